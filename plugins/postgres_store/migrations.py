"""The schema: append-only, named migrations recorded in ``schema_migrations``.

Each migration runs once, in its own transaction, under an advisory lock so
that processes opening the same database at once do not race. A database
that records a migration this version does not know was written by a newer
hermes-core: opening it raises :class:`SchemaVersionError` and changes
nothing. Never edit or reorder a released migration; append a new one.

The trigram indexes (``pg_trgm``) are not migrations: they are created when
the extension is available (on any open, so an extension installed later is
picked up) and skipped (and reported) when it is not, so the same schema works
on servers with and without it. The score-class index (``message_search_rank``,
:func:`ensure_ranked`) is built the same way: concurrently, on open, left out
(and reported) when its build fails, and so is the block-range index of ids
(``message_search_newest``, :func:`ensure_newest`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes_hookspecs.errors import SchemaVersionError

from .connection import first_line

if TYPE_CHECKING:
    import psycopg

LOG = logging.getLogger("hermes_plugin_postgres_store")
#: advisory-lock key serialising migrations (any constant; "hermes" in ASCII)
MIGRATION_LOCK = 0x6865726D6573


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str


#: ``ts_rank`` (normalisation 1) of a row holding one word of an any-term query of ``n``
#: words is ``RANK_SCALE * v / n``, with ``v = H2(tf) / log2(length + 1)``: ``H2(tf)`` the
#: sum of ``1 / j**2`` over the word's ``tf`` stored positions, ``length`` the row's
#: positions in all (PostgreSQL's ``calc_rank_or``, every position of weight D, 0.1)
RANK_SCALE = 0.1 / 1.64493406685
#: ``v`` is below pi**2 / 6 (``H2``'s limit; ``log2(length + 1) >= 1``)
RANK_TOP = 1.6449340668482264
#: class ``c`` of a word in a row holds ``v`` in ``(RANK_TOP / RANK_STEP**(c + 1),
#: RANK_TOP / RANK_STEP**c]`` (:func:`rank_class_top`), written with three digits
RANK_STEP = 1.05
#: classes up to ``RANK_CLASSES - 1`` (the last one holds every lower ``v``)
RANK_CLASSES = 128
#: ... and from this one: ``v <= 1`` (one position of a one-word row), class 10
RANK_FIRST_CLASS = 10
#: a tsvector stores at most this many positions of one lexeme
MAX_POSITIONS = 256
#: a lexeme longer than this (in bytes) has no class: ``'lexeme 123'`` would pass the
#: 2,047 bytes a lexeme may hold, and no query term is that long (256 characters)
RANK_LEXEME_BYTES = 2040


def rank_class_top(c: int) -> float:
    """The largest ``v`` a word of score class ``c`` can have (0 past the last class)."""
    return RANK_TOP / RANK_STEP**c if c < RANK_CLASSES else 0.0


#: the score classes of a tsvector's words: ``'word 034'`` for each word, the class of
#: its ``v`` (see RANK_SCALE); a GIN index on it (message_search_rank) gives the rows
#: holding a word in a class without reading them, so a ranked pass reads the best
#: classes first and stops when the rest cannot beat what it holds (search.py). In
#: PL/pgSQL: its plans are kept for the connection, where a SQL function's body is
#: planned again by every statement that writes a row (0.4 ms an append, not 0.09).
#: Its numbers are written out (a released migration never changes); the tests check
#: them against the constants above and its classes against the server's ts_rank.
RANK_CLASSES_FUNCTION = """
        CREATE FUNCTION search_rank_classes(t tsvector) RETURNS tsvector
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
        DECLARE
            words text[];
            counts int[];
            total bigint := 0;
            norm float8;
            h2 float8;
            classes text[];
        BEGIN
            SELECT array_agg(lexeme), array_agg(coalesce(array_length(positions, 1), 1))
            INTO words, counts FROM pg_catalog.unnest(t);
            IF words IS NULL THEN
                RETURN ''::tsvector;
            END IF;
            FOR i IN 1 .. array_length(counts, 1) LOOP
                total := total + counts[i];
            END LOOP;
            -- ts_rank's normalisation 1: log2 of the positions in all, plus one
            norm := ln(total + 1.0::float8) / ln(2.0::float8);
            classes := array_fill(NULL::text, ARRAY[array_length(words, 1)]);
            FOR i IN 1 .. array_length(words, 1) LOOP
                CONTINUE WHEN octet_length(words[i]) > 2040;
                h2 := 0;  -- H2(tf): 1 / j**2 over the word's positions (256 at most)
                FOR j IN 1 .. least(counts[i], 256) LOOP
                    h2 := h2 + 1.0::float8 / (j * j);
                END LOOP;
                classes[i] := words[i] || ' ' || lpad(least(127, greatest(0, floor(
                    ln(1.6449340668482264::float8 * norm / h2) / ln(1.05::float8))))::text, 3, '0');
            END LOOP;
            RETURN array_to_tsvector(array_remove(classes, NULL));
        END
        $$;
