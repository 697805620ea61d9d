"""Turn leases on PostgreSQL: one row per session, fencing tokens from a sequence.

* Expiry is judged by the database clock (``clock_timestamp()``), never by
  the clients' clocks, so machines with skewed clocks agree.
* Every grant takes ``nextval('lease_tokens')``: tokens strictly increase
  for the session (and across the database).
* A lease is live while it is not released, not expired, and its holder is
  not provably dead: same host as the caller and no such process (a zombie
  counts as dead); the rule is :func:`hermes_core.storekit.holder_is_dead`,
  shared with the SQLite store. A live lease held by someone else makes ``acquire`` wait
  or raise :class:`LeaseBusy`.
* Writes lock the lease row ``FOR SHARE`` inside their transaction (see
  :func:`fence`), so a takeover cannot slip between the check and the commit.
* Waiters ``LISTEN`` on the schema's channel; ``release`` sends
  ``pg_notify(channel, session_id)`` in its transaction, so a waiter wakes as
  soon as the release commits. A waiter also wakes when the holder's lease
  is due to expire, and (when the holder is on this host) every
  :data:`LIVENESS_EVERY` seconds to notice a holder that died.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes_core.storekit import LeaseState, check_fence
from hermes_hookspecs.errors import LeaseBusy, LeaseLost, NotFoundError
from hermes_hookspecs.records import LeaseGrant, LeaseHolder

from .writes import check_open

if TYPE_CHECKING:
    import psycopg

LIVENESS_EVERY = 0.25

_SELECT = (
    "SELECT token, holder_name, holder_host, holder_pid, released, "
    "extract(epoch FROM acquired_at)::float8, extract(epoch FROM expires_at)::float8, "
    "coalesce(extract(epoch FROM expires_at - clock_timestamp())::float8, 0) "
    "FROM leases WHERE session_id = %s"
)


@dataclass(frozen=True)
class LeaseRow:
    """A session's lease row, with the seconds left judged by the database clock."""

    session_id: str
    token: int
    holder: LeaseHolder | None
    released: bool
    acquired_at: float | None
    expires_at: float | None
    remaining: float

    @classmethod
    def from_row(cls, session_id: str, row: tuple[Any, ...]) -> LeaseRow:
        token, name, host, pid, released, acquired, expires, remaining = row
        holder = None if name is None else LeaseHolder(name=name, host=host or "", pid=pid or 0)
        return cls(session_id, token, holder, released, acquired, expires, float(remaining))

    @property
    def state(self) -> LeaseState:
        """The row as the store kit's lease rules see it (expiry by the database clock)."""
        return LeaseState(
            token=self.token,
            holder=self.holder,
            released=self.released,
            remaining=self.remaining,
            clock="database clock",
        )

    @property
    def live(self) -> bool:
        """Not released, not expired, holder not provably dead (the store kit's rule)."""
        return self.state.live

    def grant(self) -> LeaseGrant:
        assert self.holder is not None and self.expires_at is not None
        return LeaseGrant(
            session_id=self.session_id,
            holder=self.holder,
            token=self.token,
            expires_at=self.expires_at,
            acquired_at=self.acquired_at or 0.0,
        )

    def describe(self) -> str:
        return self.state.describe()


