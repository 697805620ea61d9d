"""Importer for Agent Data Protocol trajectories (``adp``).

The Agent Data Protocol (neulab/agent-data-protocol) is the standard form
agent data sets are converted to: a JSON list of trajectories (one object,
or JSONL with one trajectory per line, is read too), each
``{"id", "content": [item...], "details", "schema_version"?}`` where every
item has a ``class_``:

* ``text_observation`` (``source``: ``user`` / ``environment`` / ``agent``),
  ``image_observation``, ``web_observation``: what the agent received;
* ``code_action`` (``language``, ``content``), ``api_action`` (``function``,
  ``kwargs``), ``message_action`` (``content``): what it did, each with an
  optional ``description`` (the visible reasoning before it).

Mapping: a user observation is a user message; an action is an assistant
message (``description`` then, for a message action, ``content``) whose
tool call is ``execute_<language>`` with ``{"code": content}`` or the API
function with its ``kwargs``; consecutive actions before any observation are
one assistant message with several calls. An observation answers the call
with its ``tool_call_id`` (schema 1.3+) or, in older data without ids, the
action right before it (the protocol's own adjacency rule); an environment
observation that answers nothing is a user message marked
``harness="adp.environment"``; an agent-sourced observation is assistant
text. ``reasoning_content`` is not replayed (counted in ``skipped``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_hookspecs import (
    ImportedConversation,
    Importer,
    ImportFormatError,
    Recognition,
    hookimpl,
)

from .builder import CallSpec, ConversationBuilder
from .reading import ImportLimits, decode_head, load_json_document, read_text

FORMAT = "adp"
_ACTIONS = frozenset({"code_action", "api_action", "message_action"})
_OBSERVATIONS = frozenset({"text_observation", "image_observation", "web_observation"})
_CLASS = re.compile(
    rb'"class_"\s*:\s*"(text_observation|code_action|api_action|message_action|'
    rb"image_observation|web_observation|TextObservation|CodeAction|ApiAction|MessageAction|"
    rb'ImageObservation|WebObservation)"'
)


def _class(item: dict[str, Any]) -> str:
    """``class_`` in snake case (the schema's docs also show ``TextObservation``)."""
    raw = str(item.get("class_") or "")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", raw).lower()


class AdpImporter(Importer):
    """Agent Data Protocol standardized trajectories (``sample_std.json`` and data sets)."""

    name = FORMAT
    description = "Agent Data Protocol trajectories (JSON list or JSONL of trajectories)"

    def __init__(self, *, limits: ImportLimits | None = None) -> None:
        self.limits = limits

    def sniff(self, path: Path, head: bytes) -> bool:
        return self.recognise(path, head).matched

    def recognise(self, path: Path, sample: bytes) -> Recognition:
        data = decode_head(sample)
        start = data.lstrip()[:1]
        classes = len(_CLASS.findall(data))
        if start not in (b"[", b"{"):
            return Recognition(matched=False, reason="not a JSON document or JSONL")
        if classes and re.search(rb'"content"\s*:\s*\[', data):
            return Recognition(matched=True, score=1.0, reason="trajectory items with class_")
        if classes:
            return Recognition(
                matched=False, score=0.5, reason="ADP item classes but no 'content' list"
            )
        return Recognition(
            matched=False, reason="no item with an ADP 'class_' (text_observation, code_action...)"
        )

    def load(self, path: Path) -> list[ImportedConversation]:
        trajectories = self._trajectories(path)
        conversations = []
        for number, trajectory in enumerate(trajectories, start=1):
            conversations.append(_conversation(path, number, trajectory))
        if not conversations:
            raise ImportFormatError(f"{path}:1: no trajectory found")
        return conversations

    def _trajectories(self, path: Path) -> list[dict[str, Any]]:
        text = read_text(path, self.limits)
        stripped = text.lstrip()
        if stripped.startswith("{") and "\n{" in stripped.rstrip():  # JSONL
            from .reading import iter_jsonl

            values = [record.value for record in iter_jsonl(path, self.limits)]
        else:
            document = load_json_document(path, self.limits)
            values = document if isinstance(document, list) else [document]
        out = []
        for index, value in enumerate(values, start=1):
            if not isinstance(value, dict) or not isinstance(value.get("content"), list):
                raise ImportFormatError(
                    f"{path}: trajectory {index}: expected an object with a 'content' list"
                    f" (got {type(value).__name__})"
                )
            out.append(value)
        return out


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def _observation_text(kind: str, item: dict[str, Any]) -> str:
    if kind == "image_observation":
        return "[image]"
    if kind == "web_observation":
        parts = [f"URL: {item['url']}" if item.get("url") else ""]
        parts.append(_text(item.get("axtree") or item.get("html")))
        return "\n".join(part for part in parts if part) or "[web page]"
    return _text(item.get("content"))


def _conversation(path: Path, number: int, trajectory: dict[str, Any]) -> ImportedConversation:
    where = f"trajectory {number} ({str(trajectory.get('id'))[:60]})"
    builder = ConversationBuilder(str(path), where=where)
    skipped: Counter[str] = Counter()
    run = 0  # actions in the same run (no observation between) share one assistant message
    open_calls: list[str] = []  # ids of the run's calls not yet answered, in order
    generated = 0
    used_ids: set[str] = set()
    last_action: str | None = None  # the call of the item right before, if it was an action
    for position, item in enumerate(trajectory["content"], start=1):
        if not isinstance(item, dict):
            raise builder.error(None, f"item {position} is not an object")
        kind = _class(item)
        previous_action, last_action = last_action, None
        if item.get("reasoning_content"):
            skipped["reasoning_content"] += 1
        if kind in _ACTIONS:
            description = _text(item.get("description")).strip()
            if kind == "message_action":
                body = _text(item.get("content"))
                text = f"{description}\n\n{body}" if description and body else description or body
                run += 1
                builder.assistant(text or None, line=position, key=f"run-{run}")
                run += 1
                open_calls = []
                continue
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id or call_id in used_ids:
                generated += 1
                call_id = f"call_{generated:06d}"
                while call_id in used_ids:
                    generated += 1
                    call_id = f"call_{generated:06d}"
            used_ids.add(call_id)
            if kind == "code_action":
                language = str(item.get("language") or "code")
                name = f"execute_{re.sub(r'[^A-Za-z0-9_]', '_', language)}"
                arguments = json.dumps({"code": _text(item.get("content"))}, ensure_ascii=False)
            else:
                name = str(item.get("function") or "")
                kwargs = item.get("kwargs")
                arguments = json.dumps(
                    kwargs if isinstance(kwargs, dict) else {}, ensure_ascii=False
                )
            builder.assistant(
                description or None,
                [CallSpec(id=call_id, name=name, arguments=arguments, line=position)],
                line=position,
                key=f"run-{run}",
            )
            open_calls.append(call_id)
            last_action = call_id
        elif kind in _OBSERVATIONS:
            text = _observation_text(kind, item)
            source = item.get("source")
            linked = item.get("tool_call_id")
            answers: str | None = None
            if isinstance(linked, str) and linked:
                # an explicit link: the builder names an unknown or late call id
                builder.tool_result(linked, text, line=position)
                if linked in open_calls:
                    open_calls.remove(linked)
                if not open_calls:
                    run += 1
                continue
            elif not isinstance(linked, str) and previous_action in open_calls:
                # data without ids: the protocol's adjacency rule (an observation right
                # after an action is its result, whatever its source says)
                answers = previous_action
            if answers is not None:
                open_calls.remove(answers)
                builder.tool_result(answers, text, line=position)
                if not open_calls:
                    run += 1
                continue
            run += 1
            open_calls = []
            if source == "agent":
                builder.assistant(text or None, line=position, key=f"run-{run}")
                run += 1
            elif source == "environment":
                builder.plain("user", text, line=position, harness="adp.environment")
            else:
                speaker = item.get("name")
                builder.plain(
                    "user",
                    text,
                    line=position,
                    name=speaker if isinstance(speaker, str) and speaker else None,
                )
        else:
            skipped[f"item.{kind or 'without_class'}"] += 1
    details = trajectory.get("details")
    builder.metadata["trajectory_id"] = str(trajectory.get("id") or "")
    if trajectory.get("schema_version"):
        builder.metadata["schema_version"] = str(trajectory["schema_version"])
    if isinstance(details, dict) and details:
        builder.metadata["details"] = {
            k: v for k, v in details.items() if isinstance(v, str | int | float | bool)
        }
    conversation = builder.build(
        source_format=FORMAT,
        conversation_id=str(trajectory.get("id") or f"trajectory-{number}"),
        title=str(trajectory.get("id") or f"trajectory {number}"),
    )
    conversation.skipped.update(sorted(skipped.items()))
    return conversation


@hookimpl
def register_importers(register: Callable[[Importer], None]) -> None:
    """Register the ``adp`` importer."""
    register(AdpImporter())
