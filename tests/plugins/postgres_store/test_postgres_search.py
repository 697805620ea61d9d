"""PostgreSQL search paths: the word vocabulary, the optional index builds, the planner.

Real servers only: the vocabulary path is compared with the exact substring
scan on the same rows, with the probe sizes made small so that every stage of
it runs on a few hundred rows.
"""

from __future__ import annotations

import time
from itertools import pairwise
from typing import Any

import pytest

from hermes_core.searchkit import query_terms
from hermes_hookspecs import Message, NewMessage, NewSession
from hermes_plugin_postgres_store import PostgresSessionStore
from hermes_plugin_postgres_store import search as pg_search

#: rows whose fragments sit where the word parser does and does not put lexemes
TRICKY = [
    "the CheckpointsCount went up",
    'markup <div class="zorblat-panel">body</div> and more',
    "an entity &zorblatamp; inside",
    "fetched https://example.org/zorblat/x.json ok",
    "hyphen-zorblatted words and snake_zorblat_case",
    "我们的数据库很大 zorblat",
    "UPPER ZORBLATION here",
    "plain zorblat",
    "/srv/zorblat/main.py failed",
]
FRAGMENTS = ["orbla", "zorblat", "ckpointsc", "ttps", "div", "amp", "数据库", "ORBLATION", "xyzzy"]


