"""Turn leases of the SQLite store, with real processes, real signals and SIGKILL torture."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from hermes_hookspecs.errors import LeaseBusy, LeaseLost, NotFoundError, ValidationError
from hermes_hookspecs.messages import Message
from hermes_hookspecs.records import LeaseHolder, NewMessage, NewSession
from hermes_plugin_sqlite_store import LeaseKeeper, SqliteSessionStore

WORKERS = Path(__file__).with_name("sqlite_store_workers.py")
TORTURE = Path(__file__).resolve().parents[3] / "benchmarks" / "torture" / "sqlite.py"


def user(text: str) -> NewMessage:
    return NewMessage(message=Message(role="user", content=text))


def worker(*args: str, stdin: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKERS), *args],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSessionStore]:
    s = SqliteSessionStore(tmp_path / "leases.db")
    yield s
    s.close()


@pytest.fixture
def sid(store: SqliteSessionStore) -> str:
    return store.create_session(NewSession(title="leased")).id


# -- single process ----------------------------------------------------------------------
def test_acquire_renew_release_and_tokens(store: SqliteSessionStore, sid: str) -> None:
    cli, gateway = LeaseHolder(name="cli"), LeaseHolder(name="gateway")
    first = store.acquire_lease(sid, cli, ttl=5)
    assert first.token == 1 and first.holder == cli
    assert store.current_lease(sid) == first
    renewed = store.renew_lease(first, ttl=50)
    assert renewed.token == 1 and renewed.expires_at > first.expires_at
    with pytest.raises(LeaseBusy, match="'cli'"):
        store.acquire_lease(sid, gateway, ttl=5)
    store.release_lease(renewed)
    assert store.current_lease(sid) is None
    store.release_lease(renewed)  # releasing again is harmless
    second = store.acquire_lease(sid, gateway, ttl=5)
    third_holder = LeaseHolder(name="cron")
    store.release_lease(second)
    third = store.acquire_lease(sid, third_holder, ttl=5)
    assert [first.token, second.token, third.token] == [1, 2, 3]
    with pytest.raises(NotFoundError):
        store.acquire_lease("no-such-session", cli, ttl=5)
    with pytest.raises(ValidationError, match="ttl"):
        store.acquire_lease(sid, cli, ttl=0)


def test_expired_lease_is_taken_over(store: SqliteSessionStore, sid: str) -> None:
    old = store.acquire_lease(sid, LeaseHolder(name="slow"), ttl=0.05)
    time.sleep(0.08)
    assert store.current_lease(sid) is None
    new = store.acquire_lease(sid, LeaseHolder(name="next"), ttl=5)
    assert new.token == old.token + 1
    with pytest.raises(LeaseLost, match="superseded"):
        store.renew_lease(old, ttl=5)


def test_fencing_rejects_stale_and_lease_less_writes(store: SqliteSessionStore, sid: str) -> None:
    other = store.create_session(NewSession()).id
    stale = store.acquire_lease(sid, LeaseHolder(name="a"), ttl=0.05)
    store.append_messages(sid, [user("by a")], lease=stale)
    time.sleep(0.08)
    with pytest.raises(LeaseLost, match="expired"):  # expired, nobody took over yet
        store.append_messages(sid, [user("late a")], lease=stale)
    current = store.acquire_lease(sid, LeaseHolder(name="b"), ttl=5)
    with pytest.raises(LeaseLost, match="superseded"):
        store.append_messages(sid, [user("stale a")], lease=stale)
    with pytest.raises(LeaseLost, match="superseded"):
        store.archive_and_compact(sid, [user("S")], watermark=10**9, lease=stale)
    with pytest.raises(LeaseBusy, match="'b'"):
        store.append_messages(sid, [user("no lease")])
    with pytest.raises(LeaseLost, match="not"):
        store.append_messages(other, [user("wrong session")], lease=current)
    store.append_messages(sid, [user("by b")], lease=current)
    store.release_lease(current)
    with pytest.raises(LeaseLost, match="released"):
        store.append_messages(sid, [user("after release")], lease=current)
    store.append_messages(sid, [user("no lease, none live")])
    assert [m.message.content for m in store.all_messages(sid)] == [
        "by a",
        "by b",
        "no lease, none live",
    ]


def test_waiter_times_out_then_is_woken_by_a_release(store: SqliteSessionStore, sid: str) -> None:
    held = store.acquire_lease(sid, LeaseHolder(name="holder"), ttl=30)
    start = time.monotonic()
    with pytest.raises(LeaseBusy, match="after waiting"):
        store.acquire_lease(sid, LeaseHolder(name="waiter"), ttl=5, timeout=0.3)
    assert 0.3 <= time.monotonic() - start < 1.5
    released_at: list[float] = []

    def release_later() -> None:
        time.sleep(0.2)
        store.release_lease(held)
        released_at.append(time.monotonic())

    thread = threading.Thread(target=release_later)
    thread.start()
    grant = store.acquire_lease(sid, LeaseHolder(name="waiter"), ttl=5, timeout=10)
    woke = time.monotonic()
    thread.join()
    assert grant.token == held.token + 1
    assert woke - released_at[0] < 0.25  # a one-second poll would miss this


def test_lease_keeper_renews_and_reports_loss(store: SqliteSessionStore, sid: str) -> None:
    grant = store.acquire_lease(sid, LeaseHolder(name="keeper"), ttl=0.6)
    with LeaseKeeper(store, grant, ttl=0.6, every=0.1) as keeper:
        time.sleep(1.3)  # twice the ttl
        store.append_messages(sid, [user("still mine")], lease=keeper.check())
    assert store.current_lease(sid) is None  # released on exit
    grant = store.acquire_lease(sid, LeaseHolder(name="keeper"), ttl=0.3)
    lost: list[LeaseLost] = []
    keeper = LeaseKeeper(store, grant, ttl=0.3, every=0.05, on_lost=lost.append).start()
    thief = sqlite3.connect(store.path)  # another program moves the lease on
    thief.execute("UPDATE leases SET token = token + 1 WHERE session_id = ?", (sid,))
    thief.commit()
    thief.close()
    assert keeper.lost.wait(2)
    keeper.stop()
    assert lost and isinstance(lost[0], LeaseLost)
    with pytest.raises(LeaseLost):
        keeper.check()


# -- real processes ----------------------------------------------------------------------------
def test_dead_holder_is_taken_over_at_once(store: SqliteSessionStore, sid: str) -> None:
    proc = worker("grab", str(store.path), sid, "doomed")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("held"), proc.stderr.read() if proc.stderr else line
    with pytest.raises(LeaseBusy, match="doomed"):
        store.acquire_lease(sid, LeaseHolder(name="me"), ttl=5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.communicate()
    grant = store.acquire_lease(sid, LeaseHolder(name="me"), ttl=5)  # try once: no waiting
    assert grant.token == int(line.split()[1]) + 1


def test_eight_processes_take_turns_without_interleaving(
    store: SqliteSessionStore, sid: str
) -> None:
    procs = [worker("turns", str(store.path), sid, f"p{i}", "25") for i in range(8)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
    rows = store.all_messages(sid)
    assert len(rows) == 8 * 25 * 3
    contents = [str(m.message.content) for m in rows]
    assert len(set(contents)) == len(contents)  # nothing duplicated
    runs: list[tuple[str, list[str]]] = []
    for message, content in zip(rows, contents, strict=True):
        if runs and runs[-1][0] == message.turn_id:
            runs[-1][1].append(content)
        else:
            runs.append((str(message.turn_id), [content]))
    assert len(runs) == 200  # each turn is one contiguous run: no interleaving
    assert len({turn for turn, _ in runs}) == 200
    tokens = []
    for index, (_, parts) in enumerate(runs):
        assert [p.split()[2] for p in parts] == ["s0", "s1", "s2"]
        token = {p.split()[3] for p in parts}
        assert len(token) == 1
        tokens.append(int(token.pop()[3:]))
        assert parts[0].split()[4] == f"seen{index * 3}"  # the waiter reloaded the latest history
    assert tokens == sorted(tokens) and len(set(tokens)) == 200  # order follows fencing tokens


def test_sigstopped_holder_loses_its_lease(store: SqliteSessionStore, sid: str) -> None:
    proc = worker("hold", str(store.path), sid, "sleepy", "0.5", stdin=True)
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    assert line.startswith("ready"), proc.stderr.read() if proc.stderr else line
    old_token = int(line.split()[1])
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        grant = store.acquire_lease(sid, LeaseHolder(name="successor"), ttl=10, timeout=5)
        waited = time.monotonic() - start
        assert grant.token == old_token + 1 and waited < 3.0
        store.append_messages(sid, [user("successor wrote")], lease=grant)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate("go\n", timeout=30)
    outcome = json.loads(out.strip().splitlines()[-1])
    assert outcome["append"].startswith("lost") and "superseded" in outcome["append"], err
    assert outcome["renew"].startswith("lost")
    assert [m.message.content for m in store.all_messages(sid)] == [
        "before-stop",
        "successor wrote",
    ]
    assert store.health().ok
    assert store.current_lease(sid) == grant


def test_handover_between_processes_is_prompt(store: SqliteSessionStore, sid: str) -> None:
    procs = [worker("handover", str(store.path), sid, name, "15") for name in ("a", "b")]
    events = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-2000:]
        events.extend(json.loads(out.strip().splitlines()[-1]))
    by_token = {e["token"]: e for e in events}
    gaps = [
        by_token[t + 1]["acquired"] - by_token[t]["released"]
        for t in sorted(by_token)
        if t + 1 in by_token
    ]
    assert len(gaps) == 29
    assert statistics.median(gaps) < 0.1, gaps  # not a one-second poll


def _torture() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torture_sqlite", TORTURE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sigkill_during_appends_and_compaction_keeps_the_database_sound(tmp_path: Path) -> None:
    result = _torture().run(trials=20, seconds=0.4, workdir=str(tmp_path), seed=1)
    assert result["failures"] == []
    assert result["trials"] == 20
    assert result["kills"]["compactions"] > 0 and result["kills"]["appends"] > 0
    assert result["kills"]["in_append"] + result["kills"]["in_compact"] > 0
