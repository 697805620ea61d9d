"""``PostgresSessionStore``: the session-store contract on PostgreSQL (psycopg 3 + pool).

Every method that writes runs in one transaction on a pooled connection.
Writers lock the session row (``FOR NO KEY UPDATE``) and the lease row
(``FOR SHARE``), so the fencing check and the write commit together.
The store's tables live in one PostgreSQL schema (``hermes`` by default);
several stores (or test runs) can share a database with different schemas.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from hermes_core.storekit import (
    LIST_SESSIONS_SQL,
    ROTATION_END_REASON,
    SUCCESSOR_SQL,
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
    check_timeout,
    check_tool_pairing,
    check_ttl,
    check_update_fields,
    coerce_messages,
    missing_messages,
    pairing_rows,
    stored_row,
)
from hermes_hookspecs.errors import (
    HermesError,
    LeaseBusy,
    NotFoundError,
    StoreError,
)
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

from . import compaction, leases, ledgers, search, sessions
from .connection import (
    check_schema_name,
    connect_once,
    describe_dsn,
    first_line,
    import_psycopg,
    open_pool,
    require_dsn,
)
from .migrations import ensure_newest, ensure_ranked, ensure_trigram, migrate
from .rows import (
    MESSAGE_COLUMNS,
    SESSION_COLUMNS,
    message_from_row,
    session_from_row,
)
from .writes import insert_messages, known_calls, lock_session, origin_roots

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

LOG = logging.getLogger("hermes_plugin_postgres_store")
NOW = "extract(epoch FROM clock_timestamp())::float8"
DEFAULT_FTS_CAP = 32_768


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class PostgresSessionStore(SessionStore):
    """Sessions, messages, search and turn leases in PostgreSQL.

    :param dsn: libpq connection string or URL (``postgresql://user:pw@host/db``).
    :param min_size: connections the pool keeps open.
    :param max_size: most connections the pool opens (waiting for a lease
        holds one connection for the wait).
    :param schema: PostgreSQL schema holding the tables (created if missing).
    :param connect_timeout: seconds to wait for a connection.
    :param fts_index_cap: characters of one message indexed for search.
    """

    name = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        schema: str = "hermes",
        connect_timeout: float = 10.0,
        fts_index_cap: int = DEFAULT_FTS_CAP,
    ) -> None:
        self._dsn = require_dsn(dsn)
        self.schema = check_schema_name(schema)
        self.fts_index_cap = check_count(fts_index_cap, "fts_index_cap", minimum=1)
        self._pg, _ = import_psycopg()
        self.channel = f"hermes_lease_{self.schema}"
        self._closed = False
        with connect_once(self._dsn, connect_timeout) as conn:
            conn.execute(f"SET search_path TO {_quote_ident(self.schema)}")
            try:
                migrate(conn, self.schema)
                trgm_schema, trigram_status = ensure_trigram(conn)
                self.ranked_index, ranked_status = ensure_ranked(conn)
                self.newest_index, newest_status = ensure_newest(conn)
                self.search_status = f"{trigram_status}; {ranked_status}; {newest_status}"
            except self._pg.Error as exc:
                raise StoreError(
                    f"cannot prepare schema {self.schema!r} in PostgreSQL "
                    f"({describe_dsn(self._dsn)}): {first_line(exc)}"
                ) from None
        #: True when a pg_trgm index serves substring search
        self.substring_index = trgm_schema is not None
        self._indexes = search.Indexes(trigram=self.substring_index, ranked=self.ranked_index)
        if not (self.substring_index and self.ranked_index and self.newest_index):
            LOG.warning("postgres store (schema %r): %s", self.schema, self.search_status)
        path = [_quote_ident(self.schema)]
        if trgm_schema and trgm_schema != self.schema:
            path.append(_quote_ident(trgm_schema))
        self._pool: ConnectionPool[Any] = open_pool(
            self._dsn,
            search_path=", ".join(path),
            min_size=min_size,
            max_size=max_size,
            connect_timeout=connect_timeout,
            name=f"hermes-postgres-{self.schema}",
        )

    # -- plumbing -------------------------------------------------------------
    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection; driver errors become StoreError."""
        if self._closed:
            raise StoreError("the postgres session store is closed")
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection() as conn:
                yield conn
        except HermesError:
            raise
        except self._pg.errors.ForeignKeyViolation as exc:
            raise NotFoundError(f"a referenced row does not exist: {first_line(exc)}") from None
        except self._pg.Error as exc:
            raise StoreError(f"postgres error: {first_line(exc)}") from exc
        except PoolTimeout as exc:
            raise StoreError(f"no postgres connection available: {exc}") from None

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one transaction (committed on success)."""
        with self._conn() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe(self) -> dict[str, Any]:
        """What this store is connected to and which search features it has."""
        return {
            "store": self.name,
            "dsn": describe_dsn(self._dsn),
            "schema": self.schema,
            "substring_index": self.substring_index,
            "ranked_index": self.ranked_index,
            "newest_index": self.newest_index,
            "search": self.search_status,
            "fts_index_cap": self.fts_index_cap,
        }

    # -- sessions ---------------------------------------------------------------
    def create_session(self, new: NewSession) -> SessionRecord:
        new = check_new_session(new)
        with self._tx() as conn:
            return sessions.insert(conn, new)

    def get_session(self, session_id: str) -> SessionRecord:
        check_session_id(session_id)
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s", (session_id,)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"session {session_id!r} not found")
        return session_from_row(row)

    def list_sessions(self, limit: int = 50, offset: int = 0) -> list[SessionRecord]:
        check_count(limit, "limit")
        check_count(offset, "offset")
        with self._conn() as conn:
            rows = conn.execute(
                LIST_SESSIONS_SQL.format(columns=SESSION_COLUMNS, p="%s"),
                (limit, offset),
            ).fetchall()
        return [session_from_row(row) for row in rows]

    def continued_as(self, session_id: str) -> str | None:
        check_session_id(session_id)
        record = self.get_session(session_id)
        if record.end_reason != ROTATION_END_REASON:
            return None
        with self._conn() as conn:
            child = conn.execute(SUCCESSOR_SQL.format(p="%s"), (session_id,)).fetchone()
        return str(child[0]) if child else None

    def update_session(self, session_id: str, **fields: Any) -> SessionRecord:
        check_session_id(session_id)
        check_update_fields(fields)
        with self._tx() as conn:
            return sessions.update(conn, session_id, fields)

    def end_session(self, session_id: str, reason: str) -> SessionRecord:
        check_session_id(session_id)
        check_end_reason(reason)
        with self._tx() as conn:
            return sessions.end(conn, session_id, reason)

    # -- blobs ------------------------------------------------------------------
    def put_blob(self, kind: BlobKind, text: str) -> str:
        check_blob_kind(kind)
        data = check_blob_text(text)
        digest = hashlib.sha256(data).hexdigest()
        with self._tx() as conn:
            conn.execute(
                f"INSERT INTO blobs (digest, kind, body, created_at) VALUES (%s, %s, %s, {NOW}) "
                "ON CONFLICT (digest) DO NOTHING",
                (digest, kind, data),
            )
        return digest

    def get_blob(self, digest: str) -> str:
        with self._conn() as conn:
            row = conn.execute("SELECT body FROM blobs WHERE digest = %s", (digest,)).fetchone()
        if row is None:
            raise NotFoundError(f"no blob stored under digest {digest!r}")
        return bytes(row[0]).decode("utf-8")

    # -- messages ---------------------------------------------------------------
    def append_messages(
        self,
        session_id: str,
        messages: list[NewMessage],
        *,
        lease: LeaseGrant | None = None,
    ) -> list[StoredMessage]:
        check_session_id(session_id)
        batch = coerce_messages(messages, "messages")
        check_lease(lease)
        with self._tx() as conn:
            next_position, _ = lock_session(conn, session_id, "append messages to")
            leases.fence(conn, session_id, lease)
            if not batch:
                return []
            check_tool_pairing(
                pairing_rows(batch), lambda ids: known_calls(conn, session_id, ids), "messages"
            )
            roots = origin_roots(conn, batch, "messages")
            rows = insert_messages(
                conn,
                session_id,
                batch,
                start_position=next_position,
                roots=roots,
                cap=self.fts_index_cap,
                what="messages",
            )
            conn.execute(
                f"UPDATE sessions SET next_position = %s, updated_at = {NOW} WHERE id = %s",
                (next_position + len(batch), session_id),
            )
        return [
            stored_row(new, mid, session_id, position, created_at)
            for new, (mid, position, created_at) in zip(batch, rows, strict=True)
        ]

    def _session_rows(self, where: str, params: tuple[Any, ...], order: str) -> list[StoredMessage]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where} ORDER BY {order}", params
            ).fetchall()
            if (
                not rows
                and conn.execute("SELECT 1 FROM sessions WHERE id = %s", (params[0],)).fetchone()
                is None
            ):
                raise NotFoundError(f"session {params[0]!r} not found")
        return [message_from_row(row) for row in rows]

    def active_messages(self, session_id: str) -> list[StoredMessage]:
        check_session_id(session_id)
        return self._session_rows("session_id = %s AND active", (session_id,), "position")

    def all_messages(self, session_id: str) -> list[StoredMessage]:
        check_session_id(session_id)
        return self._session_rows("session_id = %s", (session_id,), "id")

    def get_messages(self, message_ids: list[int]) -> list[StoredMessage]:
        ids = check_message_ids(message_ids)
        if not ids:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ANY(%s::bigint[])",
                (sorted(set(ids)),),
            ).fetchall()
        found = {row[0]: message_from_row(row) for row in rows}
        missing = missing_messages(ids, found)
        if missing is not None:
            raise missing
        return [found[i] for i in ids]

    def turn_requests(self, message_ids: Sequence[int]) -> dict[int, StoredMessage]:
        ids = sorted(set(check_message_ids(list(message_ids))))
        if not ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT asked, {MESSAGE_COLUMNS} FROM messages JOIN ("
                "SELECT m.id AS asked, (SELECT r.id FROM messages r "
                "WHERE r.session_id = o.session_id AND r.id <= o.id AND r.role = 'user' "
                "AND r.kind = 'message' AND strpos(r.message, '\"harness\":') = 0 "
                "ORDER BY r.id DESC LIMIT 1) AS request "
                "FROM messages m JOIN messages o ON o.id = coalesce(m.origin_root, m.id) "
                "WHERE m.id = ANY(%s::bigint[])) found ON id = found.request",
                (ids,),
            ).fetchall()
        return {row[0]: message_from_row(row[1:]) for row in rows}

    def message_context(
        self, message_id: int, before: int = 2, after: int = 2
    ) -> list[StoredMessage]:
        check_message_id(message_id)
        check_count(before, "before")
        check_count(after, "after")
        with self._conn() as conn:
            row = conn.execute(
                "SELECT session_id FROM messages WHERE id = %s", (message_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no stored message with id {message_id!r}")
            rows = conn.execute(
                f"(SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = %s AND id < %s "
                "ORDER BY id DESC LIMIT %s) UNION ALL "
                f"(SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = %s AND id >= %s "
                "ORDER BY id LIMIT %s)",
                (row[0], message_id, before, row[0], message_id, after + 1),
            ).fetchall()
        return sorted((message_from_row(r) for r in rows), key=lambda m: m.id)

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
        with self._tx() as conn:
            return compaction.archive_and_compact(
                conn, session_id, request, lease=lease, cap=self.fts_index_cap
            )

    # -- search -----------------------------------------------------------------
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
        with self._tx() as conn:
            # one snapshot for every pass and statement (READ COMMITTED would take one a
            # statement: a compaction committed between two would show rows both ways);
            # a transaction that only reads never fails to serialize
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", prepare=False)
            return search.search(
                conn,
                query,
                session_ids=scope,
                include_compacted=bool(include_compacted),
                limit=limit,
                indexes=self._indexes,
            )

    # -- usage, prefix ledger, compaction events --------------------------------
    def record_usage(self, record: UsageRecord) -> None:
        checked = check_record(record, UsageRecord, "record_usage: record")
        with self._tx() as conn:
            ledgers.record_usage(conn, checked)

    def usage(self, session_id: str) -> list[UsageRecord]:
        check_session_id(session_id)
        with self._conn() as conn:
            return ledgers.usage(conn, session_id)

    def record_prefix(self, entry: PrefixEntry) -> None:
        checked = check_record(entry, PrefixEntry, "record_prefix: entry")
        with self._tx() as conn:
            ledgers.record_prefix(conn, checked)

    def prefix_entries(self, session_id: str) -> list[PrefixEntry]:
        check_session_id(session_id)
        with self._conn() as conn:
            return ledgers.prefix_entries(conn, session_id)

    def compaction_events(self, session_id: str) -> list[CompactionEvent]:
        check_session_id(session_id)
        with self._conn() as conn:
            return ledgers.compaction_events(conn, session_id)

    # -- turn leases --------------------------------------------------------------
    def acquire_lease(
        self,
        session_id: str,
        holder: LeaseHolder,
        ttl: float,
        *,
        timeout: float | None = None,
    ) -> LeaseGrant:
        check_session_id(session_id)
        holder = check_holder(holder)
        ttl = check_ttl(ttl)
        wait = check_timeout(timeout)
        with self._conn() as conn:
            if wait is None:
                grant, row = leases.try_grant(conn, session_id, holder, ttl)
                if grant is None:
                    raise LeaseBusy(f"session {session_id!r} lease is {row.describe()}")
                return grant
            return leases.wait_for_grant(conn, self.channel, session_id, holder, ttl, wait)

    def renew_lease(self, lease: LeaseGrant, ttl: float) -> LeaseGrant:
        lease = check_grant(lease)
        ttl = check_ttl(ttl)
        with self._conn() as conn:
            return leases.renew(conn, lease, ttl)

    def release_lease(self, lease: LeaseGrant) -> None:
        lease = check_grant(lease)
        with self._conn() as conn:
            leases.release(conn, self.channel, lease)

    def current_lease(self, session_id: str) -> LeaseGrant | None:
        check_session_id(session_id)
        with self._conn() as conn:
            return leases.current(conn, session_id)
