"""Session store, ours (SQLite) vs hermes-agent's SessionDB vs raw SQLite, same texts, same run.

* append: one message per transaction, in interleaved rounds (ours with the
  default ``synchronous=NORMAL``, ours with ``FULL``, the raw-SQLite ceiling
  (:func:`raw_ceiling`, NORMAL), and theirs, which runs SQLite's
  default FULL), each round on fresh files; the reported rate is the median of
  the rounds and each ratio the median of per-round ratios, so a disk whose
  fsync latency drifts during the run moves both sides of a ratio together;
* search p50/p95 on databases of 10^4, 10^5, 10^6 messages built from the same
  synthetic corpus (``store_sqlite.Corpus``, seed 7) and the same query list
  (``store_sqlite.search_queries``); ours through ``store_sqlite.bench_search``
  and theirs through ``benchmarks/theirs/search_cache.py``; both databases are
  cached under ``--cache`` and reused by later runs;
* ``archive_and_compact`` on 10^4 messages (20 carried + a summary);
* lease hand-over between two processes (ours ``store_sqlite.bench_handover``;
  theirs has no cross-process turn lease: its compression lock, polled every
  millisecond, is shown for reference and not compared).
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from hermes_hookspecs import Message, NewMessage, NewSession
from hermes_plugin_sqlite_store import SqliteSessionStore

from ..ours import store_sqlite
from ..report import Row, Section, Target, percentiles
from ..theirs.environment import (
    BENCH_DIR,
    ensure_theirs_venv,
    run_theirs_runner,
    runner_environment,
)

APPEND_VS_THEIRS = Target(on="ratio", op=">=", value=5.0, text=">= 5x", source="issue 3 / issue 10")
APPEND_VS_RAW = Target(on="ratio", op=">=", value=0.30, text=">= 0.30 of raw", source="issue 3")
SEARCH_1M = Target(on="ours", op="<", value=20.0, text="p50 < 20 ms", source="issue 3 / issue 10")
SEARCH_P95_1M = Target(on="ratio", op="<=", value=1.0, text="p95 <= theirs", source="issue 14")
SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
HANDOVER = Target(on="ours", op="<", value=50.0, text="p50 < 50 ms", source="issue 3 / issue 10")


# -- append ---------------------------------------------------------------------------------
RAW_INDEXES: dict[str, str] = {
    "word": "fts5(content, content='messages', content_rowid='id')",
    "trigram": "fts5(content, content='messages', content_rowid='id', tokenize='trigram')",
}


def raw_ceiling(
    path: Path, texts: list[str], synchronous: str, indexes: tuple[str, ...] = ("word",)
) -> float:
    """Plain sqlite3, WAL, one table with FTS5 triggers, one transaction per message.

    ``indexes``: the FTS5 tables the trigger feeds (``word`` is issue 3's ceiling;
    ``word, trigram`` is the same indexing work as ours; none: no FTS at all).
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
            "content TEXT, created_at REAL)"
        )
        for name in indexes:
            conn.execute(f"CREATE VIRTUAL TABLE messages_fts_{name} USING {RAW_INDEXES[name]}")
            conn.execute(
                f"CREATE TRIGGER messages_ai_{name} AFTER INSERT ON messages BEGIN "
                f"INSERT INTO messages_fts_{name}(rowid, content) VALUES (new.id, new.content); END"
            )
        start = time.perf_counter()
        for text in texts:
            conn.execute("BEGIN")
            conn.execute(
                "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, ?)",
                ("s", "user", text, time.time()),
            )
            conn.execute("COMMIT")
        return len(texts) / (time.perf_counter() - start)
    finally:
        conn.close()


def _ours_append(path: Path, texts: list[str], synchronous: Literal["NORMAL", "FULL"]) -> float:
    store = SqliteSessionStore(path, synchronous=synchronous)
    try:
        sid = store.create_session(NewSession(title="append")).id
        batch = [NewMessage(message=Message(role="user", content=t)) for t in texts]
        start = time.perf_counter()
        for new in batch:
            store.append_messages(sid, [new])
        return len(texts) / (time.perf_counter() - start)
    finally:
        store.close()


