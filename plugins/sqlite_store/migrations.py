"""Append-only, named schema migrations, recorded in the database.

Each :class:`Migration` has a version (its 1-based place in :data:`MIGRATIONS`)
and a name. Applied migrations are recorded in ``schema_migrations`` and the
latest version is mirrored in ``PRAGMA user_version``. A database whose
version is newer than :data:`LATEST_VERSION`, or whose recorded names differ
from ours, is refused with :class:`SchemaVersionError` before anything is
written.

Never edit or reorder a released migration: append a new one.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from hermes_hookspecs.errors import SchemaVersionError, StoreError

#: ``PRAGMA application_id`` of a hermes-core session database ("HRMS").
APPLICATION_ID = 0x48524D53


def fts_text(row: str) -> str:
    """SQL expression for the text a message row contributes to the FTS indexes.

    The content (flattened text) followed by each tool call's name and
    arguments, cut to the row's ``fts_cap`` characters. Deterministic in the
    row's (immutable) columns, so the delete trigger can reproduce it for the
    contentless FTS tables.
    """
    calls = (
        "(SELECT group_concat(json_extract(value, '$.function.name') || ' ' || "
        f"json_extract(value, '$.function.arguments'), char(10)) FROM json_each({row}.tool_calls))"
    )
    return (
        f"substr(coalesce({row}.content, '') || "
        f"CASE WHEN {row}.tool_calls IS NULL THEN '' ELSE char(10) || coalesce({calls}, '') END, "
        f"1, {row}.fts_cap)"
    )


@dataclass(frozen=True)
class Migration:
    """One schema step: a unique name and the statements it runs."""

    name: str
    statements: tuple[str, ...]


_INITIAL = Migration(
    name="0001_initial",
    statements=(
        """
        CREATE TABLE blobs (
            digest TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at REAL NOT NULL
        )
        """,
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL DEFAULT '',
            cwd TEXT NOT NULL DEFAULT '',
            goal TEXT NOT NULL DEFAULT '',
            routing TEXT NOT NULL DEFAULT '{}',
            model TEXT NOT NULL DEFAULT '',
            provider TEXT NOT NULL DEFAULT '',
            parent_id TEXT REFERENCES sessions(id),
            end_reason TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            ended_at REAL,
            system_prompt_hash TEXT,
            tools_hash TEXT,
            compression_count INTEGER NOT NULL DEFAULT 0,
            next_position INTEGER NOT NULL DEFAULT 1
        )
        """,
        """
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            position INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            kind TEXT NOT NULL DEFAULT 'message',
            content TEXT,
            content_parts TEXT,
            tool_calls TEXT,
            tool_call_id TEXT,
            name TEXT,
            summary TEXT,
            provider_item TEXT,
            api_content TEXT,
            token_count INTEGER,
            turn_id TEXT,
            origin_id INTEGER REFERENCES messages(id),
            origin_root INTEGER,
            active INTEGER NOT NULL DEFAULT 1,
            compacted INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            fts_cap INTEGER NOT NULL
        )
        """,
        # one index serves the active view (session, 1, position order) and every
        # per-session scan; a second index would cost each append another page write
        "CREATE INDEX messages_by_session ON messages(session_id, active, position)",
        """
        CREATE TABLE message_calls (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            message_id INTEGER NOT NULL REFERENCES messages(id),
            PRIMARY KEY (session_id, call_id, message_id)
        ) WITHOUT ROWID
        """,
        # The text of a message never changes once written: that keeps the
        # contentless FTS indexes exact and means flag flips never touch them.
        """
        CREATE TRIGGER messages_immutable
        BEFORE UPDATE OF id, session_id, role, kind, content, content_parts, tool_calls,
            tool_call_id, name, summary, provider_item, api_content, fts_cap
        ON messages
        BEGIN
            SELECT RAISE(ABORT, 'message rows are immutable except active/compacted/position');
        END
        """,
        """
        CREATE VIRTUAL TABLE messages_fts_word USING fts5(
            body, content='', tokenize='unicode61 remove_diacritics 2'
        )
        """,
        "CREATE VIRTUAL TABLE messages_fts_tri USING fts5(body, content='', tokenize='trigram')",
        f"""
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
        BEGIN
            INSERT INTO messages_fts_word(rowid, body) VALUES (new.id, {fts_text("new")});
            INSERT INTO messages_fts_tri(rowid, body) VALUES (new.id, {fts_text("new")});
        END
        """,
        f"""
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
        BEGIN
            INSERT INTO messages_fts_word(messages_fts_word, rowid, body)
                VALUES ('delete', old.id, {fts_text("old")});
            INSERT INTO messages_fts_tri(messages_fts_tri, rowid, body)
                VALUES ('delete', old.id, {fts_text("old")});
            DELETE FROM message_calls WHERE message_id = old.id;
        END
        """,
        """
        CREATE TABLE usage (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            turn_id TEXT,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cache_read_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL,
            reasoning_tokens INTEGER NOT NULL,
            model TEXT,
            created_at REAL NOT NULL
        )
        """,
        "CREATE INDEX usage_by_session ON usage(session_id)",
        """
        CREATE TABLE prefix_ledger (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            request_index INTEGER NOT NULL,
            request_hash TEXT NOT NULL,
            request_tokens INTEGER NOT NULL,
            shared_prefix_hash TEXT NOT NULL,
            shared_prefix_tokens INTEGER NOT NULL,
            previous_tokens INTEGER NOT NULL,
            break_reason TEXT,
            provider_cached_tokens INTEGER,
            created_at REAL NOT NULL
        )
        """,
        "CREATE INDEX prefix_ledger_by_session ON prefix_ledger(session_id)",
        """
        CREATE TABLE compaction_events (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            engine TEXT NOT NULL,
            backend TEXT NOT NULL,
            tokens_before INTEGER NOT NULL,
            tokens_after INTEGER NOT NULL,
            summarizer TEXT NOT NULL,
            fallback INTEGER NOT NULL,
            detail TEXT NOT NULL,
            created_at REAL NOT NULL
        )
        """,
        "CREATE INDEX compaction_events_by_session ON compaction_events(session_id)",
        """
        CREATE TABLE leases (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id),
            token INTEGER NOT NULL,
            holder_name TEXT NOT NULL,
            holder_host TEXT NOT NULL,
            holder_pid INTEGER NOT NULL,
            acquired_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            released_at REAL
        )
        """,
    ),
)

