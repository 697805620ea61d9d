"""Usage records, the prefix ledger and compaction events in SQLite (append-only rows)."""

from __future__ import annotations

import sqlite3
import time

from hermes_core.storekit import (
    EVENT_COLUMNS,
    PREFIX_COLUMNS,
    event_from_row,
    prefix_from_row,
    usage_from_row,
)
from hermes_hookspecs.records import CompactionEvent, PrefixEntry, UsageRecord

from .sessions import require

_USAGE_COLUMNS = (
    "session_id, turn_id, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, reasoning_tokens, model, created_at"
)


def record_usage(conn: sqlite3.Connection, record: UsageRecord) -> None:
    require(conn, record.session_id)
    u = record.usage
    conn.execute(
        f"INSERT INTO usage ({_USAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.session_id,
            record.turn_id,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            u.reasoning_tokens,
            u.model,
            record.created_at if record.created_at is not None else time.time(),
        ),
    )


def usage(conn: sqlite3.Connection, session_id: str) -> list[UsageRecord]:
    rows = conn.execute(
        f"SELECT {_USAGE_COLUMNS} FROM usage WHERE session_id = ? ORDER BY id", (session_id,)
    ).fetchall()
    return [usage_from_row(row) for row in rows]


def record_prefix(conn: sqlite3.Connection, entry: PrefixEntry) -> None:
    require(conn, entry.session_id)
    conn.execute(
        f"INSERT INTO prefix_ledger ({PREFIX_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (
            entry.session_id,
            entry.request_index,
            entry.request_hash,
            entry.request_tokens,
            entry.shared_prefix_hash,
            entry.shared_prefix_tokens,
            entry.previous_tokens,
            entry.break_reason,
            entry.provider_cached_tokens,
            entry.created_at if entry.created_at is not None else time.time(),
        ),
    )


def prefix_entries(conn: sqlite3.Connection, session_id: str) -> list[PrefixEntry]:
    rows = conn.execute(
        f"SELECT {PREFIX_COLUMNS} FROM prefix_ledger WHERE session_id = ? ORDER BY id",
        (session_id,),
    ).fetchall()
    return [prefix_from_row(row) for row in rows]


def compaction_events(conn: sqlite3.Connection, session_id: str) -> list[CompactionEvent]:
    rows = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM compaction_events WHERE session_id = ? ORDER BY id",
        (session_id,),
    ).fetchall()
    return [event_from_row(row) for row in rows]
