"""``SqliteSessionStore``: the default session store, one SQLite file."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_core.storekit import (
    LIST_SESSIONS_SQL,
    ROTATION_END_REASON,
    SESSION_COLUMNS,
    check_blob_kind,
    check_blob_text,
    check_compaction,
    check_count,
    check_end_reason,
    check_grant,
    check_holder,
    check_lease,
    check_message_id,
    check_message_ids,
    check_new_session,
    check_record,
    check_search,
    check_session_id,
    check_tool_pairing,
    check_ttl,
    check_update_fields,
    coerce_messages,
    missing_messages,
    pairing_rows,
    require_hashes,
    session_from_row,
)
from hermes_hookspecs.errors import NotFoundError, StoreError
from hermes_hookspecs.records import (
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
from hermes_hookspecs.store import BlobKind, SessionStore

from . import compaction, leases, ledgers, sessions
from . import messages as message_rows
from .connections import Database, JournalPolicy, Synchronous
from .health import HealthReport, integrity_problems
from .migrations import LATEST_VERSION
from .search import search as run_search
from .side_files import collision

#: Default cap on the characters of one message that reach the FTS indexes
#: (content plus tool-call arguments). Text past the cap is stored in full but
#: not searchable; large tool outputs are the usual case.
DEFAULT_FTS_INDEX_CAP = 32_768
DEFAULT_BUSY_BUDGET = 10.0

#: the trigram tokenizer arrived in 3.34, ``RETURNING`` in 3.35
MIN_SQLITE_VERSION = (3, 35, 0)


def check_sqlite_version(found: str = sqlite3.sqlite_version) -> None:
    """Refuse a SQLite library too old for the schema, saying which one was found.

    :raises StoreError: naming the found and the needed version.
    """
    have = tuple(int(part) for part in found.split(".")[:3])
    if have < MIN_SQLITE_VERSION:
        need = ".".join(map(str, MIN_SQLITE_VERSION))
        raise StoreError(
            f"the sqlite store needs SQLite {need} or newer (FTS5 trigram tokenizer, RETURNING); "
            f"this Python's sqlite3 module uses SQLite {found}"
        )


class SqliteSessionStore(SessionStore):
    """Sessions, messages, blobs, usage, leases and search in one SQLite file.

    :param path: the database file (created with its parent folders if absent).
    :param fts_index_cap: characters of each message indexed for search.
    :param busy_budget: seconds a write keeps retrying ``database is locked``.
    :param journal: ``"auto"`` (WAL unless the filesystem or SQLite rules it
        out), ``"wal"`` (fail if WAL is unavailable) or ``"rollback"`` (use a
        rollback journal for a new or rollback-mode file; a WAL file stays WAL).
    :param synchronous: ``"NORMAL"`` (WAL default: a committed transaction
        survives a process crash; the last ones may be lost on power loss)
        or ``"FULL"``. Rollback-journal mode always uses ``FULL``.
    :param readers: size of the read-only connection pool.
    """

    name = "sqlite"

    def __init__(
        self,
        path: str | Path,
        *,
        fts_index_cap: int = DEFAULT_FTS_INDEX_CAP,
        busy_budget: float = DEFAULT_BUSY_BUDGET,
        journal: JournalPolicy = "auto",
        synchronous: Synchronous = "NORMAL",
        readers: int = 4,
        logger: logging.Logger | None = None,
    ) -> None:
        check_count(fts_index_cap, "fts_index_cap", minimum=1)  # as every store (storekit)
        if journal not in ("auto", "wal", "rollback"):
            raise StoreError(f"journal must be 'auto', 'wal' or 'rollback', got {journal!r}")
        if synchronous not in ("NORMAL", "FULL"):
            raise StoreError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        check_sqlite_version()
        self.path = Path(path).expanduser().absolute()
        problem = collision(self.path)
        if problem is not None:
            raise StoreError(f"sqlite store: {problem}")
        self.fts_index_cap = fts_index_cap
        self._log = logger or logging.getLogger("hermes_plugin_sqlite_store")
        self._db = Database(
            self.path,
            busy_budget=busy_budget,
            journal=journal,
            synchronous=synchronous,
            readers=readers,
            log=self._log,
        )

    # -- introspection -----------------------------------------------------------
    @property
    def journal_mode(self) -> str:
        """``"wal"``, or the rollback journal mode used instead."""
        return self._db.journal_mode

    @property
    def applied_migrations(self) -> list[str]:
        """Names of the migrations this instance applied when it opened the file."""
        return list(self._db.applied_migrations)

    def migrations(self) -> list[tuple[int, str, float]]:
        """Every migration recorded in the database: ``(version, name, applied_at)``."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT version, name, applied_at FROM schema_migrations ORDER BY version"
            ).fetchall()
        return [(int(v), str(n), float(t)) for v, n, t in rows]

    def health(self, *, quick: bool = False) -> HealthReport:
        """Run SQLite's integrity check (and the FTS5 index checks unless ``quick``)."""

        def body(conn: sqlite3.Connection) -> HealthReport:
            problems = integrity_problems(conn, quick=quick)
            return HealthReport(
                path=str(self.path),
                ok=not problems,
                problems=problems,
                journal_mode=self.journal_mode,
                schema_version=int(conn.execute("PRAGMA user_version").fetchone()[0]),
                page_count=int(conn.execute("PRAGMA page_count").fetchone()[0]),
                freelist_count=int(conn.execute("PRAGMA freelist_count").fetchone()[0]),
            )

        return self._db.write(body)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SqliteSessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- sessions ----------------------------------------------------------------
    def create_session(self, new: NewSession) -> SessionRecord:
        new = check_new_session(new)

        def body(conn: sqlite3.Connection) -> SessionRecord:
            return sessions.load(conn, sessions.insert(conn, new, time.time()))

        return self._db.write(body)

    def get_session(self, session_id: str) -> SessionRecord:
        check_session_id(session_id)
        with self._db.read() as conn:
            return sessions.load(conn, session_id)

    def list_sessions(self, limit: int = 50, offset: int = 0) -> list[SessionRecord]:
        check_count(limit, "limit")
        check_count(offset, "offset")
        with self._db.read() as conn:
            rows = conn.execute(
                LIST_SESSIONS_SQL.format(columns=SESSION_COLUMNS, p="?"),
                (limit, offset),
            ).fetchall()
        return [session_from_row(row) for row in rows]

    def continued_as(self, session_id: str) -> str | None:
        check_session_id(session_id)
        with self._db.read() as conn:
            if sessions.load(conn, session_id).end_reason != ROTATION_END_REASON:
                return None
            return sessions.successor(conn, session_id)

    def update_session(self, session_id: str, **fields: Any) -> SessionRecord:
        check_session_id(session_id)
        check_update_fields(fields)

        def body(conn: sqlite3.Connection) -> SessionRecord:
            sessions.require(conn, session_id)
            require_hashes(
                fields,
                lambda digest, kind: sessions.blob_stored(conn, digest, kind),
                "update_session: ",
            )
            if fields:
                sessions.update(conn, session_id, fields)
            return sessions.load(conn, session_id)

        return self._db.write(body)

    def end_session(self, session_id: str, reason: str) -> SessionRecord:
        check_session_id(session_id)
        check_end_reason(reason)

        def body(conn: sqlite3.Connection) -> SessionRecord:
            sessions.require(conn, session_id)
            sessions.end(conn, session_id, reason, time.time())
            return sessions.load(conn, session_id)

        return self._db.write(body)

    # -- blobs -------------------------------------------------------------------
    def put_blob(self, kind: BlobKind, text: str) -> str:
        check_blob_kind(kind)
        digest = hashlib.sha256(check_blob_text(text)).hexdigest()
        self._db.write(
            lambda conn: conn.execute(
                "INSERT OR IGNORE INTO blobs (digest, kind, text, created_at) VALUES (?, ?, ?, ?)",
                (digest, kind, text, time.time()),
            )
        )
        return digest

    def get_blob(self, digest: str) -> str:
        with self._db.read() as conn:
            rows = conn.execute("SELECT text FROM blobs WHERE digest = ?", (digest,)).fetchall()
        if not rows:
            raise NotFoundError(f"no blob stored under digest {digest!r}")
        return str(rows[0][0])

    # -- messages ----------------------------------------------------------------
    def append_messages(
        self,
        session_id: str,
        messages: list[NewMessage],
        *,
        lease: LeaseGrant | None = None,
    ) -> list[StoredMessage]:
        check_session_id(session_id)
        batch = coerce_messages(messages)
        check_lease(lease)
        pairs = pairing_rows(batch)

        def body(conn: sqlite3.Connection) -> list[StoredMessage]:
            if not batch:  # nothing to write, but the same refusals as a write
                sessions.check_open(conn, session_id, "append messages to")
                leases.fence(conn, session_id, lease)
                return []
            now = time.time()
            # reserve the positions first (one statement); a refusal below rolls it back
            reserved = conn.execute(
                "UPDATE sessions SET next_position = next_position + ?, updated_at = ? "
                "WHERE id = ? RETURNING next_position",
                (len(batch), now, session_id),
            ).fetchall()
            if not reserved:
                raise NotFoundError(f"session {session_id!r} not found")
            position = int(reserved[0][0]) - len(batch)
            sessions.check_open(conn, session_id, "append messages to")
            leases.fence(conn, session_id, lease)
            check_tool_pairing(pairs, lambda ids: message_rows.known_calls(conn, session_id, ids))
            return message_rows.insert(conn, session_id, position, batch, now, self.fts_index_cap)

        return self._db.write(body)

    def active_messages(self, session_id: str) -> list[StoredMessage]:
        check_session_id(session_id)
        with self._db.read() as conn:
            sessions.require(conn, session_id)
            return message_rows.select(
                conn, "session_id = ? AND active = 1 ORDER BY position", (session_id,)
            )

    def get_messages(self, message_ids: list[int]) -> list[StoredMessage]:
        ids = check_message_ids(message_ids)
        if not ids:
            return []
        with self._db.read() as conn:
            found = message_rows.by_ids(conn, ids)
        missing = missing_messages(ids, found)
        if missing is not None:
            raise missing
        return [found[mid] for mid in ids]

    def message_context(
        self, message_id: int, before: int = 2, after: int = 2
    ) -> list[StoredMessage]:
        check_message_id(message_id)
        check_count(before, "before")
        check_count(after, "after")
        with self._db.read() as conn:
            found = conn.execute(
                "SELECT session_id FROM messages WHERE id = ?", (message_id,)
            ).fetchall()
            if not found:
                raise NotFoundError(f"no stored message with id {message_id!r}")
            return message_rows.context(conn, found[0][0], message_id, before, after)

    def turn_requests(self, message_ids: Sequence[int]) -> dict[int, StoredMessage]:
        ids = list(dict.fromkeys(check_message_ids(list(message_ids))))
        if not ids:
            return {}
        with self._db.read() as conn:
            found = message_rows.turn_requests(conn, ids)
            rows = message_rows.by_ids(conn, found.values())
        return {message_id: rows[request] for message_id, request in found.items()}

    def all_messages(self, session_id: str) -> list[StoredMessage]:
        check_session_id(session_id)
        with self._db.read() as conn:
            sessions.require(conn, session_id)
            return message_rows.select(conn, "session_id = ? ORDER BY id", (session_id,))

    # -- compaction --------------------------------------------------------------
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
        check_session_id(session_id)
        request = check_compaction(
            new_active,
            watermark=watermark,
            in_place=in_place,
            child=child,
            event=event,
            update=update,
        )
        check_lease(lease)
        return self._db.write(
            lambda conn: compaction.archive_and_compact(
                conn, session_id, request, lease, self.fts_index_cap
            )
        )

    # -- search ------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        session_ids: Sequence[str] | None = None,
        include_compacted: bool = True,
        limit: int = 20,
    ) -> list[SearchHit]:
        scope = check_search(query, limit, session_id, session_ids)
        with self._db.read() as conn:
            return run_search(
                conn,
                query,
                session_ids=scope,
                include_compacted=include_compacted,
                limit=limit,
            )

    # -- usage, prefix ledger, events ---------------------------------------------
    def record_usage(self, record: UsageRecord) -> None:
        checked = check_record(record, UsageRecord, "record_usage: record")
        self._db.write(lambda conn: ledgers.record_usage(conn, checked))

    def usage(self, session_id: str) -> list[UsageRecord]:
        check_session_id(session_id)
        with self._db.read() as conn:
            return ledgers.usage(conn, session_id)

    def record_prefix(self, entry: PrefixEntry) -> None:
        checked = check_record(entry, PrefixEntry, "record_prefix: entry")
        self._db.write(lambda conn: ledgers.record_prefix(conn, checked))

    def prefix_entries(self, session_id: str) -> list[PrefixEntry]:
        check_session_id(session_id)
        with self._db.read() as conn:
            return ledgers.prefix_entries(conn, session_id)

    def compaction_events(self, session_id: str) -> list[CompactionEvent]:
        check_session_id(session_id)
        with self._db.read() as conn:
            return ledgers.compaction_events(conn, session_id)

    # -- leases ------------------------------------------------------------------
    def acquire_lease(
        self,
        session_id: str,
        holder: LeaseHolder,
        ttl: float,
        *,
        timeout: float | None = None,
    ) -> LeaseGrant:
        check_session_id(session_id)
        return leases.acquire(self._db, session_id, check_holder(holder), ttl, timeout)

    def renew_lease(self, lease: LeaseGrant, ttl: float) -> LeaseGrant:
        lease = check_grant(lease)
        ttl = check_ttl(ttl)
        return self._db.write(lambda conn: leases.renew(conn, lease, ttl))

    def release_lease(self, lease: LeaseGrant) -> None:
        lease = check_grant(lease)
        self._db.write(lambda conn: leases.release(conn, lease))

    def current_lease(self, session_id: str) -> LeaseGrant | None:
        check_session_id(session_id)
        with self._db.read() as conn:
            return leases.current(conn, session_id)


__all__ = ["DEFAULT_BUSY_BUDGET", "DEFAULT_FTS_INDEX_CAP", "LATEST_VERSION", "SqliteSessionStore"]
