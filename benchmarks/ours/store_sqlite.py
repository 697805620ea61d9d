"""Benchmark of the SQLite session store, with the raw-SQLite ceiling measured in the same run.

Measures (one run, printed as a table and written as JSON):

* append throughput: one message per ``append_messages`` call (one
  transaction each), vs the raw ceiling: plain ``sqlite3``, WAL, one FTS5
  trigger, one transaction per message, same texts and same ``synchronous``
  setting (NORMAL; the raw number with SQLite's default FULL is also shown);
* search p50/p95 at 10^4, 10^5 and 10^6 messages (databases are built once
  with bulk SQL through the store's own schema and triggers, cached under
  ``--cache``, default ``/tmp/hermes-bench``);
* ``archive_and_compact`` on a 10,000-message session;
* lease hand-over latency between two processes (release committed in one
  process -> grant returned in the other).

Usage::

    python -m benchmarks store-sqlite [--sizes 10000,100000,1000000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from hermes_hookspecs.messages import Message
from hermes_hookspecs.records import LeaseHolder, NewMessage, NewSession
from hermes_plugin_sqlite_store import SqliteSessionStore
from hermes_plugin_sqlite_store.store import DEFAULT_FTS_INDEX_CAP, LATEST_VERSION

GENERATOR_VERSION = 3
SESSION_SIZE = 1000
_SYLLABLES = [a + b for a in "bcdfghjklmnprstvwz" for b in ("a", "e", "i", "o", "u", "ai", "ou")]


class Corpus:
    """Deterministic synthetic chat text: a Zipf vocabulary plus identifiers."""

    def __init__(self, seed: int = 7, vocabulary: int = 30_000) -> None:
        rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < vocabulary:
            words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
        self.words = sorted(words)
        rng.shuffle(self.words)
        weights = [1.0 / (rank + 1) ** 1.07 for rank in range(vocabulary)]
        total = 0.0
        self.cum: list[float] = []
        for weight in weights:
            total += weight
            self.cum.append(total)
        self.rng = random.Random(seed + 1)

    def text(self) -> str:
        rng = self.rng
        words = rng.choices(self.words, cum_weights=self.cum, k=rng.randint(8, 60))
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), f"err_{rng.getrandbits(32):08x}")
        if rng.random() < 0.1:
            words.append(f"/srv/{rng.choice(self.words)}/{rng.choice(self.words)}.py")
        return " ".join(words)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "p50_ms": round(pick(0.50) * 1000, 3),
        "p95_ms": round(pick(0.95) * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
        "n": len(ordered),
    }


# -- append ---------------------------------------------------------------------
def bench_append(workdir: Path, count: int, rounds: int = 10) -> dict[str, Any]:
    """Ours vs the raw ceiling, interleaved in ``rounds`` chunks so load changes hit both."""
    corpus = Corpus(seed=11)
    texts = [corpus.text() for _ in range(count)]
    store = SqliteSessionStore(workdir / "append.db")
    sid = store.create_session(NewSession(title="append")).id
    batch = [NewMessage(message=Message(role="user", content=t)) for t in texts]
    raw_conn = raw_database(workdir / "raw_NORMAL.db", "NORMAL")
    size = max(1, count // rounds)
    ours_time = raw_time = 0.0
    for first in range(0, count, size):
        start = time.perf_counter()
        for new in batch[first : first + size]:
            store.append_messages(sid, [new])
        ours_time += time.perf_counter() - start
        start = time.perf_counter()
        raw_append(raw_conn, texts[first : first + size])
        raw_time += time.perf_counter() - start
    store.close()
    raw_conn.close()
    full_conn = raw_database(workdir / "raw_FULL.db", "FULL")
    start = time.perf_counter()
    raw_append(full_conn, texts[: max(1, count // 5)])
    raw_full = max(1, count // 5) / (time.perf_counter() - start)
    full_conn.close()
    ours, raw = count / ours_time, count / raw_time
    return {
        "messages": count,
        "ours_msgs_per_s": round(ours),
        "raw_normal_msgs_per_s": round(raw),
        "raw_full_msgs_per_s": round(raw_full),
        "fraction_of_raw_ceiling": round(ours / raw, 3),
    }


def raw_database(path: Path, synchronous: str) -> sqlite3.Connection:
    """The raw ceiling's database: plain sqlite3, WAL, one table, one FTS5 trigger."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
        "content TEXT, created_at REAL)"
    )
    conn.execute(
        "CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', "
        "content_rowid='id')"
    )
    conn.execute(
        "CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN "
        "INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END"
    )
    return conn


