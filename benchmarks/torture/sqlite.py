"""SIGKILL torture of the SQLite session store.

Each trial starts a real child process (``python torture/sqlite.py --child``)
that takes the session's turn lease (the previous child's lease is taken over
because its pid is dead) and then loops: appending batches of uniquely marked
messages (some with tool-call/tool-result pairs) and compacting the session
with ``archive_and_compact`` (with a message arriving after the snapshot
watermark). The child prints a line after each commit returns. The parent
kills it with SIGKILL at a random moment, then checks:

* ``PRAGMA integrity_check`` and both FTS5 indexes' integrity checks pass;
* every message the child reported as committed is stored, and no message
  is stored twice;
* the active view is entirely the old one or entirely the new one: at most one
  active summary, first; every original row after its watermark is active and
  every original row up to it is archived (inactive, compacted); carried
  copies come right after the summary; positions are unique; every active tool
  result answers an earlier active call.

``run(trials, seconds)`` returns a summary dict (``failures`` lists every
violated check); the command line runs 200 trials.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_WATERMARK = re.compile(r" wm:(\d+)")


def _child(path: str, session_id: str, seed: int) -> None:
    from hermes_hookspecs.messages import HandoffSummary, Message, ToolCall, ToolFunction
    from hermes_hookspecs.records import LeaseHolder, NewMessage
    from hermes_plugin_sqlite_store import SqliteSessionStore

    store = SqliteSessionStore(path, busy_budget=30)
    pid = os.getpid()
    lease = store.acquire_lease(session_id, LeaseHolder(name=f"torture-{pid}"), ttl=60, timeout=30)
    out = sys.stdout
    out.write(f"L {lease.token}\n")
    out.flush()
    rng = random.Random(seed)
    k = 0

    def marker() -> str:
        nonlocal k
        k += 1
        return f"mk:{pid}:{k}"

    while True:
        if rng.random() < 0.3:
            active = store.active_messages(session_id)
            watermark = max((m.id for m in active), default=0)
            late = marker()
            store.append_messages(
                session_id, [NewMessage(message=Message(role="user", content=late))], lease=lease
            )
            out.write(f"A {late}\n")
            out.flush()
            tail = [m for m in active if m.message.kind == "message"][-3:]
            while tail and tail[0].message.role == "tool":
                tail = tail[1:]
            gen = marker()
            summary = HandoffSummary(goal="torture", progress=gen)
            new = [
                NewMessage(
                    message=Message(
                        role="user",
                        kind="summary",
                        summary=summary,
                        content=f"{gen} wm:{watermark}",
                    )
                )
            ]
            new += [NewMessage(message=m.message, origin_id=m.id) for m in tail]
            out.write(f"c {gen}\n")
            out.flush()
            store.archive_and_compact(session_id, new, watermark=watermark, lease=lease)
            out.write(f"C {gen}\n")
            out.flush()
        else:
            batch: list[NewMessage] = []
            for _ in range(rng.randint(1, 3)):
                if rng.random() < 0.3:
                    call_id = f"call-{marker()}"
                    batch.append(
                        NewMessage(
                            message=Message(
                                role="assistant",
                                content=marker(),
                                tool_calls=[
                                    ToolCall(
                                        id=call_id,
                                        function=ToolFunction(name="bash", arguments='{"n": 1}'),
                                    )
                                ],
                            )
                        )
                    )
                    batch.append(
                        NewMessage(
                            message=Message(role="tool", tool_call_id=call_id, content=marker())
                        )
                    )
                else:
                    batch.append(NewMessage(message=Message(role="user", content=marker())))
            out.write("a\n")
            out.flush()
            store.append_messages(session_id, batch, lease=lease)
            out.write("A " + " ".join(str(m.message.content) for m in batch) + "\n")
            out.flush()


def check(path: Path, session_id: str, committed: set[str]) -> list[str]:
    """Every violated invariant (empty when the database is sound)."""
    problems: list[str] = []
    conn = sqlite3.connect(path)
    try:
        result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            problems.append(f"integrity_check: {result[:5]}")
        for table in ("messages_fts_word", "messages_fts_tri"):
            try:
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 0)")
            except sqlite3.DatabaseError as exc:
                problems.append(f"{table} integrity-check: {exc}")
        conn.rollback()
        originals = conn.execute(
            "SELECT content, count(*) FROM messages WHERE session_id = ? AND origin_id IS NULL "
            "AND kind = 'message' GROUP BY content",
            (session_id,),
        ).fetchall()
        counts = {content: n for content, n in originals}
        dupes = [c for c, n in counts.items() if n > 1]
        if dupes:
            problems.append(f"stored twice: {dupes[:5]}")
        missing = sorted(m for m in committed if m not in counts)
        if missing:
            problems.append(f"committed but missing: {missing[:5]}")
        rows = conn.execute(
            "SELECT id, position, role, kind, content, tool_calls, tool_call_id, origin_id, "
            "active, compacted FROM messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
    finally:
        conn.close()
    active = sorted((r for r in rows if r[8]), key=lambda r: r[1])
    positions = [r[1] for r in active]
    if len(set(positions)) != len(positions):
        problems.append("duplicate positions in the active view")
    summaries = [r for r in active if r[3] == "summary"]
    watermark = 0
    if len(summaries) > 1:
        problems.append(f"{len(summaries)} active summaries (mixed views)")
    elif summaries:
        if active[0] is not summaries[0]:
            problems.append("the active summary is not first")
        found = _WATERMARK.search(summaries[0][4] or "")
        watermark = int(found.group(1)) if found else 0
        copies_done = False
        for row in active[1:]:
            if row[7] is None:
                copies_done = True
            elif copies_done:
                problems.append(f"carried copy {row[0]} after appended rows")
    for row in rows:
        if row[3] != "message" or row[7] is not None:
            continue
        if row[0] > watermark and not row[8]:
            problems.append(f"row {row[0]} after watermark {watermark} is not active")
        if row[0] <= watermark and (row[8] or not row[9]):
            problems.append(f"row {row[0]} up to watermark {watermark} is not archived")
    made: set[str] = set()
    for row in active:
        if row[2] == "tool" and row[6] not in made:
            problems.append(f"active tool row {row[0]} answers unknown call {row[6]!r}")
        made.update(call["id"] for call in json.loads(row[5] or "[]"))
    return problems


def run(
    trials: int, seconds: float, *, workdir: str | None = None, seed: int = 0
) -> dict[str, Any]:
    """Run ``trials`` kill trials; each child lives up to ``seconds`` after taking the lease."""
    from hermes_hookspecs.messages import Message
    from hermes_hookspecs.records import NewMessage, NewSession
    from hermes_plugin_sqlite_store import SqliteSessionStore

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="hermes-torture-", dir=workdir) as tmp:
        path = Path(tmp) / "torture.db"
        store = SqliteSessionStore(path)
        sid = store.create_session(NewSession(title="torture")).id
        store.append_messages(
            sid, [NewMessage(message=Message(role="user", content=f"seed {i}")) for i in range(5)]
        )
        store.close()
        committed = {f"seed {i}" for i in range(5)}
        failures: list[str] = []
        stats = {"in_append": 0, "in_compact": 0, "between": 0, "compactions": 0, "appends": 0}
        start = time.monotonic()
        for trial in range(trials):
            proc = subprocess.Popen(
                [sys.executable, __file__, "--child", str(path), sid, str(rng.getrandbits(32))],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            first = proc.stdout.readline()
            if not first.startswith("L "):
                proc.kill()
                _, err = proc.communicate()
                failures.append(f"trial {trial}: child did not take the lease: {err[-500:]}")
                break
            time.sleep(rng.uniform(0.0, seconds))
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate()
            if proc.returncode != -signal.SIGKILL:
                failures.append(
                    f"trial {trial}: child exited {proc.returncode} before the kill: {err[-800:]}"
                )
            lines = out.split("\n")[:-1]  # the last piece may be cut by the kill
            last = ""
            for line in lines:
                tag, _, rest = line.partition(" ")
                if tag == "A":
                    committed.update(rest.split(" "))
                    stats["appends"] += 1
                elif tag == "C":
                    stats["compactions"] += 1
                last = tag
            stats["in_append" if last == "a" else "in_compact" if last == "c" else "between"] += 1
            problems = check(path, sid, committed)
            failures.extend(f"trial {trial}: {p}" for p in problems)
            if problems:
                break
        elapsed = time.monotonic() - start
    return {
        "trials": trial + 1 if trials else 0,
        "seconds_per_trial_max": seconds,
        "elapsed_s": round(elapsed, 1),
        "committed_messages": len(committed),
        "kills": stats,
        "failures": failures,
        "ok": not failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--child", nargs=3, metavar=("DB", "SESSION", "SEED"))
    args = parser.parse_args()
    if args.child:
        db, sid, seed = args.child
        _child(db, sid, int(seed))
        return
    result = run(args.trials, args.seconds)
    print(json.dumps(result, indent=2))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
