"""Importer for OpenHands evaluation ``output.jsonl`` event streams (``openhands-events``).

Each line is one task instance and gives one conversation:

* the ``system`` action becomes the system message; the user ``message``
  action the task; agent ``message`` actions assistant text;
* tool actions (those with ``tool_call_metadata``) are grouped by
  ``model_response.id`` into one assistant message whose text is
  ``choices[0].message.content`` (or the action's ``thought``) and whose
  calls take their arguments from the matching ``tool_calls`` entry;
* observations with ``tool_call_metadata`` become ``tool`` messages;
  an ``error`` observation without it (a rejected tool call) becomes a user
  message, as OpenHands sends it (flag ``error_observation``);
* ``recall`` actions and observations and other bookkeeping events are
  dropped (counted).

Tool-call ids repeat across instances (llama-4 emitted ``toolu_01``,
``toolu_02``, ... in every run): they are scoped to their conversation.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_hookspecs import ImportedConversation, Importer, ImportFormatError, hookimpl

from .builder import CallSpec, ConversationBuilder
from .reading import (
    ImportLimits,
    as_dict,
    decode_head,
    first_line,
    flatten_content,
    iter_jsonl,
    json_arguments,
)

FORMAT = "openhands-events"
_SNIFF = re.compile(rb'^\{\s*"instance_id"\s*:')
_DROPPED_ACTIONS = frozenset({"recall", "change_agent_state", "null"})


class OpenHandsEventsImporter(Importer):
    """OpenHands evaluation ``output.jsonl`` (one instance's event history per line)."""

    name = FORMAT
    description = "OpenHands evaluation output.jsonl event streams (one conversation per line)"

    def __init__(self, *, limits: ImportLimits | None = None) -> None:
        self.limits = limits

    def sniff(self, path: Path, head: bytes) -> bool:
        line = first_line(decode_head(head))
        if not _SNIFF.match(line):
            return False
        return any(
            key in line for key in (b'"history"', b'"instruction"', b'"metadata"', b'"test_result"')
        )

    def load(self, path: Path) -> list[ImportedConversation]:
        conversations: list[ImportedConversation] = []
        for item in iter_jsonl(path, self.limits):
            conversations.append(_instance(path, item.value, item.line))
        if not conversations:
            raise ImportFormatError(f"{path}:1: empty file (no OpenHands instances)")
        return conversations


def _instance(path: Path, value: Any, line: int) -> ImportedConversation:
    if not isinstance(value, dict) or not isinstance(value.get("history"), list):
        raise ImportFormatError(f"{path}:{line}: expected an instance object with a 'history' list")
    instance_id = str(value.get("instance_id") or f"line-{line}")
    builder = ConversationBuilder(str(path))
    dropped: Counter[str] = Counter()
    for position, event in enumerate(value["history"]):
        if not isinstance(event, dict):
            raise ImportFormatError(f"{path}:{line}: history[{position}] is not an object")
        builder.where = f"instance {instance_id} event {event.get('id', position)}"
        if "action" in event:
            _action(builder, event, line, dropped)
        elif "observation" in event:
            _observation(builder, event, line, dropped)
        else:
            dropped["unknown_event"] += 1
    builder.where = f"instance {instance_id}"
    metadata = as_dict(value.get("metadata"))
    llm_config = as_dict(metadata.get("llm_config"))
    builder.metadata["line"] = line
    builder.metadata["instance_id"] = instance_id
    builder.metadata["agent_class"] = metadata.get("agent_class")
    builder.metadata["max_iterations"] = metadata.get("max_iterations")
    builder.metadata["error"] = value.get("error")
    builder.metadata["events"] = len(value["history"])
    if dropped:
        builder.metadata["dropped_events"] = dict(sorted(dropped.items()))
    return builder.build(
        source_format=FORMAT,
        skipped=dict(dropped),
        conversation_id=instance_id,
        title=instance_id,
        model=str(llm_config.get("model") or ""),
    )


def _action(
    builder: ConversationBuilder, event: dict[str, Any], line: int, dropped: Counter[str]
) -> None:
    action = event.get("action")
    args = as_dict(event.get("args"))
    metadata = event.get("tool_call_metadata")
    if isinstance(metadata, dict):
        _tool_action(builder, event, metadata, args, line)
        return
    if action == "system":
        builder.plain("system", flatten_content(args.get("content")), line=line)
    elif action == "message":
        text = flatten_content(args.get("content"))
        if event.get("source") == "user":
            builder.plain("user", text, line=line)
        else:
            builder.assistant(text or None, line=line)
    else:
        dropped[f"action.{action}"] += 1


def _tool_action(
    builder: ConversationBuilder,
    event: dict[str, Any],
    metadata: dict[str, Any],
    args: dict[str, Any],
    line: int,
) -> None:
    call_id = metadata.get("tool_call_id")
    name = metadata.get("function_name")
    if not isinstance(call_id, str) or not call_id:
        raise builder.error(line, "tool action has no tool_call_metadata.tool_call_id")
    response = as_dict(metadata.get("model_response"))
    response_id = response.get("id")
    message: dict[str, Any] = {}
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        candidate = choices[0].get("message")
        message = as_dict(candidate)
    arguments: str | None = None
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict) and call.get("id") == call_id:
            function = as_dict(call.get("function"))
            arguments = json_arguments(function.get("arguments", "{}"))
            name = function.get("name") or name
            break
    if arguments is None:
        arguments = json_arguments({k: v for k, v in args.items() if k != "thought"})
    text = flatten_content(message.get("content")) or str(args.get("thought") or "")
    spec = CallSpec(id=call_id, name=str(name or event.get("action") or ""), arguments=arguments)
    key = str(response_id) if response_id else f"event-{event.get('id')}"
    if builder.continues(key):
        text = ""
    builder.assistant(text or None, [spec], line=line, key=key)


def _observation(
    builder: ConversationBuilder, event: dict[str, Any], line: int, dropped: Counter[str]
) -> None:
    observation = event.get("observation")
    metadata = event.get("tool_call_metadata")
    content = flatten_content(event.get("content"))
    if isinstance(metadata, dict) and metadata.get("tool_call_id"):
        builder.tool_result(str(metadata["tool_call_id"]), content, line=line)
    elif observation == "error":
        builder.plain("user", content, line=line, flags=("error_observation",))
    else:
        dropped[f"observation.{observation}"] += 1


@hookimpl
def register_importers(register: Callable[[Importer], None]) -> None:
    """Register the ``openhands-events`` importer."""
    register(OpenHandsEventsImporter())
