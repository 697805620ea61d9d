"""Importer for OpenAI chat-completions message lists (``openai-chat``).

Accepted shapes:

* a JSON list of messages;
* ``{"messages": [...]}``, optionally with a ``response`` holding a
  ``ChatCompletion`` (an LLM completion log such as OpenHands'
  ``llm_completions/*.json``): its ``choices[0].message`` is appended as the
  final assistant turn.

Content given as a list of parts is flattened to text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_hookspecs import ImportedConversation, Importer, ImportFormatError, hookimpl

from .builder import CallSpec, ConversationBuilder
from .reading import (
    ImportLimits,
    decode_head,
    first_json_key,
    flatten_content,
    json_arguments,
    load_json_document,
)

FORMAT = "openai-chat"
_LIST_OF_MESSAGES = re.compile(rb'^\s*\[\s*(\]|\{\s*"(role|content|tool_calls|name)"\s*:)')


class OpenAIChatImporter(Importer):
    """Chat-completions messages, as a list or under ``"messages"``."""

    name = FORMAT
    description = (
        'OpenAI chat-completions messages: a JSON list or {"messages": [...]}'
        " (LLM completion logs append their response as the final assistant turn)"
    )

    def __init__(self, *, limits: ImportLimits | None = None) -> None:
        self.limits = limits

    def sniff(self, path: Path, head: bytes) -> bool:
        data = decode_head(head)
        if _LIST_OF_MESSAGES.match(data):
            return True
        return first_json_key(data) == "messages"

    def load(self, path: Path) -> list[ImportedConversation]:
        document = load_json_document(path, self.limits)
        response: Any = None
        extra: dict[str, Any] = {}
        if isinstance(document, list):
            raw_messages = document
        elif isinstance(document, dict) and isinstance(document.get("messages"), list):
            raw_messages = document["messages"]
            response = document.get("response")
            for key in ("timestamp", "cost"):
                if key in document:
                    extra[key] = document[key]
        else:
            raise ImportFormatError(
                f"{path}:1: expected a JSON list of messages or an object with a 'messages' list"
            )
        builder = ConversationBuilder(str(path))
        for index, raw in enumerate(raw_messages):
            _add_message(builder, raw, f"messages[{index}]")
        model = ""
        if response is not None:
            final, model = _response_message(path, response)
            _add_message(builder, final, "response.choices[0].message")
            builder.metadata["response_appended"] = True
        builder.where = ""
        builder.metadata.update(extra)
        builder.metadata["source_messages"] = len(raw_messages)
        return [
            builder.build(
                source_format=FORMAT,
                conversation_id=path.name.split(".")[0],
                model=model,
            )
        ]


def _response_message(path: Path, response: Any) -> tuple[dict[str, Any], str]:
    if not isinstance(response, dict):
        raise ImportFormatError(f"{path}: 'response' is not a ChatCompletion object")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ImportFormatError(f"{path}: 'response.choices' is empty or malformed")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ImportFormatError(f"{path}: 'response.choices[0].message' is missing")
    model = response.get("model")
    return message, model if isinstance(model, str) else ""


def _add_message(builder: ConversationBuilder, raw: Any, where: str) -> None:
    builder.where = where

    def fail(message: str) -> ImportFormatError:
        return builder.error(None, message)

    if not isinstance(raw, dict):
        raise fail(f"expected a message object, got {type(raw).__name__}")
    role = raw.get("role")
    content = flatten_content(raw.get("content"))
    if role in ("system", "developer"):
        builder.plain("system", content, line=0)
    elif role == "user":
        builder.plain("user", content, line=0)
    elif role == "assistant":
        specs = []
        for position, call in enumerate(raw.get("tool_calls") or []):
            if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                raise fail(f"tool_calls[{position}] has no 'function' object")
            function = call["function"]
            specs.append(
                CallSpec(
                    id=str(call.get("id") or ""),
                    name=str(function.get("name") or ""),
                    arguments=json_arguments(function.get("arguments", "{}")),
                )
            )
        builder.assistant(content or None, specs, line=0)
    elif role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise fail("tool message has no 'tool_call_id'")
        name = raw.get("name") if isinstance(raw.get("name"), str) else None
        builder.tool_result(call_id, content, line=0, name=name)
    else:
        raise fail(f"unknown role {role!r} (expected system, developer, user, assistant, tool)")


@hookimpl
def register_importers(register: Callable[[Importer], None]) -> None:
    """Register the ``openai-chat`` importer."""
    register(OpenAIChatImporter())
