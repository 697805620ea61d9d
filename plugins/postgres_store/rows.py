"""Converting between the contract's records and PostgreSQL rows.

Messages are stored as their JSON text (``message``) so they round-trip
exactly; ``api_content`` is stored as JSON text too, preserving the exact
bytes (key order included) once sent to the model. PostgreSQL ``text``
cannot hold NUL characters: JSON escapes them, and the search body replaces
them with spaces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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
from hermes_core.storekit import json_text
from hermes_core.storekit import (
    prefix_from_row as prefix_from_row,
)
from hermes_core.storekit import (
    session_from_row as session_from_row,
)
from hermes_core.storekit import (
    usage_from_row as usage_from_row,
)
from hermes_hookspecs.errors import ValidationError
from hermes_hookspecs.messages import Message, content_text
from hermes_hookspecs.records import (
    NewMessage,
    StoredMessage,
)

MESSAGE_COLUMNS = (
    "id, session_id, position, message, api_content, token_count, turn_id, origin_id, "
    "active, compacted, created_at, annotations"
)


def message_from_row(row: Sequence[Any]) -> StoredMessage:
    (
        mid,
        sid,
        position,
        message,
        api_content,
        token_count,
        turn_id,
        origin_id,
        active,
        compacted,
        created_at,
        annotations,
    ) = row
    return StoredMessage(
        id=mid,
        session_id=sid,
        position=position,
        message=Message.model_validate_json(message),
        api_content=None if api_content is None else json.loads(api_content),
        token_count=token_count,
        turn_id=turn_id,
        origin_id=origin_id,
        active=active,
        compacted=compacted,
        created_at=created_at,
        annotations={} if annotations is None else json.loads(annotations),
    )


def _no_nul(value: str | None, field: str) -> str | None:
    if value is not None and "\x00" in value:
        raise ValidationError(f"{field} contains a NUL character, which cannot be stored")
    return value


def encode_json(value: Any, field: str) -> str:
    """JSON text for a column (:func:`hermes_core.storekit.json_text`: refuses what cannot be
    encoded, and text that is not valid UTF-8)."""
    return json_text(value, field)


def search_body(message: Message, cap: int) -> str:
    """The text indexed for search (:func:`hermes_core.searchkit.searchable_text`), with
    NUL as a space (PostgreSQL text holds none)."""
    calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    return searchable_text(content_text(message.content), calls, cap).replace("\x00", " ")


def message_params(new: NewMessage, index: int, what: str) -> dict[str, Any]:
    """Column values of one new message (without session, position, origin root)."""
    msg = new.message
    field = f"{what}[{index}]"
    message_json = msg.model_dump_json(exclude_none=True)
    try:
        message_json.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{field}.message is not valid Unicode text ({exc.reason})") from None
    return {
        "role": msg.role,
        "kind": msg.kind,
        "message": message_json,
        "api_content": None
        if new.api_content is None
        else encode_json(new.api_content, f"{field}.api_content"),
        "token_count": new.token_count,
        "turn_id": _no_nul(new.turn_id, f"{field}.turn_id"),
        "origin_id": new.origin_id,
        "tool_call_ids": [call.id for call in msg.tool_calls] if msg.tool_calls else None,
        "annotations": encode_json(new.annotations, f"{field}.annotations")
        if new.annotations
        else None,
    }
