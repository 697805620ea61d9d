"""Message rows in SQLite: inserting a batch (with its search rows) and the reads.

Validation (message shape, tool pairing, origin chains) is
:mod:`hermes_core.storekit`'s; this module holds the statements.
"""

from __future__ import annotations

import sqlite3

from hermes_core.storekit import origin_roots, stored_row
from hermes_hookspecs.records import NewMessage, StoredMessage

from .rows import INSERT_MESSAGE, MESSAGE_COLUMNS, message_from_row, message_values


def insert(
    conn: sqlite3.Connection,
    session_id: str,
    position: int,
    batch: list[NewMessage],
    now: float,
    cap: int,
    what: str = "messages",
) -> list[StoredMessage]:
    """Insert ``batch`` at ``position, position + 1, ...``; the stored rows."""

    def lookup(ids: list[int]) -> dict[int, int]:
        found: dict[int, int] = {}
        for begin in range(0, len(ids), 500):
            part = ids[begin : begin + 500]
            rows = conn.execute(
                "SELECT id, coalesce(origin_root, id) FROM messages WHERE id IN "
                f"({','.join('?' * len(part))})",
                part,
            ).fetchall()
            found.update((int(a), int(b)) for a, b in rows)
        return found

    roots = origin_roots(batch, lookup, what)
    stored: list[StoredMessage] = []
    for offset, (new, root) in enumerate(zip(batch, roots, strict=True)):
        cursor = conn.execute(
            INSERT_MESSAGE,
            message_values(session_id, position + offset, new, root, now, cap),
        )
        mid = int(cursor.lastrowid or 0)
        for call in new.message.tool_calls or ():
            conn.execute(
                "INSERT OR IGNORE INTO message_calls (session_id, call_id, message_id) "
                "VALUES (?, ?, ?)",
                (session_id, call.id, mid),
            )
        stored.append(stored_row(new, mid, session_id, position + offset, now))
    return stored


def known_calls(conn: sqlite3.Connection, session_id: str, ids: set[str]) -> set[str]:
    """Those of ``ids`` made by an assistant message of the session's active view."""
    return {
        call_id
        for call_id in ids
        if conn.execute(
            "SELECT 1 FROM message_calls c JOIN messages m ON m.id = c.message_id "
            "WHERE c.session_id = ? AND c.call_id = ? AND m.active = 1 LIMIT 1",
            (session_id, call_id),
        ).fetchone()
        is not None
    }


def select(conn: sqlite3.Connection, where: str, params: tuple[object, ...]) -> list[StoredMessage]:
    """The message rows matching ``where`` (with its ``ORDER BY``)."""
    rows = conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where}", params).fetchall()
    return [message_from_row(row) for row in rows]
