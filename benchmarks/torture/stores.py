"""Shared pieces of the torture suite: which store a child opens, and what a sound store is.

A :class:`StoreSpec` travels to child processes as one JSON argument, so the
same scenario runs on SQLite and PostgreSQL. :func:`view_problems` checks a
session through the public :class:`~hermes_hookspecs.SessionStore` API only
(every backend answers it the same way); :func:`sqlite_problems` adds SQLite's
own integrity checks of the file and both FTS5 indexes.

Markers are single alphanumeric tokens (``mk<pid>x<n>``) so that both
backends' word indexes find them with one search.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from hermes_hookspecs import SessionStore

WATERMARK = re.compile(r" wm:(\d+)")
REPO_ROOT = Path(__file__).resolve().parents[2]


class StoreSpec(BaseModel):
    """How a (child) process opens the store under test."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["sqlite", "postgres"]
    path: str = ""
    dsn: str = ""
    pg_schema: str = ""

    def open(self) -> SessionStore:
        if self.kind == "sqlite":
            from hermes_plugin_sqlite_store import SqliteSessionStore

            return SqliteSessionStore(self.path, busy_budget=30)
        from hermes_plugin_postgres_store import PostgresSessionStore

        return PostgresSessionStore(self.dsn, schema=self.pg_schema, max_size=2)

    def label(self) -> str:
        return "SQLite" if self.kind == "sqlite" else "PostgreSQL"


def postgres_dsn() -> tuple[str | None, str]:
    """``(dsn, "")`` when a PostgreSQL server answers, else ``(None, why not)``."""
    try:
        from hermes_plugin_postgres_store.testing import find_dsn
    except ImportError as exc:  # pragma: no cover - the plugin ships with the project
        return None, f"postgres plugin not importable: {exc}"
    return find_dsn()


@contextmanager
def store_specs(folder: Path, name: str, with_postgres: bool = True) -> Iterator[list[StoreSpec]]:
    """A SQLite spec in ``folder``, plus a scratch PostgreSQL schema when a server answers.

    The schema is dropped on exit.
    """
    specs = [StoreSpec(kind="sqlite", path=str(folder / f"{name}.db"))]
    schema = ""
    dsn, _ = postgres_dsn() if with_postgres else (None, "")
    if dsn:
        schema = f"torture_{name}_{uuid.uuid4().hex[:10]}"
        specs.append(StoreSpec(kind="postgres", dsn=dsn, pg_schema=schema))
    try:
        yield specs
    finally:
        if dsn and schema:
            from hermes_plugin_postgres_store.testing import drop_schema

            drop_schema(dsn, schema)


def sqlite_problems(path: Path | str) -> list[str]:
    """``PRAGMA integrity_check`` and both FTS5 indexes' integrity checks."""
    problems: list[str] = []
    conn = sqlite3.connect(path)
    try:
        result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            problems.append(f"integrity_check: {result[:5]}")
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%' ORDER BY name"
            )
        ]
        for table in tables:
            try:
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 0)")
            except sqlite3.DatabaseError as exc:
                problems.append(f"{table} integrity-check: {exc}")
        conn.rollback()
    finally:
        conn.close()
    return problems


def view_problems(
    store: SessionStore,
    session_id: str,
    committed: Iterable[str],
    attempted: Iterable[list[str]] = (),
    *,
    search_sample: Iterable[str] = (),
    layout: bool = False,
) -> list[str]:
    """Every violated invariant of one session, seen through the store API.

    * each committed marker (the first word of a message) is stored exactly
      once as an original row;
    * each attempted batch is stored entirely or not at all;
    * positions in the active view are unique, it holds at most one summary,
      and every active tool result answers an earlier active call;
    * with ``layout`` (views written by the kill torture: summary first, its
      watermark as ``wm:N`` in its content): the view is all old or all new -
      the summary is first, carried copies come right after it, original rows
      after the watermark are active and those up to it archived (inactive and
      compacted);
    * each marker of ``search_sample`` is found by one session search.
    """
    problems: list[str] = []
    rows = store.all_messages(session_id)
    originals = [r for r in rows if r.origin_id is None and r.message.kind == "message"]
    counts: dict[str, int] = {}
    for row in originals:
        text = row.message.text().split(" ", 1)[0]  # the marker is the first word
        counts[text] = counts.get(text, 0) + 1
    dupes = sorted(t for t, n in counts.items() if n > 1 and t.startswith("mk"))
    if dupes:
        problems.append(f"stored twice: {dupes[:5]}")
    missing = sorted(m for m in committed if m not in counts)
    if missing:
        problems.append(f"committed but missing: {missing[:5]} ({len(missing)} in all)")
    for batch in attempted:
        present = [m for m in batch if m in counts]
        if present and len(present) != len(batch):
            problems.append(f"partial batch: {len(present)} of {batch} stored")
    active = store.active_messages(session_id)
    positions = [r.position for r in active]
    if len(set(positions)) != len(positions):
        problems.append("duplicate positions in the active view")
    summaries = [r for r in active if r.message.kind == "summary"]
    watermark = 0
    if len(summaries) > 1:
        problems.append(f"{len(summaries)} active summaries (mixed views)")
    elif summaries and layout:
        if active[0].id != summaries[0].id:
            problems.append("the active summary is not first")
        found = WATERMARK.search(summaries[0].message.text())
        watermark = int(found.group(1)) if found else 0
        copies_done = False
        for row in active[1:]:
            if row.origin_id is None:
                copies_done = True
            elif copies_done:
                problems.append(f"carried copy {row.id} after appended rows")
    if watermark:
        for row in originals:
            if row.id > watermark and not row.active:
                problems.append(f"row {row.id} after watermark {watermark} is not active")
            if row.id <= watermark and (row.active or not row.compacted):
                problems.append(f"row {row.id} up to watermark {watermark} is not archived")
    made: set[str] = set()
    for row in active:
        if row.message.role == "tool" and row.message.tool_call_id not in made:
            problems.append(f"active tool row {row.id} answers unknown call")
        made.update(call.id for call in row.message.tool_calls or [])
    for marker in search_sample:
        hits = store.search(marker, session_id=session_id, limit=5)
        found_rows = store.get_messages([h.message_id for h in hits]) if hits else []
        if not any(r.message.text().split(" ", 1)[0] == marker for r in found_rows):
            problems.append(f"committed marker {marker!r} not found by search")
    return problems


def parse_lines(out: str) -> list[tuple[str, list[str]]]:
    """Complete ``TAG word word`` lines of a child's stdout (a cut last line is dropped)."""
    lines = out.split("\n")[:-1]
    return [(line.split(" ")[0], line.split(" ")[1:]) for line in lines if line]


def dumps(spec: StoreSpec) -> str:
    return json.dumps(spec.model_dump())