def raw(dsn: str, schema: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        cur = conn.execute(query.encode(), params)
        return list(cur.fetchall()) if cur.description else []


def fill(store: PostgresSessionStore, filler: int = 300) -> str:
    """A session of the tricky rows spread among ``filler`` plain rows."""
    sid = store.create_session(NewSession(title="search")).id
    rows = [f"filler line {i} about nothing much" for i in range(filler)]
    step = max(1, filler // len(TRICKY))
    for i, text in enumerate(TRICKY):
        rows.insert(i * step, text)
    store.append_messages(sid, [NewMessage(message=Message(role="user", content=t)) for t in rows])
    return sid


@pytest.fixture
def small_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Probe sizes for a few hundred rows, so the vocabulary stage runs."""
    monkeypatch.setattr(pg_search, "PROBE_ROWS", 20)
    monkeypatch.setattr(pg_search, "PROBE_MORE_ROWS", 40)
    monkeypatch.setattr(pg_search, "FIRST_WINDOW", 50)


@pytest.fixture(params=["many windows", "one window"])
def windows(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of reading a fragment's older rows: window by window of a few ids (most
    windows hold no match or a few, and several are read), or all of them at once."""
    if request.param == "many windows":
        monkeypatch.setattr(pg_search, "FIRST_WINDOW", 3)
        monkeypatch.setattr(pg_search, "WINDOW_GROWTH", 2)
    else:
        monkeypatch.setattr(pg_search, "FIRST_WINDOW", 10**9)
    return str(request.param)


def run(
    store: PostgresSessionStore, query: str, indexes: pg_search.Indexes, **kw: Any
) -> list[int]:
    """The ids ``pg_search.search`` finds; without the trigram index (the exact scan), in
    one statement over all rows (no windows), so that it is a reference for them."""
    windows = pg_search.FIRST_WINDOW
    if not indexes.trigram:
        pg_search.FIRST_WINDOW = 10**12
    try:
        with store._tx() as conn:  # the store's own connection and search_path
            hits = pg_search.search(
                conn,
                query,
                session_ids=kw.get("session_ids"),
                include_compacted=kw.get("include_compacted", True),
                limit=kw.get("limit", 20),
                indexes=indexes,
            )
    finally:
        pg_search.FIRST_WINDOW = windows
    return [h.message_id for h in hits]


def test_vocabulary_holds_every_lexeme_written(pg_dsn: str, schema: str) -> None:
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        fill(store, filler=5)
    words = {r[0] for r in raw(pg_dsn, schema, "SELECT word FROM search_words")}
    lexemes = {
        r[0]
        for r in raw(
            pg_dsn, schema, "SELECT DISTINCT unnest(tsvector_to_array(tsv)) FROM message_search"
        )
    }
    assert lexemes and words == lexemes
    assert {"checkpointscount", "zorblation", "/srv/zorblat/main.py", "我们的数据库很大"} <= words


def test_migration_0008_fills_the_vocabulary_of_an_existing_database(
    pg_dsn: str, schema: str, small_probe: None
) -> None:
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        sid = fill(store)
        wanted = run(store, "orbla", pg_search.Indexes(trigram=False, ranked=False))
    # what the previous version left: no vocabulary, no trigger, no migration record
    raw(pg_dsn, schema, "DROP TABLE search_words CASCADE")
    raw(pg_dsn, schema, "DROP FUNCTION search_words_add() CASCADE")
    raw(pg_dsn, schema, "DELETE FROM schema_migrations WHERE name LIKE '000__search_words%%'")
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        assert raw(pg_dsn, schema, "SELECT count(*) FROM search_words")[0][0] > 300
        assert run(store, "orbla", pg_search.Indexes(trigram=True, ranked=False)) == wanted
        store.append_messages(sid, [NewMessage(message=Message(role="user", content="quuxorblaz"))])
    assert raw(pg_dsn, schema, "SELECT word FROM search_words WHERE word = 'quuxorblaz'")


def test_concurrent_imports_of_shared_new_words_neither_block_nor_deadlock(
    pg_dsn: str, schema: str, small_probe: None
) -> None:
    """Two writers, each in a transaction of several INSERTs (more than writes.CHUNK
    messages), with new words in common, in opposite orders: with a unique key on the
    vocabulary the second waited for the first's keys, and the first then for the
    second's (deadlock detected). Neither may wait for the other."""
    import threading
    import time

    from hermes_plugin_postgres_store import writes

    n = writes.CHUNK + 1
    with (
        PostgresSessionStore(pg_dsn, schema=schema) as first,
        PostgresSessionStore(pg_dsn, schema=schema) as second,
    ):
        sa = first.create_session(NewSession(title="import")).id
        sb = second.create_session(NewSession(title="live")).id
        # the import: 'zzqnew' in its first INSERT, 'aaqnew' in its last
        batch_a = [NewMessage(message=Message(role="user", content="zzqnew"))]
        batch_a += [
            NewMessage(message=Message(role="user", content=f"row{i} common{i % 7}"))
            for i in range(n - 2)
        ]
        batch_a.append(NewMessage(message=Message(role="user", content="aaqnew")))
        batch_b = [
            NewMessage(message=Message(role="user", content=f"aaqnew zzqnew live{i} common{i}"))
            for i in range(n)
        ]
        # the import's last INSERT sleeps, so the live writer runs between its INSERTs
        raw(
            pg_dsn,
            schema,
            "CREATE FUNCTION nap() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF EXISTS (SELECT 1 FROM added WHERE message::jsonb->>'content' = 'aaqnew') "
            "THEN PERFORM pg_sleep(3); END IF; RETURN NULL; END $$",
        )
        raw(
            pg_dsn,
            schema,
            "CREATE TRIGGER nap AFTER INSERT ON messages REFERENCING NEW TABLE AS added "
            "FOR EACH STATEMENT EXECUTE FUNCTION nap()",
        )
        errors: dict[str, str] = {}
        took: dict[str, float] = {}

        def write(name: str, store: PostgresSessionStore, sid: str, batch: list[Any]) -> None:
            started = time.monotonic()
            try:
                store.append_messages(sid, batch)
            except Exception as exc:  # reported below
                errors[name] = repr(exc)
            took[name] = time.monotonic() - started

        ta = threading.Thread(target=write, args=("import", first, sa, batch_a))
        ta.start()
        # the import's first INSERT is done once its last one sleeps in the trigger
        deadline = time.monotonic() + 10
        while not raw(
            pg_dsn,
            schema,
            "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
            "AND datname = current_database()",
        ):
            assert time.monotonic() < deadline, "the import never reached its last INSERT"
            time.sleep(0.01)
        write("live", second, sb, batch_b)
        ta.join()
        assert errors == {}
        # the live writer did not wait for the import's commit
        assert took["live"] < 2.5, took
        raw(pg_dsn, schema, "DROP TRIGGER nap ON messages")
        for word in ("aaqnew", "zzqnew", "common3", "live7"):
            assert raw(pg_dsn, schema, "SELECT 1 FROM search_words WHERE word = %s", (word,))
        for fragment in ("aqne", "zqne", "ive7"):
            exact = run(first, fragment, pg_search.Indexes(trigram=False, ranked=False), limit=500)
            assert (
                exact
                and run(first, fragment, pg_search.Indexes(trigram=True, ranked=False), limit=500)
                == exact
            )


@pytest.mark.parametrize("caller", ["on", "off"])
def test_vocabulary_pass_leaves_the_planner_settings_as_it_found_them(
    pg_dsn: str, schema: str, small_probe: None, caller: str
) -> None:
    """The rare-fragment pass turns plans off for its own queries only: the passes after it
    (and the caller's later statements in the transaction) plan as before."""
    names = ("enable_hashjoin", "enable_mergejoin", "enable_seqscan", "enable_indexscan")
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        fill(store)
        with store._tx() as conn:
            for name in names:
                conn.execute(f"SET LOCAL {name} = {caller}")
            hits = pg_search.search(
                conn,
                "orblat",
                session_ids=None,
                include_compacted=False,
                limit=5,
                indexes=pg_search.Indexes(trigram=True, ranked=False),
            )
            after = {name: conn.execute(f"SHOW {name}").fetchall()[0][0] for name in names}
    assert hits  # the vocabulary pass ran (the probe of the newest rows found too few)
    assert after == dict.fromkeys(names, caller)


def test_the_vocabulary_is_read_through_its_index(
    pg_dsn: str, schema: str, small_probe: None
) -> None:
    """A fragment's words are looked up through the vocabulary's trigram index, never by a
    scan testing ILIKE on every word: the planner prices that test as nothing and chose the
    scan for a small vocabulary (14 ms for 26,000 words)."""
    with PostgresSessionStore(pg_dsn, schema=schema, min_size=1, max_size=1) as store:
        fill(store)

        def scans() -> int:
            with store._conn() as conn:  # the same backend (one connection): flush its counts
                conn.execute("SELECT pg_stat_force_next_flush()")
                conn.execute("SELECT 1")
            rows = raw(
                pg_dsn,
                schema,
                "SELECT pg_stat_clear_snapshot(), (SELECT seq_scan FROM pg_stat_user_tables "
                "WHERE relid = 'search_words'::regclass)",
            )
            return int(rows[0][1])

        before = scans()
        assert store.search("orblat", limit=5)  # the vocabulary pass ran
        assert scans() == before


#: pieces of text where the word parser splits or drops a run of letters and digits
PIECES = [
    "{n}.{d}ms",
    "{n}.{d}MB",
    "{y}-0{d}-1{d}T{d}0:00:00Z",
    "{n}.{d}{w}",
    "v{d}.{n}.{d}{w}",
    "0x{d}F{w}",
    "{n}{w}",
    "{w}{n}",
    "{w}²³⁴",
    "x²{d}",
    "Ünï{w}",
    "{w}—{w}",
    "{w}_{w}",
    "{w}-{w}",
    "<{w} id={n}>",
    "&{w};",
    "https://{w}.org/{w}",
    "{w}@{w}.com",
    "/srv/{w}/{n}.py",
    "{n}:{d}{w}",
    "{n}/{d}{w}",
    "{n},{d}{w}",
    "数据{w}",
    "{w}",
    "{w} {w}",
    "{n}",
]


def mixed_rows(seed: int, count: int) -> list[str]:
    import random

    rnd = random.Random(seed)
    words = ["alpha", "kb", "total", "zeta", "qux", "ab", "ms", "delta"]

    def piece() -> str:
        return rnd.choice(PIECES).format(
            n=rnd.randint(0, 99),
            d=rnd.randint(0, 9),
            y=rnd.randint(2020, 2029),
            w=rnd.choice(words),
        )

    return [" ".join(piece() for _ in range(rnd.randint(1, 5))) for _ in range(count)]


@pytest.mark.parametrize("seed", [1, 2])
def test_fragments_of_split_runs_are_found_through_the_vocabulary(
    pg_dsn: str, schema: str, small_probe: None, windows: str, seed: int
) -> None:
    """Random rows of decimals with units, dates, versions, superscripts, non-ASCII letters,
    tags, URLs...: every fragment of a run of letters and digits in them (as the query
    parser cuts terms) is found through the vocabulary as by the exact scan."""
    import random
    import re

    rows = mixed_rows(seed, 300)
    runs = sorted({found for row in rows for found in re.findall(r"[^\W_]{3,}", row)})
    rnd = random.Random(seed)
    fragments = set()
    for whole in rnd.sample(runs, min(60, len(runs))):
        start = rnd.randint(0, len(whole) - 3)
        fragments.add(whole[start : rnd.randint(start + 3, len(whole))])
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        sid = store.create_session(NewSession(title="mixed")).id
        store.append_messages(
            sid, [NewMessage(message=Message(role="user", content=t)) for t in rows]
        )
        fast = pg_search.Indexes(trigram=True, ranked=False)
        exact = pg_search.Indexes(trigram=False, ranked=False)
        misses = [
            fragment
            for fragment in sorted(fragments)
            if run(store, fragment, fast, limit=10) != run(store, fragment, exact, limit=10)
        ]
    assert misses == []


@pytest.mark.parametrize("include_compacted", [True, False])
def test_fragments_through_the_vocabulary_are_the_exact_substring_matches(
    pg_dsn: str, schema: str, small_probe: None, windows: str, include_compacted: bool
) -> None:
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        fill(store)
        fast = pg_search.Indexes(trigram=True, ranked=False)
        exact = pg_search.Indexes(trigram=False, ranked=False)
        for fragment in [*FRAGMENTS, "orbla zorblat", "orbla xyzzy", "div orbla"]:
            for limit in (1, 3, 20):
                kw = {"limit": limit, "include_compacted": include_compacted}
                assert run(store, fragment, fast, **kw) == run(store, fragment, exact, **kw), (
                    fragment,
                    limit,
                )
        # the rows the parser does not index as words are found too
        texts = {h.message_id: h.snippet for h in store.search("orbla", limit=20)}
        assert len(texts) == len([t for t in TRICKY if "orbla" in t.lower()])


@pytest.mark.parametrize("common", [False, True])
def test_a_fragments_older_rows_are_read_window_by_window_from_the_newest(
    pg_dsn: str, schema: str, small_probe: None, monkeypatch: pytest.MonkeyPatch, common: bool
) -> None:
    """Past the newest rows, a fragment's matches are read window by window of ids, newest
    first, never all at once while a window may hold the rest: the index gives matches in
    block order, so reading all of them costs a heap page each (320 ms for 3,500 at 10^6
    messages, when the newest window of 20,000 ids holds the 70 wanted: 23 ms). A common
    fragment's first window is as large as the rate found says holds the rest (twice
    over); a rare one's windows grow fourfold down to the oldest row."""
    ranges: list[tuple[int, int]] = []
    real = pg_search._run

    def recorded(conn: Any, sql: str, q: pg_search.Query, k: int, **extra: Any) -> list[Any]:
        if "tsquery[]" in sql:  # a statement of the vocabulary stage
            ranges.append((extra["lo"], extra["hi"]))
        return real(conn, sql, q, k, **extra)

    monkeypatch.setattr(pg_search, "_run", recorded)
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        sid = store.create_session(NewSession(title="sparse")).id
        # common: a match every 4th row, five in the 20 newest (small_probe), too few for
        # k (30), a rate that says 150 in all; rare: three matches, in the oldest rows
        matches = (lambda i: i % 4 == 0) if common else (lambda i: i in (3, 40, 77))
        rows = [f"row {i} quuxorbla{i}" if matches(i) else f"filler {i}" for i in range(600)]
        store.append_messages(
            sid, [NewMessage(message=Message(role="user", content=t)) for t in rows]
        )
        found = run(store, "uxorbla", pg_search.Indexes(trigram=True, ranked=False), limit=5)
        exact = run(store, "uxorbla", pg_search.Indexes(trigram=False, ranked=False), limit=5)
    assert found == exact and len(found) == (5 if common else 3)
    # the windows tile the older ids from the newest down, none read twice
    assert ranges and all(a[0] == b[1] for a, b in pairwise(ranges))
    if common:  # one window: 25 more wanted at 5 in 20 rows -> 2 * 100 ids
        assert len(ranges) == 1 and ranges[0][1] - ranges[0][0] == 200
    else:  # 50 ids, then four times as many each time, the last down to the oldest
        sizes = [hi - lo for lo, hi in ranges]
        assert sizes[:-1] == [50 * 4**i for i in range(len(sizes) - 1)]
        assert len(sizes) > 2 and ranges[-1][0] == 0


def test_an_index_that_cannot_be_built_is_reported_and_the_store_opens(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed optional index build (here: a writer holds message_search past the lock
    timeout; a missing privilege or a full disk fail the same way) leaves that index out,
    says so in describe(), and searches without it; the next open builds it."""
    import psycopg

    from hermes_plugin_postgres_store import migrations

    # the build's own lock timeout gives up (the store's connections set none)
    monkeypatch.setattr(migrations, "INDEX_LOCK_TIMEOUT", "200ms")
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        fill(store, filler=30)
        wanted = {
            q: run(store, q, pg_search.Indexes(trigram=False, ranked=False))
            for q in ("orbla", "line 7")
        }
    raw(pg_dsn, schema, "DROP INDEX message_search_trgm_unparsed")
    with psycopg.connect(pg_dsn) as writer:  # an open transaction writing message_search
        writer.execute(f'SET search_path TO "{schema}"')
        writer.execute("LOCK TABLE message_search IN ROW EXCLUSIVE MODE")
        with PostgresSessionStore(pg_dsn, schema=schema) as store:
            status = store.describe()["search"]
            assert "index message_search_trgm_unparsed not built" in status, status
            assert store.substring_index is False
            assert {q: [h.message_id for h in store.search(q, limit=20)] for q in wanted} == wanted
        writer.rollback()
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        assert store.substring_index
        assert "not built" not in store.describe()["search"]


def without_partial_index(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch, timeout: str, filler: int
) -> str:
    """A filled schema whose partial trigram index is gone, so the next open builds it with
    ``timeout`` as its lock timeout; the session's id."""
    from hermes_plugin_postgres_store import migrations

    monkeypatch.setattr(migrations, "INDEX_LOCK_TIMEOUT", timeout)
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        sid = fill(store, filler=filler)
    raw(pg_dsn, schema, "DROP INDEX message_search_trgm_unparsed")
    return sid


#: whether the schema's partial trigram index is valid: [] when it does not exist
UNPARSED_INDEX_VALID = (
    "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "WHERE c.relname = 'message_search_trgm_unparsed' "
    "AND c.relnamespace = current_schema()::regnamespace"
)


def test_an_index_build_never_holds_off_the_stores_writers(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a store builds its missing optional indexes concurrently: while the build
    waits for a writing transaction to end, other writers go on (a plain CREATE INDEX
    queues every writer behind its SHARE lock request), and no invalid index is left
    when it gives up."""
    import threading

    import psycopg

    sid = without_partial_index(pg_dsn, schema, monkeypatch, "3s", filler=30)
    opened: list[str] = []
    with psycopg.connect(pg_dsn) as writer, psycopg.connect(pg_dsn, autocommit=True) as other:
        writer.execute(f'SET search_path TO "{schema}"')
        writer.execute("LOCK TABLE message_search IN ROW EXCLUSIVE MODE")  # an open write

        def open_store() -> None:
            with PostgresSessionStore(pg_dsn, schema=schema) as store:
                opened.append(store.describe()["search"])

        builder = threading.Thread(target=open_store)
        builder.start()
        # the builder is waiting on the open writer (a lock not granted)
        for _ in range(500):
            waiting = other.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE NOT l.granted AND a.datname = current_database() "
                "AND a.query LIKE 'CREATE INDEX%%'"
            ).fetchone()
            if waiting and waiting[0]:
                break
            threading.Event().wait(0.01)
        else:
            pytest.fail("the index build never waited for the open writer")
        other.execute(f'SET search_path TO "{schema}"')
        other.execute("SET lock_timeout = '1s'")
        with other.transaction():  # a second writer is not queued behind the build
            other.execute("LOCK TABLE message_search IN ROW EXCLUSIVE MODE")
        writer.rollback()  # the build goes on and finishes
        builder.join(timeout=30)
    assert opened and "not built" not in opened[0], opened
    assert raw(pg_dsn, schema, UNPARSED_INDEX_VALID) == [(True,)]
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        assert store.substring_index
        assert [h.session_id for h in store.search("orbla", limit=1)] == [sid]


def test_a_build_that_gives_up_leaves_its_invalid_index_to_the_next_open(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    without_partial_index(pg_dsn, schema, monkeypatch, "200ms", filler=5)
    query = UNPARSED_INDEX_VALID
    with psycopg.connect(pg_dsn) as writer:
        writer.execute(f'SET search_path TO "{schema}"')
        writer.execute("LOCK TABLE message_search IN ROW EXCLUSIVE MODE")
        with PostgresSessionStore(pg_dsn, schema=schema) as store:
            assert store.substring_index is False
        # the build's remains could not be dropped while the writer is open either
        assert raw(pg_dsn, schema, query) in ([], [(False,)])
        writer.rollback()
    # an invalid index (a concurrent build that failed half way, here on duplicates) is
    # dropped and built again on open
    raw(pg_dsn, schema, "DROP INDEX IF EXISTS message_search_trgm_unparsed")
    with pytest.raises(psycopg.errors.UniqueViolation):
        raw(
            pg_dsn,
            schema,
            "CREATE UNIQUE INDEX CONCURRENTLY message_search_trgm_unparsed "
            "ON message_search (session_id)",
        )
    assert raw(pg_dsn, schema, query) == [(False,)]
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        assert store.substring_index
    assert raw(pg_dsn, schema, query) == [(True,)]


def test_a_store_opens_without_waiting_for_another_process_building_its_indexes(
    pg_dsn: str, schema: str
) -> None:
    import psycopg

    from hermes_plugin_postgres_store import migrations

    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        fill(store, filler=5)
    raw(pg_dsn, schema, "DROP INDEX message_search_trgm_unparsed")
    with psycopg.connect(pg_dsn, autocommit=True) as builder:  # holds the schema's build lock
        builder.execute(
            "SELECT pg_advisory_lock(%s, hashtext(%s))", (migrations.INDEX_BUILD_LOCK, schema)
        )
        with PostgresSessionStore(pg_dsn, schema=schema) as store:
            assert "another process is building or migrating" in store.describe()["search"]
            assert store.substring_index is False
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        assert store.substring_index


def _wait_for_build(conn: Any) -> int:
    """The pid of a concurrent index build of this database once it waits for a lock."""
    deadline = time.monotonic() + 10
    while True:
        row = conn.execute(
            "SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE NOT l.granted AND a.datname = current_database() "
            "AND a.query LIKE 'CREATE INDEX CONCURRENTLY%%'"
        ).fetchone()
        if row is not None:
            return int(row[0])
        assert time.monotonic() < deadline, "the index build never waited"
        time.sleep(0.01)


def test_a_migration_waits_for_an_index_build_instead_of_deadlocking(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newer version opens while an older one builds an index: its migration (here one
    that drops an index of message_search, as 0010 does) waits for the build, outside any
    transaction, and both open (inside one, the build waited for the migration's snapshot
    while the migration waited for the build: a deadlock)."""
    import threading

    import psycopg

    from hermes_plugin_postgres_store import migrations

    without_partial_index(pg_dsn, schema, monkeypatch, "30s", filler=30)
    opened: dict[str, str] = {}

    def open_store(name: str) -> None:
        try:
            with PostgresSessionStore(pg_dsn, schema=schema) as store:
                opened[name] = store.describe()["search"]
        except Exception as exc:  # reported below
            opened[name] = f"raised {exc!r}"

    with psycopg.connect(pg_dsn) as writer, psycopg.connect(pg_dsn, autocommit=True) as admin:
        writer.execute(f'SET search_path TO "{schema}"')
        writer.execute("LOCK TABLE message_search IN ROW EXCLUSIVE MODE")
        builder = threading.Thread(target=open_store, args=("builder",))
        builder.start()
        _wait_for_build(admin)
        future = migrations.Migration(
            "0099_future", "DROP INDEX IF EXISTS message_search_session_order"
        )
        monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, future))
        monkeypatch.setattr(migrations, "KNOWN", migrations.KNOWN | {future.name})
        newer = threading.Thread(target=open_store, args=("newer",))
        newer.start()
        time.sleep(0.5)  # the newer one is waiting for the build (it polls)
        assert newer.is_alive()
        writer.rollback()  # the build goes on, ends, and the migration runs
        builder.join(timeout=30)
        newer.join(timeout=30)
    assert "raised" not in opened.get("builder", "raised"), opened
    assert "raised" not in opened.get("newer", "raised"), opened
    assert raw(pg_dsn, schema, "SELECT 1 FROM schema_migrations WHERE name = '0099_future'")
    assert raw(pg_dsn, schema, UNPARSED_INDEX_VALID) == [(True,)]


def test_a_build_whose_connection_dies_leaves_the_store_open(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import psycopg

    without_partial_index(pg_dsn, schema, monkeypatch, "30s", filler=5)
    opened: list[Any] = []

    def open_store() -> None:
        try:
            with PostgresSessionStore(pg_dsn, schema=schema) as store:
                opened.append((store.substring_index, store.describe()["search"]))
        except Exception as exc:  # reported below
            opened.append(exc)

    with psycopg.connect(pg_dsn) as writer, psycopg.connect(pg_dsn, autocommit=True) as admin:
        writer.execute(f'SET search_path TO "{schema}"')
        writer.execute("LOCK TABLE message_search IN ROW EXCLUSIVE MODE")
        builder = threading.Thread(target=open_store)
        builder.start()
        admin.execute("SELECT pg_terminate_backend(%s)", (_wait_for_build(admin),))
        builder.join(timeout=30)
        writer.rollback()
    assert len(opened) == 1 and isinstance(opened[0], tuple), opened
    assert opened[0][0] is False and "not built" in opened[0][1], opened


def test_words_rank_through_gin_the_store_builds_no_other_index_kind(
    pg_dsn: str, schema: str
) -> None:
    """Words are ranked by ts_rank over the GIN index: opening the store builds btree and
    GIN indexes only (a ranked index of another kind cost a write on every append and
    was never faster), and the block-range index of ids that substring windows read."""
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        fill(store, filler=5)
        assert [h.snippet for h in store.search("ZORBLATION", limit=5)] == ["UPPER ZORBLATION here"]
    kinds = raw(
        pg_dsn,
        schema,
        "SELECT c.relname, a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam "
        "WHERE c.relkind = 'i' AND c.relnamespace = current_schema()::regnamespace",
    )
    assert ("message_search_tsv", "gin") in kinds, kinds
    others = {(name, am) for name, am in kinds if am not in ("btree", "gin")}
    assert others == {("message_search_newest", "brin")}, kinds


def test_search_leaves_no_prepared_statement(pg_dsn: str, schema: str) -> None:
    """psycopg prepares a query run five times; the server may then keep a generic plan,
    blind to the words and id ranges of the next query (at 10^6 messages: substring p95
    125 ms instead of 26). Search never prepares."""
    with PostgresSessionStore(pg_dsn, schema=schema, min_size=1, max_size=1) as store:
        fill(store, filler=30)
        for _ in range(8):
            for query in ("zorblat", "orbla", "filler nothing", "orbla zorblat"):
                store.search(query, limit=3)
                store.search(query, limit=3, include_compacted=False)
        with store._conn() as conn:
            prepared = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    assert prepared == []


# -- ranked passes through the score classes ---------------------------------------------


def ranked_rows(seed: int, count: int) -> list[str]:
    """Rows of skewed word frequencies, lengths from one word to hundreds, words repeated
    (``tf`` up to past the 256 positions a tsvector keeps of one lexeme)."""
    import random

    rnd = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(60)]
    weights = [1.0 / (i + 1) for i in range(len(vocabulary))]
    rows = []
    for _ in range(count):
        length = rnd.choice([1, 2, 3, 5, 8, 13, 40, 120, 400])
        words = rnd.choices(vocabulary, weights, k=length)
        if rnd.random() < 0.1:  # a word said over and over
            words += [rnd.choice(vocabulary[:5])] * rnd.choice([2, 3, 7, 300])
        rnd.shuffle(words)
        rows.append(" ".join(words))
    return rows


def boundary_rows(seed: int, count: int) -> list[str]:
    """Rows of every length from 1 to 300 positions, each holding one of six words once to
    three times among filler words: the six words' ranks are a dense spectrum, many of
    them just either side of a class's bound."""
    import random

    rnd = random.Random(seed)
    rows = []
    for i in range(count):
        length = 1 + i % 300
        tf = min(length, rnd.choice([1, 1, 1, 2, 3]))
        words = [f"b{rnd.randrange(6)}"] * tf
        words += [f"f{rnd.randrange(400)}" for _ in range(length - tf)]
        rnd.shuffle(words)
        rows.append(" ".join(words))
    return rows


def test_score_classes_bound_ts_rank(pg_dsn: str, schema: str) -> None:
    """A word's class bounds its share of ts_rank as PostgreSQL itself computes it: the
    ranked passes' stopping rule holds for the server's own ranking, repeated words and
    long rows included."""
    from hermes_plugin_postgres_store.migrations import (
        RANK_CLASSES,
        RANK_FIRST_CLASS,
        RANK_SCALE,
        rank_class_top,
    )

    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        sid = store.create_session(NewSession(title="classes")).id
        store.append_messages(
            sid,
            [NewMessage(message=Message(role="user", content=t)) for t in ranked_rows(3, 300)],
        )
    rows = raw(
        pg_dsn,
        schema,
        "SELECT split_part(c, ' ', 1), split_part(c, ' ', 2)::int, "
        "ts_rank(f.tsv, quote_literal(split_part(c, ' ', 1))::tsquery, 1)::float8 "
        "FROM message_search f, unnest(tsvector_to_array(search_rank_classes(f.tsv))) c",
    )
    assert len(rows) > 1000
    used = set()
    for word, c, r in rows:
        v = r / RANK_SCALE  # the word's share of a one-word query's rank
        assert v <= rank_class_top(c) * (1 + 1e-5), (word, c, v)
        assert c == RANK_CLASSES - 1 or v > rank_class_top(c + 1) * (1 - 1e-5), (word, c, v)
        used.add(c)
    assert len(used) > 10  # the rows spread over many classes
    assert min(used) >= RANK_FIRST_CLASS  # the classes a pass starts from


def test_the_class_function_is_written_with_the_constants_search_uses() -> None:
    """Migration 0012 spells its numbers out (a released migration never changes); they
    are the ones the ranked passes bound ranks with."""
    from hermes_plugin_postgres_store import migrations

    sql = migrations.RANK_CLASSES_FUNCTION
    assert f"ln({migrations.RANK_TOP!r}::float8" in sql
    assert f"ln({migrations.RANK_STEP!r}::float8)" in sql
    assert f"least({migrations.RANK_CLASSES - 1}, greatest(0" in sql
    assert f"least(counts[i], {migrations.MAX_POSITIONS})" in sql
    assert f"octet_length(words[i]) > {migrations.RANK_LEXEME_BYTES}" in sql
    assert migrations.RANK_CLASSES <= 1000  # three digits
    assert pg_search._class_of(1.0) == migrations.RANK_FIRST_CLASS


@pytest.mark.parametrize("include_compacted", [True, False])
def test_ranked_passes_give_the_best_of_every_match(
    pg_dsn: str, schema: str, include_compacted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the score classes a word pass returns exactly the rows (and ranks, and tie
    order) of ranking every match, while reading a fraction of the matches."""
    from hermes_hookspecs import NewMessage as New

    read: dict[tuple[str, int], list[str]] = {}  # (query, k) -> the classes its pass read
    at: list[tuple[str, int]] = []
    original = pg_search._run

    def counting(conn: Any, sql: str, q: Any, k: int, **extra: Any) -> list[Any]:
        if "classes" in extra:
            read.setdefault(at[-1], []).append(extra["classes"])
        return original(conn, sql, q, k, **extra)

    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        for seed in (1, 2):  # two sessions; the search covers every session
            sid = store.create_session(NewSession(title=f"ranked {seed}")).id
            texts = ranked_rows(seed, 1500) + boundary_rows(seed, 1200)
            texts += ["w1 w2"] * 40  # ties: the newest first
            store.append_messages(
                sid, [New(message=Message(role="user", content=t)) for t in texts]
            )
        # a compaction: most rows inactive, so the active-only pass filters its reads
        active = store.active_messages(sid)
        store.archive_and_compact(
            sid,
            [New(message=m.message, origin_id=m.id) for m in active[-300:]],
            watermark=active[-1].id,
        )
        queries = ["w0", "w1", "w7", "w1 w2", "w0 w3 w9", "w2 w2b w5", "w40 w41", "w59"]
        queries += ["b0", "b1 b2", "b3 b4 b5", "b0 w0"]
        monkeypatch.setattr(pg_search, "_run", counting)
        with store._tx() as conn:
            pg_search._exec(conn, "SET LOCAL jit = off")
            for query in queries:
                q = pg_search.Query(query_terms(query), None, not include_compacted)
                tsquery = q.any_word if q.words > 1 else q.all_words
                assert tsquery is not None
                for k in (1, 2, 5, 13, 30, 71, 200):
                    every = original(conn, pg_search.word_sql(q, tsquery), q, k)
                    at.append((query, k))
                    ranked = pg_search._ranked_rows(conn, q, tsquery, k)
                    assert ranked is not None, (query, k)
                    assert [tuple(r) for r in ranked] == [tuple(r) for r in every], (query, k)
            # the commonest word's pass read a small share of its matches: the rows of
            # the classes it asked for, against every row holding the word
            classes = " | ".join(f"({text})" for text in read[("w0", 5)])
            counts = conn.execute(
                "SELECT count(*) FILTER (WHERE search_rank_classes(tsv) @@ %s::tsquery), "
                "count(*) FILTER (WHERE tsv @@ 'w0'::tsquery) FROM message_search",
                (classes,),
            ).fetchone()
    assert counts is not None
    scanned, matches = counts
    assert matches > 1000 and 0 < scanned * 4 < matches, (scanned, matches)


def test_ranked_search_is_the_search_of_every_match(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole search (every pass, the shared ranking) is the same with and without the
    score classes; a phrase term (``w1.w2``) or too many rows holding two words send a
    pass back to ranking every match; the planner settings are left as found."""
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        assert store.ranked_index and store.describe()["ranked_index"] is True
        sid = store.create_session(NewSession(title="ranked")).id
        store.append_messages(
            sid,
            [NewMessage(message=Message(role="user", content=t)) for t in ranked_rows(5, 2000)],
        )
        with_classes = pg_search.Indexes(trigram=True, ranked=True)
        without = pg_search.Indexes(trigram=True, ranked=False)
        for query in ["w0", "w3 w4", "w1.w2 w6", "w0 w1 w2 w3", "w5 zzz", "w58 w59"]:
            for limit in (1, 5, 20):
                assert run(store, query, with_classes, limit=limit) == run(
                    store, query, without, limit=limit
                ), (query, limit)
        with store._tx() as conn:
            conn.execute("SET LOCAL enable_seqscan = on")
            pg_search.search(
                conn,
                "w0 w1",
                session_ids=None,
                include_compacted=True,
                limit=5,
                indexes=with_classes,
            )
            assert conn.execute("SHOW enable_seqscan").fetchall()[0][0] == "on"
        q = pg_search.Query(("w0", "w1"), None, False)
        assert q.any_word is not None
        monkeypatch.setattr(pg_search, "MULTI_MATCHES", 3)  # the rows holding both are more
        with store._tx() as conn:
            assert pg_search._ranked_rows(conn, q, q.any_word, 5) is None
        monkeypatch.undo()
        wanted = run(store, "w0", without, limit=5)
        # a class query too long for a tsquery (long words, many of them) ranks every match
        monkeypatch.setattr(pg_search, "MAX_CLASS_TEXT", 10)
        assert run(store, "w0", with_classes, limit=5) == wanted
        monkeypatch.undo()
        # the index dropped after the store opened: no class query (each would compute the
        # classes of every row of the table), the same hits
        classes: list[str] = []
        original = pg_search._run

        def recording(conn: Any, sql: str, q: Any, k: int, **extra: Any) -> list[Any]:
            if "classes" in extra:
                classes.append(extra["classes"])
            return original(conn, sql, q, k, **extra)

        monkeypatch.setattr(pg_search, "_run", recording)
        assert run(store, "w0", with_classes, limit=5) == wanted and classes
        classes.clear()
        raw(pg_dsn, schema, "DROP INDEX message_search_rank")
        assert run(store, "w0", with_classes, limit=5) == wanted
        assert classes == []


def test_the_id_ranges_index_is_built_on_open_and_search_is_the_same_without_it(
    pg_dsn: str, schema: str, small_probe: None, windows: str
) -> None:
    """Opening the store builds the block-range index of ids that substring windows read
    (and builds it again when it was dropped); without it the windows read the primary
    key, and find the same rows. (The planner takes it for a window's id range once the
    table is large: at 10^6 messages, for windows of 4,000 to 320,000 ids.)"""
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        assert store.describe()["newest_index"] is True
        sid = store.create_session(NewSession(title="windows")).id
        rows = [f"row {i} quuxorbla{i}" if i % 50 == 0 else f"filler {i}" for i in range(3000)]
        store.append_messages(
            sid, [NewMessage(message=Message(role="user", content=t)) for t in rows]
        )
        fast = pg_search.Indexes(trigram=True, ranked=False)
        exact = pg_search.Indexes(trigram=False, ranked=False)
        queries = ["uxorbla", "xorbla10", "orbla295", "row 1 quux"]
        found = {query: run(store, query, fast, limit=5) for query in queries}
        assert found == {query: run(store, query, exact, limit=5) for query in queries}
    kinds = raw(
        pg_dsn,
        schema,
        "SELECT a.amname, pg_get_indexdef(c.oid) FROM pg_class c JOIN pg_am a "
        "ON a.oid = c.relam WHERE c.relname = 'message_search_newest' "
        "AND c.relnamespace = current_schema()::regnamespace",
    )
    assert [am for am, _ in kinds] == ["brin"] and "(message_id)" in kinds[0][1], kinds
    raw(pg_dsn, schema, "DROP INDEX message_search_newest")
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        assert {query: run(store, query, fast, limit=5) for query in queries} == found
        assert store.describe()["newest_index"] is True  # built again on this open
    raw(pg_dsn, schema, "DROP INDEX message_search_newest")
    with PostgresSessionStore(pg_dsn, schema=schema) as store:
        raw(pg_dsn, schema, "DROP INDEX message_search_newest")  # gone while it searches
        assert {query: run(store, query, fast, limit=5) for query in queries} == found
