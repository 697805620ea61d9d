"""``archive_and_compact`` on SQLite: execute the store kit's plan in one transaction.

The plan (what is inserted where, which rows move, the rotation's child) is
:func:`hermes_core.storekit.plan_compaction`'s; this module writes it.
"""

from __future__ import annotations

import sqlite3
import time

from hermes_core.storekit import (
    EVENT_COLUMNS,
    CompactionRequest,
    json_text,
    plan_compaction,
    require_blobs,
)
from hermes_hookspecs.records import CompactionCommit, LeaseGrant

from . import leases, messages, sessions


def archive_and_compact(
    conn: sqlite3.Connection,
    session_id: str,
    request: CompactionRequest,
    lease: LeaseGrant | None,
    cap: int,
) -> CompactionCommit:
    """Run inside the caller's write transaction (see :meth:`SessionStore.archive_and_compact`)."""
    parent = sessions.load(conn, session_id)
    sessions.check_open(conn, session_id, "compact")
    leases.fence(conn, session_id, lease)
    require_blobs(request.update, lambda digest, kind: sessions.blob_stored(conn, digest, kind))
    late = messages.select(
        conn,
        "session_id = ? AND active = 1 AND id > ? ORDER BY position",
        (session_id, request.watermark),
    )
    next_position = int(
        conn.execute("SELECT next_position FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
    )
    plan = plan_compaction(
        parent, next_position, request, late, first_position=sessions.FIRST_POSITION
    )
    now = time.time()
    archived = conn.execute(
        "UPDATE messages SET active = 0, compacted = 1 "
        "WHERE session_id = ? AND active = 1 AND id <= ?",
        (session_id, request.watermark),
    ).rowcount
    if plan.in_place:
        conn.executemany(
            "UPDATE messages SET position = ? WHERE id = ?",
            [(position, mid) for mid, position in plan.moves],
        )
        conn.execute(
            "UPDATE sessions SET compression_count = ?, next_position = ?, updated_at = ? "
            "WHERE id = ?",
            (plan.compression_count, plan.next_position, now, session_id),
        )
    else:
        assert plan.child is not None
        sessions.insert(
            conn,
            plan.child,
            now,
            system_prompt_hash=plan.child_system_prompt_hash,
            tools_hash=plan.child_tools_hash,
            compression_count=plan.compression_count,
            next_position=plan.next_position,
        )
        conn.executemany(
            "UPDATE messages SET active = 0, compacted = 1 WHERE id = ?",
            [(mid,) for mid in plan.retire],
        )
        sessions.end(conn, session_id, "compression", now)
    inserted = messages.insert(
        conn, plan.continuing_id, plan.first_position, plan.inserts, now, cap, "new_active"
    )
    update = plan.update
    if update is not None:
        conn.execute(
            "UPDATE sessions SET system_prompt_hash = coalesce(?, system_prompt_hash), "
            "tools_hash = coalesce(?, tools_hash), routing = coalesce(?, routing) WHERE id = ?",
            (
                update.system_prompt_hash,
                update.tools_hash,
                None if update.routing is None else json_text(update.routing, "update.routing"),
                plan.continuing_id,
            ),
        )
    event = plan.event
    if event is not None:
        conn.execute(
            f"INSERT INTO compaction_events ({EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                event.session_id,
                event.engine,
                event.backend,
                event.tokens_before,
                event.tokens_after,
                event.summarizer,
                int(event.fallback),
                json_text(event.detail, "event.detail"),
                event.created_at if event.created_at is not None else now,
            ),
        )
    return plan.commit(archived, [m.id for m in inserted])
