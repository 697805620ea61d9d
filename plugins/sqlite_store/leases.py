"""Turn leases: grants with fencing tokens, takeover rules, prompt wake-up of waiters.

One row per session in ``leases`` keeps the current (or last) grant. The
token only grows: a new grant gets ``old token + 1``, and the row is never
deleted, so tokens are strictly increasing per session.

A lease is *live* while it is not released, not past ``expires_at`` by the
store's clock (``time.time()`` of the process doing the check), and its
holder is not provably dead (:func:`hermes_core.storekit.holder_is_dead`:
same host and no such process, or a zombie). Anything else can be taken over.

Waiting (:func:`wait_for_grant`) polls ``PRAGMA data_version`` on one
read connection with an adaptive interval of 1 to 10 ms: a commit by any
other connection (the holder's release) changes it, and the waiter then
re-reads the lease row and tries to take it. The lease row is also re-read
when the holder's expiry passes and every 100 ms (to notice a dead holder).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from hermes_core.storekit import LeaseState, check_fence, check_timeout, check_ttl
from hermes_hookspecs.errors import LeaseBusy, LeaseLost, StoreError
from hermes_hookspecs.records import LeaseGrant, LeaseHolder
from hermes_hookspecs.store import SessionStore

from .connections import Database
from .sessions import check_open, require

POLL_MIN = 0.001
POLL_MAX = 0.010
LIVENESS_EVERY = 0.1


@dataclass(frozen=True)
class LeaseRow:
    """The stored state of a session's lease."""

    session_id: str
    token: int
    holder: LeaseHolder
    acquired_at: float
    expires_at: float
    released_at: float | None

    def grant(self) -> LeaseGrant:
        return LeaseGrant(
            session_id=self.session_id,
            holder=self.holder,
            token=self.token,
            expires_at=self.expires_at,
            acquired_at=self.acquired_at,
        )

    def state(self, now: float) -> LeaseState:
        """The row as the store kit's lease rules see it (expiry by this process's clock)."""
        return LeaseState(
            token=self.token,
            holder=self.holder,
            released=self.released_at is not None,
            remaining=self.expires_at - now,
        )

    def describe(self, now: float | None = None) -> str:
        return self.state(time.time() if now is None else now).describe()


def is_live(row: LeaseRow | None, now: float) -> bool:
    """The store kit's rule: not released, not expired, holder not provably dead."""
    return row is not None and row.state(now).live


def load(conn: sqlite3.Connection, session_id: str) -> LeaseRow | None:
    rows = conn.execute(
        "SELECT token, holder_name, holder_host, holder_pid, acquired_at, expires_at, released_at "
        "FROM leases WHERE session_id = ?",
        (session_id,),
    ).fetchall()
    if not rows:
        return None
    token, name, host, pid, acquired, expires, released = rows[0]
    return LeaseRow(
        session_id=session_id,
        token=token,
        holder=LeaseHolder(name=name, host=host, pid=pid),
        acquired_at=acquired,
        expires_at=expires,
        released_at=released,
    )


def try_grant(
    conn: sqlite3.Connection, session_id: str, holder: LeaseHolder, ttl: float
) -> tuple[LeaseGrant | None, LeaseRow | None]:
    """Inside a write transaction: grant the lease if it is free, else report who holds it."""
    check_open(conn, session_id, "take the turn lease of")
    now = time.time()
    row = load(conn, session_id)
    if is_live(row, now):
        return None, row
    token = 1 if row is None else row.token + 1
    expires = now + ttl
    conn.execute(
        "INSERT INTO leases (session_id, token, holder_name, holder_host, holder_pid, "
        "acquired_at, expires_at, released_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL) "
        "ON CONFLICT(session_id) DO UPDATE SET token = excluded.token, "
        "holder_name = excluded.holder_name, holder_host = excluded.holder_host, "
        "holder_pid = excluded.holder_pid, acquired_at = excluded.acquired_at, "
        "expires_at = excluded.expires_at, released_at = NULL",
        (session_id, token, holder.name, holder.host, holder.pid, now, expires),
    )
    grant = LeaseGrant(
        session_id=session_id, holder=holder, token=token, expires_at=expires, acquired_at=now
    )
    return grant, row


def fence(conn: sqlite3.Connection, session_id: str, lease: LeaseGrant | None) -> None:
    """Inside a write transaction: refuse the write unless the lease rules allow it.

    The rules are :func:`hermes_core.storekit.check_fence`'s.

    :raises LeaseLost: ``lease`` is not the session's current live grant.
    :raises LeaseBusy: no lease given while another holder's lease is live.
    """
    row = load(conn, session_id)
    check_fence(session_id, lease, None if row is None else row.state(time.time()))