def load(conn: psycopg.Connection[Any], session_id: str, lock: str = "") -> LeaseRow:
    """The session's lease row (optionally locked ``FOR UPDATE``/``FOR SHARE``)."""
    row = conn.execute(_SELECT + (f" FOR {lock}" if lock else ""), (session_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"session {session_id!r} not found")
    return LeaseRow.from_row(session_id, row)


def fence(conn: psycopg.Connection[Any], session_id: str, lease: LeaseGrant | None) -> None:
    """Inside a write transaction: allow the write or raise (:func:`storekit.check_fence`).

    The lease row is locked ``FOR SHARE`` so a takeover cannot commit between
    this check and the write's commit.

    :raises LeaseLost: ``lease`` is not the session's current, unexpired grant.
    :raises LeaseBusy: no lease given while another holder's lease is live.
    """
    check_fence(session_id, lease, load(conn, session_id, "SHARE").state)


def try_grant(
    conn: psycopg.Connection[Any], session_id: str, holder: LeaseHolder, ttl: float
) -> tuple[LeaseGrant | None, LeaseRow]:
    """One transaction: grant the lease if it is free; else report who holds it."""
    with conn.transaction():
        row = load(conn, session_id, "UPDATE")
        ended = conn.execute("SELECT end_reason FROM sessions WHERE id = %s", (session_id,))
        found = ended.fetchone()
        if found is not None:
            check_open(conn, session_id, found[0], "take the turn lease of")
        if row.live:
            return None, row
        granted = conn.execute(
            "UPDATE leases SET token = nextval('lease_tokens'), holder_name = %s, "
            "holder_host = %s, holder_pid = %s, acquired_at = clock_timestamp(), "
            "expires_at = clock_timestamp() + make_interval(secs => %s), released = false "
            "WHERE session_id = %s RETURNING token, "
            "extract(epoch FROM acquired_at)::float8, extract(epoch FROM expires_at)::float8",
            (holder.name, holder.host, holder.pid, ttl, session_id),
        ).fetchone()
    assert granted is not None
    token, acquired, expires = granted
    grant = LeaseGrant(
        session_id=session_id, holder=holder, token=token, expires_at=expires, acquired_at=acquired
    )
    return grant, row


def wait_for_grant(
    conn: psycopg.Connection[Any],
    channel: str,
    session_id: str,
    holder: LeaseHolder,
    ttl: float,
    timeout: float,
) -> LeaseGrant:
    """Try, then sleep on notifications until the lease is ours or ``timeout`` passes.

    ``conn`` must be an autocommit connection used only by this call.
    """
    from psycopg import sql

    deadline = time.monotonic() + timeout
    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
    try:
        while True:
            grant, row = try_grant(conn, session_id, holder, ttl)
            if grant is not None:
                return grant
            left = deadline - time.monotonic()
            if left <= 0:
                raise LeaseBusy(
                    f"session {session_id!r} lease still {row.describe()} "
                    f"after waiting {timeout:g}s"
                )
            nap = min(left, max(row.remaining, 0.0) + 0.002)
            if row.holder is not None and row.holder.host == socket.gethostname():
                nap = min(nap, LIVENESS_EVERY)
            _sleep_until_notified(conn, session_id, nap)
    finally:
        conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(channel)))
        for _ in conn.notifies(timeout=0):  # drop what is queued for this wait
            pass


def _sleep_until_notified(conn: psycopg.Connection[Any], session_id: str, seconds: float) -> None:
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        for note in conn.notifies(timeout=left, stop_after=1):
            if note.payload == session_id:
                return
        # notifications for other sessions (or none): keep sleeping until ``end``


def renew(conn: psycopg.Connection[Any], lease: LeaseGrant, ttl: float) -> LeaseGrant:
    """Extend a live lease; LeaseLost if it was released, expired or taken over."""
    with conn.transaction():
        row = conn.execute(
            "UPDATE leases SET expires_at = clock_timestamp() + make_interval(secs => %s) "
            "WHERE session_id = %s AND token = %s AND NOT released "
            "AND expires_at > clock_timestamp() "
            "RETURNING extract(epoch FROM expires_at)::float8",
            (ttl, lease.session_id, lease.token),
        ).fetchone()
        if row is None:
            current = load(conn, lease.session_id)
            raise LeaseLost(
                f"cannot renew lease token {lease.token} on session {lease.session_id!r}: "
                f"it is no longer live (now {current.describe()})"
            )
    return lease.model_copy(update={"expires_at": float(row[0])})


def release(conn: psycopg.Connection[Any], channel: str, lease: LeaseGrant) -> None:
    """Give the lease up and wake the waiters; nothing happens if it already moved on."""
    with conn.transaction():
        row = conn.execute(
            "UPDATE leases SET released = true, "
            "expires_at = least(expires_at, clock_timestamp()) "
            "WHERE session_id = %s AND token = %s AND NOT released RETURNING 1",
            (lease.session_id, lease.token),
        ).fetchone()
        if row is not None:
            conn.execute("SELECT pg_notify(%s, %s)", (channel, lease.session_id))


def current(conn: psycopg.Connection[Any], session_id: str) -> LeaseGrant | None:
    row = load(conn, session_id)
    return row.grant() if row.live else None
