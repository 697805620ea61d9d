"""Turns through the real runtime (``Hermes`` + ``session.turn()``) under contention and freezing.

**race**: N real processes (default 8) each run ``turns`` turns on ONE session
through :meth:`hermes_core.runtime.Session.turn`: prepare a user message,
sometimes a tool round, record the answer, commit. The window is small so
compressions (deterministic summarizer) happen in the middle of the race,
under the lease. Each child prints, per committed turn, its fencing token and
turn id. Checked afterwards: every user and assistant message of every
committed turn stored exactly once, no turn's rows interleaved with another's,
turns stored in fencing-token order, each turn's rows in the order they were
made, a sound active view (and, on SQLite, a sound file).

**freeze**: a child begins a turn with a short lease TTL, prepares and records
an answer, then is frozen with SIGSTOP for several TTLs. Meanwhile another
process takes the lease over and commits its own turn. The child is resumed
(SIGCONT) and asked to commit, then to append directly with its old lease:
both must raise ``LeaseLost``; nothing of it may be stored; the taker's turn
must be; the store must be sound.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .stores import REPO_ROOT, StoreSpec, parse_lines, sqlite_problems, view_problems

FILLER = "lorem ipsum dolor sit amet " * 12


def hermes_for(spec: StoreSpec, folder: Path, window: int) -> Any:
    from hermes_core.config import settings_from
    from hermes_core.host import Hermes

    settings = settings_from(
        {
            "session": {"path": spec.path or str(folder / "unused.db")},
            "memory": {"home": str(folder / "memory")},
            "model": {"context_length": window},
            "compression": {"summarizer": "deterministic"},
        }
    )
    return Hermes(settings, store=spec.open())


# -- race ------------------------------------------------------------------------------------
def race_child(spec: StoreSpec, sid: str, index: int, turns: int, window: int) -> None:
    with tempfile.TemporaryDirectory(prefix="race-") as tmp:
        hermes = hermes_for(spec, Path(tmp), window)
        try:
            session = hermes.open_session(sid)
            for k in range(turns):
                with session.turn(f"racer{index}", wait=300) as turn:
                    token = turn.lease.token
                    turn.prepare(f"rq{index}x{k} {FILLER}")
                    if k % 3 == 0:
                        call = f"call{index}x{k}"
                        turn.record_response(
                            {
                                "role": "assistant",
                                "content": None,
                                "tool_calls": [
                                    {
                                        "id": call,
                                        "type": "function",
                                        "function": {"name": "bash", "arguments": '{"n": 1}'},
                                    }
                                ],
                            }
                        )
                        turn.add_tool_result(call, f"rt{index}x{k} {FILLER}")
                        turn.prepare()
                    turn.record_response(
                        {"role": "assistant", "content": f"rp{index}x{k} {FILLER}"}
                    )
                    turn.commit()
                    print(f"T {index} {k} {token} {turn.id}", flush=True)
        finally:
            store = hermes.store()
            hermes.close()
            store.close()


def race(spec: StoreSpec, processes: int, turns: int, window: int = 16_000) -> dict[str, Any]:
    from hermes_hookspecs import SessionStore

    started = time.monotonic()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="race-parent-") as tmp:
        hermes = hermes_for(spec, Path(tmp), window)
        store: SessionStore = hermes.store()
        try:
            sid = hermes.new_session(caller_message="race").id
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.torture.runtime",
                        "race-child",
                        spec.model_dump_json(),
                        sid,
                        str(i),
                        str(turns),
                        str(window),
                    ],
                    cwd=REPO_ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for i in range(processes)
            ]
            committed: dict[str, tuple[int, int, int]] = {}
            for index, proc in enumerate(procs):
                try:
                    out, err = proc.communicate(timeout=600)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                    failures.append(f"racer {index} did not finish in 600 s")
                if proc.returncode:
                    failures.append(f"racer {index} exited {proc.returncode}: {err[-600:]}")
                for tag, words in parse_lines(out):
                    if tag == "T":
                        committed[words[3]] = (int(words[0]), int(words[1]), int(words[2]))
            if len(committed) != processes * turns:
                failures.append(f"{len(committed)} turns committed, expected {processes * turns}")
            failures += _race_problems(store, sid, committed)
            failures += view_problems(store, sid, ())
            compactions = len(store.compaction_events(sid))
            if spec.kind == "sqlite":
                failures += sqlite_problems(spec.path)
        finally:
            hermes.close()
            store.close()
    return {
        "backend": spec.label(),
        "processes": processes,
        "turns": len(committed),
        "compactions": compactions,
        "elapsed_s": round(time.monotonic() - started, 1),
        "failures": failures,
    }


def _race_problems(store: Any, sid: str, committed: dict[str, tuple[int, int, int]]) -> list[str]:
    problems: list[str] = []
    rows = [
        r for r in store.all_messages(sid) if r.origin_id is None and r.message.kind == "message"
    ]
    seen: dict[str, int] = {}
    for row in rows:
        word = row.message.text().split(" ", 1)[0]
        if word[:2] in ("rq", "rp", "rt"):
            seen[word] = seen.get(word, 0) + 1
    for index, k, _ in committed.values():
        wanted = [f"rq{index}x{k}", f"rp{index}x{k}"] + ([f"rt{index}x{k}"] if k % 3 == 0 else [])
        for word in wanted:
            if seen.get(word, 0) != 1:
                problems.append(f"turn {index}/{k}: {word} stored {seen.get(word, 0)} times")
    order: list[str] = []
    for row in rows:
        if row.turn_id in committed and (not order or order[-1] != row.turn_id):
            if row.turn_id in order:
                problems.append(f"turn {committed[row.turn_id][:2]} interleaved with another")
            order.append(row.turn_id)
    tokens = [committed[t][2] for t in order]
    if tokens != sorted(tokens):
        problems.append("turns are not stored in fencing-token order")
    for turn_id, (index, k, _) in committed.items():
        kinds = [r.message.role for r in rows if r.turn_id == turn_id]
        expected = (
            ["user", "assistant", "tool", "assistant"] if k % 3 == 0 else ["user", "assistant"]
        )
        if kinds != expected:
            problems.append(f"turn {index}/{k} stored as {kinds}, expected {expected}")
    return problems[:20]


# -- freeze ----------------------------------------------------------------------------------
def freeze_child(spec: StoreSpec, sid: str, ttl: float) -> None:
    from hermes_hookspecs import LeaseLost, Message, NewMessage

    with tempfile.TemporaryDirectory(prefix="freeze-") as tmp:
        hermes = hermes_for(spec, Path(tmp), 128_000)
        store = hermes.store()
        try:
            session = hermes.open_session(sid)
            turn = session.turn("frozen", ttl=ttl, wait=30)
            turn.prepare("frozenq question")
            turn.record_response({"role": "assistant", "content": "frozena answer"})
            print(f"READY {turn.lease.token}", flush=True)
            sys.stdin.readline()
            try:
                turn.commit()
                print("COMMIT committed", flush=True)
            except LeaseLost:
                print("COMMIT leaselost", flush=True)
            try:
                store.append_messages(
                    sid,
                    [NewMessage(message=Message(role="user", content="frozenraw write"))],
                    lease=turn.lease,
                )
                print("RAW committed", flush=True)
            except LeaseLost:
                print("RAW leaselost", flush=True)
        finally:
            hermes.close()
            store.close()


def freeze(spec: StoreSpec, trials: int, ttl: float = 1.0) -> dict[str, Any]:
    started = time.monotonic()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="freeze-parent-") as tmp:
        hermes = hermes_for(spec, Path(tmp), 128_000)
        store = hermes.store()
        try:
            for trial in range(trials):
                session = hermes.new_session(caller_message=f"freeze {trial}")
                failures += [f"trial {trial}: {p}" for p in _freeze_trial(spec, session, ttl)]
            if spec.kind == "sqlite":
                failures += sqlite_problems(spec.path)
        finally:
            hermes.close()
            store.close()
    return {
        "backend": spec.label(),
        "trials": trials,
        "ttl_s": ttl,
        "elapsed_s": round(time.monotonic() - started, 1),
        "failures": failures,
    }


def _freeze_trial(spec: StoreSpec, session: Any, ttl: float) -> list[str]:
    problems: list[str] = []
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.torture.runtime",
            "freeze-child",
            spec.model_dump_json(),
            session.id,
            str(ttl),
        ],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        ready = proc.stdout.readline().split()
        if not ready or ready[0] != "READY":
            proc.kill()
            return [f"frozen child did not start: {proc.communicate()[1][-500:]}"]
        frozen_token = int(ready[1])
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            time.sleep(ttl * 2.5)
            with session.turn("taker", wait=ttl * 10) as turn:
                taker_token = turn.lease.token
                turn.prepare("takerq question")
                turn.record_response({"role": "assistant", "content": "takera answer"})
                turn.commit()
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        if taker_token <= frozen_token:
            problems.append(f"taker token {taker_token} not above frozen {frozen_token}")
        out, err = proc.communicate("go\n", timeout=60)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    answers = dict((tag, words[0] if words else "") for tag, words in parse_lines(out))
    if answers.get("COMMIT") != "leaselost":
        problems.append(f"frozen holder's commit: {answers.get('COMMIT')!r} (expected leaselost)")
    if answers.get("RAW") != "leaselost":
        problems.append(f"frozen holder's direct append: {answers.get('RAW')!r}")
    if proc.returncode:
        problems.append(f"frozen child exited {proc.returncode}: {err[-500:]}")
    store = session.hermes.store()
    texts = {r.message.text() for r in store.all_messages(session.id)}
    for word in ("frozenq question", "frozena answer", "frozenraw write"):
        if word in texts:
            problems.append(f"the frozen holder's {word!r} was stored")
    for word in ("takerq question", "takera answer"):
        if word not in texts:
            problems.append(f"the taker's {word!r} is missing")
    problems += view_problems(store, session.id, ())
    return problems


if __name__ == "__main__":
    command, *rest = sys.argv[1:] or [""]
    if command == "race-child":
        race_child(
            StoreSpec.model_validate_json(rest[0]),
            rest[1],
            int(rest[2]),
            int(rest[3]),
            int(rest[4]),
        )
    elif command == "freeze-child":
        freeze_child(StoreSpec.model_validate_json(rest[0]), rest[1], float(rest[2]))
    else:
        sys.exit("usage: python -m benchmarks.torture.runtime race-child|freeze-child ...")
