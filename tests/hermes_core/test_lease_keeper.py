"""The runtime's lease keeper on a real SQLite store: renewal, loss, hand-over."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from hermes_core.lease import LeaseKeeper
from hermes_hookspecs import LeaseGrant, LeaseHolder, LeaseLost, NewSession, SessionStore
from hermes_plugin_sqlite_store import SqliteSessionStore


def wait_for(condition: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.02)
    return False


def test_the_keeper_renews_its_grant_and_releases_it(tmp_path: Path) -> None:
    with SqliteSessionStore(tmp_path / "s.db") as store:
        sid = store.create_session(NewSession()).id
        grant = store.acquire_lease(sid, LeaseHolder(name="a"), 0.6, timeout=0)
        keeper = LeaseKeeper(lambda: store, grant, 0.6).start()
        assert wait_for(lambda: keeper.grant.expires_at > grant.expires_at)
        assert keeper.grant.token == grant.token  # a renewal keeps the fencing token
        keeper.check()
        keeper.release()
        assert store.current_lease(sid) is None


def test_a_lease_taken_over_is_reported_as_lost(tmp_path: Path) -> None:
    with SqliteSessionStore(tmp_path / "s.db") as store:
        sid = store.create_session(NewSession()).id
        grant = store.acquire_lease(sid, LeaseHolder(name="a"), 0.3, timeout=0)
        keeper = LeaseKeeper(lambda: store, grant, 30.0)  # never renews in time: not started
        time.sleep(0.4)
        taker = store.acquire_lease(sid, LeaseHolder(name="b"), 30.0, timeout=0)
        assert taker.token > grant.token
        keeper.ttl = 0.3  # now renew: the store refuses the stale token
        keeper.start()
        assert wait_for(lambda: keeper.lost is not None)
        with pytest.raises(LeaseLost, match="turn interrupted"):
            keeper.check()
        keeper.release()  # gives back nothing of the taker's
        assert store.current_lease(sid) == taker


class SlowRenewals:
    """The real store, with each renewal of ``slow`` held until ``go`` is set."""

    def __init__(self, store: SessionStore, slow: LeaseGrant) -> None:
        self.store = store
        self.slow = slow
        self.entered = threading.Event()
        self.go = threading.Event()

    def renew_lease(self, lease: LeaseGrant, ttl: float) -> LeaseGrant:
        renewed = self.store.renew_lease(lease, ttl)
        if lease.session_id == self.slow.session_id:
            self.entered.set()
            self.go.wait(5)
        return renewed

    def release_lease(self, lease: LeaseGrant) -> None:
        self.store.release_lease(lease)


def test_a_renewal_in_flight_does_not_undo_a_hand_over(tmp_path: Path) -> None:
    """A rotation hands the keeper the child's grant while the parent's renewal runs."""
    with SqliteSessionStore(tmp_path / "s.db") as store:
        parent = store.create_session(NewSession()).id
        child = store.create_session(NewSession()).id
        grant = store.acquire_lease(parent, LeaseHolder(name="a"), 0.3, timeout=0)
        slow = SlowRenewals(store, grant)
        keeper = LeaseKeeper(lambda: slow, grant, 0.3).start()
        assert slow.entered.wait(5)  # the parent's renewal is in flight
        child_grant = store.acquire_lease(child, LeaseHolder(name="a"), 30.0, timeout=0)
        keeper.hand_over(child_grant)
        slow.go.set()
        time.sleep(0.3)
        assert keeper.grant.session_id == child
        keeper.release()
        assert store.current_lease(child) is None