def renew(conn: sqlite3.Connection, lease: LeaseGrant, ttl: float) -> LeaseGrant:
    fence(conn, lease.session_id, lease)
    expires = time.time() + ttl
    conn.execute(
        "UPDATE leases SET expires_at = ? WHERE session_id = ? AND token = ?",
        (expires, lease.session_id, lease.token),
    )
    return lease.model_copy(update={"expires_at": expires})


def release(conn: sqlite3.Connection, lease: LeaseGrant) -> None:
    now = time.time()
    conn.execute(
        "UPDATE leases SET released_at = ?, expires_at = min(expires_at, ?) "
        "WHERE session_id = ? AND token = ? AND released_at IS NULL",
        (now, now, lease.session_id, lease.token),
    )


def acquire(
    db: Database,
    session_id: str,
    holder: LeaseHolder,
    ttl: float,
    timeout: float | None,
) -> LeaseGrant:
    """Grant the lease now, or (with ``timeout``) wait for it, woken promptly."""
    ttl = check_ttl(ttl)
    wait = check_timeout(timeout)
    grant, row = db.write(lambda conn: try_grant(conn, session_id, holder, ttl))
    if grant is not None:
        return grant
    assert row is not None
    if wait is None:
        raise LeaseBusy(f"session {session_id!r} lease is {row.describe()}")
    return _wait(db, session_id, holder, ttl, wait, row)


def current(conn: sqlite3.Connection, session_id: str) -> LeaseGrant | None:
    """The live grant of the session, or None (NotFoundError for an unknown session)."""
    row = load(conn, session_id)
    if row is None:
        require(conn, session_id)
        return None
    return row.grant() if is_live(row, time.time()) else None


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchall()[0][0])


def _wait(
    db: Database,
    session_id: str,
    holder: LeaseHolder,
    ttl: float,
    timeout: float,
    row: LeaseRow | None,
) -> LeaseGrant:
    deadline = time.monotonic() + timeout
    with db.private_reader() as conn:  # a long wait must not hold a pooled reader
        version = _data_version(conn)
        interval = POLL_MIN
        checked = time.monotonic()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                held = row.describe() if row is not None else "busy"
                raise LeaseBusy(
                    f"session {session_id!r} lease still {held} after waiting {timeout:g}s"
                )
            nap = min(interval, remaining)
            if row is not None and row.released_at is None:
                nap = min(nap, max(row.expires_at - time.time(), 0.0) + 0.0005)
            time.sleep(nap)
            current = _data_version(conn)
            changed = current != version
            version = current
            now = time.time()
            due = (
                row is None
                or row.released_at is not None
                or row.expires_at <= now
                or time.monotonic() - checked >= LIVENESS_EVERY
            )
            interval = POLL_MIN if changed else min(interval * 1.5, POLL_MAX)
            if not (changed or due):
                continue
            row = load(conn, session_id)
            checked = time.monotonic()
            if is_live(row, now):
                continue
            grant, row = db.write(lambda c: try_grant(c, session_id, holder, ttl))
            if grant is not None:
                return grant


class LeaseKeeper:
    """Keeps a lease renewed from a background thread and reports its loss.

    ``with LeaseKeeper(store, grant, ttl) as keeper:`` renews every
    ``ttl / 3`` seconds; if a renewal raises :class:`LeaseLost` the keeper
    sets :attr:`lost`, stores the error and calls ``on_lost`` (from the
    keeper's thread), which a turn runtime turns into an interrupt.
    :meth:`check` raises the loss in the caller's thread. Leaving the block
    stops renewing and releases the lease.
    """

    def __init__(
        self,
        store: SessionStore,
        lease: LeaseGrant,
        ttl: float,
        *,
        every: float | None = None,
        on_lost: Callable[[LeaseLost], None] | None = None,
    ) -> None:
        self._store = store
        self._lease = lease
        self._ttl = check_ttl(ttl)
        self._every = every if every is not None else self._ttl / 3
        self._on_lost = on_lost
        self._stop = threading.Event()
        self.lost = threading.Event()
        self.error: LeaseLost | None = None
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)

    @property
    def lease(self) -> LeaseGrant:
        """The latest grant (its ``expires_at`` moves with each renewal)."""
        return self._lease

    def check(self) -> LeaseGrant:
        """Return the current grant, or raise the :class:`LeaseLost` that ended it."""
        if self.error is not None:
            raise self.error
        return self._lease

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._lease = self._store.renew_lease(self._lease, self._ttl)
            except LeaseLost as exc:
                self.error = exc
                self.lost.set()
                if self._on_lost is not None:
                    self._on_lost(exc)
                return
            except StoreError:
                continue  # transient (locked); the next tick retries or finds the loss

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def stop(self, *, release: bool = True) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if release and self.error is None:
            self._store.release_lease(self._lease)

    def __enter__(self) -> LeaseKeeper:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
