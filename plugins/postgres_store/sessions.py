"""Session and blob rows on PostgreSQL: the statements behind the session methods.

The rules (checks, the first end wins, rotation) come from
:mod:`hermes_core.storekit`; this module only holds the SQL. Each function
runs inside the caller's transaction.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from hermes_core.storekit import (
    END_ONCE_SQL,
    SESSION_COLUMNS,
    duplicate_session,
    require_hashes,
    session_from_row,
)
from hermes_hookspecs.errors import NotFoundError
from hermes_hookspecs.records import NewSession, SessionRecord

from .rows import encode_json

if TYPE_CHECKING:
    import psycopg

NOW = "extract(epoch FROM clock_timestamp())::float8"


def load(conn: psycopg.Connection[Any], session_id: str) -> SessionRecord:
    row = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s", (session_id,)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"session {session_id!r} not found")
    return session_from_row(row)


def insert(conn: psycopg.Connection[Any], new: NewSession) -> SessionRecord:
    """Insert a checked :class:`NewSession` and its lease row (refused if the id is taken)."""
    sid = new.id or uuid.uuid4().hex
    if new.parent_id is not None:
        parent = conn.execute("SELECT 1 FROM sessions WHERE id = %s", (new.parent_id,)).fetchone()
        if parent is None:
            raise NotFoundError(f"parent session {new.parent_id!r} not found")
    row = conn.execute(
        "INSERT INTO sessions (id, title, cwd, goal, routing, model, provider, parent_id, "
        f"created_at, updated_at) VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s, {NOW}, "
        f"{NOW}) ON CONFLICT (id) DO NOTHING RETURNING {SESSION_COLUMNS}",
        (
            sid,
            new.title,
            new.cwd,
            new.goal,
            encode_json(new.routing, "routing"),
            new.model,
            new.provider,
            new.parent_id,
        ),
    ).fetchone()
    if row is None:
        raise duplicate_session(sid)
    conn.execute("INSERT INTO leases (session_id) VALUES (%s)", (sid,))
    return session_from_row(row)


def blob_stored(conn: psycopg.Connection[Any], digest: str, kind: str) -> bool:
    found = conn.execute(
        "SELECT 1 FROM blobs WHERE digest = %s AND kind = %s", (digest, kind)
    ).fetchone()
    return found is not None


def update(conn: psycopg.Connection[Any], session_id: str, fields: dict[str, Any]) -> SessionRecord:
    """Write checked ``update_session`` fields (hashes checked against the blobs here)."""
    from psycopg import sql

    current = load(conn, session_id)
    if not fields:
        return current
    require_hashes(fields, lambda digest, kind: blob_stored(conn, digest, kind), "update_session: ")
    sets: list[sql.Composable] = []
    values: list[Any] = []
    for key, value in fields.items():
        if key == "routing":
            sets.append(sql.SQL("routing = %s::jsonb"))
            values.append(encode_json(value, "routing"))
        else:
            sets.append(sql.SQL("{} = %s").format(sql.Identifier(key)))
            values.append(value)
    sets.append(sql.SQL(f"updated_at = {NOW}"))
    query = sql.SQL("UPDATE sessions SET {} WHERE id = %s RETURNING {}").format(
        sql.SQL(", ").join(sets), sql.SQL(SESSION_COLUMNS)
    )
    row = conn.execute(query, [*values, session_id]).fetchone()
    assert row is not None
    return session_from_row(row)


def end(conn: psycopg.Connection[Any], session_id: str, reason: str) -> SessionRecord:
    """End the session unless it already ended (the first end wins); the stored record."""
    row = conn.execute(
        f"UPDATE sessions SET end_reason = %s, ended_at = {NOW}, updated_at = {NOW} "
        f"WHERE id = %s AND {END_ONCE_SQL} RETURNING {SESSION_COLUMNS}",
        (reason, session_id),
    ).fetchone()
    if row is None:  # ended before, or no such session
        return load(conn, session_id)
    return session_from_row(row)
