"""Torture scenarios for issue #16: secrets through every outbound path, redaction time,
files deleted under an open store, a lease holder that turns into a zombie.

* :func:`secrets_canary`: the 26-format canary (:mod:`hermes_core.testing.canary`)
  is planted in a real session (SQLite file) whose turns, tool results and
  memory-tool calls carry it; the session is compressed with the ``openai``
  summarizer against the loopback fake; an external memory provider records
  what it is handed (and fails once with the canary in its exception). Every
  outbound path is then searched for every secret: the summarizer's raw
  request bytes, the provider's inputs, ``MEMORY.md``/``USER.md``, and every
  log record formatted with its traceback.
* :func:`redaction_timing`: :mod:`benchmarks.ours.redaction` at 100 KB and 1 MB.
* :func:`file_deletion`: per trial, in a child process, the database file is
  deleted, replaced, or its ``-wal`` deleted (then the child is SIGKILLed);
  no write after that may be acknowledged, and what was acknowledged before
  must be found afterwards (rescue copy, checkpointed main file).
* :func:`zombie_holder`: a child process holds a session's lease and exits
  unreaped (a zombie) while another handle waits; the take-over latency is
  measured on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from .stores import REPO_ROOT, StoreSpec, postgres_dsn, store_specs


# -- secrets canary ---------------------------------------------------------------------------
def secrets_canary(folder: Path, block: tuple[str, ...] = ()) -> dict[str, Any]:
    """Plant the canary, use every outbound path, search each for every secret.

    :param block: plugins to block (the harness's own test blocks ``redaction`` to
        prove the checks fire).
    """
    from hermes_core.config import settings_from
    from hermes_core.host import Hermes
    from hermes_core.testing.canary import CANARIES, canary_text, leaked
    from hermes_core.testing.fake_openai import FakeOpenAIServer
    from hermes_hookspecs import MemoryProvider, Message, TurnRecord, hookimpl

    planted = canary_text()

    class Recorder(MemoryProvider):
        name = "recorder"

        def __init__(self) -> None:
            self.seen: list[str] = []
            self.failed = False

        def prefetch(self, query: str, session_id: str) -> str | None:
            self.seen.append(query)
            if not self.failed:  # one failure, logged with its traceback
                self.failed = True
                raise RuntimeError(f"vendor rejected the query {query!r}")
            return None

        def sync_turn(self, turn: TurnRecord) -> None:
            self.seen.append(turn.model_dump_json())

        def on_pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
            self.seen.extend(m.model_dump_json() for m in messages)
            return []

    class Plugin:
        def __init__(self, provider: Recorder) -> None:
            self.provider = provider

        @hookimpl
        def register_memory_providers(self, register: Any, settings: Any) -> None:
            register(self.provider)

    class Capture(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.lines: list[str] = []
            self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(self.format(record))

    recorder = Recorder()
    capture = Capture()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    try:
        with FakeOpenAIServer() as fake:
            settings = settings_from(
                {
                    "session": {"path": str(folder / "canary.db")},
                    "memory": {"home": str(folder / "mem"), "provider": "recorder"},
                    "model": {"name": "gpt-4o-mini", "context_length": 20_000},
                    "compression": {"tail": "legacy"},
                    "summarizer": {"openai": {"base_url": fake.base_url, "model": "aux"}},
                    "plugins": {"block": list(block)},
                }
            )
            with Hermes(settings, plugins=[Plugin(recorder)]) as hermes:
                session = hermes.new_session(cwd=str(folder))
                for i in range(10):
                    with session.turn() as turn:
                        turn.prepare(f"turn {i}, my config:\n{planted}\n" + "words " * 150)
                        turn.record_response({"role": "assistant", "content": f"noted: {planted}"})
                        turn.commit()
                memory = hermes.memory()
                assert memory is not None
                for canary in CANARIES:
                    for target in ("memory", "user"):
                        memory.handle_tool_call(
                            "memory",
                            {"action": "add", "target": target, "content": canary.text},
                            session.id,
                        )
                outcome = session.compress()
                memory.flush(10)
                raw = "\n".join(r.raw.decode("utf-8", "replace") for r in fake.requests)
                summarizer_calls = len(fake.requests_to("chat.completions"))
    finally:
        root.removeHandler(capture)
        root.setLevel(old_level)
    files = "\n".join(p.read_text(encoding="utf-8") for p in sorted((folder / "mem").glob("*.md")))
    paths = {
        "summarizer request bytes": raw,
        "memory provider inputs": "\n".join(recorder.seen),
        "MEMORY.md / USER.md": files,
        "log records with tracebacks": "\n".join(capture.lines),
    }
    failures = [f"{path}: {name} leaked" for path, text in paths.items() for name in leaked(text)]
    if outcome.status != "compressed":
        failures.append(f"compression did not run: {outcome.status} {outcome.reason}")
    if not summarizer_calls:
        failures.append("the openai summarizer was never called")
    for path, text in paths.items():
        if "[REDACTED:" not in text:
            failures.append(f"{path}: nothing redacted reached it (path not exercised?)")
    return {
        "formats": len(CANARIES),
        "paths": list(paths),
        "trials": len(CANARIES) * len(paths),
        "summarizer_calls": summarizer_calls,
        "log_lines": len(capture.lines),
        "failures": failures,
    }


# -- redaction timing -------------------------------------------------------------------------
def redaction_timing(repeat: int) -> dict[str, Any]:
    from ..ours import redaction

    result = redaction.measure(repeat)
    failures = []
    for name, case in result["cases"].items():
        if case["linearity"] > 2.0:
            failures.append(f"{name}: t(1MB)/10t(100KB) = {case['linearity']} (not linear)")
    if result["cases"]["dashes"]["ms_100kb"] > 1_000:
        failures.append(f"100 KB x-x-x- took {result['cases']['dashes']['ms_100kb']} ms")
    result["failures"] = failures
    result["trials"] = 2 * len(result["cases"])
    return result


# -- files deleted or replaced under an open store -----------------------------------------------
_FILE_CHILD = textwrap.dedent(
    """
    import json, os, signal, sqlite3, sys
    from hermes_hookspecs.errors import StoreError
    from hermes_hookspecs.messages import Message
    from hermes_hookspecs.records import NewMessage, NewSession
    from hermes_plugin_sqlite_store import SqliteSessionStore

    path, case = sys.argv[1], sys.argv[2]
    store = SqliteSessionStore(path)
    sid = store.create_session(NewSession(id="s", title="t")).id
    msg = lambda text: [NewMessage(message=Message(role="user", content=text))]
    for i in range(20):
        store.append_messages(sid, msg(f"before {i}"))
    if case == "delete-db":
        os.unlink(path)
    elif case == "delete-wal":
        os.unlink(path + "-wal")
    else:
        other = path + ".other"
        sqlite3.connect(other).execute("CREATE TABLE x (y)").connection.close()
        os.replace(other, path)
    acknowledged, refused, message = 0, 0, ""
    for i in range(5):
        try:
            store.append_messages(sid, msg(f"after {i}"))
            acknowledged += 1
        except StoreError as exc:
            refused += 1
            message = str(exc)
    print(json.dumps({"acknowledged": acknowledged, "refused": refused, "message": message}))
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _texts(path: Path) -> list[str]:
    from hermes_plugin_sqlite_store import SqliteSessionStore

    store = SqliteSessionStore(path)
    try:
        return [row.message.text() for row in store.all_messages("s")]
    finally:
        store.close()