"""


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
    Migration(
        "0008_search_words",
        """
        -- the vocabulary of the word index: every lexeme of message_search.tsv, so that a
        -- fragment is turned into the words holding it (search.py) instead of rechecking
        -- every trigram candidate; kept by a statement trigger, in the writer's transaction
        -- (words sorted: concurrent writers of the same new words lock them in one order)
        CREATE TABLE search_words (word text PRIMARY KEY);
        CREATE FUNCTION search_words_add() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
            INSERT INTO search_words (word)
            SELECT DISTINCT w FROM added, unnest(tsvector_to_array(added.tsv)) AS w
            ORDER BY w ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$;
        CREATE TRIGGER search_words_add AFTER INSERT ON message_search
            REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION search_words_add();
        INSERT INTO search_words (word)
        SELECT word FROM ts_stat('SELECT tsv FROM message_search') ORDER BY word;
        """,
    ),
    Migration(
        "0009_search_words_without_key",
        """
        -- no unique key on the vocabulary: with one, a writer inserting a new word holds
        -- its key until commit, so a second writer of the same word waits for it (a long
        -- import blocks other sessions' commits) and two writers of several chunks each
        -- can deadlock. A word is inserted when no committed or own row holds it; two
        -- writers of the same new word at once may both insert it, and the readers of
        -- search_words ask for DISTINCT words.
        ALTER TABLE search_words DROP CONSTRAINT search_words_pkey;
        CREATE INDEX search_words_word ON search_words (word);
        CREATE OR REPLACE FUNCTION search_words_add() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
            INSERT INTO search_words (word)
            SELECT DISTINCT w FROM added, unnest(tsvector_to_array(added.tsv)) AS w
            WHERE NOT EXISTS (SELECT 1 FROM search_words s WHERE s.word = w);
            RETURN NULL;
        END $$;
        """,
    ),
    Migration(
        "0010_search_unparsed_rows",
        r"""
        -- true when a run of letters and digits of body (any non-ASCII character counted
        -- as one) lies in no lexeme of tsv: the parser split it ('1.5ms' gives '1.5' and
        -- 'ms'; '2024-01-05T10' gives '2024', '-01', '-05', 't10'), or dropped it (XML
        -- tags, entities, URL protocols, superscripts, words over 2,047 bytes). A
        -- fragment of such a run is in no word of the vocabulary: these rows are looked
        -- for through the partial trigram index on this condition (search.py). The runs
        -- that are whole lexemes are set aside by a hash (EXCEPT), the others are looked
        -- for in the lexemes joined by spaces (a run holds no space, so a match lies
        -- inside one lexeme).
        CREATE FUNCTION search_unparsed(body text, tsv tsvector) RETURNS boolean
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            WITH words AS (SELECT pg_catalog.tsvector_to_array(tsv) AS a),
            joined AS (SELECT pg_catalog.array_to_string(a, ' ') AS s FROM words),
            runs AS (
                SELECT pg_catalog.lower(r[1]) AS run
                FROM pg_catalog.regexp_matches(body, '(?:[[:alnum:]]|[^-])+', 'g') r
                EXCEPT SELECT pg_catalog.unnest(a) FROM words)
            SELECT EXISTS (
                SELECT 1 FROM runs, joined WHERE pg_catalog.strpos(joined.s, runs.run) = 0)
        $$;
        -- the partial trigram index of the narrower condition of 0008 (tags, entities, URL
        -- heads, long words) is built again on this one (migrations.ensure_trigram)
        DROP INDEX IF EXISTS message_search_trgm_unparsed;
        """,
    ),
    Migration(
        "0011_summary_index",
        """
        -- Message.kind as a column (written with each row, never updated), so that the
        -- compaction summaries of a session, which search ranks with the any-term matches
        -- whatever their length (search.py, summary_sql), are found through an index
        ALTER TABLE messages ADD COLUMN kind text NOT NULL DEFAULT 'message';
        -- (a row is the JSON pydantic writes, without spaces: a summary's or a compaction
        -- item's holds the literal pair, so strpos spares parsing every other row)
        UPDATE messages SET kind = message::jsonb ->> 'kind'
        WHERE (strpos(message, '"kind":"summary"') > 0
                OR strpos(message, '"kind":"compaction"') > 0)
            AND message::jsonb ->> 'kind' IN ('summary', 'compaction');
        CREATE INDEX messages_summaries ON messages (session_id, id) WHERE kind = 'summary';
        """,
    ),
    Migration(
        "0012_search_rank_classes",
        """
        -- the score classes of a row's words (RANK_CLASSES_FUNCTION); their GIN index,
        -- message_search_rank, is built like the trigram indexes (ensure_ranked)
        """
        + RANK_CLASSES_FUNCTION,
    ),
    Migration(
        "0013_request_index",
        """
        -- the messages the user wrote, by session: the request that opened a row's turn is
        -- the latest of them at or before it (store.turn_requests). A row is the JSON
        -- pydantic writes without None fields or spaces, so only text a harness injected
        -- holds the key "harness": (inside a string its quotes are escaped)
        CREATE INDEX messages_requests ON messages (session_id, id)
            WHERE role = 'user' AND kind = 'message' AND strpos(message, '"harness":') = 0;
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


def _needs_migrations(conn: psycopg.Connection[Any]) -> bool:
    """Whether the schema on ``conn``'s search_path lacks a migration this version knows
    (or cannot tell: no schema or no migrations table yet, a new database)."""
    from psycopg import errors

    try:
        applied = _applied(conn)
    except errors.Error:
        return True
    return not KNOWN.issubset(applied)


#: how often a migrating process asks again for a schema its index builder holds
BUILD_POLL_SECONDS = 0.2


def _hold_off_builds(conn: psycopg.Connection[Any], schema: str) -> None:
    """Take the schema's index build lock, waiting for a build of another process.

    The lock is asked for in short autocommit statements, never from inside a
    transaction: a concurrent build (``CREATE INDEX CONCURRENTLY``) waits for
    every transaction older than its last phase, so a migration waiting for the
    lock inside one, or for a table lock the build holds, would be a deadlock.
    """
    warned = False
    while True:
        row = conn.execute(
            "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (INDEX_BUILD_LOCK, schema)
        ).fetchone()
        if row is not None and row[0]:
            return
        if not warned:
            LOG.info("postgres schema %r: waiting for another process's index build", schema)
            warned = True
        time.sleep(BUILD_POLL_SECONDS)


def migrate(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Apply the missing migrations on ``conn`` (autocommit, search_path set); return them.

    With migrations to apply, it first waits for an index build another process
    is running in the schema (:func:`_hold_off_builds`), and no build starts until
    it is done.
    """
    from psycopg import errors

    held = _needs_migrations(conn)
    if held:
        _hold_off_builds(conn, schema)
    try:
        return _migrate(conn, schema)
    finally:
        if held:
            with contextlib.suppress(errors.Error):  # a lost connection released it
                conn.execute(
                    "SELECT pg_advisory_unlock(%s, hashtext(%s))", (INDEX_BUILD_LOCK, schema)
                )


def _migrate(conn: psycopg.Connection[Any], schema: str) -> list[str]:
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
            return None, f"pg_trgm unavailable ({first_line(exc)}); substring search runs unindexed"
        row = conn.execute(
            "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'"
        ).fetchone()
        if row is None:
            return None, "pg_trgm unavailable; substring search runs unindexed"
    ext_schema = str(row[0]).strip('"')
    ops = sql.Identifier(ext_schema)
    failed = _ensure_indexes(
        conn,
        {
            "message_search_trgm": sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS message_search_trgm ON message_search "
                "USING gin (body {}.gin_trgm_ops)"
            ).format(ops),
            # the rows whose text the word parser does not wholly index (see UNPARSED)
            "message_search_trgm_unparsed": sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS message_search_trgm_unparsed "
                "ON message_search USING gin (body {}.gin_trgm_ops) WHERE "
            ).format(ops)
            + sql.SQL(UNPARSED.format(alias="")),
            "search_words_trgm": sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS search_words_trgm ON search_words "
                "USING gin (word {}.gin_trgm_ops)"
            ).format(ops),
        },
    )
    if failed:  # the substring passes that lean on these indexes are not taken
        return None, f"pg_trgm {'; '.join(failed)}; substring search runs unindexed"
    return ext_schema, f"pg_trgm {ext_schema}.gin_trgm_ops index on message_search.body"


def ensure_ranked(conn: psycopg.Connection[Any]) -> tuple[bool, str]:
    """Make sure the score-class index (``message_search_rank``) exists; built like the
    trigram indexes (:func:`_ensure_indexes`: concurrently, left out on failure).

    :return: ``(whether it serves search, a one-line status)``.
    """
    return _ensure_index(
        conn,
        "message_search_rank",
        # a small pending list: a query checks every pending entry for each of its
        # words, and a class query has many (65 ms for 45 words against 4 MB pending)
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS message_search_rank "
        "ON message_search USING gin (search_rank_classes(tsv)) "
        "WITH (gin_pending_list_limit = 256)",
        built="score classes index on message_search (ranked passes read the best first)",
        left_out="ranked passes read every match",
    )


def ensure_newest(conn: psycopg.Connection[Any]) -> tuple[bool, str]:
    """Make sure the block-range index of ``message_search`` ids (``message_search_newest``,
    BRIN) exists; built like the trigram indexes (:func:`_ensure_indexes`).

    Rows are written in id order, so a range of ids lies in a run of table
    blocks: the index holds each run's lowest and highest id (120 kB at 10^6
    messages), and a window of ids becomes a bitmap of a few runs, not of every
    id (the primary key's: 9 ms for 200,000). Substring search reads a
    fragment's matches window by window from the newest (``search.py``,
    ``_windows``); without this index the windows go through the primary key.

    :return: ``(whether it is there, a one-line status)``.
    """
    return _ensure_index(
        conn,
        "message_search_newest",
        # autosummarize: a run filled by new rows is summarised by autovacuum (until
        # then it is in every window's bitmap, and only its matches are read)
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS message_search_newest "
        "ON message_search USING brin (message_id) "
        "WITH (pages_per_range = 32, autosummarize = on)",
        built="id ranges index on message_search (substring windows read few blocks)",
        left_out="substring windows read the primary key",
    )


def _ensure_index(
    conn: psycopg.Connection[Any], name: str, statement: str, *, built: str, left_out: str
) -> tuple[bool, str]:
    """One optional index (:func:`_ensure_indexes`): ``(whether it is there, its status:
    ``built``, or why it is not and ``left_out``, what search does without it)``."""
    failed = _ensure_indexes(conn, {name: statement})
    if failed:
        return False, f"{'; '.join(failed)}; {left_out}"
    return True, built


#: rows with a run of letters and digits that lies in no lexeme of their ``tsv``
#: (migration ``0010_search_unparsed_rows``): the parser splits ``1.5ms`` and
#: ``2024-01-05T10``, drops XML tags (``<a href=x>``), entities (``&amp;``), URL
#: protocol heads (``https://``), superscripts and words longer than 2,047 bytes. A
#: fragment is looked up in the vocabulary for the other rows, and through the trigram
#: index (partial, on this condition) for these. ``{alias}``: the table's, or empty.
UNPARSED = "search_unparsed({alias}body, {alias}tsv)"


#: an optional index build waits at most this long for a lock or for the transactions
#: writing the table when it starts (a concurrent build waits for them to end); it is
#: tried again on the next open
INDEX_LOCK_TIMEOUT = "10s"

#: the advisory lock class (with the schema's hash) of one schema's optional index
#: builds: one process builds, the others open without waiting for it
INDEX_BUILD_LOCK = 0x68657273


def _index_validity(conn: psycopg.Connection[Any], names: list[str]) -> dict[str, bool]:
    """Name -> valid for the indexes of ``names`` in the current schema (a concurrent
    build that failed leaves its index invalid: kept up to date, never used)."""
    rows = conn.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(%s)",
        (names,),
    ).fetchall()
    return {str(name): bool(valid) for name, valid in rows}


def _ensure_indexes(conn: psycopg.Connection[Any], wanted: dict[str, Any]) -> list[str]:
    """Build the indexes of ``wanted`` (name -> statement) that are missing or invalid.

    ``conn`` is an autocommit connection. Each index is built ``CONCURRENTLY``:
    the build never holds off the store's writers, however long it takes on a
    big table (a plain ``CREATE INDEX`` holds a SHARE lock throughout, and even
    while it waits for its lock the writers queue behind it). One process of a
    schema builds at a time, and none while another migrates it; a process
    opening meanwhile leaves the indexes out. A concurrent build waits for every
    transaction in the database older than its last phase; one still open past
    :data:`INDEX_LOCK_TIMEOUT` (or no privilege, no disk) fails it, and the
    builds after it are left for the next open too (the same transaction would
    hold them off). A failed build leaves an invalid index, which the next
    open drops before building again; the store opens without it.

    :return: one line per index left out.
    """
    from psycopg import errors, sql

    if conn.closed:  # an earlier build lost the connection: the next open builds these
        return [f"index {name} not built: the connection was lost" for name in wanted]
    valid = _index_validity(conn, list(wanted))
    missing = [name for name in wanted if not valid.get(name, False)]
    if not missing:
        return []
    row = conn.execute(
        "SELECT pg_try_advisory_lock(%s, hashtext(current_schema()))", (INDEX_BUILD_LOCK,)
    ).fetchone()
    if row is None or not row[0]:
        why = "another process is building or migrating the schema"
        return [f"index {name} not built: {why}" for name in missing]
    failed: list[str] = []
    try:
        conn.execute("SET maintenance_work_mem = '256MB'")
        conn.execute("SELECT set_config('lock_timeout', %s, false)", (INDEX_LOCK_TIMEOUT,))
        valid = _index_validity(conn, missing)  # another process may have built them
        held_off = ""
        for name in missing:
            if valid.get(name, False):
                continue
            if held_off:
                failed.append(f"index {name} not built: {held_off}")
                continue
            try:
                if name in valid:  # the invalid remains of a build that failed
                    drop = sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                        sql.Identifier(name)
                    )
                    conn.execute(drop)
                LOG.info("postgres schema: creating index %s", name)
                conn.execute(wanted[name])
            except errors.Error as exc:
                LOG.warning("postgres schema: index %s not built (%s)", name, first_line(exc))
                failed.append(f"index {name} not built: {first_line(exc)}")
                if isinstance(exc, errors.LockNotAvailable) or conn.closed:
                    held_off = first_line(exc)
    finally:
        # a lost connection has released the lock and its settings with it
        with contextlib.suppress(errors.Error):
            conn.execute("RESET lock_timeout")
            conn.execute("RESET maintenance_work_mem")
            conn.execute(
                "SELECT pg_advisory_unlock(%s, hashtext(current_schema()))", (INDEX_BUILD_LOCK,)
            )
    return failed
