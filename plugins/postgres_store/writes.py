"""Statements shared by the write paths: locking a session and inserting messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_core.storekit import (
    SESSION_COLUMNS,
    SUCCESSOR_SQL,
    refuse_if_rotated,
    session_from_row,
)
from hermes_core.storekit import origin_roots as resolve_roots
from hermes_hookspecs.errors import NotFoundError
from hermes_hookspecs.records import NewMessage, SessionRecord

from .rows import message_params, search_body

if TYPE_CHECKING:
    import psycopg

CHUNK = 400
_COLS = (
    "ord, position, role, message, api_content, token_count, turn_id, origin_id, "
    "origin_root, tool_call_ids, body, annotations, kind"
)
_ROW = (
    "(%s::int, %s::bigint, %s::text, %s::text, %s::text, %s::int, %s::text, %s::bigint, "
    "%s::bigint, %s::text[], %s::text, %s::text, %s::text)"
)


def lock_session(
    conn: psycopg.Connection[Any], session_id: str, action: str = "write to"
) -> tuple[Any, ...]:
    """Lock the session row for this transaction; ``(next_position, compression_count)``.

    :raises SessionRotated: the session was ended by a rotation (storekit's rule).
    """
    row = conn.execute(
        "SELECT next_position, compression_count, end_reason FROM sessions "
        "WHERE id = %s FOR NO KEY UPDATE",
        (session_id,),
    ).fetchone()
    if row is None:
        raise NotFoundError(f"session {session_id!r} not found")
    check_open(conn, session_id, row[2], action)
    return tuple(row[:2])


def lock_session_record(
    conn: psycopg.Connection[Any], session_id: str, action: str
) -> tuple[int, SessionRecord]:
    """Lock the session row for this transaction; ``(next_position, record)``.

    :raises SessionRotated: the session was ended by a rotation (storekit's rule).
    """
    row = conn.execute(
        f"SELECT next_position, {SESSION_COLUMNS} FROM sessions WHERE id = %s FOR NO KEY UPDATE",
        (session_id,),
    ).fetchone()
    if row is None:
        raise NotFoundError(f"session {session_id!r} not found")
    record = session_from_row(row[1:])
    check_open(conn, session_id, record.end_reason, action)
    return int(row[0]), record


def check_open(
    conn: psycopg.Connection[Any], session_id: str, end_reason: str | None, action: str
) -> None:
    """Refuse ``action`` on a session a rotation ended, naming its successor."""
    if end_reason is not None:
        child = conn.execute(SUCCESSOR_SQL.format(p="%s"), (session_id,)).fetchone()
        refuse_if_rotated(session_id, end_reason, child[0] if child else None, action)


def known_calls(conn: psycopg.Connection[Any], session_id: str, ids: set[str]) -> set[str]:
    """Those of ``ids`` made by an assistant message of the session's active view."""
    rows = conn.execute(
        "SELECT DISTINCT c FROM messages, unnest(tool_call_ids) AS c "
        "WHERE session_id = %s AND active AND tool_call_ids IS NOT NULL "
        "AND tool_call_ids && %s::text[] AND c = ANY(%s::text[])",
        (session_id, sorted(ids), sorted(ids)),
    ).fetchall()
    return {str(row[0]) for row in rows}


def origin_roots(
    conn: psycopg.Connection[Any], batch: list[NewMessage], what: str
) -> list[int | None]:
    """The ``origin_root`` of each new message (:func:`hermes_core.storekit.origin_roots`)."""

    def lookup(ids: list[int]) -> dict[int, int]:
        rows = conn.execute(
            "SELECT id, coalesce(origin_root, id) FROM messages WHERE id = ANY(%s::bigint[])",
            (ids,),
        ).fetchall()
        return {int(a): int(b) for a, b in rows}

    return resolve_roots(batch, lookup, what)


def insert_messages(
    conn: psycopg.Connection[Any],
    session_id: str,
    batch: list[NewMessage],
    *,
    start_position: int,
    roots: list[int | None],
    cap: int,
    what: str,
) -> list[tuple[int, int, float]]:
    """Insert ``batch`` (and its search rows); ``(id, position, created_at)`` per message."""
    params_list = [message_params(new, i, what) for i, new in enumerate(batch)]
    out: list[tuple[int, int, float]] = []
    for begin in range(0, len(batch), CHUNK):
        chunk = range(begin, min(begin + CHUNK, len(batch)))
        values: list[Any] = []
        for i in chunk:
            p = params_list[i]
            values += [
                i,
                start_position + i,
                p["role"],
                p["message"],
                p["api_content"],
                p["token_count"],
                p["turn_id"],
                p["origin_id"],
                roots[i],
                p["tool_call_ids"],
                search_body(batch[i].message, cap),
                p["annotations"],
                p["kind"],
            ]
        sql = (
            f"WITH input ({_COLS}) AS (VALUES {', '.join([_ROW] * len(chunk))}), "
            "ins AS (INSERT INTO messages (session_id, position, role, message, api_content, "
            "token_count, turn_id, origin_id, origin_root, tool_call_ids, annotations, kind, "
            "created_at) "
            "SELECT %s, position, role, message, api_content, token_count, turn_id, origin_id, "
            "origin_root, tool_call_ids, annotations, kind, "
            "extract(epoch FROM clock_timestamp())::float8 "
            "FROM input ORDER BY ord RETURNING id, position, created_at), "
            "fts AS (INSERT INTO message_search (message_id, session_id, body) "
            "SELECT ins.id, %s, input.body FROM ins JOIN input USING (position)) "
            "SELECT id, position, created_at FROM ins ORDER BY position"
        )
        rows = conn.execute(sql.encode(), [*values, session_id, session_id]).fetchall()
        out += [(int(a), int(b), float(c)) for a, b, c in rows]
    return out
