"""OpenAI Agents SDK items <-> hermes-core messages, without loss.

The Agents SDK keeps a conversation as a list of Responses-API *input items*
(plain dicts): messages of any role, ``function_call`` / ``function_call_output``
pairs, ``reasoning`` items, hosted-tool calls and more. hermes-core keeps
chat-completions :class:`~hermes_hookspecs.Message` rows, which is what the
compressor, the summarizers and session search understand. This module maps
one to the other:

- a user, system or developer message is one ``user`` / ``system`` row;
- the assistant side of one model response (its ``reasoning``, its output
  ``message`` items, its ``function_call`` items and any other item the model
  produced) is ONE ``assistant`` row whose ``tool_calls`` are the calls, so
  the compressor's tool-pair rule (an assistant message and the tool results
  after it are cut together) holds for the SDK's parallel calls too;
- a ``function_call_output`` (and the outputs of custom, computer, shell and
  apply-patch calls) is one ``tool`` row.

Every SDK item is kept verbatim in the row's ``provider_item`` under the key
``"agents_sdk"``, except the fields the message itself holds (the text, the
tool output, the call's name and arguments): those are *slots*, filled back
from the message when the items are rebuilt. A slot is used only when filling
it reproduces the item exactly (checked at write time), so the round trip is
lossless, the text is counted and stored once, and a compaction that rewrites
a message (a pruned tool output, cut arguments) is what the SDK sees next.
Rows hermes-core wrote itself (a compaction summary, a stub result, a session
recorded through :meth:`hermes_core.runtime.Session.turn`) become fresh items.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from hermes_hookspecs import Message, ToolCall, ToolFunction, ValidationError
from hermes_hookspecs.messages import check_unicode

#: the key of the SDK items in ``Message.provider_item``
PROVIDER_KEY = "agents_sdk"

#: call item type -> the type of the item that answers it
CALL_OUTPUTS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
OUTPUT_TYPES = frozenset(CALL_OUTPUTS.values())
ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}

Item = dict[str, Any]


def _fail(index: int, problem: str) -> ValidationError:
    return ValidationError(f"invalid Agents SDK item {index}: {problem}")


def check_item(item: Any, index: int) -> Item:
    """Validate the shape of one SDK item; raise :class:`ValidationError` naming the problem."""
    if not isinstance(item, dict):
        raise _fail(index, f"expected a dict, got {type(item).__name__} {item!r:.60}")
    try:
        json.dumps(item, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise _fail(index, f"not JSON-serializable ({exc})") from None
    try:
        check_unicode(item, f"item {index}")
    except ValueError as exc:
        raise _fail(index, str(exc)) from None
    kind = item.get("type")
    if kind is not None and not isinstance(kind, str):
        raise _fail(index, f"'type' must be a string, got {kind!r:.60}")
    if kind in (None, "message"):
        role = item.get("role")
        if role not in ROLES:
            raise _fail(
                index,
                f"a message needs 'role' in {sorted(ROLES)}, got {role!r:.60} (item {kind!r})",
            )
        content = item.get("content")
        if not isinstance(content, str | list):
            raise _fail(index, f"message 'content' must be a string or a list, got {content!r:.60}")
        if isinstance(content, list):
            for j, part in enumerate(content):
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    raise _fail(index, f"content part {j} has no string 'type': {part!r:.60}")
        return item
    if kind in CALL_OUTPUTS or kind in OUTPUT_TYPES:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _fail(index, f"a {kind} item needs a non-empty string 'call_id'")
    if kind == "function_call":
        for key in ("name", "arguments"):
            if not isinstance(item.get(key), str) or (key == "name" and not item[key]):
                raise _fail(index, f"a function_call needs a string {key!r}, got {item.get(key)!r}")
    if kind == "function_call_output" and not isinstance(item.get("output"), str | list):
        raise _fail(index, f"a function_call_output needs 'output' (str or list), got {item!r:.80}")
    return item


def side(item: Item) -> str:
    """``"user"``, ``"system"``, ``"tool"`` or ``"assistant"`` (an assistant-side item)."""
    kind = item.get("type")
    if kind in (None, "message"):
        return ROLES[item["role"]]
    if kind in OUTPUT_TYPES:
        return "tool"
    return "assistant"


# --------------------------------------------------------------------------- items -> message


def _text_parts(items: Sequence[Item]) -> list[tuple[int, int]]:
    """(item, part) positions of the assistant text parts of a group."""
    out = []
    for i, item in enumerate(items):
        if item.get("type", "message") == "message" and isinstance(item.get("content"), list):
            for j, part in enumerate(item["content"]):
                if part.get("type") in ("output_text", "refusal", "text", "input_text"):
                    out.append((i, j))
        elif item.get("type", "message") == "message" and isinstance(item.get("content"), str):
            out.append((i, -1))
    return out


def _part_text(item: Item, part: int) -> str:
    if part < 0:
        return str(item["content"])
    value = item["content"][part]
    return str(value.get("text", value.get("refusal", "")))


def _arguments(raw: str) -> str:
    """Call arguments as JSON text (a model's invalid JSON is kept as a JSON string)."""
    try:
        json.loads(raw)
        return raw
    except ValueError:
        return json.dumps(raw)


def _message(items: Sequence[Item], role: str) -> Message:
    """The canonical message of a row (what compression, summaries and search read)."""
    if role in ("user", "system"):
        (item,) = items
        return Message(role="user" if role == "user" else "system", content=item["content"])
    if role == "tool":
        (item,) = items
        output = item.get("output")
        content: Any = output if isinstance(output, str | list) else json.dumps(output)
        if isinstance(content, list) and not all(
            isinstance(p, dict) and isinstance(p.get("type"), str) for p in content
        ):
            content = json.dumps(content)
        return Message(role="tool", tool_call_id=item["call_id"], content=content)
    texts = [_part_text(items[i], j) for i, j in _text_parts(items)]
    calls = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            arguments = _arguments(item["arguments"])
            calls.append(
                ToolCall(
                    id=item["call_id"],
                    function=ToolFunction(name=item["name"], arguments=arguments),
                )
            )
        elif kind in CALL_OUTPUTS:
            name = (
                item.get("name") if isinstance(item.get("name"), str) and item.get("name") else kind
            )
            calls.append(ToolCall(id=item["call_id"], function=ToolFunction(name=str(name))))
    return Message(
        role="assistant", content="\n".join(texts) if texts else None, tool_calls=calls or None
    )


def _residual(items: Sequence[Item], role: str) -> tuple[list[Item], list[dict[str, Any]]]:
    """The items less their slots, and the slots (see the module docstring)."""
    rest = [copy.deepcopy(item) for item in items]
    slots: list[dict[str, Any]] = []
    if role in ("user", "system"):
        rest[0].pop("content")
        slots.append({"field": "content", "item": 0})
    elif role == "tool":
        if isinstance(rest[0].get("output"), str):
            rest[0].pop("output")
            slots.append({"field": "output", "item": 0})
    else:
        parts = _text_parts(items)
        if len(parts) == 1:
            i, j = parts[0]
            if j < 0:
                rest[i].pop("content")
            elif "text" in rest[i]["content"][j]:
                rest[i]["content"][j].pop("text")
            else:
                parts = []
            if parts:
                slots.append({"field": "text", "item": i, "part": j})
        k = 0
        for i, item in enumerate(items):
            if item.get("type") in CALL_OUTPUTS:
                if item["type"] == "function_call":
                    for key in ("call_id", "name", "arguments"):
                        rest[i].pop(key)
                    slots.append({"field": "call", "item": i, "call": k})
                k += 1
    return rest, slots


def to_message(items: Sequence[Item], role: str) -> Message:
    """One row's items as a :class:`Message` holding them (lossless, see the module docstring)."""
    message = _message(items, role)
    rest, slots = _residual(items, role)
    stored = {PROVIDER_KEY: {"items": rest, "slots": slots}}
    candidate = message.model_copy(update={"provider_item": stored})
    if to_items(candidate) != list(items):  # a shape the slots cannot rebuild: keep it all
        stored = {PROVIDER_KEY: {"items": [copy.deepcopy(i) for i in items], "slots": []}}
        candidate = message.model_copy(update={"provider_item": stored})
    return candidate


def to_messages(items: Sequence[Any]) -> list[Message]:
    """Validate SDK items and group them into rows (all or nothing).

    :raises ValidationError: an item is malformed; the message names its index.
    """
    checked = [check_item(item, index) for index, item in enumerate(items)]
    rows: list[Message] = []
    group: list[Item] = []
    start = 0
    for index, item in enumerate(checked):
        where = side(item)
        if where == "assistant":
            if not group:
                start = index
            group.append(item)
            continue
        if group:
            rows.append(_build(group, "assistant", start))
            group = []
        rows.append(_build([item], where, index))
    if group:
        rows.append(_build(group, "assistant", start))
    return rows


def _build(items: list[Item], role: str, index: int) -> Message:
    try:
        return to_message(items, role)
    except PydanticValidationError as exc:
        problems = "; ".join(e["msg"] for e in exc.errors())
        raise _fail(index, problems) from None


# --------------------------------------------------------------------------- message -> items


def to_items(message: Message, output_types: dict[str, str] | None = None) -> list[Item]:
    """The SDK items of one stored row (its own items, or fresh ones for hermes-core's rows).

    :param output_types: call id -> output item type, collected from earlier
        rows, so a stub result answering a custom tool call gets the right type.
    """
    stored = (message.provider_item or {}).get(PROVIDER_KEY)
    if isinstance(stored, dict) and isinstance(stored.get("items"), list):
        return _fill(message, stored["items"], stored.get("slots") or [])
    return _fresh(message, output_types or {})


def _fill(message: Message, rest: list[Item], slots: list[dict[str, Any]]) -> list[Item]:
    items = copy.deepcopy(rest)
    calls = list(message.tool_calls or [])
    drop: set[int] = set()
    for slot in slots:
        item = items[slot["item"]]
        field = slot["field"]
        if field == "content":
            item["content"] = message.content if message.content is not None else ""
        elif field == "output":
            item["output"] = message.content if isinstance(message.content, str) else message.text()
        elif field == "text":
            if slot["part"] < 0:
                item["content"] = message.text()
            else:
                item["content"][slot["part"]]["text"] = message.text()
        elif field == "call":
            k = slot["call"]
            if k >= len(calls):
                drop.add(slot["item"])
                continue
            call = calls[k]
            item.update(call_id=call.id, name=call.function.name, arguments=call.function.arguments)
    return [item for i, item in enumerate(items) if i not in drop]


def _fresh(message: Message, output_types: dict[str, str]) -> list[Item]:
    if message.role == "tool":
        kind = output_types.get(message.tool_call_id or "", "function_call_output")
        output = message.content if isinstance(message.content, str) else message.text()
        return [{"type": kind, "call_id": message.tool_call_id, "output": output}]
    items: list[Item] = []
    if message.content is not None or not message.tool_calls:
        content = message.content if message.content is not None else ""
        if message.role == "assistant":
            content = message.text()
        items.append({"role": message.role, "content": content})
    for call in message.tool_calls or []:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.function.name,
                "arguments": call.function.arguments,
            }
        )
    return items


def rows_to_items(messages: Sequence[Message]) -> list[Item]:
    """The SDK items of a sequence of rows, in order."""
    out: list[Item] = []
    output_types: dict[str, str] = {}
    for message in messages:
        items = to_items(message, output_types)
        for item in items:
            if item.get("type") in CALL_OUTPUTS and isinstance(item.get("call_id"), str):
                output_types[item["call_id"]] = CALL_OUTPUTS[item["type"]]
        out.extend(items)
    return out
