"""Column lists and row mappers shared by SQL stores (same column order in every backend)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hermes_hookspecs.messages import Usage
from hermes_hookspecs.records import (
    CompactionEvent,
    NewMessage,
    PrefixEntry,
    SessionRecord,
    StoredMessage,
    UsageRecord,
)

SESSION_COLUMNS = (
    "id, title, cwd, goal, routing, model, provider, parent_id, end_reason, created_at, "
    "updated_at, ended_at, system_prompt_hash, tools_hash, compression_count"
)


def session_from_row(row: Sequence[Any]) -> SessionRecord:
    """A :class:`SessionRecord` from a row of :data:`SESSION_COLUMNS`."""
    (
        sid,
        title,
        cwd,
        goal,
        routing,
        model,
        provider,
        parent_id,
        end_reason,
        created_at,
        updated_at,
        ended_at,
        sp_hash,
        tools_hash,
        count,
    ) = row
    if not isinstance(routing, dict):  # JSON text (SQLite); PostgreSQL's jsonb arrives decoded
        routing = json.loads(routing or "{}")
    return SessionRecord(
        id=sid,
        title=title,
        cwd=cwd,
        goal=goal,
        routing=routing,
        model=model,
        provider=provider,
        parent_id=parent_id,
        end_reason=end_reason,
        created_at=created_at,
        updated_at=updated_at,
        ended_at=ended_at,
        system_prompt_hash=sp_hash,
        tools_hash=tools_hash,
        compression_count=count,
    )


def usage_from_row(row: Sequence[Any]) -> UsageRecord:
    sid, turn_id, inp, out, cread, cwrite, reasoning, model, created_at = row
    return UsageRecord(
        session_id=sid,
        turn_id=turn_id,
        usage=Usage(
            input_tokens=inp,
            output_tokens=out,
            cache_read_tokens=cread,
            cache_write_tokens=cwrite,
            reasoning_tokens=reasoning,
            model=model,
        ),
        created_at=created_at,
    )


PREFIX_COLUMNS = (
    "session_id, request_index, request_hash, request_tokens, shared_prefix_hash, "
    "shared_prefix_tokens, previous_tokens, break_reason, provider_cached_tokens, created_at"
)


def prefix_from_row(row: Sequence[Any]) -> PrefixEntry:
    names = [name.strip() for name in PREFIX_COLUMNS.split(",")]
    return PrefixEntry.model_validate(dict(zip(names, row, strict=True)))


EVENT_COLUMNS = (
    "session_id, engine, backend, tokens_before, tokens_after, summarizer, fallback, detail, "
    "created_at"
)


def event_from_row(row: Sequence[Any]) -> CompactionEvent:
    sid, engine, backend, before, after, summarizer, fallback, detail, created_at = row
    return CompactionEvent(
        session_id=sid,
        engine=engine,
        backend=backend,
        tokens_before=before,
        tokens_after=after,
        summarizer=summarizer,
        fallback=bool(fallback),
        detail=json.loads(detail),
        created_at=created_at,
    )


def stored_row(
    new: NewMessage, message_id: int, session_id: str, position: int, created_at: float
) -> StoredMessage:
    """The :class:`StoredMessage` a store returns for ``new`` once it is written (active)."""
    return StoredMessage(
        id=message_id,
        session_id=session_id,
        position=position,
        message=new.message,
        api_content=new.api_content,
        token_count=new.token_count,
        turn_id=new.turn_id,
        origin_id=new.origin_id,
        active=True,
        compacted=False,
        created_at=created_at,
        annotations=new.annotations,
    )
