"""The schema: append-only, named migrations recorded in ``schema_migrations``.

Each migration runs once, in its own transaction, under an advisory lock so
that processes opening the same database at once do not race. A database
that records a migration this version does not know was written by a newer
hermes-core: opening it raises :class:`SchemaVersionError` and changes
nothing. Never edit or reorder a released migration; append a new one.

The trigram index (``pg_trgm``) is not a migration: it is created when the
extension is available and skipped (and reported) when it is not, so the same
schema works on servers with and without the extension.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes_hookspecs.errors import SchemaVersionError

if TYPE_CHECKING:
    import psycopg

LOG = logging.getLogger("hermes_plugin_postgres_store")
#: advisory-lock key serialising migrations (any constant; "hermes" in ASCII)
MIGRATION_LOCK = 0x6865726D6573


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_sessions_messages_blobs",
        """
        CREATE TABLE sessions (
            id                 text PRIMARY KEY,
            title              text NOT NULL DEFAULT '',
            cwd                text NOT NULL DEFAULT '',
            goal               text NOT NULL DEFAULT '',
            routing            jsonb NOT NULL DEFAULT '{}'::jsonb,
            model              text NOT NULL DEFAULT '',
            provider           text NOT NULL DEFAULT '',
            parent_id          text REFERENCES sessions (id),
            end_reason         text,
            created_at         double precision NOT NULL,
            updated_at         double precision NOT NULL,
            ended_at           double precision,
            system_prompt_hash text,
            tools_hash         text,
            compression_count  integer NOT NULL DEFAULT 0,
            next_position      bigint NOT NULL DEFAULT 0
        );
        CREATE INDEX sessions_updated ON sessions (updated_at DESC, created_at DESC);
        CREATE INDEX sessions_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL;

        CREATE TABLE blobs (
            digest     text PRIMARY KEY,
            kind       text NOT NULL,
            body       bytea NOT NULL,
            created_at double precision NOT NULL
        );

        CREATE TABLE messages (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id    text NOT NULL REFERENCES sessions (id),
            position      bigint NOT NULL,
            role          text NOT NULL,
            message       text NOT NULL,
            api_content   text,
            token_count   integer,
            turn_id       text,
            origin_id     bigint REFERENCES messages (id),
            origin_root   bigint,
            tool_call_ids text[],
            active        boolean NOT NULL DEFAULT true,
            compacted     boolean NOT NULL DEFAULT false,
            created_at    double precision NOT NULL
        );
        CREATE INDEX messages_session_id ON messages (session_id, id);
        CREATE INDEX messages_active_view ON messages (session_id, position) WHERE active;
        CREATE INDEX messages_active_calls ON messages USING gin (tool_call_ids)
            WHERE active AND tool_call_ids IS NOT NULL;
        """,
    ),
    Migration(
        "0002_search",
        """
        -- The searchable text of each message, written once and never updated:
        -- flipping messages.active/compacted does not touch these indexes.
        CREATE TABLE message_search (
            message_id bigint PRIMARY KEY REFERENCES messages (id),
            session_id text NOT NULL,
            body       text NOT NULL,
            tsv        tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, body)) STORED
        );
        CREATE INDEX message_search_tsv ON message_search USING gin (tsv);
        CREATE INDEX message_search_session ON message_search (session_id);
        """,
    ),
    Migration(
        "0003_leases",
        """
        CREATE SEQUENCE lease_tokens AS bigint START 1;
        CREATE TABLE leases (
            session_id  text PRIMARY KEY REFERENCES sessions (id),
            token       bigint NOT NULL DEFAULT 0,
            holder_name text,
            holder_host text,
            holder_pid  integer,
            acquired_at timestamptz,
            expires_at  timestamptz,
            released    boolean NOT NULL DEFAULT true
        );
        """,
    ),
    Migration(
        "0004_usage_prefix_compactions",
        """
        CREATE TABLE usage_records (
            id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id         text NOT NULL REFERENCES sessions (id),
            turn_id            text,
            input_tokens       bigint NOT NULL,
            output_tokens      bigint NOT NULL,
            cache_read_tokens  bigint NOT NULL,
            cache_write_tokens bigint NOT NULL,
            reasoning_tokens   bigint NOT NULL,
            model              text,
            created_at         double precision NOT NULL
        );
        CREATE INDEX usage_records_session ON usage_records (session_id, id);

        CREATE TABLE prefix_ledger (
            id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id             text NOT NULL REFERENCES sessions (id),
            request_index          integer NOT NULL,
            request_hash           text NOT NULL,
            request_tokens         integer NOT NULL,
            shared_prefix_hash     text NOT NULL,
            shared_prefix_tokens   integer NOT NULL,
            previous_tokens        integer NOT NULL,
            break_reason           text,
            provider_cached_tokens integer,
            created_at             double precision NOT NULL
        );
        CREATE INDEX prefix_ledger_session ON prefix_ledger (session_id, id);

        CREATE TABLE compaction_events (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id    text NOT NULL REFERENCES sessions (id),
            engine        text NOT NULL,
            backend       text NOT NULL,
            tokens_before integer NOT NULL,
            tokens_after  integer NOT NULL,
            summarizer    text NOT NULL,
            fallback      boolean NOT NULL,
            detail        text NOT NULL,
            created_at    double precision NOT NULL
        );
        CREATE INDEX compaction_events_session ON compaction_events (session_id, id);
        """,
    ),
    Migration(
        "0005_search_session_order",
        """
        -- newest-first substring matches within one session stop after k rows
        CREATE INDEX message_search_session_order ON message_search (session_id, message_id);
        DROP INDEX message_search_session;
        """,
    ),
    Migration(
        "0006_message_annotations",
        """
        -- JSON object of annotate_message results; NULL when there are none
        ALTER TABLE messages ADD COLUMN annotations text;
        """,
    ),
    Migration(
        "0007_search_body_without_name",
        """
        -- the searchable text is the content and the tool calls, as in the SQLite store
        -- (hermes_core.searchkit.searchable_text): a tool result's name, which older
        -- versions appended on a line of its own, comes out (tsv follows: generated)
        UPDATE message_search f
        SET body = CASE WHEN f.body = n.name THEN ''
                        ELSE left(f.body, length(f.body) - length(n.name) - 1) END
        FROM (SELECT id, message::jsonb ->> 'name' AS name FROM messages
              WHERE message::jsonb ? 'name') n
        WHERE n.id = f.message_id AND n.name <> ''
          AND (f.body = n.name OR right(f.body, length(n.name) + 1) = E'\n' || n.name);
        """,
    ),
)

KNOWN = frozenset(m.name for m in MIGRATIONS)


def _applied(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()
    return [str(row[0]) for row in rows]


def check_known(applied: list[str], where: str) -> None:
    """Refuse a database that records migrations this version does not know."""
    unknown = sorted(set(applied) - KNOWN)
    if unknown:
        raise SchemaVersionError(
            f"PostgreSQL schema {where} was written by a newer hermes-core: it records "
            f"migrations {unknown} that this version does not know (it knows up to "
            f"{MIGRATIONS[-1].name!r}); upgrade hermes-core, or point session.postgres_dsn "
            "at another database/schema"
        )


def migrate(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Apply the missing migrations on ``conn`` (autocommit, search_path set); return them."""
    from psycopg import sql

    done: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " name text PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        applied = _applied(conn)
        check_known(applied, repr(schema))
        for migration in MIGRATIONS:
            if migration.name in applied:
                continue
            conn.execute(migration.sql.encode())
            conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (migration.name,))
            done.append(migration.name)
    if done:
        LOG.info("postgres schema %r: applied migrations %s", schema, done)
    return done


def ensure_trigram(conn: psycopg.Connection[Any]) -> tuple[str | None, str]:
    """Make sure ``pg_trgm`` and the trigram index exist, when the server allows.

    :return: ``(schema holding pg_trgm or None, a one-line status)``.
    """
    from psycopg import errors, sql

    row = conn.execute(
        "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'"
    ).fetchone()
    if row is None:
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
        except errors.Error as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return None, f"pg_trgm unavailable ({reason}); substring search runs unindexed"
        row = conn.execute(
            "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'"
        ).fetchone()
        if row is None:
            return None, "pg_trgm unavailable; substring search runs unindexed"
    ext_schema = str(row[0]).strip('"')
    exists = conn.execute(
        "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() "
        "AND indexname = 'message_search_trgm'"
    ).fetchone()
    if exists is None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS message_search_trgm ON message_search "
                    "USING gin (body {}.gin_trgm_ops)"
                ).format(sql.Identifier(ext_schema))
            )
    return ext_schema, f"pg_trgm {ext_schema}.gin_trgm_ops index on message_search.body"
