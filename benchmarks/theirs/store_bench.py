"""Measure hermes-agent's SessionDB (hermes_state.py): append, FTS search, in-place compaction.

Run with the reference venv's python.  Job (JSON; see runner_common.read_job), all
fields optional::

    {"parts": ["append", "search", "compaction"],
     "messages_file": "msgs.json",      # message source, cycled; default: synthetic text
     "append_messages": 2000,           # N appended one by one into one session
     "search_messages": 20000,          # size of the DB searched
     "search_build": "bulk",            # "bulk" (replace_messages, one txn per session)
                                        # or "append" (append_message per message)
     "session_size": 1000,              # messages per session when building the search DB
     "queries": ["django", "formset"],  # default: picked from the corpus by frequency
     "search_repeats": 20, "search_limit": 20,
     "compaction_messages": 10000, "compaction_keep": 20, "compaction_runs": 3,
     "seed": 0}

Each part uses its own fresh database under a temp HOME.  Prints one JSON object.
"""

from __future__ import annotations

import itertools
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from runner_common import (
    RunnerError,
    environment_facts,
    isolate_home,
    load_messages,
    percentile,
    read_job,
    remove_home,
    run_main,
    summarize,
)

PARTS = ("append", "search", "compaction")
TOKEN_RE = re.compile(r"[a-z0-9]+")
WORD_RE = re.compile(r"[a-z][a-z0-9]{3,}")


class StoreJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    parts: list[str] = Field(default_factory=lambda: list(PARTS))
    messages_file: str | None = None
    append_messages: int = Field(default=2000, ge=1)
    search_messages: int = Field(default=20000, ge=1)
    search_build: str = "bulk"
    session_size: int = Field(default=1000, ge=1)
    queries: list[str] | None = None
    search_repeats: int = Field(default=20, ge=1)
    search_limit: int = Field(default=20, ge=1)
    compaction_messages: int = Field(default=10000, ge=1)
    compaction_keep: int = Field(default=20, ge=0)
    compaction_runs: int = Field(default=3, ge=1)
    seed: int = 0
    keep_home: bool = False


def synthetic_messages(count: int, seed: int) -> list[dict[str, Any]]:
    """Deterministic user/assistant/tool-ish text with a Zipf-like word distribution."""
    rng = random.Random(seed)
    topical = ["django", "formset", "permission", "migration", "traceback", "pytest", "sqlite"]
    vocab = [f"w{i:04d}" for i in range(5000)] + topical
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    roles = ("user", "assistant", "tool")
    out = []
    for i in range(count):
        words = rng.choices(vocab, weights=weights, k=rng.randint(20, 400))
        out.append({"role": roles[i % 3], "content": " ".join(words)})
    return out


def source_messages(job: StoreJob) -> list[dict[str, Any]]:
    if job.messages_file is None:
        return synthetic_messages(997, job.seed)
    messages: list[dict[str, Any]] = load_messages(job.messages_file)
    if not messages:
        raise RunnerError(f"messages_file={job.messages_file!r} holds no messages")
    return messages


def cycled(messages: list[dict[str, Any]], count: int) -> Iterator[dict[str, Any]]:
    for i in range(count):
        yield messages[i % len(messages)]


def append_one(db: Any, session_id: str, msg: dict[str, Any]) -> None:
    """Their normal per-message write path (one BEGIN IMMEDIATE transaction each)."""
    db.append_message(
        session_id,
        msg["role"],
        content=msg.get("content"),
        tool_name=msg.get("name") if msg["role"] == "tool" else None,
        tool_calls=msg.get("tool_calls"),
        tool_call_id=msg.get("tool_call_id"),
    )