def raw_append(conn: sqlite3.Connection, texts: list[str]) -> None:
    """One transaction per message."""
    for text in texts:
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, ?)",
            ("s", "user", text, time.time()),
        )
        conn.execute("COMMIT")


# -- big databases ----------------------------------------------------------------
def build_database(path: Path, total: int) -> None:
    """Fill a fresh store file with ``total`` messages in sessions of ``SESSION_SIZE``.

    Uses the store to create the schema, then bulk SQL (many rows per
    transaction) into the same tables, so the store's FTS triggers index
    every row exactly as ``append_messages`` would.
    """
    tmp = path.with_name(path.name + ".building")
    for suffix in ("", "-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    SqliteSessionStore(tmp).close()
    corpus = Corpus(seed=7)
    conn = sqlite3.connect(tmp, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    now = time.time()
    made = 0
    session_no = 0
    while made < total:
        conn.execute("BEGIN")
        for _ in range(max(1, 20_000 // SESSION_SIZE)):
            if made >= total:
                break
            sid = f"bench{session_no:07d}"
            session_no += 1
            size = min(SESSION_SIZE, total - made)
            conn.execute(
                "INSERT INTO sessions (id, title, created_at, updated_at, next_position) "
                "VALUES (?, ?, ?, ?, ?)",
                (sid, f"session {session_no}", now, now, size + 1),
            )
            conn.executemany(
                "INSERT INTO messages (session_id, position, role, kind, content, active, "
                "compacted, created_at, fts_cap) VALUES (?, ?, ?, 'message', ?, 1, 0, ?, ?)",
                (
                    (
                        sid,
                        pos,
                        "user" if pos % 2 else "assistant",
                        corpus.text(),
                        now,
                        DEFAULT_FTS_INDEX_CAP,
                    )
                    for pos in range(1, size + 1)
                ),
            )
            made += size
        conn.execute("COMMIT")
        if made % 100_000 == 0:
            print(f"  built {made:,}/{total:,}", file=sys.stderr, flush=True)
    for table in ("messages_fts_word", "messages_fts_tri"):
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    os.replace(tmp, path)
    for suffix in ("-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)


def search_queries(count: int, seed: int = 3) -> list[tuple[str, str]]:
    """(kind, query): mid-frequency words, word pairs, identifier substrings, phrases."""
    corpus = Corpus(seed=7)
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for i in range(count):
        kind = ("word", "two_words", "substring", "rare_word")[i % 4]
        if kind == "word":
            query = corpus.words[rng.randint(200, 5000)]
        elif kind == "two_words":
            query = f"{corpus.words[rng.randint(50, 3000)]} {corpus.words[rng.randint(50, 3000)]}"
        elif kind == "substring":
            word = corpus.words[rng.randint(100, 10000)]
            query = word[1:] if len(word) > 4 else word
        else:
            query = corpus.words[rng.randint(5000, 29000)]
        out.append((kind, query))
    return out


def time_searches(
    searches: Mapping[str, Callable[[str], list[Any]]], plan: list[tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    """Run ``plan`` once through each of ``searches`` (name -> search), the stores taking
    turns query by query (which goes first alternating), so that each query meets the
    same machine in every store: percentiles over all queries and by kind, and how many
    queries found something, by name."""
    names = list(searches)
    by_kind: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    hits = dict.fromkeys(names, 0)
    for index, (kind, query) in enumerate(plan):
        turn = index % len(names)
        for name in names[turn:] + names[:turn]:
            start = time.perf_counter()
            found = searches[name](query)
            elapsed = time.perf_counter() - start
            hits[name] += bool(found)
            by_kind[name].setdefault(kind, []).append(elapsed)
    return {
        name: {
            "queries_with_hits": hits[name],
            "all": _percentiles([t for samples in kinds.values() for t in samples]),
            "by_kind": {kind: _percentiles(samples) for kind, samples in kinds.items()},
        }
        for name, kinds in by_kind.items()
    }


def timed_plans(
    searches: Mapping[str, Callable[[str], list[Any]]], plan: list[tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    """The search benchmark of one store or several side by side: each store's cache
    warmed by the first 20 queries of ``plan``, then ``plan`` (:func:`time_searches`),
    then the same queries again (``second_pass``: the pages they read now cached, what a
    long-running store answers once its cache holds them)."""
    for _, query in plan[:20]:  # warm the page cache
        for search in searches.values():
            search(query)
    first = time_searches(searches, plan)
    again = time_searches(searches, plan)
    for name, row in first.items():
        row["second_pass"] = again[name]["all"]
    return first


def search_database(cache: Path, size: int) -> Path:
    """The SQLite store's search database of ``size`` messages in ``cache``, built the
    first time it is asked for."""
    # keyed by the schema version too: an older file would migrate in place and
    # keep the dropped index's pages, so its size would mislead
    path = cache / f"store_sqlite_v{GENERATOR_VERSION}_s{LATEST_VERSION}_{size}.db"
    if not path.exists():
        print(f"building {path} ({size:,} messages)...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        build_database(path, size)
        print(f"  built in {time.perf_counter() - start:.0f}s", file=sys.stderr)
    return path


def bench_search(cache: Path, size: int, queries: int) -> dict[str, Any]:
    path = search_database(cache, size)
    store = SqliteSessionStore(path)
    plan = search_queries(queries)
    timed = timed_plans({"ours": partial(store.search, limit=20)}, plan)["ours"]
    scoped: list[float] = []
    for _, query in plan[: max(20, queries // 4)]:
        sid = f"bench{random.Random(query).randrange(max(1, size // SESSION_SIZE)):07d}"
        start = time.perf_counter()
        store.search(query, session_id=sid, limit=20)
        scoped.append(time.perf_counter() - start)
    store.close()
    return {
        "messages": size,
        "db_mb": round(path.stat().st_size / 2**20, 1),
        **timed,
        "session_scoped": _percentiles(scoped),
    }


# -- compaction ---------------------------------------------------------------------
def bench_compact(workdir: Path, size: int = 10_000, trials: int = 3) -> dict[str, Any]:
    corpus = Corpus(seed=5)
    base = workdir / "compact_base.db"
    store = SqliteSessionStore(base)
    sid = store.create_session(NewSession(title="compact")).id
    for _ in range(size // 100):
        store.append_messages(
            sid,
            [NewMessage(message=Message(role="user", content=corpus.text())) for _ in range(100)],
        )
    store.close()
    samples: list[float] = []
    for trial in range(trials):
        path = workdir / f"compact_{trial}.db"
        shutil.copy(base, path)
        store = SqliteSessionStore(path)
        active = store.active_messages(sid)
        tail = active[-20:]
        new_active = [NewMessage(message=Message(role="user", content="summary " + corpus.text()))]
        new_active += [NewMessage(message=m.message, origin_id=m.id) for m in tail]
        start = time.perf_counter()
        commit = store.archive_and_compact(sid, new_active, watermark=active[-1].id)
        samples.append(time.perf_counter() - start)
        assert commit.archived == size
        store.close()
    return {"messages": size, **_percentiles(samples)}


# -- lease hand-over ----------------------------------------------------------------
def handover_loop(
    store: Any, sid: str, name: str, rounds: int, hold: float
) -> list[dict[str, float]]:
    """One side of the hand-over benchmark: take the lease, hold it, release, wait for the
    other side to take it; returns the grant/release times (any store)."""
    holder = LeaseHolder(name=name)
    events: list[dict[str, float]] = []
    for turn in range(rounds):
        grant = store.acquire_lease(sid, holder, ttl=30, timeout=30)
        got = time.time()
        time.sleep(hold)
        store.release_lease(grant)
        released = time.time()
        events.append({"token": grant.token, "acquired": got, "released": released})
        if turn == rounds - 1:
            break
        deadline = time.monotonic() + 30  # let the other side take its turn first
        while time.monotonic() < deadline:
            current = store.current_lease(sid)
            if current is not None and current.holder.name != name:
                break
            time.sleep(0.0005)
    return events


def _handover_child(path: str, sid: str, name: str, rounds: int, hold: float) -> None:
    store = SqliteSessionStore(path)
    events = handover_loop(store, sid, name, rounds, hold)
    store.close()
    print(json.dumps(events), flush=True)


def bench_handover(workdir: Path, rounds: int = 60, hold: float = 0.02) -> dict[str, Any]:
    path = workdir / "lease.db"
    store = SqliteSessionStore(path)
    sid = store.create_session(NewSession(title="lease")).id
    store.close()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--handover-child",
                str(path),
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
    by_token = {int(e["token"]): e for e in events}
    gaps = [
        by_token[t + 1]["acquired"] - by_token[t]["released"]
        for t in sorted(by_token)
        if t + 1 in by_token
    ]
    return _percentiles(gaps)


# -- main -------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--appends", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cache", default="/tmp/hermes-bench")
    parser.add_argument(
        "--json", default=str(Path(__file__).resolve().parents[1] / "results" / "store_sqlite.json")
    )
    parser.add_argument(
        "--handover-child", nargs=5, metavar=("DB", "SID", "NAME", "ROUNDS", "HOLD")
    )
    args = parser.parse_args(argv)
    if args.handover_child:
        db, sid, name, rounds, hold = args.handover_child
        _handover_child(db, sid, name, int(rounds), float(hold))
        return {}
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"sqlite_version": sqlite3.sqlite_version, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="hermes-store-bench-") as tmp:
        work = Path(tmp)
        result["append"] = bench_append(work, args.appends)
        print(f"append: {result['append']}", flush=True)
        result["archive_and_compact_10k"] = bench_compact(work)
        print(f"archive_and_compact 10k: {result['archive_and_compact_10k']}", flush=True)
        result["lease_handover"] = bench_handover(work)
        print(f"lease hand-over: {result['lease_handover']}", flush=True)
    result["search"] = {}
    for size in (int(s) for s in args.sizes.split(",") if s):
        result["search"][str(size)] = bench_search(cache, size, args.queries)
        print(f"search {size:,}: {result['search'][str(size)]}", flush=True)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    append = result["append"]
    print()
    print(
        f"append          {append['ours_msgs_per_s']:>8} msg/s  = "
        f"{append['fraction_of_raw_ceiling']:.0%} of raw ceiling "
        f"({append['raw_normal_msgs_per_s']} msg/s, synchronous=NORMAL; "
        f"{append['raw_full_msgs_per_s']} with FULL)"
    )
    for size, row in result["search"].items():
        print(
            f"search {int(size):>9,}  p50 {row['all']['p50_ms']:.2f} ms  "
            f"p95 {row['all']['p95_ms']:.2f} ms"
        )
    print(f"compact 10k     p50 {result['archive_and_compact_10k']['p50_ms']:.1f} ms")
    print(
        f"lease hand-over p50 {result['lease_handover']['p50_ms']:.2f} ms  "
        f"p95 {result['lease_handover']['p95_ms']:.2f} ms"
    )
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
