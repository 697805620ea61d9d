"""The lease rules both stores apply: who is a dead holder, when a lease is live,
and which writes a lease (or its absence) allows.

A store reads its lease row into a :class:`LeaseState` (its clock decides
``remaining``: SQLite the process clock, PostgreSQL the database clock) and
lets :func:`check_fence` and :meth:`LeaseState.live` decide.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from hermes_hookspecs.errors import LeaseBusy, LeaseLost
from hermes_hookspecs.records import LeaseGrant, LeaseHolder

from .checks import check_lease


def process_state(pid: int) -> str | None:
    """The one-letter state of process ``pid`` from ``/proc/PID/stat`` (None: unknown).

    The command name in field 2 may hold spaces and parentheses, so the state is
    read after the last ``)``.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields[0] if fields else None


def holder_is_dead(holder: LeaseHolder) -> bool:
    """True only when the lease holder's process provably runs no code on this host.

    Dead means: the holder names this host, a pid other than ours, and either
    no such process exists (``os.kill(pid, 0)`` says so) or it is a zombie
    (``Z``: exited, not yet reaped by its parent) or dying (``X``), by
    ``/proc/PID/stat``. A holder on another host, a pid we may not signal, or
    a process whose state cannot be read is *not* dead: its lease lasts until
    it expires. Both stores apply this rule (the conformance suite pins it).
    """
    if holder.host != socket.gethostname() or holder.pid <= 0 or holder.pid == os.getpid():
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return process_state(holder.pid) in ("Z", "X")


@dataclass(frozen=True)
class LeaseState:
    """A session's lease row as the rules see it.

    :param token: the latest grant's fencing token (0: never granted).
    :param holder: who holds (or last held) it; None if never granted.
    :param released: the holder gave it up.
    :param remaining: seconds until it expires by the store's clock (<= 0: expired).
    :param clock: the clock ``remaining`` is judged by, named in error messages.
    """

    token: int
    holder: LeaseHolder | None
    released: bool
    remaining: float
    clock: str = ""

    @property
    def live(self) -> bool:
        """Not released, not expired, and its holder not provably dead."""
        return (
            not self.released
            and self.holder is not None
            and self.remaining > 0
            and not holder_is_dead(self.holder)
        )

    def describe(self) -> str:
        if self.holder is None:
            return "never granted"
        h = self.holder
        if self.released:
            state = "released"
        elif self.remaining <= 0:
            state = f"expired {-self.remaining:.3f}s ago"
        else:
            state = f"{self.remaining:.3f}s left"
        return f"held by {h.name!r} (pid {h.pid} on {h.host}), token {self.token}, {state}"


def check_fence(session_id: str, lease: object, state: LeaseState | None) -> None:
    """Inside a write's transaction: allow the write or raise (the fencing rule).

    Without a lease a write is allowed unless another holder's lease is live;
    with one, it must be the session's current grant, not released and not
    expired (a takeover after a dead holder or an expiry moves the token on).

    :raises ValidationError: ``lease`` is neither None nor a LeaseGrant.
    :raises LeaseBusy: no lease given while another holder's lease is live.
    :raises LeaseLost: ``lease`` is not the session's current, unexpired grant.
    """
    grant: LeaseGrant | None = check_lease(lease)
    if grant is None:
        if state is not None and state.live:
            raise LeaseBusy(
                f"session {session_id!r} is leased ({state.describe()}); write with that lease"
            )
        return
    if grant.session_id != session_id:
        raise LeaseLost(f"lease is for session {grant.session_id!r}, not {session_id!r}")
    if state is None or state.token != grant.token:
        now = "none" if state is None else state.describe()
        raise LeaseLost(
            f"lease token {grant.token} on session {session_id!r} was superseded (now {now})"
        )
    if state.released:
        raise LeaseLost(f"lease token {grant.token} on session {session_id!r} was released")
    if state.remaining <= 0:
        clock = f" ({state.clock})" if state.clock else ""
        raise LeaseLost(
            f"lease token {grant.token} on session {session_id!r} expired "
            f"{-state.remaining:.3f}s ago{clock}"
        )