def file_deletion(folder: Path, trials: int) -> dict[str, Any]:
    failures: list[str] = []
    runs = 0
    expected = [f"before {i}" for i in range(20)]
    for trial in range(trials):
        for case in ("delete-db", "delete-wal", "replace-db"):
            runs += 1
            work = folder / f"{case}-{trial}"
            work.mkdir()
            path = work / "s.db"
            env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
            done = subprocess.run(
                [sys.executable, "-c", _FILE_CHILD, str(path), case],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )
            try:
                report = json.loads(done.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                failures.append(f"{case}: child crashed: {done.stderr[-300:]}")
                continue
            if report["acknowledged"]:
                failures.append(f"{case}: {report['acknowledged']} writes acknowledged after it")
            if str(path) not in report["message"]:
                failures.append(f"{case}: the refusal does not name the file: {report['message']}")
            if case == "delete-wal":
                survived = _texts(path)
            else:
                rescued = sorted(work.glob("s.db.rescued-*"))
                survived = _texts(rescued[0]) if rescued else []
                if rescued and stat.S_IMODE(rescued[0].stat().st_mode) != 0o600:
                    failures.append(f"{case}: the rescue copy is not 0600")
            if survived != expected:
                failures.append(
                    f"{case}: {len(survived)} of the 20 acknowledged messages found afterwards"
                )
    return {"trials": runs, "failures": failures}


# -- zombie lease holder ------------------------------------------------------------------------
def _zombie_trial(spec: StoreSpec, session_id: str) -> float:
    from hermes_core.storekit import process_state
    from hermes_hookspecs.records import LeaseHolder

    store = spec.open()
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        holder = LeaseHolder(name="doomed", host=socket.gethostname(), pid=child.pid)
        store.acquire_lease(session_id, holder, 3600)
        got: list[Any] = []  # when the heir's acquire returned (time.monotonic())
        waiter = threading.Thread(
            target=lambda: got.append(
                store.acquire_lease(session_id, LeaseHolder(name="heir"), 5, timeout=30)
                and time.monotonic()
            )
        )
        waiter.start()
        time.sleep(0.2)
        assert child.stdin is not None
        child.stdin.close()
        while process_state(child.pid) != "Z":
            time.sleep(0.001)
        died = time.monotonic()
        waiter.join(40)
        if not got:
            raise AssertionError("the waiter never got the lease")
        latest = store.current_lease(session_id)
        if latest is not None:
            store.release_lease(latest)
        return float(got[0] - died)
    finally:
        child.wait()
        store.close()


def zombie_holder(folder: Path, trials: int) -> dict[str, Any]:
    from hermes_hookspecs.records import NewSession

    failures: list[str] = []
    latencies: dict[str, list[float]] = {}
    skipped = ""
    with store_specs(folder, "zombie") as specs:
        if len(specs) < 2:
            skipped = postgres_dsn()[1]
        for spec in specs:
            store = spec.open()
            try:
                sid = store.create_session(NewSession(title="zombie")).id
            finally:
                store.close()
            for _ in range(trials):
                try:
                    took = _zombie_trial(spec, sid)
                except Exception as exc:
                    failures.append(f"{spec.label}: {type(exc).__name__}: {exc}")
                    continue
                latencies.setdefault(spec.kind, []).append(took)
                if took > 1.0:
                    failures.append(f"{spec.label}: take-over from a zombie took {took:.3f}s")
    summary = {
        kind: {
            "max_ms": round(max(v) * 1000, 1),
            "median_ms": round(sorted(v)[len(v) // 2] * 1000, 1),
        }
        for kind, v in latencies.items()
    }
    return {
        "trials": sum(len(v) for v in latencies.values()) + len(failures),
        "failures": failures,
        "latency": summary,
        "postgres_skipped": skipped,
    }
