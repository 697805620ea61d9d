"""The lease keeper: holds a turn's lease grant and renews it while the turn runs.

A turn writes under its session's turn lease; every write carries the
grant's fencing token, so a holder that lost the lease (it stalled past the
TTL and another process took over) is refused by the store. The keeper
renews the grant every ``ttl/3`` on a daemon thread; when the store says the
lease is lost it records that (:attr:`LeaseKeeper.lost`) and stops, and the
turn's next step raises :class:`~hermes_hookspecs.LeaseLost`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from hermes_hookspecs import LeaseGrant, LeaseLost

log = logging.getLogger("hermes_core.runtime")


class LeaseStore(Protocol):
    """What the keeper uses of a :class:`~hermes_hookspecs.SessionStore`."""

    def renew_lease(self, lease: LeaseGrant, ttl: float) -> LeaseGrant: ...

    def release_lease(self, lease: LeaseGrant) -> None: ...


class LeaseKeeper:
    """The current grant of one turn's lease, renewed on a thread until :meth:`release`."""

    def __init__(self, store: Callable[[], LeaseStore], grant: LeaseGrant, ttl: float) -> None:
        self._store = store
        self.grant = grant
        self.ttl = ttl
        #: set when a renewal found the lease taken over (the turn is interrupted)
        self.lost: LeaseLost | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name=f"hermes-lease-{grant.session_id[:8]}", daemon=True
        )

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def check(self) -> None:
        """:raises LeaseLost: a renewal found the lease taken over."""
        if self.lost is not None:
            raise LeaseLost(f"turn interrupted: {self.lost}")

    def hand_over(self, grant: LeaseGrant) -> None:
        """Keep renewing ``grant`` instead (a rotation moved the turn to the child session)."""
        with self._lock:
            self.grant = grant

    def release(self) -> None:
        """Stop renewing and give the lease back (a store fault here is ignored)."""
        self._stop.set()
        with contextlib.suppress(Exception):
            self._store().release_lease(self.grant)

    def _run(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            grant = self.grant
            try:
                renewed = self._store().renew_lease(grant, self.ttl)
            except LeaseLost as exc:
                self.lost = exc
                return
            except Exception as exc:  # the store hiccupped: try again next period
                log.warning("lease renewal failed for %s: %s", grant.session_id, exc)
                continue
            with self._lock:
                if self.grant is grant:  # not handed over meanwhile
                    self.grant = renewed
