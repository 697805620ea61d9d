"""The session-store contract.

A store is registered by name through ``register_session_stores`` and chosen
with ``session.store``. The SQLite store (``sqlite``) and the PostgreSQL
store (``postgres``) implement this class unchanged; the conformance suite in
``hermes_core.testing`` checks any implementation against the rules below.

Rules every implementation keeps:

* **Nothing is deleted.** Compaction flips ``active``/``compacted`` flags and
  inserts the new active view; old rows stay searchable.
* **Atomicity.** Each method that writes does so in one transaction.
* **Fencing.** A write made with a ``lease`` is rejected with
  :class:`~hermes_hookspecs.errors.LeaseLost` unless that lease is still the
  session's current one (same token, not expired) at the moment of the write,
  checked inside the write's transaction. A write made without a lease is
  rejected with :class:`~hermes_hookspecs.errors.LeaseBusy` while another
  holder's lease is live.
* **Bad input is refused whole.** An invalid message (tool result for an
  unknown call id, ...) raises :class:`~hermes_hookspecs.errors.ValidationError`
  and nothing of that call is written.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from .errors import NotFoundError
from .records import (
    CompactionCommit,
    CompactionEvent,
    ContinuationUpdate,
    LeaseGrant,
    LeaseHolder,
    NewMessage,
    NewSession,
    PrefixEntry,
    SearchHit,
    SessionRecord,
    StoredMessage,
    UsageRecord,
)

BlobKind = Literal["system_prompt", "tools"]


class SessionStore(ABC):
    """Durable sessions, messages, prompts, usage, leases and search."""

    #: registered name, e.g. ``"sqlite"``
    name: str = ""

    # -- lifecycle ----------------------------------------------------------
    def close(self) -> None:  # noqa: B027 - optional
        """Release connections. Idempotent."""

    # -- sessions -----------------------------------------------------------
    @abstractmethod
    def create_session(self, new: NewSession) -> SessionRecord:
        """Create a session (a fresh uuid4 hex id unless ``new.id`` is set)."""

    @abstractmethod
    def get_session(self, session_id: str) -> SessionRecord:
        """Return the session or raise :class:`NotFoundError`."""

    @abstractmethod
    def list_sessions(self, limit: int = 50, offset: int = 0) -> list[SessionRecord]:
        """Most recently updated first; sessions updated at the same instant, the most
        recently created first, then by id (the same order on every store)."""

    def continued_as(self, session_id: str) -> str | None:
        """The session that continues ``session_id`` after a rotation, or None.

        That is its newest child when the session was ended by a rotation
        (``end_reason == "compression"``); None for any other session. The
        default walks :meth:`list_sessions`; a store answers with one query.
        """
        if self.get_session(session_id).end_reason != "compression":
            return None
        best: SessionRecord | None = None
        offset = 0
        while page := self.list_sessions(limit=500, offset=offset):
            for record in page:
                if record.parent_id == session_id and (
                    best is None or (record.created_at, record.id) > (best.created_at, best.id)
                ):
                    best = record
            offset += len(page)
        return best.id if best is not None else None

    @abstractmethod
    def update_session(self, session_id: str, **fields: Any) -> SessionRecord:
        """Update ``title``, ``goal``, ``routing``, ``model``, ``provider``,
        ``system_prompt_hash`` or ``tools_hash``; any other key is a
        :class:`ValidationError`."""

    @abstractmethod
    def end_session(self, session_id: str, reason: str) -> SessionRecord:
        """Mark the session ended with ``reason``; the first end wins.

        Ending an ended session changes neither its reason nor its time (a
        stale process must not erase that a rotation closed the parent) and
        returns the stored record.
        """

    # -- content-addressed blobs (frozen system prompts, tool schemas) ------
    @abstractmethod
    def put_blob(self, kind: BlobKind, text: str) -> str:
        """Store ``text`` once under its SHA-256 hex digest and return the digest."""

    @abstractmethod
    def get_blob(self, digest: str) -> str:
        """Return the exact text stored under ``digest`` or raise :class:`NotFoundError`."""

    # -- messages -----------------------------------------------------------
    @abstractmethod
    def append_messages(
        self,
        session_id: str,
        messages: list[NewMessage],
        *,
        lease: LeaseGrant | None = None,
    ) -> list[StoredMessage]:
        """Append to the active view in one transaction, after fencing checks.

        Validates tool pairing against the session's active view: a tool
        result must answer a call made by an earlier assistant message.

        :raises SessionRotated: the session was ended by a rotation
            (``end_reason == "compression"``); the error names the session
            that continues it (:func:`hermes_core.storekit.refuse_if_rotated`).
        """

    @abstractmethod
    def active_messages(self, session_id: str) -> list[StoredMessage]:
        """The active view, ordered by ``position``."""

    @abstractmethod
    def get_messages(self, message_ids: list[int]) -> list[StoredMessage]:
        """Fetch rows by id (any state), in the order asked."""

    @abstractmethod
    def message_context(
        self, message_id: int, before: int = 2, after: int = 2
    ) -> list[StoredMessage]:
        """The row and its neighbours in write order (a recovery pointer opened)."""

    def turn_requests(self, message_ids: Sequence[int]) -> dict[int, StoredMessage]:
        """The message the user wrote that opened each row's turn, by row id.

        A row's request is the latest row at or before it, in its session,
        that the user wrote (:attr:`Message.written_by_user`: not text a
        harness injected, not a summary). A row a compaction carried forward
        (``origin_id``) is looked up at the row it copies, first of its chain,
        in that row's session: a copy stands where its original stood. A row
        the user wrote is its own request. Ids with no such row before them,
        and ids that do not exist, are left out.

        Search ranks hits by what their turn was about with it
        (:func:`hermes_core.search.search_with_context`). This default walks
        the rows back with :meth:`get_messages` and :meth:`message_context`;
        a store answers it with one indexed query.
        """
        out: dict[int, StoredMessage] = {}
        for message_id in dict.fromkeys(message_ids):
            try:
                row = self.get_messages([message_id])[0]
                while row.origin_id is not None:
                    row = self.get_messages([row.origin_id])[0]
            except NotFoundError:
                continue
            span = 16
            while True:
                rows = self.message_context(row.id, before=span, after=0)
                found = next((r for r in reversed(rows) if r.message.written_by_user), None)
                if found is not None or len(rows) <= span:
                    break
                span *= 4
            if found is not None:
                out[message_id] = found
        return out

    @abstractmethod
    def all_messages(self, session_id: str) -> list[StoredMessage]:
        """Every row of the session in write order, active and compacted."""

    @abstractmethod
    def archive_and_compact(
        self,
        session_id: str,
        new_active: list[NewMessage],
        *,
        watermark: int,
        lease: LeaseGrant | None = None,
        in_place: bool = True,
        child: NewSession | None = None,
        event: CompactionEvent | None = None,
        update: ContinuationUpdate | None = None,
    ) -> CompactionCommit:
        """Replace the active view in ONE transaction.

        Active rows with ``id <= watermark`` (the snapshot the engine saw)
        become inactive and compacted; ``new_active`` is inserted as the new
        view; active rows with ``id > watermark`` (arrived after the snapshot)
        are kept and placed after the new rows. Session id, title, cwd, goal
        and routing are unchanged and ``compression_count`` grows by one.

        With ``in_place=False`` the session is ended with reason
        ``"compression"`` and the new view is written to a child session
        created from ``child`` (its ``parent_id`` set), in the same
        transaction. ``event`` is recorded with the commit. The child
        inherits each of ``title``, ``cwd``, ``goal``, ``routing``, ``model``
        and ``provider`` that ``child`` leaves empty (or all of them without
        a ``child``), the parent's prompt hashes, and the parent's
        ``compression_count`` plus one
        (:func:`hermes_core.storekit.rotation_child`).

        ``update`` (the rebuilt prompt's hashes, new routing) is applied to
        the continuing session - this one in place, the child in rotation -
        in the same transaction, so a crash never leaves a new view under an
        old prompt or routing.

        :raises ValidationError: bad input, an ``update`` hash naming no
            stored blob of its kind, a tool result answering no call of the
            new view, ``child`` with ``in_place=True``, a ``child.parent_id``
            naming another session, a child id already taken; nothing changes.
        """

    # -- search -------------------------------------------------------------
    @abstractmethod
    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        session_ids: Sequence[str] | None = None,
        include_compacted: bool = True,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Search for a natural query, best first.

        The query is text: it is split on whitespace into terms and nothing
        in it is an operator (quotes, ``AND``/``OR``/``NEAR``, ``*``, ``^``,
        ``:``, parentheses and column filters are searched as written).

        * A row *covers* a term when it holds the term as a word (or as
          consecutive words: ``session.go``) or as a substring, ignoring case
          and diacritics; substrings and identifiers (paths, SHAs, error
          fragments, CJK text) are found through a trigram index.
        * Rows covering every term come first (``score`` in ``[1, 2)``),
          then rows covering some of them (``score`` in ``[0, 1)``); within
          each, the index's text relevance (bm25 or equivalent) weighted by
          how many distinct terms the row covers orders them.
        * A row carried forward by compaction (``origin_id``) and its origin
          are reported once.

        :class:`hermes_core.searchkit` implements these rules for any store.

        :param query: the text to look for; an empty query finds nothing.
        :param session_id: only rows of this session.
        :param session_ids: only rows of these sessions (a session and its
            rotation ancestors, searched at once); not with ``session_id``.
            An empty sequence finds nothing.
        :param include_compacted: also search rows that compaction replaced.
        :param limit: at most this many hits.
        :raises ValidationError: a query that is not text, a bad limit, or
            both ``session_id`` and ``session_ids``.
        """

    # -- usage, prefix ledger, compaction events ----------------------------
    @abstractmethod
    def record_usage(self, record: UsageRecord) -> None:
        """Store the usage of one model call."""

    @abstractmethod
    def usage(self, session_id: str) -> list[UsageRecord]:
        """Usage records of the session, oldest first."""

    @abstractmethod
    def record_prefix(self, entry: PrefixEntry) -> None:
        """Append a prefix-ledger row."""

    @abstractmethod
    def prefix_entries(self, session_id: str) -> list[PrefixEntry]:
        """The session's prefix ledger, oldest first."""

    @abstractmethod
    def compaction_events(self, session_id: str) -> list[CompactionEvent]:
        """Compaction boundaries of the session, oldest first."""

    # -- turn leases --------------------------------------------------------
    @abstractmethod
    def acquire_lease(
        self,
        session_id: str,
        holder: LeaseHolder,
        ttl: float,
        *,
        timeout: float | None = None,
    ) -> LeaseGrant:
        """Take the session's turn lease.

        :param timeout: ``None`` tries once and raises :class:`LeaseBusy`;
            a number waits up to that many seconds, woken promptly (not by a
            one-second poll) when the lease is released.
        A lease that expired, or whose holder process is provably dead on
        this host, is taken over. Every grant gets a larger fencing token.

        :raises SessionRotated: the session was ended by a rotation; its
            successor takes the turns (as :meth:`append_messages`).
        """

    @abstractmethod
    def renew_lease(self, lease: LeaseGrant, ttl: float) -> LeaseGrant:
        """Extend the lease or raise :class:`LeaseLost` if it moved on."""

    @abstractmethod
    def release_lease(self, lease: LeaseGrant) -> None:
        """Give the lease up (no error if it already moved on)."""

    @abstractmethod
    def current_lease(self, session_id: str) -> LeaseGrant | None:
        """The live lease of the session, if any."""
