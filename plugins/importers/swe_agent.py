"""Importer for SWE-agent trajectories (``.traj``, ``swe-agent``).

The ``history`` list is the LLM conversation; it is imported message by
message:

* 1.x function calling: assistant ``tool_calls`` and ``tool`` messages
  (``tool_call_ids``) map directly;
* 0.x text actions: an assistant message with an ``action`` (and no
  ``tool_calls``) gets a synthetic call ``call_<history index>`` to
  ``bash`` with ``{"command": action}``, and the next ``user`` message (the
  observation) becomes its ``tool`` result. The assistant text is kept as
  the model wrote it (thought plus fenced command);
* ``is_demo`` messages (in-context demonstrations) are skipped unless
  ``include_demos`` is set, and counted in ``metadata["counts"]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_hookspecs import ImportedConversation, Importer, ImportFormatError, hookimpl

from .builder import CallSpec, ConversationBuilder
from .reading import (
    ImportLimits,
    as_dict,
    decode_head,
    first_json_key,
    flatten_content,
    json_arguments,
    load_json_document,
)

FORMAT = "swe-agent"
_TOP_KEYS = frozenset({"environment", "trajectory", "history", "info", "replay_config"})


class SweAgentImporter(Importer):
    """SWE-agent ``.traj`` files, 0.x text actions and 1.x function calling.

    :param include_demos: keep ``is_demo`` demonstration messages (flagged ``demo``).
    """

    name = FORMAT
    description = "SWE-agent .traj trajectories (0.x text actions, 1.x function calling)"

    def __init__(self, *, include_demos: bool = False, limits: ImportLimits | None = None) -> None:
        self.include_demos = include_demos
        self.limits = limits

    def sniff(self, path: Path, head: bytes) -> bool:
        data = decode_head(head)
        key = first_json_key(data)
        if key not in _TOP_KEYS:
            return False
        return b'"trajectory"' in data or b'"history"' in data or path.suffix == ".traj"

    def load(self, path: Path) -> list[ImportedConversation]:
        document = load_json_document(path, self.limits)
        if not isinstance(document, dict) or not isinstance(document.get("history"), list):
            raise ImportFormatError(f"{path}:1: expected a .traj object with a 'history' list")
        history: list[Any] = document["history"]
        builder = ConversationBuilder(str(path))
        function_calling = any(
            isinstance(m, dict) and (m.get("tool_calls") or m.get("role") == "tool")
            for m in history
        )
        pending_observation: str | None = None
        for index, message in enumerate(history):
            builder.where = f"history[{index}]"
            if not isinstance(message, dict):
                raise builder.error(None, "message is not an object")
            if message.get("is_demo") and not self.include_demos:
                builder.counts["demo_messages_skipped"] += 1
                continue
            flags = ("demo",) if message.get("is_demo") else ()
            role = message.get("role")
            content = flatten_content(message.get("content"))
            if role == "user" and pending_observation is not None:
                builder.tool_result(pending_observation, content, line=0)
                pending_observation = None
                continue
            pending_observation = None
            if role == "system":
                builder.plain("system", content, line=0, flags=flags)
            elif role == "user":
                builder.plain("user", content, line=0, flags=flags)
            elif role == "assistant":
                pending_observation = _assistant(builder, message, content, index, flags)
            elif role == "tool":
                ids = message.get("tool_call_ids") or (
                    [message["tool_call_id"]] if message.get("tool_call_id") else []
                )
                if not ids or not all(isinstance(i, str) and i for i in ids):
                    raise builder.error(None, "tool message has no 'tool_call_ids'")
                for call_id in ids:
                    builder.tool_result(call_id, content, line=0)
            else:
                raise builder.error(None, f"unknown role {role!r}")
        builder.where = ""
        info = as_dict(document.get("info"))
        builder.metadata["version"] = "1.x" if function_calling else "0.x"
        builder.metadata["exit_status"] = info.get("exit_status")
        builder.metadata["model_stats"] = info.get("model_stats")
        trajectory = document.get("trajectory")
        steps = len(trajectory) if isinstance(trajectory, list) else 0
        builder.metadata["trajectory_steps"] = steps
        builder.metadata["history_messages"] = len(history)
        return [
            builder.build(
                source_format=FORMAT,
                conversation_id=path.name.split(".")[0],
                model=_model_name(document),
            )
        ]


def _assistant(
    builder: ConversationBuilder,
    message: dict[str, Any],
    content: str,
    index: int,
    flags: tuple[str, ...],
) -> str | None:
    """Add an assistant message; return the synthetic call id awaiting an observation."""
    raw_calls = message.get("tool_calls") or []
    if raw_calls:
        specs = []
        for position, call in enumerate(raw_calls):
            if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                raise builder.error(None, f"tool_calls[{position}] has no 'function' object")
            specs.append(
                CallSpec(
                    id=str(call.get("id") or ""),
                    name=str(call["function"].get("name") or ""),
                    arguments=json_arguments(call["function"].get("arguments", "{}")),
                )
            )
        builder.assistant(content or None, specs, line=0, flags=flags)
        return None
    action = message.get("action")
    if isinstance(action, str) and action.strip():
        call_id = f"call_{index}"
        spec = CallSpec(
            id=call_id,
            name="bash",
            arguments=json.dumps({"command": action.strip()}, ensure_ascii=False),
        )
        builder.assistant(content or None, [spec], line=0, flags=(*flags, "text_action"))
        builder.counts["synthetic_calls"] += 1
        return call_id
    builder.assistant(content or None, line=0, flags=flags)
    return None


def _model_name(document: dict[str, Any]) -> str:
    config = document.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return ""
    if isinstance(config, dict):
        agent = config.get("agent")
        model = agent.get("model") if isinstance(agent, dict) else None
        if isinstance(model, dict) and isinstance(model.get("name"), str):
            return str(model["name"])
    return ""


@hookimpl
def register_importers(register: Callable[[Importer], None]) -> None:
    """Register the ``swe-agent`` importer."""
    register(SweAgentImporter())