def as_rows(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dicts in the shape replace_messages/archive_and_compact read (tool name as tool_name)."""
    rows = []
    for msg in messages:
        row = dict(msg)
        if msg["role"] == "tool" and "name" in msg:
            row["tool_name"] = row.pop("name")
        rows.append(row)
    return rows


def open_db(home: Path, name: str) -> Any:
    from hermes_state import SessionDB

    return SessionDB(home / "dbs" / name / "state.db")


def db_size(db: Any) -> int:
    base = Path(db.db_path)
    return sum(p.stat().st_size for p in base.parent.glob(base.name + "*"))


def bench_append(job: StoreJob, home: Path, source: list[dict[str, Any]]) -> dict[str, Any]:
    db = open_db(home, "append")
    db.create_session("append-session", "cli")
    t0 = time.perf_counter()
    c0 = time.process_time()
    for msg in cycled(source, job.append_messages):
        append_one(db, "append-session", msg)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    stored = db.message_count("append-session")
    journal = db._conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = db._conn.execute("PRAGMA synchronous").fetchone()[0]
    result = {
        "api": "SessionDB.append_message (one transaction per message)",
        "messages": job.append_messages,
        "stored": stored,
        "wall_s": wall,
        "cpu_s": cpu,
        "messages_per_s": job.append_messages / wall,
        "journal_mode": journal,
        "synchronous": sync,
        "fts_tables": ["messages_fts (unicode61)"]
        + (["messages_fts_trigram"] if db._trigram_available else []),
        "db_bytes": db_size(db),
    }
    db.close()
    if stored != job.append_messages:
        raise RunnerError(f"append: stored {stored} of {job.append_messages} messages")
    return result


def build_search_db(job: StoreJob, home: Path, source: list[dict[str, Any]]) -> tuple[Any, float]:
    db = open_db(home, "search")
    it = cycled(source, job.search_messages)
    remaining = job.search_messages
    t0 = time.perf_counter()
    n_session = 0
    while remaining > 0:
        size = min(job.session_size, remaining)
        sid = f"search-{n_session:05d}"
        db.create_session(sid, "cli")
        chunk = [next(it) for _ in range(size)]
        if job.search_build == "bulk":
            db.replace_messages(sid, as_rows(chunk))
        else:
            for msg in chunk:
                append_one(db, sid, msg)
        remaining -= size
        n_session += 1
    return db, time.perf_counter() - t0


def default_queries(source: list[dict[str, Any]]) -> list[str]:
    """Words at several frequency ranks of the corpus, plus its most common adjacent pair.

    Tokens are split like FTS5's unicode61 tokenizer does for ASCII (runs of
    letters and digits), so every default query is a plain term or phrase.
    """
    words: Counter[str] = Counter()
    pairs: Counter[str] = Counter()
    for msg in source:
        tokens = TOKEN_RE.findall((msg.get("content") or "").lower())
        words.update(t for t in tokens if WORD_RE.fullmatch(t))
        pairs.update(
            f'"{a} {b}"'
            for a, b in itertools.pairwise(tokens)
            if WORD_RE.fullmatch(a) and WORD_RE.fullmatch(b) and a != b
        )
    ranked = [w for w, _ in words.most_common()]
    if not ranked:
        raise RunnerError("no words of 4+ letters in the corpus to build queries from")
    queries = [ranked[min(r, len(ranked) - 1)] for r in (0, 9, 49, 199, 999)]
    if pairs:
        queries.append(pairs.most_common(1)[0][0])
    return list(dict.fromkeys(queries))


def bench_search(job: StoreJob, home: Path, source: list[dict[str, Any]]) -> dict[str, Any]:
    if job.search_build not in ("bulk", "append"):
        raise RunnerError(f"search_build={job.search_build!r}: expected 'bulk' or 'append'")
    db, build_wall = build_search_db(job, home, source)
    queries = job.queries or default_queries(source)
    api_lat: list[float] = []
    raw_lat: list[float] = []
    per_query: dict[str, Any] = {}
    for q in queries:
        db.search_messages(q, limit=job.search_limit)  # warm the page cache once per query
        lat = []
        hits = 0
        for _ in range(job.search_repeats):
            t0 = time.perf_counter()
            hits = len(db.search_messages(q, limit=job.search_limit))
            lat.append(time.perf_counter() - t0)
        raw = []
        for _ in range(job.search_repeats):
            t0 = time.perf_counter()
            db._conn.execute(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?",
                (db._sanitize_fts5_query(q), job.search_limit),
            ).fetchall()
            raw.append(time.perf_counter() - t0)
        api_lat.extend(lat)
        raw_lat.extend(raw)
        per_query[q] = {"hits": hits, "p50_s": percentile(lat, 50), "p95_s": percentile(lat, 95)}
    result = {
        "api": "SessionDB.search_messages "
        "(FTS5 MATCH + BM25 rank + snippet + 1-before/after context)",
        "build": (
            "SessionDB.replace_messages per session (one transaction each)"
            if job.search_build == "bulk"
            else "SessionDB.append_message per message"
        ),
        "db_messages": db.message_count(),
        "build_wall_s": build_wall,
        "db_bytes": db_size(db),
        "limit": job.search_limit,
        "queries": queries,
        "latency_s": summarize(api_lat),
        "per_query": per_query,
        "raw_fts_match_latency_s": summarize(raw_lat),
    }
    db.close()
    return result


def bench_compaction(job: StoreJob, home: Path, source: list[dict[str, Any]]) -> dict[str, Any]:
    db = open_db(home, "compaction")
    walls: list[float] = []
    cpus: list[float] = []
    checks: list[dict[str, int]] = []
    summary = {"role": "user", "content": "compaction summary placeholder for the store benchmark"}
    for run in range(job.compaction_runs):
        sid = f"compact-{run}"
        db.create_session(sid, "cli")
        rows = as_rows(list(cycled(source, job.compaction_messages)))
        db.replace_messages(sid, rows)
        keep = rows[len(rows) - job.compaction_keep :] if job.compaction_keep else []
        compacted = [summary, *keep]
        t0 = time.perf_counter()
        c0 = time.process_time()
        active = db.archive_and_compact(sid, compacted)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        total = len(db.get_messages(sid, include_inactive=True))
        checks.append({"active": active, "total_rows": total})
        if active != len(compacted) or total != job.compaction_messages + len(compacted):
            raise RunnerError(f"compaction run {run}: unexpected row counts {checks[-1]}")
    result = {
        "api": "SessionDB.archive_and_compact (one transaction: mark all active rows archived, "
        "insert the compacted set; FTS update triggers re-index every archived row)",
        "messages": job.compaction_messages,
        "compacted_set": 1 + min(job.compaction_keep, job.compaction_messages),
        "runs": job.compaction_runs,
        "wall_s": summarize(walls),
        "cpu_s": summarize(cpus),
        "row_checks": checks,
    }
    db.close()
    return result


def main(argv: list[str]) -> dict[str, Any]:
    job = read_job(argv, StoreJob)
    unknown = [p for p in job.parts if p not in PARTS]
    if unknown:
        raise RunnerError(f"parts: unknown {unknown}; expected a subset of {list(PARTS)}")
    home = isolate_home("store")
    try:
        return run_parts(job, home)
    finally:
        if not job.keep_home:
            remove_home(home)


def run_parts(job: StoreJob, home: Path) -> dict[str, Any]:
    source = source_messages(job)
    result: dict[str, Any] = {
        "runner": "store_bench",
        **environment_facts(),
        "home": str(home) if job.keep_home else None,
        "source": job.messages_file or f"synthetic(seed={job.seed})",
        "source_messages": len(source),
    }
    if "append" in job.parts:
        result["append"] = bench_append(job, home, source)
    if "search" in job.parts:
        result["search"] = bench_search(job, home, source)
    if "compaction" in job.parts:
        result["compaction"] = bench_compaction(job, home, source)
    return result


if __name__ == "__main__":
    sys.exit(run_main(main))
