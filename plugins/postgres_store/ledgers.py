"""Usage records, the prefix ledger and compaction events on PostgreSQL (append-only rows)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_core.storekit import (
    EVENT_COLUMNS,
    PREFIX_COLUMNS,
    event_from_row,
    prefix_from_row,
    usage_from_row,
)
from hermes_hookspecs.errors import NotFoundError
from hermes_hookspecs.records import CompactionEvent, PrefixEntry, UsageRecord

if TYPE_CHECKING:
    import psycopg

NOW = "extract(epoch FROM clock_timestamp())::float8"
_USAGE_COLUMNS = (
    "session_id, turn_id, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, reasoning_tokens, model, created_at"
)


def record_usage(conn: psycopg.Connection[Any], record: UsageRecord) -> None:
    """Insert the record (NotFoundError for an unknown session), in the caller's transaction."""
    u = record.usage
    done = conn.execute(
        f"INSERT INTO usage_records ({_USAGE_COLUMNS}) "
        f"SELECT id, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, {NOW}) "
        "FROM sessions WHERE id = %s RETURNING 1",
        (
            record.turn_id,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            u.reasoning_tokens,
            u.model,
            record.created_at,
            record.session_id,
        ),
    ).fetchone()
    if done is None:
        raise NotFoundError(f"session {record.session_id!r} not found")


def usage(conn: psycopg.Connection[Any], session_id: str) -> list[UsageRecord]:
    rows = conn.execute(
        f"SELECT {_USAGE_COLUMNS} FROM usage_records WHERE session_id = %s ORDER BY id",
        (session_id,),
    ).fetchall()
    return [usage_from_row(row) for row in rows]


def record_prefix(conn: psycopg.Connection[Any], entry: PrefixEntry) -> None:
    """Insert the entry (NotFoundError for an unknown session), in the caller's transaction."""
    done = conn.execute(
        f"INSERT INTO prefix_ledger ({PREFIX_COLUMNS}) "
        f"SELECT id, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, {NOW}) "
        "FROM sessions WHERE id = %s RETURNING 1",
        (
            entry.request_index,
            entry.request_hash,
            entry.request_tokens,
            entry.shared_prefix_hash,
            entry.shared_prefix_tokens,
            entry.previous_tokens,
            entry.break_reason,
            entry.provider_cached_tokens,
            entry.created_at,
            entry.session_id,
        ),
    ).fetchone()
    if done is None:
        raise NotFoundError(f"session {entry.session_id!r} not found")


def prefix_entries(conn: psycopg.Connection[Any], session_id: str) -> list[PrefixEntry]:
    rows = conn.execute(
        f"SELECT {PREFIX_COLUMNS} FROM prefix_ledger WHERE session_id = %s ORDER BY id",
        (session_id,),
    ).fetchall()
    return [prefix_from_row(row) for row in rows]


def compaction_events(conn: psycopg.Connection[Any], session_id: str) -> list[CompactionEvent]:
    rows = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM compaction_events WHERE session_id = %s ORDER BY id",
        (session_id,),
    ).fetchall()
    return [event_from_row(row) for row in rows]
