"""Reference side: FTS search latency of hermes-agent's SessionDB on a cached database.

Run with the reference venv's python (``benchmarks/comparison/store.py`` does it). Like
the runners in ``benchmarks/theirs/`` it imports only hermes-agent, pydantic and
the standard library, and ``runner_common.emit`` refuses to print if anything
of hermes-core got loaded.

``benchmarks/theirs/store_bench.py`` rebuilds its search database on every run;
at 10^6 messages that costs minutes and gigabytes, so this runner keeps the
database between runs: it is built once (``SessionDB.replace_messages`` per
session of ``session_size`` messages, texts read from ``texts_file``, one JSON
string per line) at ``db_path`` and marked complete by ``db_path + ".done"``.

Job (JSON)::

    {"db_path": "/tmp/.../theirs_1000000.db", "texts_file": "texts.jsonl",
     "size": 1000000, "session_size": 1000, "queries": ["word", ...],
     "repeats": 1, "limit": 20}

Prints one JSON object: per query (in order) the hits and every latency in seconds.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pydantic import BaseModel, ConfigDict, Field
from runner_common import (
    RunnerError,
    environment_facts,
    isolate_home,
    read_job,
    remove_home,
    run_main,
)


class SearchJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    db_path: str
    texts_file: str
    size: int = Field(gt=0)
    session_size: int = Field(default=1000, gt=0)
    queries: list[str] = Field(min_length=1)
    repeats: int = Field(default=1, ge=1)
    limit: int = Field(default=20, ge=1)


def build(job: SearchJob, path: Path) -> float:
    """Fill a fresh SessionDB at ``path`` with ``job.size`` messages; return seconds taken."""
    from hermes_state import SessionDB

    building = path.with_name(path.name + ".building")
    for suffix in ("", "-wal", "-shm"):
        Path(str(building) + suffix).unlink(missing_ok=True)
    started = time.perf_counter()
    db = SessionDB(building)
    made = 0
    session_no = 0
    with open(job.texts_file, encoding="utf-8") as texts:
        while made < job.size:
            rows: list[dict[str, Any]] = []
            for _ in range(min(job.session_size, job.size - made)):
                line = texts.readline()
                if not line:
                    raise RunnerError(f"texts_file={job.texts_file!r} ends after {made} texts")
                role = "user" if (made + len(rows)) % 2 else "assistant"
                rows.append({"role": role, "content": json.loads(line)})
            sid = f"bench{session_no:07d}"
            db.create_session(sid, "cli")
            db.replace_messages(sid, rows)
            made += len(rows)
            session_no += 1
            if made % 100_000 == 0:
                print(f"  theirs built {made:,}/{job.size:,}", file=sys.stderr, flush=True)
    db.close()
    os.replace(building, path)
    for suffix in ("-wal", "-shm"):
        Path(str(building) + suffix).unlink(missing_ok=True)
    Path(str(path) + ".done").write_text(str(job.size), encoding="utf-8")
    return time.perf_counter() - started


def main(argv: list[str]) -> dict[str, Any]:
    job = read_job(argv, SearchJob)
    home = isolate_home("search-cache")
    try:
        return run(job)
    finally:
        remove_home(home)


def run(job: SearchJob) -> dict[str, Any]:
    from hermes_state import SessionDB

    path = Path(job.db_path)
    done = Path(str(path) + ".done")
    build_s = None
    if not (path.is_file() and done.is_file() and done.read_text().strip() == str(job.size)):
        build_s = build(job, path)
    db = SessionDB(path)
    stored = db.message_count()
    if stored != job.size:
        raise RunnerError(f"{path} holds {stored} messages, expected {job.size}")
    for query in job.queries[:20]:  # warm the page cache
        db.search_messages(query, limit=job.limit)
    per_query = []
    for query in job.queries:
        samples = []
        hits = 0
        for _ in range(job.repeats):
            start = time.perf_counter()
            hits = len(db.search_messages(query, limit=job.limit))
            samples.append(time.perf_counter() - start)
        per_query.append({"query": query, "hits": hits, "seconds": samples})
    db.close()
    return {
        "runner": "theirs_search_cache",
        **environment_facts(),
        "api": "SessionDB.search_messages (FTS5 + bm25 + snippet + context rows)",
        "db_path": str(path),
        "db_bytes": sum(p.stat().st_size for p in path.parent.glob(path.name + "*")),
        "messages": stored,
        "build_s": build_s,
        "limit": job.limit,
        "per_query": per_query,
    }


if __name__ == "__main__":
    sys.exit(run_main(main))
