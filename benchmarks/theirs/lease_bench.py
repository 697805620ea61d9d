"""Hand-over latency of hermes-agent's cross-process session lock, between two processes.

Run with the reference venv's python.  hermes-agent 0.19.0 has no cross-process
*turn* lease: its turn lease (gateway/turn_lease.py) is an asyncio lock inside one
gateway process.  The only per-session lease two processes can contend for is the
compression lock in state.db (``SessionDB.try_acquire_compression_lock`` /
``release_compression_lock``, TTL-based, holder-checked).  It has no wait or
notify: a contender must poll.  So this measures, for that lock,
release-in-process-A -> acquired-in-process-B, with B polling every
``poll_interval_s``.  Treat it as partially comparable (see API_NOTES.md).

Job (JSON; all optional)::

    {"rounds": 50, "poll_interval_s": 0.001, "hold_s": 0.005,
     "ttl_s": 300.0, "uncontended": 200, "timeout_s": 30.0}

Each round yields two samples: A->B (the child polls) and B->A (the parent polls,
starting only once B holds the lock; a holder that releases and polls at once would
otherwise just win the lock back, as happened in a first version of this runner).
Times come from time.monotonic(), which is system-wide (CLOCK_MONOTONIC) on Linux.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field
from runner_common import (
    RunnerError,
    environment_facts,
    isolate_home,
    read_job,
    remove_home,
    run_main,
    summarize,
)

SESSION = "lease-session"
PARENT = "holder-A"
CHILD = "holder-B"


class LeaseJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rounds: int = Field(default=50, ge=1)
    poll_interval_s: float = Field(default=0.001, ge=0)
    hold_s: float = Field(default=0.005, ge=0)
    ttl_s: float = Field(default=300.0, gt=0)
    uncontended: int = Field(default=200, ge=1)
    timeout_s: float = Field(default=30.0, gt=0)


def poll_acquire(db: Any, holder: str, ttl: float, interval: float, timeout: float) -> float:
    """Poll try_acquire_compression_lock until it succeeds; return time.monotonic() then."""
    deadline = time.monotonic() + timeout
    while True:
        if db.try_acquire_compression_lock(SESSION, holder, ttl_seconds=ttl):
            return time.monotonic()
        if time.monotonic() > deadline:
            raise RunnerError(f"{holder}: lock not acquired within timeout_s={timeout}")
        if interval:
            time.sleep(interval)


def child_main(db_path: str, interval: float, hold: float, ttl: float, timeout: float) -> int:
    """Process B: on each 'go' line, poll for the lock, report, hold it, release, report."""
    from hermes_state import SessionDB

    db = SessionDB(Path(db_path))
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        if line.strip() != "go":
            break
        out.write("polling\n")
        out.flush()
        acquired = poll_acquire(db, CHILD, ttl, interval, timeout)
        out.write(f"{acquired!r}\n")
        out.flush()
        time.sleep(hold)
        released = time.monotonic()
        db.release_compression_lock(SESSION, CHILD)
        out.write(f"{released!r}\n")
        out.flush()
    db.close()
    return 0


def expect(stream: IO[str], word: str) -> str:
    line = stream.readline()
    if not line:
        raise RunnerError(f"lease child exited while the parent waited for {word!r}")
    if word and line.strip() != word:
        raise RunnerError(f"lease child said {line.strip()!r}, expected {word!r}")
    return line


def main(argv: list[str]) -> dict[str, Any]:
    job = read_job(argv, LeaseJob)
    home = isolate_home("lease")
    try:
        return run_lease(job, home)
    finally:
        remove_home(home)


def run_lease(job: LeaseJob, home: Path) -> dict[str, Any]:
    from hermes_state import SessionDB

    db_path = home / "state.db"
    db = SessionDB(db_path)
    db.create_session(SESSION, "cli")

    uncontended = []
    for _ in range(job.uncontended):
        t0 = time.perf_counter()
        if not db.try_acquire_compression_lock(SESSION, PARENT, ttl_seconds=job.ttl_s):
            raise RunnerError("uncontended acquire failed")
        db.release_compression_lock(SESSION, PARENT)
        uncontended.append(time.perf_counter() - t0)

    child_args = [str(job.poll_interval_s), str(job.hold_s), str(job.ttl_s), str(job.timeout_s)]
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", str(db_path), *child_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    a_to_b: list[float] = []
    b_to_a: list[float] = []
    try:
        expect(child.stdout, "ready")
        if not db.try_acquire_compression_lock(SESSION, PARENT, ttl_seconds=job.ttl_s):
            raise RunnerError("parent could not take the lock before round 1")
        for _ in range(job.rounds):
            child.stdin.write("go\n")
            child.stdin.flush()
            expect(child.stdout, "polling")
            time.sleep(job.hold_s)
            released_a = time.monotonic()
            db.release_compression_lock(SESSION, PARENT)
            # Wait until B holds the lock before contending, or A would simply win it back.
            acquired_b = float(expect(child.stdout, ""))
            acquired_a = poll_acquire(db, PARENT, job.ttl_s, job.poll_interval_s, job.timeout_s)
            released_b = float(expect(child.stdout, ""))
            a_to_b.append(acquired_b - released_a)
            b_to_a.append(acquired_a - released_b)
        db.release_compression_lock(SESSION, PARENT)
        child.stdin.close()
        if child.wait(timeout=job.timeout_s) != 0:
            raise RunnerError(f"lease child exited with {child.returncode}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        db.close()
    return {
        "runner": "lease_bench",
        **environment_facts(),
        "mechanism": "SessionDB compression lock (state.db row, TTL lease, polled)",
        "comparable": "partial: not a turn lease; no blocking wait, contender polls",
        "poll_interval_s": job.poll_interval_s,
        "hold_s": job.hold_s,
        "rounds": job.rounds,
        "handover_s": summarize(a_to_b + b_to_a),
        "a_to_b_s": summarize(a_to_b),
        "b_to_a_s": summarize(b_to_a),
        "uncontended_acquire_release_s": summarize(uncontended),
    }


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        _, _, path, interval, hold, ttl, timeout = sys.argv
        sys.exit(child_main(path, float(interval), float(hold), float(ttl), float(timeout)))
    sys.exit(run_main(main))
