"""``SqliteSessionStore``: the default session store, one SQLite file."""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_core.storekit import (
    END_ONCE_SQL,
    ROTATION_END_REASON,
    SUCCESSOR_SQL,
    check_continuation,
    check_count,
    check_search_scope,
    check_tool_pairing,
    check_ttl,
    coerce_messages,
    no_known_calls,
    pairing_rows,
    require_blobs,
)
from hermes_hookspecs.errors import NotFoundError, StoreError, ValidationError
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

from . import leases
from .connections import Database, JournalPolicy, Synchronous
from .health import HealthReport, integrity_problems
from .migrations import LATEST_VERSION
from .rows import (
    EVENT_COLUMNS,
    INSERT_MESSAGE,
    MESSAGE_COLUMNS,
    PREFIX_COLUMNS,
    SESSION_COLUMNS,
    event_from_row,
    message_from_row,
    message_values,
    prefix_from_row,
    session_from_row,
    usage_from_row,
)
from .search import search as run_search

#: Default cap on the characters of one message that reach the FTS indexes
#: (content plus tool-call arguments). Text past the cap is stored in full but
#: not searchable; large tool outputs are the usual case.
DEFAULT_FTS_INDEX_CAP = 32_768
DEFAULT_BUSY_BUDGET = 10.0

_STR_FIELDS = ("title", "goal", "model", "provider")
_HASH_FIELDS = ("system_prompt_hash", "tools_hash")
_BLOB_KINDS = ("system_prompt", "tools")


def _require_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}: {value!r:.80}")
    return value


