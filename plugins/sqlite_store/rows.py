"""Conversions between the contract's records and SQLite rows."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from hermes_core.searchkit import searchable_text
from hermes_core.storekit import (  # shared with every SQL store; re-exported here
    EVENT_COLUMNS as EVENT_COLUMNS,
)
from hermes_core.storekit import (
    PREFIX_COLUMNS as PREFIX_COLUMNS,
)
from hermes_core.storekit import (
    SESSION_COLUMNS as SESSION_COLUMNS,
)
from hermes_core.storekit import (
    event_from_row as event_from_row,
)
from hermes_core.storekit import (
    prefix_from_row as prefix_from_row,
)
from hermes_core.storekit import (
    session_from_row as session_from_row,
)
from hermes_core.storekit import (
    usage_from_row as usage_from_row,
)
from hermes_hookspecs.messages import Message, content_text
from hermes_hookspecs.records import (
    NewMessage,
    StoredMessage,
)

MESSAGE_COLUMNS = (
    "id, session_id, position, role, kind, content, content_parts, tool_calls, tool_call_id, "
    "name, summary, provider_item, api_content, token_count, turn_id, origin_id, active, "
    "compacted, created_at, annotations, harness"
)
INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, position, role, kind, content, content_parts, "
    "tool_calls, tool_call_id, name, summary, provider_item, api_content, token_count, "
    "turn_id, origin_id, origin_root, active, compacted, created_at, fts_cap, annotations, "
    "harness) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, ?, ?, ?, ?)"
)


def message_values(
    session_id: str,
    position: int,
    new: NewMessage,
    origin_root: int | None,
    created_at: float,
    fts_cap: int,
) -> tuple[Any, ...]:
    """Parameters for :data:`INSERT_MESSAGE`."""
    msg = new.message
    if isinstance(msg.content, list):
        content: str | None = content_text(msg.content)
        parts: str | None = json.dumps(msg.content, ensure_ascii=False)
    else:
        content, parts = msg.content, None
    calls = (
        json.dumps([call.model_dump() for call in msg.tool_calls], ensure_ascii=False)
        if msg.tool_calls
        else None
    )
    return (
        session_id,
        position,
        msg.role,
        msg.kind,
        content,
        parts,
        calls,
        msg.tool_call_id,
        msg.name,
        msg.summary.model_dump_json() if msg.summary is not None else None,
        json.dumps(msg.provider_item, ensure_ascii=False)
        if msg.provider_item is not None
        else None,
        json.dumps(new.api_content, ensure_ascii=False) if new.api_content is not None else None,
        new.token_count,
        new.turn_id,
        new.origin_id,
        origin_root,
        created_at,
        fts_cap,
        json.dumps(new.annotations, ensure_ascii=False) if new.annotations else None,
        msg.harness,
    )


def message_from_row(row: sqlite3.Row | tuple[Any, ...]) -> StoredMessage:
    (
        mid,
        sid,
        position,
        role,
        kind,
        content,
        parts,
        calls,
        call_id,
        name,
        summary,
        item,
        api_content,
        tokens,
        turn_id,
        origin_id,
        active,
        compacted,
        created_at,
        annotations,
        harness,
    ) = tuple(row)
    body: dict[str, Any] = {"role": role, "kind": kind}
    body["content"] = json.loads(parts) if parts is not None else content
    if calls is not None:
        body["tool_calls"] = json.loads(calls)
    if call_id is not None:
        body["tool_call_id"] = call_id
    if name is not None:
        body["name"] = name
    if summary is not None:
        body["summary"] = json.loads(summary)
    if item is not None:
        body["provider_item"] = json.loads(item)
    if harness is not None:
        body["harness"] = harness
    return StoredMessage(
        id=mid,
        session_id=sid,
        position=position,
        message=Message.model_validate(body),
        api_content=json.loads(api_content) if api_content is not None else None,
        token_count=tokens,
        turn_id=turn_id,
        origin_id=origin_id,
        active=bool(active),
        compacted=bool(compacted),
        created_at=created_at,
        annotations=json.loads(annotations) if annotations is not None else {},
    )


def search_text(content: str | None, calls: str | None, cap: int) -> str:
    """The text a row contributes to the indexes (mirrors the SQL of ``fts_text``):
    :func:`hermes_core.searchkit.searchable_text` of its columns."""
    pairs = []
    for call in json.loads(calls) if calls else []:
        function = call.get("function") or {}
        pairs.append((str(function.get("name", "")), str(function.get("arguments", ""))))
    return searchable_text(content or "", pairs, cap)
