"""The disk under the SQLite file fills up: nothing committed is lost, the error is clear.

Where permitted (root, ``mount -t tmpfs``), each trial mounts a small tmpfs,
puts a filler file on it, and appends marked batches (1-3 messages of the
trial's size) until the store refuses; then it tries three more appends and an
``archive_and_compact`` of the whole session while the disk is still full,
closes the store, deletes the filler, reopens the file and checks: the
refusals were the store's own ``StoreError`` naming the cause ("full"),
``PRAGMA integrity_check`` and the FTS5 checks pass, every batch whose append
returned is stored exactly once, no batch is stored in part, the active view
is sound, and an append works again.

Where mounting is not permitted, the same trial runs in a child process
whose file size is capped with ``RLIMIT_FSIZE`` (writes past it fail with
EFBIG, as on a full disk); the filler step is then skipped, and SQLite
reports the cap as "disk I/O error", which is accepted as naming the cause.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .stores import REPO_ROOT, parse_lines, sqlite_problems, view_problems

#: (tmpfs size in bytes, message size in characters)
VARIANTS = [(2 * 2**20, 1_000), (3 * 2**20, 16_000), (4 * 2**20, 200_000)]


def fill(path: Path, size: int, out: Any) -> None:
    """Append marked batches until the store refuses; report each step as a line on ``out``."""
    from hermes_hookspecs import HandoffSummary, HermesError, Message, NewMessage, NewSession
    from hermes_plugin_sqlite_store import SqliteSessionStore

    store = SqliteSessionStore(path)
    sid = store.create_session(NewSession(title="disk full")).id
    out.write(f"S {sid}\n")
    body = "y" * size
    refused = 0
    n = 0
    try:
        for attempt in range(100_000):
            batch = [f"mk{attempt}x{i}" for i in range(1 + attempt % 3)]
            out.write("a " + " ".join(batch) + "\n")
            out.flush()
            try:
                store.append_messages(
                    sid,
                    [
                        NewMessage(message=Message(role="user", content=f"{m} {body}"))
                        for m in batch
                    ],
                )
            except HermesError as exc:
                out.write(f"E {type(exc).__name__} {json.dumps(str(exc))}\n")
                refused += 1
                if refused >= 4:
                    break
                continue
            except Exception as exc:
                out.write(f"X {type(exc).__name__} {json.dumps(str(exc))}\n")
                break
            out.write("A " + " ".join(batch) + "\n")
            n += 1
        try:
            active = store.active_messages(sid)
            summary = HandoffSummary(goal="disk full", progress=body[:2000])
            new = [
                NewMessage(
                    message=Message(
                        role="user", kind="summary", summary=summary, content="summary " + body
                    )
                )
            ]
            new += [NewMessage(message=m.message, origin_id=m.id) for m in active[-2:]]
            store.archive_and_compact(sid, new, watermark=max(m.id for m in active))
            out.write("C ok\n")
        except HermesError as exc:
            out.write(f"CE {type(exc).__name__} {json.dumps(str(exc))}\n")
        except Exception as exc:
            out.write(f"CX {type(exc).__name__} {json.dumps(str(exc))}\n")
    finally:
        try:
            store.close()
        except Exception as exc:
            out.write(f"X close {type(exc).__name__} {json.dumps(str(exc))}\n")
        out.flush()


def _check(
    path: Path, lines: list[tuple[str, list[str]]], causes: tuple[str, ...] = ("full", "space")
) -> tuple[list[str], dict[str, Any]]:
    from hermes_hookspecs import Message, NewMessage
    from hermes_plugin_sqlite_store import SqliteSessionStore

    problems: list[str] = []
    sid = next((w[0] for tag, w in lines if tag == "S"), "")
    committed = {m for tag, w in lines if tag == "A" for m in w}
    attempted = [w for tag, w in lines if tag == "a"]
    errors = [" ".join(w) for tag, w in lines if tag in ("E", "CE")]
    crashes = [" ".join(w) for tag, w in lines if tag in ("X", "CX")]
    problems += [f"not a store error: {c[:200]}" for c in crashes]
    if not errors:
        problems.append("the store never refused a write (disk never filled?)")
    unclear = [e for e in errors if not any(c in e.lower() for c in causes)]
    problems += [f"refusal does not name the cause: {e[:200]}" for e in unclear[:3]]
    problems += sqlite_problems(path)
    store = SqliteSessionStore(path)
    try:
        rows = store.all_messages(sid)
        stored = {r.message.text().split(" ", 1)[0] for r in rows if r.origin_id is None}
        problems += view_problems(store, sid, committed, attempted)
        store.append_messages(sid, [NewMessage(message=Message(role="user", content="after"))])
    except Exception as exc:
        problems.append(f"after freeing space: {type(exc).__name__}: {exc}")
        stored = set()
    finally:
        store.close()
    return problems, {
        "batches_committed": sum(1 for tag, _ in lines if tag == "A"),
        "messages_stored": len(stored),
        "first_refusal": errors[0][:160] if errors else None,
        "compaction_when_full": next(
            (" ".join(w)[:120] for t, w in lines if t in ("C", "CE", "CX")), None
        ),
    }


def _mount(folder: Path, size: int) -> bool:
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode == 0


def _umount(folder: Path) -> None:
    if subprocess.run(["umount", str(folder)], capture_output=True, check=False).returncode:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def trial_tmpfs(folder: Path, size: int, message_chars: int) -> tuple[list[str], dict[str, Any]]:
    filler = folder / "filler"
    filler.write_bytes(b"\0" * (size // 2))
    path = folder / "full.db"
    with open(folder.parent / f"{folder.name}.log", "w+", encoding="utf-8") as log:
        fill(path, message_chars, log)
        log.seek(0)
        lines = parse_lines(log.read())
    filler.unlink()
    return _check(path, lines)


def trial_rlimit(folder: Path, size: int, message_chars: int) -> tuple[list[str], dict[str, Any]]:
    path = folder / "full.db"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.torture.diskfull",
            "child",
            str(path),
            str(size),
            str(message_chars),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if proc.returncode:
        return [f"rlimit child exited {proc.returncode}: {proc.stderr[-400:]}"], {}
    # EFBIG from the file-size cap reaches SQLite as an I/O error, not as "full"
    return _check(path, parse_lines(proc.stdout), causes=("full", "space", "i/o"))


def _child(path: str, limit: int, message_chars: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    fill(Path(path), message_chars, sys.stdout)


def run(trials: int) -> dict[str, Any]:
    started = time.monotonic()
    failures: list[str] = []
    details: list[dict[str, Any]] = []
    method = "tmpfs"
    for trial in range(trials):
        size, chars = VARIANTS[trial % len(VARIANTS)]
        with tempfile.TemporaryDirectory(prefix="torture-diskfull-") as tmp:
            folder = Path(tmp) / "disk"
            folder.mkdir()
            if os.geteuid() == 0 and _mount(folder, size):
                try:
                    problems, info = trial_tmpfs(folder, size, chars)
                finally:
                    _umount(folder)
            else:
                method = "RLIMIT_FSIZE (mount not permitted)"
                problems, info = trial_rlimit(folder, size, chars)
        details.append({"disk_bytes": size, "message_chars": chars, **info})
        failures += [f"trial {trial} ({size // 2**20} MB, {chars:,} chars): {p}" for p in problems]
    return {
        "trials": trials,
        "method": method,
        "details": details,
        "elapsed_s": round(time.monotonic() - started, 1),
        "failures": failures,
    }


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "child":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit("usage: python -m benchmarks.torture.diskfull child DB LIMIT_BYTES MESSAGE_CHARS")