def _json(name: str, value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{name} is not JSON-serialisable: {exc}") from None


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
        if not isinstance(fts_index_cap, int) or fts_index_cap < 0:
            raise StoreError(f"fts_index_cap must be an integer >= 0, got {fts_index_cap!r}")
        if journal not in ("auto", "wal", "rollback"):
            raise StoreError(f"journal must be 'auto', 'wal' or 'rollback', got {journal!r}")
        if synchronous not in ("NORMAL", "FULL"):
            raise StoreError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        check_sqlite_version()
        self.path = Path(path).expanduser().absolute()
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
    @staticmethod
    def _session(conn: sqlite3.Connection, session_id: str) -> SessionRecord:
        rows = conn.execute(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchall()
        if not rows:
            raise NotFoundError(f"session {session_id!r} not found")
        return session_from_row(rows[0])

    @staticmethod
    def _insert_session(conn: sqlite3.Connection, new: NewSession, now: float, **extra: Any) -> str:
        sid = new.id if new.id is not None else uuid.uuid4().hex
        if not sid:
            raise ValidationError("session id must not be empty")
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
            raise ValidationError(f"session id {sid!r} already exists")
        if (
            new.parent_id is not None
            and not conn.execute("SELECT 1 FROM sessions WHERE id = ?", (new.parent_id,)).fetchone()
        ):
            raise NotFoundError(f"parent session {new.parent_id!r} not found")
        conn.execute(
            "INSERT INTO sessions (id, title, cwd, goal, routing, model, provider, parent_id, "
            "created_at, updated_at, system_prompt_hash, tools_hash, compression_count) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sid,
                new.title,
                new.cwd,
                new.goal,
                _json("routing", new.routing),
                new.model,
                new.provider,
                new.parent_id,
                now,
                now,
                extra.get("system_prompt_hash"),
                extra.get("tools_hash"),
                extra.get("compression_count", 0),
            ),
        )
        return sid

    def create_session(self, new: NewSession) -> SessionRecord:
        if not isinstance(new, NewSession):
            raise ValidationError(f"create_session needs a NewSession, got {type(new).__name__}")

        def body(conn: sqlite3.Connection) -> SessionRecord:
            sid = self._insert_session(conn, new, time.time())
            return self._session(conn, sid)

        return self._db.write(body)

    def get_session(self, session_id: str) -> SessionRecord:
        with self._db.read() as conn:
            return self._session(conn, session_id)

    def list_sessions(self, limit: int = 50, offset: int = 0) -> list[SessionRecord]:
        check_count(limit, "limit")
        check_count(offset, "offset")
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions "
                "ORDER BY updated_at DESC, rowid DESC LIMIT ? OFFSET ?",
                (limit, offset),
            ).fetchall()
        return [session_from_row(row) for row in rows]

    def continued_as(self, session_id: str) -> str | None:
        with self._db.read() as conn:
            record = self._session(conn, session_id)
            if record.end_reason != ROTATION_END_REASON:
                return None
            child = conn.execute(SUCCESSOR_SQL.format(p="?"), (session_id,)).fetchone()
        return str(child[0]) if child else None

    def update_session(self, session_id: str, **fields: Any) -> SessionRecord:
        allowed = (*_STR_FIELDS, "routing", *_HASH_FIELDS)
        sets: list[str] = []
        params: list[Any] = []
        for key, value in fields.items():
            if key not in allowed:
                raise ValidationError(
                    f"update_session cannot change {key!r}; allowed: {', '.join(allowed)}"
                )
            if key in _STR_FIELDS:
                params.append(_require_str(key, value))
            elif key == "routing":
                if not isinstance(value, dict):
                    raise ValidationError(f"routing must be a dict, got {type(value).__name__}")
                params.append(_json("routing", value))
            else:
                if value is not None:
                    _require_str(key, value)
                params.append(value)
            sets.append(f"{key} = ?")

        def body(conn: sqlite3.Connection) -> SessionRecord:
            self._session(conn, session_id)
            for key in _HASH_FIELDS:
                digest = fields.get(key)
                if (
                    digest is not None
                    and not conn.execute(
                        "SELECT 1 FROM blobs WHERE digest = ?", (digest,)
                    ).fetchone()
                ):
                    raise ValidationError(f"{key} {digest!r} names no stored blob (put_blob first)")
            if sets:
                conn.execute(
                    f"UPDATE sessions SET {', '.join(sets)}, updated_at = ? WHERE id = ?",
                    (*params, time.time(), session_id),
                )
            return self._session(conn, session_id)

        return self._db.write(body)

    def end_session(self, session_id: str, reason: str) -> SessionRecord:
        if not isinstance(reason, str) or not reason:
            raise ValidationError(f"end reason must be a non-empty string, got {reason!r}")

        def body(conn: sqlite3.Connection) -> SessionRecord:
            self._session(conn, session_id)
            now = time.time()
            conn.execute(  # the first end wins (storekit.END_ONCE_SQL)
                "UPDATE sessions SET end_reason = ?, ended_at = ?, updated_at = ? "
                f"WHERE id = ? AND {END_ONCE_SQL}",
                (reason, now, now, session_id),
            )
            return self._session(conn, session_id)

        return self._db.write(body)

    # -- blobs -------------------------------------------------------------------
    def put_blob(self, kind: BlobKind, text: str) -> str:
        if kind not in _BLOB_KINDS:
            raise ValidationError(f"blob kind must be one of {_BLOB_KINDS}, got {kind!r}")
        _require_str("blob text", text)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
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
    def _insert_messages(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        position: int,
        messages: list[NewMessage],
        now: float,
    ) -> list[StoredMessage]:
        stored: list[StoredMessage] = []
        for offset, new in enumerate(messages):
            root: int | None = None
            if new.origin_id is not None:
                found = conn.execute(
                    "SELECT coalesce(origin_root, id) FROM messages WHERE id = ?", (new.origin_id,)
                ).fetchone()
                if found is None:
                    raise ValidationError(f"origin_id {new.origin_id} matches no stored message")
                root = int(found[0])
            cursor = conn.execute(
                INSERT_MESSAGE,
                message_values(session_id, position + offset, new, root, now, self.fts_index_cap),
            )
            mid = int(cursor.lastrowid or 0)
            for call in new.message.tool_calls or ():
                conn.execute(
                    "INSERT OR IGNORE INTO message_calls (session_id, call_id, message_id) "
                    "VALUES (?, ?, ?)",
                    (session_id, call.id, mid),
                )
            stored.append(
                StoredMessage(
                    id=mid,
                    session_id=session_id,
                    position=position + offset,
                    message=new.message,
                    api_content=new.api_content,
                    token_count=new.token_count,
                    turn_id=new.turn_id,
                    origin_id=new.origin_id,
                    active=True,
                    compacted=False,
                    created_at=now,
                    annotations=new.annotations,
                )
            )
        return stored

    @staticmethod
    def _call_in_active_view(conn: sqlite3.Connection, session_id: str, call_id: str) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM message_calls c JOIN messages m ON m.id = c.message_id "
                "WHERE c.session_id = ? AND c.call_id = ? AND m.active = 1 LIMIT 1",
                (session_id, call_id),
            ).fetchone()
            is not None
        )

    @staticmethod
    def _next_position(conn: sqlite3.Connection, session_id: str) -> int:
        row = conn.execute(
            "SELECT next_position FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"session {session_id!r} not found")
        return int(row[0])

    def append_messages(
        self,
        session_id: str,
        messages: list[NewMessage],
        *,
        lease: LeaseGrant | None = None,
    ) -> list[StoredMessage]:
        batch = coerce_messages(messages)
        if not batch:
            return []
        pairs = pairing_rows(batch)

        def body(conn: sqlite3.Connection) -> list[StoredMessage]:
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
            leases.check_open(conn, session_id, "append messages to")
            leases.fence(conn, session_id, lease)
            check_tool_pairing(
                pairs,
                lambda ids: {i for i in ids if self._call_in_active_view(conn, session_id, i)},
            )
            return self._insert_messages(conn, session_id, position, batch, now)

        return self._db.write(body)

    def active_messages(self, session_id: str) -> list[StoredMessage]:
        with self._db.read() as conn:
            self._session(conn, session_id)
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages "
                "WHERE session_id = ? AND active = 1 ORDER BY position",
                (session_id,),
            ).fetchall()
        return [message_from_row(row) for row in rows]

    def get_messages(self, message_ids: list[int]) -> list[StoredMessage]:
        ids = list(message_ids)
        if not ids:
            return []
        for mid in ids:
            if not isinstance(mid, int) or isinstance(mid, bool):
                raise ValidationError(f"message ids must be integers, got {mid!r}")
        unique = sorted(set(ids))
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN "
                f"({','.join('?' * len(unique))})",
                unique,
            ).fetchall()
        by_id = {row[0]: row for row in rows}
        missing = [mid for mid in unique if mid not in by_id]
        if missing:
            raise NotFoundError(f"message ids not found: {missing[:20]}")
        return [message_from_row(by_id[mid]) for mid in ids]

    def message_context(
        self, message_id: int, before: int = 2, after: int = 2
    ) -> list[StoredMessage]:
        with self._db.read() as conn:
            found = conn.execute(
                "SELECT session_id FROM messages WHERE id = ?", (message_id,)
            ).fetchall()
            if not found:
                raise NotFoundError(f"message {message_id!r} not found")
            sid = found[0][0]
            earlier = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND id < ? "
                "ORDER BY id DESC LIMIT ?",
                (sid, message_id, max(0, int(before))),
            ).fetchall()
            rest = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND id >= ? "
                "ORDER BY id LIMIT ?",
                (sid, message_id, max(0, int(after)) + 1),
            ).fetchall()
        return [message_from_row(row) for row in [*reversed(earlier), *rest]]

    def all_messages(self, session_id: str) -> list[StoredMessage]:
        with self._db.read() as conn:
            self._session(conn, session_id)
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY id",
                (session_id,),
            ).fetchall()
        return [message_from_row(row) for row in rows]

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
        batch = coerce_messages(new_active, "new_active")
        update = check_continuation(update)
        if not isinstance(watermark, int) or isinstance(watermark, bool) or watermark < 0:
            raise ValidationError(f"watermark must be a message id >= 0, got {watermark!r}")
        if child is not None and in_place:
            raise ValidationError("child is only used with in_place=False (rotation)")
        if child is not None and not isinstance(child, NewSession):
            raise ValidationError(f"child must be a NewSession, got {type(child).__name__}")
        if event is not None and not isinstance(event, CompactionEvent):
            raise ValidationError(f"event must be a CompactionEvent, got {type(event).__name__}")

        def body(conn: sqlite3.Connection) -> CompactionCommit:
            parent = self._session(conn, session_id)
            leases.check_open(conn, session_id, "compact")
            leases.fence(conn, session_id, lease)
            require_blobs(
                update,
                lambda digest, kind: (
                    conn.execute(
                        "SELECT 1 FROM blobs WHERE digest = ? AND kind = ?", (digest, kind)
                    ).fetchone()
                    is not None
                ),
            )
            archived = int(
                conn.execute(
                    "SELECT count(*) FROM messages WHERE session_id = ? AND active = 1 AND id <= ?",
                    (session_id, watermark),
                ).fetchone()[0]
            )
            carried = [
                message_from_row(row)
                for row in conn.execute(
                    f"SELECT {MESSAGE_COLUMNS} FROM messages "
                    "WHERE session_id = ? AND active = 1 AND id > ? ORDER BY position",
                    (session_id, watermark),
                ).fetchall()
            ]
            view = pairing_rows(batch) + [
                (
                    m.message.role,
                    [call.id for call in m.message.tool_calls or []],
                    m.message.tool_call_id,
                )
                for m in carried
            ]
            check_tool_pairing(view, no_known_calls, "new_active + carried messages")
            now = time.time()
            if in_place:
                conn.execute(
                    "UPDATE messages SET active = 0, compacted = 1 "
                    "WHERE session_id = ? AND active = 1 AND id <= ?",
                    (session_id, watermark),
                )
                position = self._next_position(conn, session_id)
                inserted = self._insert_messages(conn, session_id, position, batch, now)
                position += len(batch)
                for moved in carried:
                    conn.execute(
                        "UPDATE messages SET position = ? WHERE id = ?", (position, moved.id)
                    )
                    position += 1
                conn.execute(
                    "UPDATE sessions SET compression_count = compression_count + 1, "
                    "next_position = ?, updated_at = ? WHERE id = ?",
                    (position, now, session_id),
                )
                active_ids = [m.id for m in inserted] + [m.id for m in carried]
                child_id = None
                continuing = session_id
            else:
                spec = child or NewSession(
                    title=parent.title,
                    cwd=parent.cwd,
                    goal=parent.goal,
                    routing=parent.routing,
                    model=parent.model,
                    provider=parent.provider,
                )
                spec = spec.model_copy(update={"parent_id": session_id})
                child_id = self._insert_session(
                    conn,
                    spec,
                    now,
                    system_prompt_hash=parent.system_prompt_hash,
                    tools_hash=parent.tools_hash,
                    compression_count=parent.compression_count + 1,
                )
                conn.execute(
                    "UPDATE messages SET active = 0, compacted = 1 "
                    "WHERE session_id = ? AND active = 1",
                    (session_id,),
                )
                conn.execute(
                    "UPDATE sessions SET end_reason = 'compression', ended_at = ?, updated_at = ? "
                    f"WHERE id = ? AND {END_ONCE_SQL}",
                    (now, now, session_id),
                )
                copies = [NewMessage.carried_from(m) for m in carried]
                rows = self._insert_messages(conn, child_id, 1, batch + copies, now)
                conn.execute(
                    "UPDATE sessions SET next_position = ? WHERE id = ?",
                    (1 + len(rows), child_id),
                )
                active_ids = [m.id for m in rows]
                continuing = child_id
            if update is not None:
                for column in ("system_prompt_hash", "tools_hash"):
                    value = getattr(update, column)
                    if value is not None:
                        conn.execute(
                            f"UPDATE sessions SET {column} = ? WHERE id = ?", (value, continuing)
                        )
                if update.routing is not None:
                    conn.execute(
                        "UPDATE sessions SET routing = ? WHERE id = ?",
                        (_json("update.routing", update.routing), continuing),
                    )
            if event is not None:
                allowed = {session_id} if child_id is None else {session_id, child_id}
                if event.session_id not in allowed:
                    raise ValidationError(
                        f"event.session_id = {event.session_id!r}; "
                        f"expected one of {sorted(allowed)}"
                    )
                conn.execute(
                    f"INSERT INTO compaction_events ({EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        event.session_id,
                        event.engine,
                        event.backend,
                        event.tokens_before,
                        event.tokens_after,
                        event.summarizer,
                        int(event.fallback),
                        _json("event.detail", event.detail),
                        event.created_at if event.created_at is not None else now,
                    ),
                )
            return CompactionCommit(
                session_id=session_id,
                archived=archived,
                inserted=len(batch),
                carried_after_watermark=len(carried),
                child_session_id=child_id,
                active_ids=active_ids,
            )

        return self._db.write(body)

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
        if not isinstance(query, str):
            raise ValidationError(f"search query must be a string, got {type(query).__name__}")
        if not isinstance(limit, int) or limit < 0:
            raise ValidationError(f"search limit must be an integer >= 0, got {limit!r}")
        scope = check_search_scope(session_id, session_ids)
        with self._db.read() as conn:
            return run_search(
                conn,
                query,
                session_ids=scope,
                include_compacted=include_compacted,
                limit=limit,
            )

    # -- usage, prefix ledger, events ---------------------------------------------
    def _require_session(self, conn: sqlite3.Connection, session_id: str) -> None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            raise NotFoundError(f"session {session_id!r} not found")

    def record_usage(self, record: UsageRecord) -> None:
        if not isinstance(record, UsageRecord):
            raise ValidationError(f"record_usage needs a UsageRecord, got {type(record).__name__}")
        u = record.usage

        def body(conn: sqlite3.Connection) -> None:
            self._require_session(conn, record.session_id)
            conn.execute(
                "INSERT INTO usage (session_id, turn_id, input_tokens, output_tokens, "
                "cache_read_tokens, cache_write_tokens, reasoning_tokens, model, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.session_id,
                    record.turn_id,
                    u.input_tokens,
                    u.output_tokens,
                    u.cache_read_tokens,
                    u.cache_write_tokens,
                    u.reasoning_tokens,
                    u.model,
                    record.created_at if record.created_at is not None else time.time(),
                ),
            )

        self._db.write(body)

    def usage(self, session_id: str) -> list[UsageRecord]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT session_id, turn_id, input_tokens, output_tokens, cache_read_tokens, "
                "cache_write_tokens, reasoning_tokens, model, created_at FROM usage "
                "WHERE session_id = ? ORDER BY id",
                (session_id,),
            ).fetchall()
        return [usage_from_row(row) for row in rows]

    def record_prefix(self, entry: PrefixEntry) -> None:
        if not isinstance(entry, PrefixEntry):
            raise ValidationError(f"record_prefix needs a PrefixEntry, got {type(entry).__name__}")

        def body(conn: sqlite3.Connection) -> None:
            self._require_session(conn, entry.session_id)
            conn.execute(
                f"INSERT INTO prefix_ledger ({PREFIX_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    entry.session_id,
                    entry.request_index,
                    entry.request_hash,
                    entry.request_tokens,
                    entry.shared_prefix_hash,
                    entry.shared_prefix_tokens,
                    entry.previous_tokens,
                    entry.break_reason,
                    entry.provider_cached_tokens,
                    entry.created_at if entry.created_at is not None else time.time(),
                ),
            )

        self._db.write(body)

    def prefix_entries(self, session_id: str) -> list[PrefixEntry]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {PREFIX_COLUMNS} FROM prefix_ledger WHERE session_id = ? ORDER BY id",
                (session_id,),
            ).fetchall()
        return [prefix_from_row(row) for row in rows]

    def compaction_events(self, session_id: str) -> list[CompactionEvent]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM compaction_events WHERE session_id = ? ORDER BY id",
                (session_id,),
            ).fetchall()
        return [event_from_row(row) for row in rows]

    # -- leases ------------------------------------------------------------------
    def acquire_lease(
        self,
        session_id: str,
        holder: LeaseHolder,
        ttl: float,
        *,
        timeout: float | None = None,
    ) -> LeaseGrant:
        if not isinstance(holder, LeaseHolder):
            raise ValidationError(f"holder must be a LeaseHolder, got {type(holder).__name__}")
        return leases.acquire(self._db, session_id, holder, ttl, timeout)

    def renew_lease(self, lease: LeaseGrant, ttl: float) -> LeaseGrant:
        ttl = check_ttl(ttl)
        return self._db.write(lambda conn: leases.renew(conn, lease, ttl))

    def release_lease(self, lease: LeaseGrant) -> None:
        self._db.write(lambda conn: leases.release(conn, lease))

    def current_lease(self, session_id: str) -> LeaseGrant | None:
        with self._db.read() as conn:
            row = leases.load(conn, session_id)
        if leases.is_live(row, time.time()):
            assert row is not None
            return row.grant()
        return None


__all__ = ["DEFAULT_BUSY_BUDGET", "DEFAULT_FTS_INDEX_CAP", "LATEST_VERSION", "SqliteSessionStore"]
