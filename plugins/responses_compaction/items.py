"""Conversion between stored messages and OpenAI Responses items.

Outbound, the active view is rendered exactly as the core renders the
session's requests (:func:`hermes_core.requests.message_to_response_items`
over each row's wire dict, ``api_content`` sidecar included), so the provider
compacts the bytes the model saw and can reuse their cached prefix; a stored
compaction record is sent as its opaque ``provider_item``, verbatim, and any
other provider item (another backend's marker) is refused.

Inbound, the compacted window's kept items are matched back to the rows they
came from (same item type, role and text), so a kept message keeps its
``api_content`` bytes, its token count and an ``origin_id`` pointing at the
archived row; an unmatched item is converted to a new message. The opaque
compaction item becomes ``Message(role="assistant", kind="compaction",
content=None, provider_item=<the exact dict>)``: no text, so summarizers and
the search index never see it.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hermes_core.requests import message_to_response_items
from hermes_hookspecs import (
    Message,
    NewMessage,
    StoredMessage,
    ToolCall,
    ToolFunction,
)
from hermes_hookspecs.messages import Role

from .client import COMPACTION_ITEM_TYPE, check_compaction_item
from .errors import ResponsesCompactionError

TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_ROLES: Mapping[str, Role] = MappingProxyType(
    {"user": "user", "assistant": "assistant", "developer": "system", "system": "system"}
)
_SERVER_KEYS = frozenset({"id", "status"})


# --------------------------------------------------------------------------- outbound


def is_compaction_record(message: Message) -> bool:
    """True for a stored opaque Responses compaction item."""
    return (
        message.kind == "compaction"
        and message.provider_item is not None
        and message.provider_item.get("type") == COMPACTION_ITEM_TYPE
    )


def row_items(row: StoredMessage) -> list[dict[str, Any]]:
    """One stored row as Responses input items (a compaction record: its item, verbatim)."""
    message = row.message
    if message.kind == "compaction":
        item = message.provider_item or {}
        if item.get("type") != COMPACTION_ITEM_TYPE:
            raise ResponsesCompactionError(
                "unsupported",
                f"message {row.id} holds a provider item of type {item.get('type')!r}, "
                "which the Responses API cannot read",
            )
        return [item]
    return message_to_response_items(row.to_api())


def input_items(rows: list[StoredMessage]) -> list[dict[str, Any]]:
    """The active view as the ``input`` of ``/responses/compact``."""
    items: list[dict[str, Any]] = []
    for row in rows:
        items.extend(row_items(row))
    return items


# --------------------------------------------------------------------------- inbound


def compaction_message(item: dict[str, Any]) -> Message:
    """The typed record for one opaque compaction item (checked, stored verbatim).

    Integrators on the in-line route record the ``compaction`` output item of
    a response with it, e.g. ``turn.record_response(compaction_message(item))``.
    """
    check_compaction_item(item, "compaction item")
    return Message(role="assistant", kind="compaction", content=None, provider_item=item)


def compaction_messages(output: list[dict[str, Any]]) -> list[Message]:
    """The compaction records among a ``/v1/responses`` answer's output items."""
    return [
        compaction_message(item)
        for item in output
        if isinstance(item, dict) and item.get("type") == COMPACTION_ITEM_TYPE
    ]


def _part_key(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") in TEXT_PARTS:
        return ["text", part.get("text", "")]
    if isinstance(part, dict):
        return {k: v for k, v in part.items() if k not in _SERVER_KEYS}
    return part


def item_key(item: dict[str, Any]) -> str:
    """What identifies an item across the round trip (server-added id/status ignored)."""
    kind = item.get("type", "message")
    if kind == "message":
        content = item.get("content")
        parts = (
            [["text", content]]
            if isinstance(content, str)
            else [_part_key(part) for part in content or []]
        )
        return json.dumps(["message", item.get("role"), parts], sort_keys=True)
    rest = {k: v for k, v in item.items() if k not in _SERVER_KEYS}
    return json.dumps(rest, sort_keys=True)


def _content(parts: Any) -> str | list[dict[str, Any]] | None:
    if parts is None or isinstance(parts, str):
        return parts
    converted: list[dict[str, Any]] = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ResponsesCompactionError(
                "malformed", f"content part {index} of a kept message has no type: {part!r:.80}"
            )
        if part["type"] in TEXT_PARTS:
            converted.append({"type": "text", "text": str(part.get("text", ""))})
        else:
            converted.append(dict(part))
    if all(p["type"] == "text" for p in converted):
        return "\n".join(p["text"] for p in converted)
    return converted


def item_message(item: dict[str, Any], where: str) -> Message:
    """Convert one kept item the view did not hold as a row into a message."""
    kind = item.get("type", "message")
    try:
        if kind == "message":
            role = _ROLES.get(str(item.get("role")))
            if role is None:
                raise ResponsesCompactionError(
                    "unsupported", f"{where} has role {item.get('role')!r}"
                )
            return Message(role=role, content=_content(item.get("content")))
        if kind == "function_call":
            call = ToolCall(
                id=str(item["call_id"]),
                function=ToolFunction(name=str(item["name"]), arguments=str(item["arguments"])),
            )
            return Message(role="assistant", content=None, tool_calls=[call])
        if kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            return Message(role="tool", tool_call_id=str(item["call_id"]), content=text)
    except ResponsesCompactionError:
        raise
    except (KeyError, ValueError) as exc:
        raise ResponsesCompactionError("malformed", f"{where} is invalid: {exc}") from None
    raise ResponsesCompactionError(
        "unsupported", f"{where} has type {kind!r}, which cannot be kept as a message"
    )


def window_messages(
    output: list[dict[str, Any]], rows: list[StoredMessage]
) -> tuple[list[NewMessage], int]:
    """The compacted window as the new active view; also how many rows it carried over.

    Kept items are matched back to the rows they render from (in order, each
    row used once); the last item must be the compaction item.
    """
    pending: dict[str, deque[tuple[StoredMessage, list[str]]]] = defaultdict(deque)
    for row in rows:
        keys = [item_key(item) for item in row_items(row)]
        if keys:
            pending[keys[0]].append((row, keys))
    keys = [item_key(item) if isinstance(item, dict) else "" for item in output]
    out: list[NewMessage] = []
    carried = 0
    index = 0
    last = len(output) - 1
    while index < last:
        item = output[index]
        where = f"output[{index}]"
        if not isinstance(item, dict):
            raise ResponsesCompactionError("malformed", f"{where} is not an object: {item!r:.80}")
        match = None
        for candidate in pending.get(keys[index], ()):
            row, row_keys = candidate
            if keys[index : index + len(row_keys)] == row_keys and index + len(row_keys) <= last:
                match = candidate
                break
        if match is not None:
            row, row_keys = match
            pending[keys[index]].remove(match)
            out.append(NewMessage.carried_from(row))
            carried += 1
            index += len(row_keys)
            continue
        out.append(NewMessage(message=item_message(item, where)))
        index += 1
    out.append(NewMessage(message=compaction_message(output[last])))
    return out, carried


def latest_compaction(rows: list[StoredMessage]) -> int | None:
    """Index of the newest stored compaction record in ``rows`` (None: there is none)."""
    for index in range(len(rows) - 1, -1, -1):
        if is_compaction_record(rows[index].message):
            return index
    return None
