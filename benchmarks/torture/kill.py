"""SIGKILL of writer processes at random points, on any store (used for PostgreSQL).

The SQLite store has its own version of this scenario
(``benchmarks/torture/sqlite.py``, with file-level integrity checks); this one
drives a store only through the public API, so it runs unchanged on
PostgreSQL. Each trial starts a real child process
(``python -m benchmarks.torture.kill --child SPEC SESSION SEED``) that takes the
session's turn lease (the dead previous child's lease is taken over), then
loops: appending batches of 1-3 uniquely marked messages (some as tool-call
pairs) or compacting with ``archive_and_compact`` (a message arriving after the
snapshot watermark first). It prints the batch it is about to write (``a``),
each commit that returned (``A``), and the same for compactions (``c``/``C``).
The parent kills it with SIGKILL after a random delay and checks
:func:`benchmarks.torture.stores.view_problems` (every committed message once,
no partial batch, the active view all old or all new, tool pairs, and that
three just-committed markers are found by search).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from typing import Any

from .stores import REPO_ROOT, StoreSpec, parse_lines, view_problems


def child(spec: StoreSpec, session_id: str, seed: int) -> None:
    from hermes_hookspecs import HandoffSummary, LeaseHolder, Message, NewMessage
    from hermes_hookspecs.messages import ToolCall, ToolFunction

    store = spec.open()
    pid = os.getpid()
    lease = store.acquire_lease(session_id, LeaseHolder(name=f"kill-{pid}"), ttl=60, timeout=30)
    out = sys.stdout
    out.write(f"L {lease.token}\n")
    out.flush()
    rng = random.Random(seed)
    k = 0

    def marker() -> str:
        nonlocal k
        k += 1
        return f"mk{pid}x{k}"

    while True:
        if rng.random() < 0.3:
            active = store.active_messages(session_id)
            watermark = max((m.id for m in active), default=0)
            late = marker()
            out.write(f"a {late}\n")
            out.flush()
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
            continue
        batch: list[NewMessage] = []
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.3:
                call_id = f"call{marker()}"
                call = ToolCall(id=call_id, function=ToolFunction(name="bash", arguments="{}"))
                batch.append(
                    NewMessage(
                        message=Message(role="assistant", content=marker(), tool_calls=[call])
                    )
                )
                batch.append(
                    NewMessage(message=Message(role="tool", tool_call_id=call_id, content=marker()))
                )
            else:
                batch.append(NewMessage(message=Message(role="user", content=marker())))
        texts = " ".join(str(m.message.content) for m in batch)
        out.write(f"a {texts}\n")
        out.flush()
        store.append_messages(session_id, batch, lease=lease)
        out.write(f"A {texts}\n")
        out.flush()


def run(spec: StoreSpec, trials: int, seconds: float, *, seed: int = 0) -> dict[str, Any]:
    """``trials`` kill trials on ``spec``; a child lives up to ``seconds`` after its lease."""
    from hermes_hookspecs import Message, NewMessage, NewSession

    rng = random.Random(seed)
    store = spec.open()
    sid = store.create_session(NewSession(title="kill torture")).id
    seeds = [f"mkseed{i}" for i in range(5)]
    store.append_messages(sid, [NewMessage(message=Message(role="user", content=s)) for s in seeds])
    committed = set(seeds)
    attempted: list[list[str]] = []
    failures: list[str] = []
    where = {"in_append": 0, "in_compact": 0, "between": 0}
    commits = {"appends": 0, "compactions": 0}
    started = time.monotonic()
    done = 0
    try:
        for trial in range(trials):
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.torture.kill",
                    "--child",
                    spec.model_dump_json(),
                    sid,
                    str(rng.getrandbits(32)),
                ],
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            first = proc.stdout.readline()
            if not first.startswith("L "):
                proc.kill()
                _, err = proc.communicate()
                failures.append(f"trial {trial}: child did not take the lease: {err[-400:]}")
                break
            time.sleep(rng.uniform(0.0, seconds))
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate()
            done += 1
            if proc.returncode != -signal.SIGKILL:
                failures.append(f"trial {trial}: child exited {proc.returncode}: {err[-600:]}")
            last = ""
            recent: list[str] = []
            for tag, words in parse_lines(out):
                if tag == "a":
                    attempted.append(words)
                elif tag == "A":
                    committed.update(words)
                    recent = words
                    commits["appends"] += 1
                elif tag == "C":
                    commits["compactions"] += 1
                last = tag
            where["in_append" if last == "a" else "in_compact" if last == "c" else "between"] += 1
            problems = view_problems(
                store, sid, committed, attempted, search_sample=recent[:3], layout=True
            )
            failures.extend(f"trial {trial}: {p}" for p in problems)
            if problems:
                break
    finally:
        store.close()
    return {
        "backend": spec.label(),
        "trials": done,
        "elapsed_s": round(time.monotonic() - started, 1),
        "committed_messages": len(committed),
        "commits": commits,
        "killed": where,
        "failures": failures,
    }


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(StoreSpec.model_validate_json(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit("usage: python -m benchmarks.torture.kill --child SPEC SESSION SEED")
