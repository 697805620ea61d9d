"""``archive_and_compact`` in one transaction: in place, or rotated into a child session."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from hermes_core.storekit import (
    END_ONCE_SQL,
    check_new_session,
    check_tool_pairing,
    no_known_calls,
    pairing_rows,
    require_blobs,
)
from hermes_hookspecs.errors import StoreError, ValidationError
from hermes_hookspecs.records import (
    CompactionCommit,
    CompactionEvent,
    ContinuationUpdate,
    LeaseGrant,
    NewMessage,
    NewSession,
    StoredMessage,
)

from . import leases
from .rows import MESSAGE_COLUMNS, encode_json, message_from_row
from .writes import insert_messages, lock_session, origin_roots

if TYPE_CHECKING:
    import psycopg

NOW = "extract(epoch FROM clock_timestamp())::float8"


def _late_rows(
    conn: psycopg.Connection[Any], session_id: str, watermark: int
) -> list[StoredMessage]:
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = %s AND active AND id > %s "
        "ORDER BY position",
        (session_id, watermark),
    ).fetchall()
    return [message_from_row(row) for row in rows]


def _record_event(conn: psycopg.Connection[Any], event: CompactionEvent, allowed: set[str]) -> None:
    if not isinstance(event, CompactionEvent):
        raise ValidationError(f"event must be a CompactionEvent, got {type(event).__name__}")
    if event.session_id not in allowed:
        raise ValidationError(
            f"event.session_id = {event.session_id!r}; expected one of {sorted(allowed)}"
        )
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
    parent_id: str,
    child: NewSession | None,
    compression_count: int,
    next_position: int,
) -> str:
    spec = check_new_session(child) if child is not None else NewSession()
    if spec.parent_id not in (None, parent_id):
        raise ValidationError(
            f"child.parent_id = {spec.parent_id!r}; a rotated child's parent is {parent_id!r}"
        )
    child_id = spec.id or uuid.uuid4().hex
    row = conn.execute(
        "INSERT INTO sessions (id, title, cwd, goal, routing, model, provider, parent_id, "
        "created_at, updated_at, system_prompt_hash, tools_hash, compression_count, "
        "next_position) "
        "SELECT %s, coalesce(nullif(%s, ''), p.title), coalesce(nullif(%s, ''), p.cwd), "
        "coalesce(nullif(%s, ''), p.goal), "
        "CASE WHEN %s::jsonb = '{}'::jsonb THEN p.routing ELSE %s::jsonb END, "
        "coalesce(nullif(%s, ''), p.model), coalesce(nullif(%s, ''), p.provider), p.id, "
        f"{NOW}, {NOW}, p.system_prompt_hash, p.tools_hash, %s, %s "
        "FROM sessions p WHERE p.id = %s "
        "ON CONFLICT (id) DO NOTHING RETURNING id",
        (
            child_id,
            spec.title,
            spec.cwd,
            spec.goal,
            encode_json(spec.routing, "child.routing"),
            encode_json(spec.routing, "child.routing"),
            spec.model,
            spec.provider,
            compression_count,
            next_position,
            parent_id,
        ),
    ).fetchone()
    if row is None:
        raise StoreError(f"cannot rotate into child session {child_id!r}: that id already exists")
    conn.execute("INSERT INTO leases (session_id) VALUES (%s)", (child_id,))
    return child_id


def archive_and_compact(
    conn: psycopg.Connection[Any],
    session_id: str,
    new_active: list[NewMessage],
    *,
    watermark: int,
    lease: LeaseGrant | None,
    in_place: bool,
    child: NewSession | None,
    event: CompactionEvent | None,
    cap: int,
    update: ContinuationUpdate | None = None,
) -> CompactionCommit:
    """Run inside the caller's transaction (see :meth:`SessionStore.archive_and_compact`)."""
    next_position, count = lock_session(conn, session_id, "compact")
    leases.fence(conn, session_id, lease)
    require_blobs(
        update,
        lambda digest, kind: (
            conn.execute(
                "SELECT 1 FROM blobs WHERE digest = %s AND kind = %s", (digest, kind)
            ).fetchone()
            is not None
        ),
    )
    check_tool_pairing(pairing_rows(new_active), no_known_calls, "new_active")
    late = _late_rows(conn, session_id, watermark)
    if late:
        check_tool_pairing(
            pairing_rows([*new_active, *(NewMessage.carried_from(row) for row in late)]),
            no_known_calls,
            "active view after compaction (new_active + rows after the watermark)",
        )
    roots = origin_roots(conn, new_active, "new_active")
    archived = conn.execute(
        "UPDATE messages SET active = false, compacted = true "
        "WHERE session_id = %s AND active AND id <= %s",
        (session_id, watermark),
    ).rowcount

    if in_place:
        inserted = insert_messages(
            conn,
            session_id,
            new_active,
            start_position=next_position,
            roots=roots,
            cap=cap,
            what="new_active",
        )
        base = next_position + len(new_active)
        if late:
            conn.execute(
                "UPDATE messages m SET position = v.pos "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, pos) WHERE m.id = v.id",
                ([row.id for row in late], [base + i for i in range(len(late))]),
            )
        conn.execute(
            f"UPDATE sessions SET next_position = %s, compression_count = %s, updated_at = {NOW} "
            "WHERE id = %s",
            (base + len(late), count + 1, session_id),
        )
        if event is not None:
            _record_event(conn, event, {session_id})
        _apply_update(conn, session_id, update)
        return CompactionCommit(
            session_id=session_id,
            archived=archived,
            inserted=len(inserted),
            carried_after_watermark=len(late),
            active_ids=[row[0] for row in inserted] + [row.id for row in late],
        )

    # rotation: the parent keeps every row (now inactive) and ends; the child gets the view
    if late:
        conn.execute(
            "UPDATE messages SET active = false, compacted = true WHERE id = ANY(%s::bigint[])",
            ([row.id for row in late],),
        )
    carried = [NewMessage.carried_from(row) for row in late]
    child_rows = [*new_active, *carried]
    child_id = _create_child(conn, session_id, child, count + 1, len(child_rows))
    child_roots = roots + origin_roots(conn, carried, "carried")
    inserted = insert_messages(
        conn,
        child_id,
        child_rows,
        start_position=0,
        roots=child_roots,
        cap=cap,
        what="new_active",
    )
    conn.execute(
        f"UPDATE sessions SET end_reason = 'compression', ended_at = {NOW}, updated_at = {NOW} "
        f"WHERE id = %s AND {END_ONCE_SQL}",
        (session_id,),
    )
    if event is not None:
        _record_event(conn, event, {session_id, child_id})
    _apply_update(conn, child_id, update)
    return CompactionCommit(
        session_id=session_id,
        archived=archived,
        inserted=len(new_active),
        carried_after_watermark=len(late),
        child_session_id=child_id,
        active_ids=[row[0] for row in inserted],
    )