def bench_append(folder: Path, per_round: int, rounds: int) -> dict[str, Any]:
    corpus = store_sqlite.Corpus(seed=11)
    texts = [corpus.text() for _ in range(per_round)]
    source = folder / "append_texts.json"
    source.write_text(json.dumps([{"role": "user", "content": t} for t in texts]), encoding="utf-8")
    rates: dict[str, list[float]] = {
        "ours": [],
        "ours_full": [],
        "raw": [],
        "raw_two_indexes": [],
        "raw_no_fts": [],
        "theirs": [],
    }
    theirs_facts: dict[str, Any] = {}
    for r in range(rounds):
        rates["ours"].append(_ours_append(folder / f"ours_{r}.db", texts, "NORMAL"))
        rates["raw"].append(raw_ceiling(folder / f"raw_{r}.db", texts, "NORMAL"))
        rates["raw_two_indexes"].append(
            raw_ceiling(folder / f"raw2_{r}.db", texts, "NORMAL", ("word", "trigram"))
        )
        rates["raw_no_fts"].append(raw_ceiling(folder / f"raw0_{r}.db", texts, "NORMAL", ()))
        theirs = run_theirs_runner(
            "store_bench",
            {"parts": ["append"], "messages_file": str(source), "append_messages": per_round},
        )["append"]
        rates["theirs"].append(theirs["messages_per_s"])
        theirs_facts = {k: theirs[k] for k in ("journal_mode", "synchronous", "fts_tables")}
        rates["ours_full"].append(_ours_append(folder / f"ours_full_{r}.db", texts, "FULL"))
    ratio = {
        "ours_vs_theirs": [o / t for o, t in zip(rates["ours"], rates["theirs"], strict=True)],
        "ours_full_vs_theirs": [
            o / t for o, t in zip(rates["ours_full"], rates["theirs"], strict=True)
        ],
        "ours_vs_raw": [o / r for o, r in zip(rates["ours"], rates["raw"], strict=True)],
        "ours_vs_raw_two_indexes": [
            o / r for o, r in zip(rates["ours"], rates["raw_two_indexes"], strict=True)
        ],
        "raw_two_indexes_vs_theirs": [
            o / t for o, t in zip(rates["raw_two_indexes"], rates["theirs"], strict=True)
        ],
    }
    return {
        "messages_per_round": per_round,
        "rounds": rounds,
        "rates_msgs_per_s": rates,
        "median_msgs_per_s": {k: statistics.median(v) for k, v in rates.items()},
        "ratios_per_round": ratio,
        "median_ratio": {k: statistics.median(v) for k, v in ratio.items()},
        "theirs": theirs_facts,
    }


# -- search ---------------------------------------------------------------------------------
def _texts_file(cache: Path, size: int) -> Path:
    """The first ``size`` texts of ``store_sqlite.build_database``'s corpus, one per line."""
    path = cache / f"texts_v{store_sqlite.GENERATOR_VERSION}_{size}.jsonl"
    if not path.is_file():
        corpus = store_sqlite.Corpus(seed=7)
        partial = path.with_name(path.name + ".partial")
        with partial.open("w", encoding="utf-8") as out:
            for _ in range(size):
                out.write(json.dumps(corpus.text()) + "\n")
        partial.replace(path)
    return path


def _theirs_search(cache: Path, size: int, queries: list[str], timeout: float) -> dict[str, Any]:
    python = ensure_theirs_venv()
    job = {
        "db_path": str(cache / f"theirs_v{store_sqlite.GENERATOR_VERSION}_{size}.db"),
        "texts_file": str(_texts_file(cache, size)),
        "size": size,
        "session_size": store_sqlite.SESSION_SIZE,
        "queries": queries,
    }
    with tempfile.TemporaryDirectory(prefix="theirs-search-job-") as tmp:
        job_file = Path(tmp) / "job.json"
        job_file.write_text(json.dumps(job), encoding="utf-8")
        proc = subprocess.run(
            [str(python), str(BENCH_DIR / "theirs" / "search_cache.py"), str(job_file)],
            env=runner_environment(),
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"theirs_search_cache failed ({proc.returncode}): {proc.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def bench_search(
    cache: Path, size: int, queries: int, with_theirs: bool, timeout: float
) -> dict[str, Any]:
    plan = store_sqlite.search_queries(queries)
    ours = store_sqlite.bench_search(cache, size, queries)
    out: dict[str, Any] = {"messages": size, "ours": ours}
    if with_theirs:
        theirs = _theirs_search(cache, size, [q for _, q in plan], timeout)
        by_kind: dict[str, list[float]] = {}
        every: list[float] = []
        hits: dict[str, int] = {}
        for (kind, _), entry in zip(plan, theirs["per_query"], strict=True):
            by_kind.setdefault(kind, []).extend(entry["seconds"])
            every.extend(entry["seconds"])
            hits[kind] = hits.get(kind, 0) + bool(entry["hits"])
        out["theirs"] = {
            "all": percentiles(every),
            "by_kind": {k: percentiles(v) for k, v in by_kind.items()},
            "queries_with_hits_by_kind": hits,
            "db_mb": round(theirs["db_bytes"] / 2**20, 1),
            "build_s": theirs["build_s"],
        }
    return out


