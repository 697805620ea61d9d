"""``archive_and_compact`` on PostgreSQL: execute the store kit's plan in one transaction.

The plan (what is inserted where, which rows move, the rotation's child) is
:func:`hermes_core.storekit.plan_compaction`'s; this module writes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_core.storekit import (
    END_ONCE_SQL,
    CompactionRequest,
    duplicate_session,
    plan_compaction,
    require_blobs,
)
from hermes_hookspecs.records import (
    CompactionCommit,
    CompactionEvent,
    ContinuationUpdate,
    LeaseGrant,
    NewSession,
    StoredMessage,
)

from . import leases
from .rows import MESSAGE_COLUMNS, encode_json, message_from_row
from .writes import insert_messages, lock_session_record, origin_roots

if TYPE_CHECKING:
    import psycopg

NOW = "extract(epoch FROM clock_timestamp())::float8"
#: the position a new session's first message takes (the schema's default ``next_position``)
FIRST_POSITION = 0


def _late_rows(
    conn: psycopg.Connection[Any], session_id: str, watermark: int
) -> list[StoredMessage]:
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = %s AND active AND id > %s "
        "ORDER BY position",
        (session_id, watermark),
    ).fetchall()
    return [message_from_row(row) for row in rows]


def _record_event(conn: psycopg.Connection[Any], event: CompactionEvent) -> None:
    conn.execute(
        "INSERT INTO compaction_events (session_id, engine, backend, tokens_before, "
        "tokens_after, summarizer, fallback, detail, created_at) "
        f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, {NOW}))",
        (
            event.session_id,
            event.engine,
            event.backend,
            event.tokens_before,
            event.tokens_after,
            event.summarizer,
            event.fallback,
            encode_json(event.detail, "event.detail"),
            event.created_at,
        ),
    )


def _apply_update(
    conn: psycopg.Connection[Any], session_id: str, update: ContinuationUpdate | None
) -> None:
    """Write ``update`` onto the continuing session (blobs already checked)."""
    if update is None:
        return
    conn.execute(
        "UPDATE sessions SET system_prompt_hash = coalesce(%s, system_prompt_hash), "
        "tools_hash = coalesce(%s, tools_hash), "
        "routing = coalesce(%s::jsonb, routing) WHERE id = %s",
        (
            update.system_prompt_hash,
            update.tools_hash,
            None if update.routing is None else encode_json(update.routing, "update.routing"),
            session_id,
        ),
    )


def _create_child(
    conn: psycopg.Connection[Any],
    child: NewSession,
    hashes: tuple[str | None, str | None],
    compression_count: int,
    next_position: int,
) -> None:
    """Insert the planned child session (its fields already inherited by the plan)."""
    row = conn.execute(
        "INSERT INTO sessions (id, title, cwd, goal, routing, model, provider, parent_id, "
        "created_at, updated_at, system_prompt_hash, tools_hash, compression_count, "
        f"next_position) VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s, {NOW}, {NOW}, "
        "%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id",
        (
            child.id,
            child.title,
            child.cwd,
            child.goal,
            encode_json(child.routing, "child.routing"),
            child.model,
            child.provider,
            child.parent_id,
            *hashes,
            compression_count,
            next_position,
        ),
    ).fetchone()
    if row is None:
        assert child.id is not None
        raise duplicate_session(child.id)
    conn.execute("INSERT INTO leases (session_id) VALUES (%s)", (child.id,))


def archive_and_compact(
    conn: psycopg.Connection[Any],
    session_id: str,
    request: CompactionRequest,
    *,
    lease: LeaseGrant | None,
    cap: int,
) -> CompactionCommit:
    """Run inside the caller's transaction (see :meth:`SessionStore.archive_and_compact`)."""
    next_position, parent = lock_session_record(conn, session_id, "compact")
    leases.fence(conn, session_id, lease)
    require_blobs(
        request.update,
        lambda digest, kind: (
            conn.execute(
                "SELECT 1 FROM blobs WHERE digest = %s AND kind = %s", (digest, kind)
            ).fetchone()
            is not None
        ),
    )
    late = _late_rows(conn, session_id, request.watermark)
    plan = plan_compaction(parent, next_position, request, late, first_position=FIRST_POSITION)
    roots = origin_roots(conn, plan.inserts, "new_active")
    archived = conn.execute(
        "UPDATE messages SET active = false, compacted = true "
        "WHERE session_id = %s AND active AND id <= %s",
        (session_id, request.watermark),
    ).rowcount
    if plan.in_place:
        if plan.moves:
            conn.execute(
                "UPDATE messages m SET position = v.pos "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, pos) WHERE m.id = v.id",
                ([mid for mid, _ in plan.moves], [pos for _, pos in plan.moves]),
            )
        conn.execute(
            f"UPDATE sessions SET next_position = %s, compression_count = %s, updated_at = {NOW} "
            "WHERE id = %s",
            (plan.next_position, plan.compression_count, session_id),
        )
    else:
        assert plan.child is not None
        if plan.retire:
            conn.execute(
                "UPDATE messages SET active = false, compacted = true WHERE id = ANY(%s::bigint[])",
                (plan.retire,),
            )
        # the parent ends before the child is created, so the child (the live session) is the
        # more recently updated of the two and lists first, as in every store
        conn.execute(
            f"UPDATE sessions SET end_reason = 'compression', ended_at = {NOW}, "
            f"updated_at = {NOW} WHERE id = %s AND {END_ONCE_SQL}",
            (session_id,),
        )
        _create_child(
            conn,
            plan.child,
            (plan.child_system_prompt_hash, plan.child_tools_hash),
            plan.compression_count,
            plan.next_position,
        )
    inserted = insert_messages(
        conn,
        plan.continuing_id,
        plan.inserts,
        start_position=plan.first_position,
        roots=roots,
        cap=cap,
        what="new_active",
    )
    if plan.event is not None:
        _record_event(conn, plan.event)
    _apply_update(conn, plan.continuing_id, plan.update)
    return plan.commit(archived, [row[0] for row in inserted])
