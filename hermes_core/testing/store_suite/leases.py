"""Turn leases and fencing: try once, waiting woken promptly, stale tokens, expiry,
dead holders, across processes.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from hermes_core.storekit import process_state
from hermes_hookspecs import (
    HermesError,
    LeaseBusy,
    LeaseGrant,
    LeaseHolder,
    LeaseLost,
    NotFoundError,
    SessionStore,
    ValidationError,
)

from .base import SuiteBase
from .helpers import (
    StoreFactory,
    dead_pid,
    snapshot,
    summary,
    texts,
    user,
    zombie_process,
)


def _child_hold_lease(factory: StoreFactory, session_id: str, ttl: float, conn: Any) -> None:
    store = factory()
    grant = store.acquire_lease(session_id, LeaseHolder(name="child-holder"), ttl)
    conn.send(grant.token)
    time.sleep(3600)


def _child_wait_lease(factory: StoreFactory, session_id: str, timeout: float, conn: Any) -> None:
    store = factory()
    try:
        conn.send("ready")
        grant = store.acquire_lease(
            session_id, LeaseHolder(name="child-waiter"), 30, timeout=timeout
        )
        got = time.time()
        seen = texts(store.active_messages(session_id))
        store.release_lease(grant)
        conn.send(("granted", grant.token, got, seen))
    except Exception as exc:  # reported to the parent, which fails the test
        conn.send(("error", f"{type(exc).__name__}: {exc}", 0.0, []))
    finally:
        store.close()


class LeaseChecks(SuiteBase):
    """Turn leases and fencing checks."""

    def test_acquire_try_once_then_busy(self, store: SessionStore, session_id: str) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        assert isinstance(grant, LeaseGrant) and grant.session_id == session_id
        assert grant.holder.name == "a" and grant.expires_at > grant.acquired_at
        with pytest.raises(LeaseBusy):
            store.acquire_lease(session_id, LeaseHolder(name="b"), 30)
        current = store.current_lease(session_id)
        assert current is not None and current.token == grant.token
        assert current.holder == grant.holder

    def test_tokens_strictly_increase(self, store: SessionStore, session_id: str) -> None:
        tokens = []
        for name in ("a", "b", "a", "c"):
            grant = store.acquire_lease(session_id, LeaseHolder(name=name), 30)
            tokens.append(grant.token)
            store.release_lease(grant)
        assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)

    def test_release_frees_the_lease(self, store: SessionStore, session_id: str) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        store.release_lease(grant)
        assert store.current_lease(session_id) is None
        other = store.acquire_lease(session_id, LeaseHolder(name="b"), 30)
        store.release_lease(grant)  # stale release: no error, no effect
        current = store.current_lease(session_id)
        assert current is not None and current.token == other.token

    def test_writes_need_the_live_lease(self, store: SessionStore, session_id: str) -> None:
        store.append_messages(session_id, [user("before any lease")])
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        store.append_messages(session_id, [user("with the lease")], lease=grant)
        before = snapshot(store, session_id)
        with pytest.raises(LeaseBusy):
            store.append_messages(session_id, [user("without a lease")])
        with pytest.raises(LeaseBusy):
            store.archive_and_compact(session_id, [summary("s")], watermark=10**12)
        assert snapshot(store, session_id) == before
        store.release_lease(grant)
        store.append_messages(session_id, [user("free again")])

    def test_stale_token_rejected(self, store: SessionStore, session_id: str) -> None:
        old = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        store.release_lease(old)
        new = store.acquire_lease(session_id, LeaseHolder(name="b"), 30)
        store.append_messages(session_id, [user("by b")], lease=new)
        before = snapshot(store, session_id)
        with pytest.raises(LeaseLost):
            store.append_messages(session_id, [user("by stale a")], lease=old)
        with pytest.raises(LeaseLost):
            store.archive_and_compact(session_id, [summary("s")], watermark=10**12, lease=old)
        with pytest.raises(LeaseLost):
            store.renew_lease(old, 30)
        assert snapshot(store, session_id) == before

    def test_expired_lease_taken_over_and_old_holder_fenced(
        self, store: SessionStore, session_id: str
    ) -> None:
        old = store.acquire_lease(session_id, LeaseHolder(name="slow"), self.short_ttl)
        store.append_messages(session_id, [user("slow wrote this in time")], lease=old)
        time.sleep(self.short_ttl + 0.2)
        assert store.current_lease(session_id) is None
        with pytest.raises(LeaseLost):  # expired: its writes are refused even before a takeover
            store.append_messages(session_id, [user("too late")], lease=old)
        new = store.acquire_lease(session_id, LeaseHolder(name="fast"), 30)
        assert new.token > old.token
        store.append_messages(session_id, [user("fast proceeds")], lease=new)
        before = snapshot(store, session_id)
        with pytest.raises(LeaseLost):
            store.append_messages(session_id, [user("slow resumes")], lease=old)
        with pytest.raises(LeaseLost):
            store.renew_lease(old, 30)
        with pytest.raises(LeaseLost):
            store.archive_and_compact(session_id, [summary("s")], watermark=10**12, lease=old)
        assert snapshot(store, session_id) == before
        assert texts(store.active_messages(session_id)) == [
            "slow wrote this in time",
            "fast proceeds",
        ]

    def test_renew_extends(self, store: SessionStore, session_id: str) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), self.short_ttl)
        renewed = store.renew_lease(grant, 30)
        assert renewed.token == grant.token and renewed.expires_at > grant.expires_at
        time.sleep(self.short_ttl + 0.2)
        with pytest.raises(LeaseBusy):
            store.acquire_lease(session_id, LeaseHolder(name="b"), 30)
        store.append_messages(session_id, [user("still mine")], lease=renewed)

    def test_waiter_woken_promptly_on_release(
        self, store: SessionStore, store_factory: StoreFactory, session_id: str
    ) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="holder"), 30)
        store.append_messages(session_id, [user("the holder's turn")], lease=grant)
        result: dict[str, Any] = {}
        with self.second_handle(store_factory) as other:

            def wait() -> None:
                try:
                    result["grant"] = other.acquire_lease(
                        session_id, LeaseHolder(name="waiter"), 30, timeout=10
                    )
                    result["at"] = time.monotonic()
                    result["seen"] = texts(other.active_messages(session_id))
                except Exception as exc:  # reported below
                    result["error"] = exc

            thread = threading.Thread(target=wait)
            thread.start()
            time.sleep(0.3)  # the waiter is waiting now
            assert "grant" not in result and "error" not in result
            released = time.monotonic()
            store.release_lease(grant)
            thread.join(15)
        assert "error" not in result, result.get("error")
        latency = result["at"] - released
        assert latency < self.handover_budget, f"hand-over took {latency:.3f}s"
        assert result["grant"].token > grant.token
        assert result["seen"] == ["the holder's turn"]  # the waiter reloads the latest history

    def test_wait_times_out_with_busy(self, store: SessionStore, session_id: str) -> None:
        store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        started = time.monotonic()
        with pytest.raises(LeaseBusy):
            store.acquire_lease(session_id, LeaseHolder(name="b"), 30, timeout=0.3)
        assert 0.25 <= time.monotonic() - started < 3.0

    def test_waiter_gets_expired_lease(self, store: SessionStore, session_id: str) -> None:
        held = store.acquire_lease(
            session_id, LeaseHolder(name="crashed-elsewhere"), self.short_ttl
        )
        started = time.monotonic()
        grant = store.acquire_lease(session_id, LeaseHolder(name="b"), 30, timeout=10)
        waited = time.monotonic() - started
        assert grant.token > held.token
        assert waited < self.short_ttl + 1.5, f"waited {waited:.3f}s for a {self.short_ttl}s lease"

    def test_dead_holder_on_this_host_taken_over(
        self, store: SessionStore, session_id: str
    ) -> None:
        ghost = LeaseHolder(name="ghost", host=socket.gethostname(), pid=dead_pid())
        held = store.acquire_lease(session_id, ghost, 3600)
        grant = store.acquire_lease(session_id, LeaseHolder(name="heir"), 30)
        assert grant.token > held.token
        with pytest.raises(LeaseLost):
            store.append_messages(session_id, [user("ghost write")], lease=held)

    def test_zombie_holder_on_this_host_taken_over(
        self, store: SessionStore, session_id: str
    ) -> None:
        # a zombie (exited, not reaped) still answers os.kill(pid, 0), yet runs no code
        if process_state(os.getpid()) is None:
            pytest.skip("no /proc on this platform")
        zombie = zombie_process()
        try:
            ghost = LeaseHolder(name="zombie", host=socket.gethostname(), pid=zombie.pid)
            held = store.acquire_lease(session_id, ghost, 3600)
            started = time.monotonic()
            grant = store.acquire_lease(session_id, LeaseHolder(name="heir"), 30)
            assert time.monotonic() - started < 0.5
            assert grant.token > held.token
            with pytest.raises(LeaseLost):
                store.append_messages(session_id, [user("zombie write")], lease=held)
        finally:
            zombie.wait()

    def test_waiter_takes_over_promptly_when_the_holder_becomes_a_zombie(
        self, store: SessionStore, session_id: str
    ) -> None:
        if process_state(os.getpid()) is None:
            pytest.skip("no /proc on this platform")
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
        )
        try:
            holder = LeaseHolder(name="doomed", host=socket.gethostname(), pid=child.pid)
            held = store.acquire_lease(session_id, holder, 3600)
            got: list[tuple[float, LeaseGrant]] = []
            waiter = threading.Thread(
                target=lambda: got.append(
                    (
                        time.monotonic(),
                        store.acquire_lease(session_id, LeaseHolder(name="heir"), 30, timeout=20),
                    )
                )
            )
            waiter.start()
            time.sleep(0.3)
            assert not got  # the holder is alive: the waiter waits
            assert child.stdin is not None
            child.stdin.close()  # the child exits; nobody reaps it: a zombie
            while process_state(child.pid) != "Z":
                time.sleep(0.002)
            died = time.monotonic()
            waiter.join(20)
            assert got, "the waiter never got the lease"
            took = got[0][0] - died
            assert took < 0.5, f"take-over from a zombie holder took {took:.3f}s"
            assert got[0][1].token > held.token
        finally:
            child.wait()

    def test_dead_pid_on_other_host_not_taken_over(
        self, store: SessionStore, session_id: str
    ) -> None:
        remote = LeaseHolder(name="remote", host="another-host.invalid", pid=dead_pid())
        store.acquire_lease(session_id, remote, 3600)
        with pytest.raises(LeaseBusy):
            store.acquire_lease(session_id, LeaseHolder(name="local"), 30)

    def test_lease_bad_input(self, store: SessionStore, session_id: str) -> None:
        for ttl in (0, -1.0):
            with pytest.raises(HermesError):
                store.acquire_lease(session_id, LeaseHolder(name="a"), ttl)
        assert store.current_lease(session_id) is None
        with pytest.raises(NotFoundError):
            store.acquire_lease("no-such-session", LeaseHolder(name="a"), 30)

    # -- rules decided once for every store (issue 17) ---------------------------
    def test_lease_arguments_checked_alike(self, store: SessionStore, session_id: str) -> None:
        for timeout in (True, -0.5, "1", float("nan")):
            with pytest.raises(ValidationError, match="timeout"):
                store.acquire_lease(session_id, LeaseHolder(name="a"), 30, timeout=timeout)  # type: ignore[arg-type]
        for ttl in (True, float("nan"), 10**9):
            with pytest.raises(ValidationError, match="ttl"):
                store.acquire_lease(session_id, LeaseHolder(name="a"), ttl)
        with pytest.raises(ValidationError, match="holder"):
            store.acquire_lease(session_id, "a", 30)  # type: ignore[arg-type]
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        with pytest.raises(ValidationError, match="lease"):
            store.renew_lease(grant.token, 30)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="lease"):
            store.release_lease(None)  # type: ignore[arg-type]
        current = store.current_lease(session_id)
        assert current is not None and current.token == grant.token  # untouched
        store.release_lease(grant)
        assert store.current_lease(session_id) is None

    def test_current_lease_of_an_unknown_session_not_found(self, store: SessionStore) -> None:
        # a misspelt session id must not look like a free session
        with pytest.raises(NotFoundError):
            store.current_lease("no-such-session")

    def _spawn(self, target: Callable[..., None], *args: Any) -> tuple[Any, Any]:
        if not self.multiprocess:
            pytest.skip("multiprocess = False for this store")
        ctx = multiprocessing.get_context("spawn")
        parent_end, child_end = ctx.Pipe()
        proc = ctx.Process(target=target, args=(*args, child_end), daemon=True)
        proc.start()
        return proc, parent_end

    def test_process_waiter_woken_promptly(
        self, store: SessionStore, store_factory: StoreFactory, session_id: str
    ) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="parent"), 30)
        store.append_messages(session_id, [user("parent's turn")], lease=grant)
        proc, pipe = self._spawn(_child_wait_lease, store_factory, session_id, 30.0)
        try:
            assert pipe.poll(60), "child process did not start"
            assert pipe.recv() == "ready"
            time.sleep(0.5)  # the child is waiting now
            released = time.time()
            store.release_lease(grant)
            assert pipe.poll(30), "child never got the released lease"
            status, token, got, seen = pipe.recv()
        finally:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        assert status == "granted", token
        assert token > grant.token
        assert got - released < self.handover_budget, f"hand-over took {got - released:.3f}s"
        assert seen == ["parent's turn"]

    def test_killed_holder_process_taken_over(
        self, store: SessionStore, store_factory: StoreFactory, session_id: str
    ) -> None:
        proc, pipe = self._spawn(_child_hold_lease, store_factory, session_id, 3600.0)
        try:
            assert pipe.poll(60), "child process did not report its lease"
            child_token = pipe.recv()
            with pytest.raises(LeaseBusy):  # alive: its lease stands
                store.acquire_lease(session_id, LeaseHolder(name="parent"), 30)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.join(10)
        grant = store.acquire_lease(session_id, LeaseHolder(name="parent"), 30)
        assert grant.token > child_token
        store.append_messages(session_id, [user("after the takeover")], lease=grant)
