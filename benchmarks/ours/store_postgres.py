"""Benchmark of the PostgreSQL session store, side by side with the SQLite store.

Measures (one run, printed as a table and written as JSON):

* append throughput: one message per ``append_messages`` call (one
  transaction each), vs the raw ceiling measured in the same run: plain
  psycopg, one ``INSERT`` per transaction into a table with the same
  ``tsvector`` column, GIN index (and trigram index when ``pg_trgm`` is
  available), same texts;
* search p50/p95 at 10^4, 10^5 and 10^6 messages, with the same corpus and
  query mix as ``store_sqlite.py``; databases are built once with bulk SQL
  (COPY) into the store's own schema and kept as schemas named
  ``bench_search_v<N>_<size>`` for later runs (``--rebuild`` drops them); with
  ``--search-beside-sqlite DIR`` the SQLite store's database of the same size
  answers the same queries alongside, the two stores taking turns query by query;
* ``archive_and_compact`` on a 10,000-message session (20 rows carried);
* lease hand-over latency between two processes (release committed in one
  process -> grant returned in the other), woken by LISTEN/NOTIFY;
* with ``--with-sqlite``: the SQLite store's numbers for the same operations,
  measured in the same run by ``store_sqlite.py``'s functions.

Usage::

    eval "$(bash .ci/start-postgres.sh)"     # or set HERMES_CORE_POSTGRES_DSN
    python -m benchmarks store-postgres [--sizes 10000,100000,1000000] [--with-sqlite]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from hermes_hookspecs.messages import Message
from hermes_hookspecs.records import NewMessage, NewSession
from hermes_plugin_postgres_store import PostgresSessionStore
from hermes_plugin_postgres_store.testing import drop_schema, find_dsn
from hermes_plugin_sqlite_store import SqliteSessionStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
import store_sqlite

BUILD_VERSION = 1
SESSION_SIZE = store_sqlite.SESSION_SIZE
Corpus = store_sqlite.Corpus
percentiles: Callable[[list[float]], dict[str, Any]] = store_sqlite._percentiles
handover_loop = store_sqlite.handover_loop


def _scratch(dsn: str, tag: str) -> str:
    schema = f"bench_{tag}_{os.getpid()}"
    drop_schema(dsn, schema)
    return schema


# -- append -------------------------------------------------------------------------
def async_commit(dsn: str) -> str:
    """The DSN with ``synchronous_commit=off``: commits survive a crash of any client or of
    the server process but not an OS crash/power loss (like SQLite WAL + synchronous=NORMAL)."""
    return make_conninfo(dsn, options="-c synchronous_commit=off")


def bench_append(dsn: str, count: int, rounds: int = 10) -> dict[str, Any]:
    """Ours and the raw ceiling in alternating chunks, so both see the same disk.

    (fsync latency on shared/virtual disks drifts by 10x within minutes; measuring
    one after the other would compare the disk's moods, not the code.)
    """
    corpus = Corpus(seed=11)
    texts = [corpus.text() for _ in range(count)]
    chunk = max(1, count // rounds)
    ours_schema = _scratch(dsn, "append")
    raw_schema = _scratch(dsn, "raw")
    ours_time = raw_time = 0.0
    try:
        store = PostgresSessionStore(dsn, schema=ours_schema)
        sid = store.create_session(NewSession(title="append")).id
        trigram = store.substring_index
        with psycopg.connect(dsn, autocommit=True) as raw:
            _raw_table(raw, raw_schema, trigram)
            for begin in range(0, count, chunk):
                part = texts[begin : begin + chunk]
                batch = [NewMessage(message=Message(role="user", content=t)) for t in part]
                start = time.perf_counter()
                for new in batch:
                    store.append_messages(sid, [new])
                ours_time += time.perf_counter() - start
                start = time.perf_counter()
                for text in part:
                    raw.execute(
                        "INSERT INTO messages (session_id, role, content, created_at) "
                        "VALUES (%s, %s, %s, %s)",
                        ("s", "user", text, time.time()),
                    )
                raw_time += time.perf_counter() - start
        store.close()
    finally:
        drop_schema(dsn, ours_schema)
        drop_schema(dsn, raw_schema)
    ours, raw_rate = count / ours_time, count / raw_time
    return {
        "messages": count,
        "synchronous_commit": "off" if "synchronous_commit=off" in dsn else "on",
        "ours_msgs_per_s": round(ours),
        "raw_msgs_per_s": round(raw_rate),
        "fraction_of_raw_ceiling": round(ours / raw_rate, 3),
        "raw_has_trigram_index": trigram,
    }


def _raw_table(conn: psycopg.Connection[Any], schema: str, trigram: bool) -> None:
    """The raw ceiling's table: plain INSERTs, tsvector column + GIN (+ trigram GIN)."""
    conn.execute(f"CREATE SCHEMA {schema}")
    conn.execute(f"SET search_path TO {schema}, public")
    conn.execute(
        "CREATE TABLE messages (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
        "session_id text, role text, content text, created_at float8, "
        "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED)"
    )
    conn.execute("CREATE INDEX ON messages USING gin (tsv)")
    if trigram:
        conn.execute("CREATE INDEX ON messages USING gin (content gin_trgm_ops)")


# -- big databases --------------------------------------------------------------------
def search_schema(size: int) -> str:
    return f"bench_search_v{BUILD_VERSION}_{size}"


def build_database(dsn: str, schema: str, total: int) -> None:
    """Fill a fresh store schema with ``total`` messages in sessions of ``SESSION_SIZE``.

    The store creates the schema; rows go in with COPY into a staging table,
    then INSERT ... SELECT into ``messages`` and ``message_search`` (the same
    rows ``append_messages`` writes); the GIN indexes are dropped during the
    load and recreated with their original definitions.
    """
    drop_schema(dsn, schema)
    PostgresSessionStore(dsn, schema=schema).close()
    corpus = Corpus(seed=7)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}, public")
        conn.execute("SET maintenance_work_mem = '512MB'")
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
            "AND tablename = 'message_search' AND indexdef LIKE '%%USING gin%%'",
            (schema,),
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f"DROP INDEX {schema}.{name}")
        conn.execute(
            "CREATE UNLOGGED TABLE staging (session_id text, position bigint, role text, "
            "content text)"
        )
        made = 0
        session_no = 0
        now = time.time()
        while made < total:
            chunk_sessions = []
            with conn.transaction():
                with conn.cursor().copy(
                    "COPY staging (session_id, position, role, content) FROM STDIN"
                ) as copy:
                    for _ in range(max(1, 100_000 // SESSION_SIZE)):
                        if made >= total:
                            break
                        sid = f"bench{session_no:07d}"
                        session_no += 1
                        size = min(SESSION_SIZE, total - made)
                        chunk_sessions.append((sid, size))
                        for pos in range(size):
                            role = "user" if pos % 2 else "assistant"
                            copy.write_row((sid, pos, role, corpus.text()))
                        made += size
                conn.execute(
                    "INSERT INTO sessions (id, title, created_at, updated_at, next_position) "
                    "SELECT s, 'bench ' || s, %s, %s, n FROM unnest(%s::text[], %s::bigint[]) "
                    "AS t(s, n)",
                    (now, now, [s for s, _ in chunk_sessions], [n for _, n in chunk_sessions]),
                )
                conn.execute(
                    "INSERT INTO leases (session_id) SELECT unnest(%s::text[])",
                    ([s for s, _ in chunk_sessions],),
                )
                conn.execute(
                    "INSERT INTO messages (session_id, position, role, message, created_at) "
                    "SELECT session_id, position, role, "
                    "json_build_object('role', role, 'content', content, 'kind', 'message')::text, "
                    "%s FROM staging ORDER BY session_id, position",
                    (now,),
                )
                conn.execute(
                    "INSERT INTO message_search (message_id, session_id, body) "
                    "SELECT m.id, m.session_id, s.content FROM staging s JOIN messages m "
                    "ON m.session_id = s.session_id AND m.position = s.position"
                )
                conn.execute("TRUNCATE staging")
            print(f"  loaded {made:,}/{total:,}", file=sys.stderr, flush=True)
        conn.execute("DROP TABLE staging")
        for name, definition in indexes:
            print(f"  indexing {name}...", file=sys.stderr, flush=True)
            conn.execute(definition)
        conn.execute("VACUUM ANALYZE messages")
        conn.execute("VACUUM ANALYZE message_search")


def bench_search(
    dsn: str, size: int, queries: int, rebuild: bool, sqlite_cache: Path | None = None
) -> dict[str, Any]:
    """Search p50/p95 over the query mix; with ``sqlite_cache`` (where the SQLite store's
    search databases are kept, built if missing) the SQLite store of the same size runs
    the same queries alongside, the two taking turns query by query (``sqlite``): what the
    machine does meanwhile costs both alike. Which of each store's pages it kept from
    before still differs (a SQLite database the store section has just searched is warm)."""
    schema = search_schema(size)
    with psycopg.connect(dsn, autocommit=True) as conn:
        have = conn.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'message_search'",
            (schema,),
        ).fetchone()
        count = conn.execute(f"SELECT count(*) FROM {schema}.messages").fetchone() if have else None
    if rebuild or count is None or count[0] != size:
        print(f"building schema {schema} ({size:,} messages)...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        build_database(dsn, schema, size)
        print(f"  built in {time.perf_counter() - start:.0f}s", file=sys.stderr, flush=True)
    store = PostgresSessionStore(dsn, schema=schema)
    plan = store_sqlite.search_queries(queries)
    searches: dict[str, Callable[[str], list[Any]]] = {"postgres": partial(store.search, limit=20)}
    with ExitStack() as stack:
        if sqlite_cache is not None:
            path = store_sqlite.search_database(sqlite_cache, size)
            lite = stack.enter_context(SqliteSessionStore(path))
            searches["sqlite"] = partial(lite.search, limit=20)
        timed = store_sqlite.timed_plans(searches, plan)
    scoped: list[float] = []
    for _, query in plan[: max(20, queries // 4)]:
        sid = f"bench{random.Random(query).randrange(max(1, size // SESSION_SIZE)):07d}"
        start = time.perf_counter()
        store.search(query, session_id=sid, limit=20)
        scoped.append(time.perf_counter() - start)
    store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        mb = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) / 1048576.0 FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return {
        "messages": size,
        "db_mb": round(float(mb[0] or 0), 1) if mb else None,
        **timed["postgres"],
        **({"sqlite": timed["sqlite"]} if "sqlite" in timed else {}),
        "session_scoped": percentiles(scoped),
    }


# -- compaction ---------------------------------------------------------------------------
def bench_compact(dsn: str, size: int = 10_000, trials: int = 3) -> dict[str, Any]:
    corpus = Corpus(seed=5)
    schema = _scratch(dsn, "compact")
    samples: list[float] = []
    try:
        store = PostgresSessionStore(dsn, schema=schema)
        for _ in range(trials):
            sid = store.create_session(NewSession(title="compact")).id
            for _ in range(size // 100):
                store.append_messages(
                    sid,
                    [
                        NewMessage(message=Message(role="user", content=corpus.text()))
                        for _ in range(100)
                    ],
                )
            active = store.active_messages(sid)
            tail = active[-20:]
            new_active = [
                NewMessage(message=Message(role="user", content="summary " + corpus.text()))
            ]
            new_active += [NewMessage(message=m.message, origin_id=m.id) for m in tail]
            start = time.perf_counter()
            commit = store.archive_and_compact(sid, new_active, watermark=active[-1].id)
            samples.append(time.perf_counter() - start)
            assert commit.archived == size
        store.close()
    finally:
        drop_schema(dsn, schema)
    return {"messages": size, **percentiles(samples)}


# -- lease hand-over --------------------------------------------------------------------
def _handover_child(dsn: str, schema: str, sid: str, name: str, rounds: int, hold: float) -> None:
    store = PostgresSessionStore(dsn, schema=schema, max_size=2)
    events = handover_loop(store, sid, name, rounds, hold)
    store.close()
    print(json.dumps(events), flush=True)


def bench_handover(dsn: str, rounds: int = 60, hold: float = 0.02) -> dict[str, Any]:
    schema = _scratch(dsn, "lease")
    try:
        store = PostgresSessionStore(dsn, schema=schema)
        sid = store.create_session(NewSession(title="lease")).id
        store.close()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--handover-child",
                    dsn,
                    schema,
                    sid,
                    name,
                    str(rounds),
                    str(hold),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for name in ("a", "b")
        ]
        events: list[dict[str, float]] = []
        for proc in procs:
            out, _ = proc.communicate(timeout=300)
            if proc.returncode:
                raise RuntimeError(f"hand-over child failed with {proc.returncode}")
            events.extend(json.loads(out.strip().splitlines()[-1]))
    finally:
        drop_schema(dsn, schema)
    by_token = {int(e["token"]): e for e in events}
    tokens = sorted(by_token)
    gaps = [
        by_token[b]["acquired"] - by_token[a]["released"] for a, b in itertools.pairwise(tokens)
    ]
    return percentiles(gaps)


# -- SQLite, same run ---------------------------------------------------------------------
def sqlite_side(sizes: list[int], appends: int, queries: int, cache: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hermes-store-bench-") as tmp:
        work = Path(tmp)
        out["append"] = store_sqlite.bench_append(work, appends)
        out["archive_and_compact_10k"] = store_sqlite.bench_compact(work)
        out["lease_handover"] = store_sqlite.bench_handover(work)
    cache.mkdir(parents=True, exist_ok=True)
    out["search"] = {str(s): store_sqlite.bench_search(cache, s, queries) for s in sizes}
    return out


# -- main -----------------------------------------------------------------------------------
def _row(label: str, pg: str, lite: str) -> str:
    return f"{label:<26} {pg:>22} {lite:>22}"


def report(result: dict[str, Any]) -> None:
    pg = result["postgres"]
    lite = result.get("sqlite") or {}

    def pair(row: dict[str, Any] | None, fmt: str = "{p50_ms:.2f} / {p95_ms:.2f}") -> str:
        return fmt.format(**row) if row else ""

    print()
    print(_row("", "postgres", "sqlite" if lite else ""))
    for key, label in (
        ("append", "append msg/s, 1 txn each"),
        ("append_async_commit", "  same, sync commit off"),
    ):
        if key in pg:
            print(
                _row(
                    label,
                    str(pg[key]["ours_msgs_per_s"]),
                    str(lite["append"]["ours_msgs_per_s"]) if lite and key == "append" else "",
                )
            )
            print(
                _row(
                    "    fraction of raw ceiling",
                    f"{pg[key]['fraction_of_raw_ceiling']:.0%}",
                    f"{lite['append']['fraction_of_raw_ceiling']:.0%}"
                    if lite and key == "append"
                    else "",
                )
            )
    for size, row in pg["search"].items():
        other = lite.get("search", {}).get(size)
        print(
            _row(
                f"search {int(size):,} p50/p95 ms",
                pair(row["all"]),
                pair(other["all"]) if other else "",
            )
        )
    if "archive_and_compact_10k" in pg:
        print(
            _row(
                "compact 10k p50 ms",
                pair(pg["archive_and_compact_10k"], "{p50_ms:.1f}"),
                pair(lite.get("archive_and_compact_10k"), "{p50_ms:.1f}"),
            )
        )
    if "lease_handover" in pg:
        print(
            _row(
                "lease hand-over p50/p95 ms",
                pair(pg["lease_handover"]),
                pair(lite.get("lease_handover")),
            )
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--appends", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rebuild", action="store_true", help="rebuild the search schemas")
    parser.add_argument("--with-sqlite", action="store_true", help="measure the SQLite store too")
    parser.add_argument(
        "--cache", default="/tmp/hermes-bench-pg-side", help="SQLite database cache (own dir)"
    )
    parser.add_argument(
        "--sqlite-sizes", default=None, help="search sizes for the SQLite side (default: --sizes)"
    )
    parser.add_argument(
        "--search-beside-sqlite",
        metavar="DIR",
        default=None,
        help="run each search size's queries alongside the SQLite store's database of the "
        "same size kept in DIR (built there if missing), the two taking turns per query",
    )
    parser.add_argument(
        "--parts", default="append,compact,handover,search", help="what to measure on postgres"
    )
    parser.add_argument(
        "--json",
        default=str(Path(__file__).resolve().parents[1] / "results" / "store_postgres.json"),
    )
    parser.add_argument(
        "--handover-child", nargs=6, metavar=("DSN", "SCHEMA", "SID", "NAME", "ROUNDS", "HOLD")
    )
    args = parser.parse_args(argv)
    if args.handover_child:
        dsn, schema, sid, name, rounds, hold = args.handover_child
        _handover_child(dsn, schema, sid, name, int(rounds), float(hold))
        return {}
    dsn, reason = find_dsn()
    if dsn is None:
        parser.exit(2, f"store_postgres: {reason}\n")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with psycopg.connect(dsn) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        buffers = conn.execute("SHOW shared_buffers").fetchone()
    pg: dict[str, Any] = {
        "server_version": version[0] if version else "?",
        # how much of the tables the server keeps in its own cache (the packaged
        # default, 128MB, holds little of a 10^6-message schema: its reads go to the OS)
        "shared_buffers": buffers[0] if buffers else "?",
        "cpus": os.cpu_count(),
    }
    parts = set(args.parts.split(","))
    if "append" in parts:
        pg["append"] = bench_append(dsn, args.appends)
        print(f"append: {pg['append']}", flush=True)
        pg["append_async_commit"] = bench_append(async_commit(dsn), args.appends)
        print(f"append (synchronous_commit=off): {pg['append_async_commit']}", flush=True)
    if "compact" in parts:
        pg["archive_and_compact_10k"] = bench_compact(dsn)
        print(f"archive_and_compact 10k: {pg['archive_and_compact_10k']}", flush=True)
    if "handover" in parts:
        pg["lease_handover"] = bench_handover(dsn)
        print(f"lease hand-over: {pg['lease_handover']}", flush=True)
    pg["search"] = {}
    for size in sizes if "search" in parts else []:
        beside = None if args.search_beside_sqlite is None else Path(args.search_beside_sqlite)
        pg["search"][str(size)] = bench_search(dsn, size, args.queries, args.rebuild, beside)
        print(f"search {size:,}: {pg['search'][str(size)]}", flush=True)
    result: dict[str, Any] = {"postgres": pg}
    if args.with_sqlite:
        lite_sizes = [
            int(x)
            for x in (args.sizes if args.sqlite_sizes is None else args.sqlite_sizes).split(",")
            if x
        ]
        result["sqlite"] = sqlite_side(lite_sizes, args.appends, args.queries, Path(args.cache))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    report(result)
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