_ANNOTATIONS = Migration(
    name="0002_message_annotations",
    statements=(
        # JSON object of annotate_message results; NULL when there are none
        "ALTER TABLE messages ADD COLUMN annotations TEXT",
        "DROP TRIGGER messages_immutable",
        """
        CREATE TRIGGER messages_immutable
        BEFORE UPDATE OF id, session_id, role, kind, content, content_parts, tool_calls,
            tool_call_id, name, summary, provider_item, api_content, fts_cap, annotations
        ON messages
        BEGIN
            SELECT RAISE(ABORT, 'message rows are immutable except active/compacted/position');
        END
        """,
    ),
)

_TRIGRAM_WITHOUT_POSITIONS = Migration(
    name="0003_trigram_without_positions",
    statements=(
        # Substring search only needs to know which rows hold every trigram of a
        # term (search.py then checks the term in the row's text), not where:
        # detail=none drops the position lists, the bulk of this index and of
        # the cost of writing it. The triggers name the table and keep working.
        "DROP TABLE messages_fts_tri",
        "CREATE VIRTUAL TABLE messages_fts_tri USING fts5("
        "body, content='', detail=none, tokenize='trigram')",
        "INSERT INTO messages_fts_tri(rowid, body) "
        f"SELECT id, {fts_text('messages')} FROM messages",
    ),
)

_HARNESS = Migration(
    name="0004_message_harness",
    statements=(
        # Message.harness: the harness construct that injected the text; NULL otherwise
        "ALTER TABLE messages ADD COLUMN harness TEXT",
        "DROP TRIGGER messages_immutable",
        """
        CREATE TRIGGER messages_immutable
        BEFORE UPDATE OF id, session_id, role, kind, content, content_parts, tool_calls,
            tool_call_id, name, summary, provider_item, api_content, fts_cap, annotations,
            harness
        ON messages
        BEGIN
            SELECT RAISE(ABORT, 'message rows are immutable except active/compacted/position');
        END
        """,
    ),
)

_SUMMARIES = Migration(
    name="0005_summary_index",
    statements=(
        # the compaction summaries of a session, which search ranks with the any-term
        # matches whatever their length (search.py, _summary_rows)
        "CREATE INDEX messages_summaries ON messages(session_id, id) WHERE kind = 'summary'",
    ),
)

_REQUESTS = Migration(
    name="0006_request_index",
    statements=(
        # the messages the user wrote, by session: the request that opened a row's turn
        # is the latest of them at or before it (messages.turn_requests)
        "CREATE INDEX messages_requests ON messages(session_id, id) "
        "WHERE role = 'user' AND kind = 'message' AND harness IS NULL",
    ),
)

#: Every migration, oldest first. Append only.
MIGRATIONS: tuple[Migration, ...] = (
    _INITIAL,
    _ANNOTATIONS,
    _TRIGRAM_WITHOUT_POSITIONS,
    _HARNESS,
    _SUMMARIES,
    _REQUESTS,
)
LATEST_VERSION = len(MIGRATIONS)


def read_version(conn: sqlite3.Connection, path: str) -> int:
    """The schema version of an open database; 0 for an empty file.

    :raises SchemaVersionError: the database is newer than this code, or its
        recorded migrations are not ours.
    :raises StoreError: the file is a SQLite database of some other program.
    """
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    tables = int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    if app_id != APPLICATION_ID and (tables or version):
        raise StoreError(
            f"{path} is a SQLite database but not a hermes session database "
            f"(application_id {app_id:#x}, expected {APPLICATION_ID:#x}); refusing to touch it"
        )
    if version > LATEST_VERSION:
        raise SchemaVersionError(
            f"{path} has schema version {version}, newer than this hermes-core knows "
            f"(up to {LATEST_VERSION}, {MIGRATIONS[-1].name}); upgrade hermes-core to open it"
        )
    if version:
        recorded = conn.execute(
            "SELECT version, name FROM schema_migrations ORDER BY version"
        ).fetchall()
        for number, name in recorded:
            if number > LATEST_VERSION or MIGRATIONS[number - 1].name != name:
                raise SchemaVersionError(
                    f"{path} records migration {number} {name!r}, which this hermes-core "
                    f"does not know (expected {MIGRATIONS[min(number, LATEST_VERSION) - 1].name!r})"
                )
    return version


def migrate(conn: sqlite3.Connection, path: str) -> list[str]:
    """Apply pending migrations inside the caller's write transaction.

    Returns the names applied (empty when the schema is current).
    """
    version = read_version(conn, path)
    if version == LATEST_VERSION:
        return []
    if version == 0:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(
            "CREATE TABLE schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, applied_at REAL NOT NULL)"
        )
    applied: list[str] = []
    for number in range(version + 1, LATEST_VERSION + 1):
        migration = MIGRATIONS[number - 1]
        for statement in migration.statements:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
            (number, migration.name, time.time()),
        )
        applied.append(migration.name)
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION}")
    return applied
