"""Message rows in SQLite: inserting a batch (with its search rows) and the reads.

Validation (message shape, tool pairing, origin chains) is
:mod:`hermes_core.storekit`'s; this module holds the statements.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

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


def by_ids(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, StoredMessage]:
    """The rows of ``ids`` that exist, by id (read 500 ids a statement)."""
    unique = sorted(set(ids))
    found: dict[int, StoredMessage] = {}
    for begin in range(0, len(unique), 500):
        part = unique[begin : begin + 500]
        for row in select(conn, f"id IN ({','.join('?' * len(part))})", tuple(part)):
            found[row.id] = row
    return found


#: a window's rows are first looked for among this many ids on its side, walking the
#: table in id order (a session's rows are mostly written together); only when fewer
#: are found there (many other sessions written between two of its messages, or the
#: session's end) does the read go through the session's index
NEAR_IDS = 4096


def context(
    conn: sqlite3.Connection, session_id: str, message_id: int, before: int, after: int
) -> list[StoredMessage]:
    """The ``before`` rows of ``session_id`` written before ``message_id``, that row and
    the ``after`` rows written after it, in write (id) order.

    The session's index orders rows by position, not id: asked for the nearest ids,
    SQLite read every row of the session before the message and sorted them (1.4 ms
    a window on a 1,400-row session of large rows). Walking the primary key from the
    message reads only the rows it returns (0.03 ms); the index, read for ids alone,
    covers the rows further away.
    """
    earlier = _side(conn, session_id, message_id, before, earlier=True)
    rest = _side(conn, session_id, message_id, after + 1, earlier=False)
    return [*reversed(earlier), *rest]


def _side(
    conn: sqlite3.Connection, session_id: str, message_id: int, count: int, *, earlier: bool
) -> list[StoredMessage]:
    """The ``count`` rows of the session nearest ``message_id`` on one side (``earlier``:
    before it, nearest first; else from it on)."""
    if count <= 0:
        return []
    if earlier:  # ``+session_id``: not through the session's index, along the primary key
        near = "+session_id = ? AND id < ? AND id >= ? ORDER BY id DESC LIMIT ?"
        bound = message_id - NEAR_IDS
    else:
        near = "+session_id = ? AND id >= ? AND id < ? ORDER BY id LIMIT ?"
        bound = message_id + NEAR_IDS
    rows = select(conn, near, (session_id, message_id, bound, count))
    if len(rows) >= count:
        return rows
    sign, order = ("<", "DESC") if earlier else (">=", "ASC")
    ids = [
        int(row[0])
        for row in conn.execute(
            f"SELECT id FROM messages WHERE session_id = ? AND id {sign} ? "
            f"ORDER BY id {order} LIMIT ?",
            (session_id, message_id, count),
        )
    ]
    if len(ids) == len(rows):  # the session has no more rows on this side
        return rows
    found = by_ids(conn, ids)
    return [found[i] for i in ids]


def turn_requests(conn: sqlite3.Connection, message_ids: list[int]) -> dict[int, int]:
    """The id of the request that opened each row's turn (see
    :meth:`hermes_hookspecs.SessionStore.turn_requests`): the latest message the
    user wrote at or before the row's origin root, in the root's session, one
    lookup of the ``messages_requests`` index a row."""
    out: dict[int, int] = {}
    for begin in range(0, len(message_ids), 500):
        part = message_ids[begin : begin + 500]
        rows = conn.execute(
            "SELECT m.id, (SELECT r.id FROM messages r INDEXED BY messages_requests "
            "WHERE r.session_id = o.session_id AND r.id <= o.id AND r.role = 'user' "
            "AND r.kind = 'message' AND r.harness IS NULL ORDER BY r.id DESC LIMIT 1) "
            "FROM messages m JOIN messages o ON o.id = coalesce(m.origin_root, m.id) "
            f"WHERE m.id IN ({','.join('?' * len(part))})",
            tuple(part),
        ).fetchall()
        out.update((int(row[0]), int(row[1])) for row in rows if row[1] is not None)
    return out
