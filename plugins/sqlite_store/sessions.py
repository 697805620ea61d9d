"""Session and blob rows in SQLite: the statements behind the session methods.

The rules (checks, the first end wins, rotation) come from
:mod:`hermes_core.storekit`; this module only holds the SQL.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

from hermes_core.storekit import (
    END_ONCE_SQL,
    SESSION_COLUMNS,
    SUCCESSOR_SQL,
    duplicate_session,
    json_text,
    refuse_if_rotated,
    session_from_row,
)
from hermes_hookspecs.errors import NotFoundError
from hermes_hookspecs.records import NewSession, SessionRecord

#: the position a new session's first message takes (the schema's default ``next_position``)
FIRST_POSITION = 1


def load(conn: sqlite3.Connection, session_id: str) -> SessionRecord:
    rows = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
    ).fetchall()
    if not rows:
        raise NotFoundError(f"session {session_id!r} not found")
    return session_from_row(rows[0])


def require(conn: sqlite3.Connection, session_id: str) -> None:
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise NotFoundError(f"session {session_id!r} not found")


def check_open(conn: sqlite3.Connection, session_id: str, action: str) -> None:
    """Inside a transaction: the session exists and was not ended by a rotation."""
    found = conn.execute("SELECT end_reason FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if found is None:
        raise NotFoundError(f"session {session_id!r} not found")
    if found[0] is not None:
        refuse_if_rotated(session_id, found[0], successor(conn, session_id), action)


def successor(conn: sqlite3.Connection, session_id: str) -> str | None:
    child = conn.execute(SUCCESSOR_SQL.format(p="?"), (session_id,)).fetchone()
    return str(child[0]) if child else None


def insert(
    conn: sqlite3.Connection,
    new: NewSession,
    now: float,
    *,
    system_prompt_hash: str | None = None,
    tools_hash: str | None = None,
    compression_count: int = 0,
    next_position: int = FIRST_POSITION,
) -> str:
    """Insert a checked :class:`NewSession`; its id (refused if taken, or its parent unknown)."""
    sid = new.id if new.id is not None else uuid.uuid4().hex
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
        raise duplicate_session(sid)
    if new.parent_id is not None:
        require_parent(conn, new.parent_id)
    conn.execute(
        "INSERT INTO sessions (id, title, cwd, goal, routing, model, provider, parent_id, "
        "created_at, updated_at, system_prompt_hash, tools_hash, compression_count, "
        "next_position) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            sid,
            new.title,
            new.cwd,
            new.goal,
            json_text(new.routing, "routing"),
            new.model,
            new.provider,
            new.parent_id,
            now,
            now,
            system_prompt_hash,
            tools_hash,
            compression_count,
            next_position,
        ),
    )
    return sid


def require_parent(conn: sqlite3.Connection, parent_id: str) -> None:
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (parent_id,)).fetchone() is None:
        raise NotFoundError(f"parent session {parent_id!r} not found")


def update(conn: sqlite3.Connection, session_id: str, fields: dict[str, Any]) -> None:
    """Write checked ``update_session`` fields (routing as JSON text) and bump ``updated_at``."""
    sets = [f"{key} = ?" for key in fields]
    values = [json_text(v, "routing") if k == "routing" else v for k, v in fields.items()]
    conn.execute(
        f"UPDATE sessions SET {', '.join(sets)}, updated_at = ? WHERE id = ?",
        (*values, time.time(), session_id),
    )


def end(conn: sqlite3.Connection, session_id: str, reason: str, now: float) -> None:
    """End the session unless it already ended (the first end wins)."""
    conn.execute(
        "UPDATE sessions SET end_reason = ?, ended_at = ?, updated_at = ? "
        f"WHERE id = ? AND {END_ONCE_SQL}",
        (reason, now, now, session_id),
    )


def blob_stored(conn: sqlite3.Connection, digest: str, kind: str) -> bool:
    found = conn.execute(
        "SELECT 1 FROM blobs WHERE digest = ? AND kind = ?", (digest, kind)
    ).fetchone()
    return found is not None
