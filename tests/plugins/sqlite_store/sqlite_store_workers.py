"""Child-process programs for the SQLite store tests.

Run as ``python sqlite_store_workers.py CMD ARGS...``.

Not a test module: the tests start these as real processes and signal them.
"""

from __future__ import annotations

import json
import sys
import time

from hermes_hookspecs.errors import LeaseLost
from hermes_hookspecs.messages import Message
from hermes_hookspecs.records import LeaseHolder, NewMessage
from hermes_plugin_sqlite_store import SqliteSessionStore


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def turns(db: str, sid: str, name: str, count: int) -> None:
    """Run ``count`` turns, each: take the lease, reload history, append 3 messages, release."""
    store = SqliteSessionStore(db, busy_budget=60)
    holder = LeaseHolder(name=name)
    for turn in range(count):
        grant = store.acquire_lease(sid, holder, ttl=20, timeout=120)
        seen = len(store.active_messages(sid))
        for step in range(3):
            content = f"{name} t{turn} s{step} tok{grant.token} seen{seen}"
            new = NewMessage(
                message=Message(role="user", content=content), turn_id=f"{name}-{turn}"
            )
            store.append_messages(sid, [new], lease=grant)
            time.sleep(0.001)
        store.release_lease(grant)
    store.close()


def hold(db: str, sid: str, name: str, ttl: float) -> None:
    """Take the lease, write once, say ``ready``; after a line on stdin, try to write again."""
    store = SqliteSessionStore(db)
    grant = store.acquire_lease(sid, LeaseHolder(name=name), ttl=ttl)
    store.append_messages(
        sid, [NewMessage(message=Message(role="user", content="before-stop"))], lease=grant
    )
    _say(f"ready {grant.token}")
    sys.stdin.readline()
    outcome = {}
    try:
        store.append_messages(
            sid, [NewMessage(message=Message(role="user", content="after-resume"))], lease=grant
        )
        outcome["append"] = "written"
    except LeaseLost as exc:
        outcome["append"] = f"lost: {exc}"
    try:
        store.renew_lease(grant, ttl)
        outcome["renew"] = "renewed"
    except LeaseLost as exc:
        outcome["renew"] = f"lost: {exc}"
    _say(json.dumps(outcome))
    store.close()


def grab(db: str, sid: str, name: str) -> None:
    """Take the lease for a long time, say ``held``, then sleep until killed."""
    store = SqliteSessionStore(db)
    grant = store.acquire_lease(sid, LeaseHolder(name=name), ttl=600)
    _say(f"held {grant.token}")
    time.sleep(600)


def handover(db: str, sid: str, name: str, rounds: int) -> None:
    """Alternate the lease with a peer; print the acquire/release times as JSON."""
    store = SqliteSessionStore(db)
    holder = LeaseHolder(name=name)
    events = []
    for turn in range(rounds):
        grant = store.acquire_lease(sid, holder, ttl=30, timeout=30)
        got = time.time()
        time.sleep(0.02)
        store.release_lease(grant)
        events.append({"token": grant.token, "acquired": got, "released": time.time()})
        if turn == rounds - 1:
            break
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            current = store.current_lease(sid)
            if current is not None and current.holder.name != name:
                break
            time.sleep(0.0005)
    _say(json.dumps(events))
    store.close()


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "turns":
        turns(args[0], args[1], args[2], int(args[3]))
    elif command == "hold":
        hold(args[0], args[1], args[2], float(args[3]))
    elif command == "grab":
        grab(args[0], args[1], args[2])
    elif command == "handover":
        handover(args[0], args[1], args[2], int(args[3]))
    else:
        raise SystemExit(f"unknown command {command!r}")