# -- compaction and lease -----------------------------------------------------------------
def bench_compact(folder: Path, size: int, runs: int) -> dict[str, Any]:
    ours = store_sqlite.bench_compact(folder, size=size, trials=runs)
    corpus = store_sqlite.Corpus(seed=5)
    source = folder / "compact_texts.json"
    source.write_text(
        json.dumps([{"role": "user", "content": corpus.text()} for _ in range(size)]),
        encoding="utf-8",
    )
    theirs = run_theirs_runner(
        "store_bench",
        {
            "parts": ["compaction"],
            "messages_file": str(source),
            "compaction_messages": size,
            "compaction_keep": 20,
            "compaction_runs": runs,
        },
    )["compaction"]
    return {"ours": ours, "theirs": theirs}


def bench_lease(folder: Path, rounds: int) -> dict[str, Any]:
    ours = store_sqlite.bench_handover(folder, rounds=rounds)
    theirs = run_theirs_runner("lease_bench", {"rounds": max(10, rounds // 2)})
    return {"ours": ours, "theirs": theirs}


# -- the section ----------------------------------------------------------------------------
def run(
    *,
    cache: Path,
    sizes: list[int],
    theirs_sizes: list[int],
    queries: int,
    append_per_round: int,
    append_rounds: int,
    compact_size: int,
    compact_runs: int,
    lease_rounds: int,
) -> Section:
    section = Section(name="store (SQLite)")
    started = time.perf_counter()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hermes-compare-store-") as tmp:
        folder = Path(tmp)
        append = bench_append(folder, append_per_round, append_rounds)
        section.detail["append"] = append
        med = append["median_msgs_per_s"]
        ratio = append["median_ratio"]
        rounds = f"median of {append_rounds} interleaved rounds x {append_per_round} msgs"
        section.rows += [
            Row(
                key="append_vs_theirs",
                metric="append, 1 msg per transaction (defaults)",
                unit="msg/s",
                ours=med["ours"],
                theirs=med["theirs"],
                ratio=ratio["ours_vs_theirs"],
                target=APPEND_VS_THEIRS,
                note=(
                    f"{rounds}; ours synchronous=NORMAL (its default), theirs "
                    f"synchronous={SYNC_NAMES.get(append['theirs'].get('synchronous'), '?')} "
                    "(SQLite's default), "
                    f"two FTS5 tables each"
                ),
            ).finish(),
            Row(
                key="append_full_vs_theirs",
                metric="  same, ours with synchronous=FULL",
                unit="msg/s",
                ours=med["ours_full"],
                theirs=med["theirs"],
                ratio=ratio["ours_full_vs_theirs"],
            ).finish(),
            Row(
                key="append_vs_raw",
                metric="append vs raw SQLite ceiling",
                unit="msg/s",
                ours=med["ours"],
                theirs=med["raw"],
                ratio=ratio["ours_vs_raw"],
                baseline="raw sqlite3",
                target=APPEND_VS_RAW,
                note="raw: plain sqlite3, WAL, synchronous=NORMAL, one FTS5 trigger, 1 txn/msg",
            ).finish(),
            Row(
                key="append_vs_raw_two_indexes",
                metric="  same, raw with our two FTS5 indexes (word + trigram)",
                unit="msg/s",
                ours=med["ours"],
                theirs=med["raw_two_indexes"],
                ratio=ratio["ours_vs_raw_two_indexes"],
                baseline="raw sqlite3, 2 FTS5",
                note=(
                    "the same indexing work as ours in plain sqlite3: the ceiling for a store "
                    "that keeps both indexes in sync; it is "
                    f"{ratio['raw_two_indexes_vs_theirs']:.2f}x theirs, and plain sqlite3 "
                    f"without FTS does {med['raw_no_fts']:,.0f} msg/s"
                ),
            ).finish(),
        ]

        compact = bench_compact(folder, compact_size, compact_runs)
        section.detail["archive_and_compact"] = compact
        section.rows.append(
            Row(
                key="archive_and_compact",
                metric=f"archive_and_compact, {compact_size:,} msgs",
                unit="ms",
                ours=compact["ours"]["p50_ms"],
                theirs=compact["theirs"]["wall_s"]["median"] * 1000,
                note=(
                    f"median of {compact_runs}; {compact_size:,} active rows -> summary + 20 "
                    "carried, one transaction; theirs re-indexes every archived row"
                ),
            ).finish()
        )

        lease = bench_lease(folder, lease_rounds)
        section.detail["lease_handover"] = lease
        theirs_ms = lease["theirs"]["handover_s"]["p50"] * 1000
        section.rows.append(
            Row(
                key="lease_handover",
                metric="lease hand-over between 2 processes, p50",
                unit="ms",
                ours=lease["ours"]["p50_ms"],
                theirs=None,
                theirs_text=f"n/c ({theirs_ms:.2f} polled lock)",
                target=HANDOVER,
                note=(
                    f"ours p95 {lease['ours']['p95_ms']:.2f} ms over {lease['ours']['n']} "
                    "hand-overs (release committed -> grant returned in the other process); "
                    "theirs has no cross-process turn lease, its compression lock polled every "
                    "1 ms is shown only for reference"
                ),
            ).finish()
        )

    section.detail["search"] = {}
    for size in sizes:
        found = bench_search(cache, size, queries, with_theirs=size in theirs_sizes, timeout=3600)
        section.detail["search"][str(size)] = found
        ours_all = found["ours"]["all"]
        theirs = found.get("theirs")
        exp = f"10^{len(str(size)) - 1}" if str(size).strip("0") == "1" else f"{size:,}"
        section.rows.append(
            Row(
                key=f"search_{size}_all",
                metric=f"search p50 / p95, {exp} msgs, all queries",
                unit="ms",
                ours=ours_all["p50_ms"],
                theirs=theirs["all"]["p50_ms"] if theirs else None,
                ours_text=f"{ours_all['p50_ms']:.2f} / {ours_all['p95_ms']:.2f}",
                theirs_text=(
                    f"{theirs['all']['p50_ms']:.2f} / {theirs['all']['p95_ms']:.2f}"
                    if theirs
                    else "not run"
                ),
                target=SEARCH_1M if size == 1_000_000 else None,
                note=(
                    "theirs answers no substring and few two-word queries (hits by kind: "
                    f"{theirs['queries_with_hits_by_kind']}); a query with no hit returns in µs"
                    if theirs
                    else ""
                ),
            ).finish()
        )
        if theirs:
            section.rows.append(
                Row(
                    key=f"search_{size}_p95",
                    metric="  p95 only, all queries",
                    unit="ms",
                    ours=ours_all["p95_ms"],
                    theirs=theirs["all"]["p95_ms"],
                    target=SEARCH_P95_1M if size == 1_000_000 else None,
                    note=(
                        "natural-query semantics: every term first, then some terms by bm25 x "
                        "coverage, substrings through the trigram index (issue 14)"
                    ),
                ).finish()
            )
        if theirs and "word" in theirs["by_kind"]:
            ours_word = found["ours"]["by_kind"]["word"]
            theirs_word = theirs["by_kind"]["word"]
            section.rows.append(
                Row(
                    key=f"search_{size}_word",
                    metric="  single-word queries only (both find hits)",
                    unit="ms",
                    ours=ours_word["p50_ms"],
                    theirs=theirs_word["p50_ms"],
                    ours_text=f"{ours_word['p50_ms']:.2f} / {ours_word['p95_ms']:.2f}",
                    theirs_text=f"{theirs_word['p50_ms']:.2f} / {theirs_word['p95_ms']:.2f}",
                ).finish()
            )
    section.seconds = time.perf_counter() - started
    return section
