"""Importer for Codex CLI rollout JSONL (``codex-rollout``).

Only ``response_item`` records (the model-visible history) make messages:

* ``session_meta.base_instructions.text`` becomes the first ``system``
  message; ``developer`` messages become ``system`` messages marked
  ``harness="codex.developer_notice"``; one that arrives while tool calls
  await their results (an approval or collaboration-mode notice mid-turn)
  is placed after those results (counted as ``moved_after_tool_results``),
  never between a call and its result;
* ``user`` / ``assistant`` ``message`` items become user / assistant
  messages; injected user items are flagged ``injected`` and marked
  harness text: ``<environment_context>`` (``codex.environment_context``),
  ``<turn_aborted>`` (``codex.turn_aborted``), ``<user_instructions>`` and
  ``# AGENTS.md instructions`` (``codex.user_instructions``);
* ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` join the
  current assistant turn's ``tool_calls`` (custom calls carry
  ``json.dumps({"input": input})``); ``*_output`` items become ``tool``
  messages;
* ``reasoning`` and ``web_search_call`` are dropped (counted);
* a ``compacted`` record becomes a marker in ``metadata["markers"]``;
* ``event_msg`` and ``turn_context`` only feed metadata (model, non-zero
  exit codes).

Lines holding two JSON objects ("torn" lines) are read object by object.
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

from .builder import CallSpec, ConversationBuilder, earliest_timestamp
from .reading import (
    ImportLimits,
    decode_head,
    first_line,
    flatten_content,
    iter_jsonl,
    json_arguments,
    judge_sample,
    sample_records,
)

FORMAT = "codex-rollout"
_RECORD_TYPES = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
)
_SNIFF = re.compile(
    rb'"type"\s*:\s*"(session_meta|response_item|turn_context|event_msg|compacted)"'
    rb'\s*,\s*"payload"\s*:'
)
#: how injected user items start, and the harness construct each one is
_INJECTED_PREFIXES = {
    "<environment_context>": "codex.environment_context",
    "<turn_aborted>": "codex.turn_aborted",
    "<user_instructions>": "codex.user_instructions",
    "# AGENTS.md instructions": "codex.user_instructions",
}
_CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUT_TYPES = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)


class CodexRolloutImporter(Importer):
    """Codex CLI ``~/.codex/sessions/**/rollout-*.jsonl`` files."""

    name = FORMAT
    description = "Codex CLI rollout JSONL (response_item history)"

    def __init__(self, *, limits: ImportLimits | None = None) -> None:
        self.limits = limits

    def sniff(self, path: Path, head: bytes) -> bool:
        return self.recognise(path, head).matched

    def recognise(self, path: Path, sample: bytes) -> Recognition:
        values, bad = sample_records(sample)
        objects = [v for v in values if isinstance(v, dict)]
        if not objects:
            if _SNIFF.search(first_line(decode_head(sample))[:400]):
                return Recognition(matched=True, score=0.6, reason="a first record of a rollout")
            return Recognition(matched=False, reason="no JSON object on any complete line")
        typed = [v for v in objects if isinstance(v.get("type"), str)]
        shaped = [v for v in typed if isinstance(v.get("payload"), dict)]
        rollout = [v for v in shaped if v["type"] in _RECORD_TYPES]
        return judge_sample(
            objects,
            rollout,
            bad,
            what="rollout",
            near_score=0.3 * len(shaped) / len(objects),
            none_reason=f"none of the {len(objects)} records is a rollout record"
            ' ({"type": session_meta|response_item|..., "payload": {...}})',
            matched_reason="rollout records with payloads",
        )

    def load(self, path: Path) -> list[ImportedConversation]:
        builder = ConversationBuilder(str(path))
        models: Counter[str] = Counter()
        dropped: Counter[str] = Counter()
        meta: dict[str, Any] = {}
        nonzero_exits = 0
        records = 0
        torn_lines: list[int] = []
        stamps: list[object] = []  # each record's timestamp: the earliest dates the session
        for item in iter_jsonl(path, self.limits):
            records += 1
            if item.part == 1:
                torn_lines.append(item.line)
            record = item.value
            if not isinstance(record, dict):
                raise ImportFormatError(f"{path}:{item.line}: expected a JSON object per record")
            stamps.append(record.get("timestamp"))
            kind = record.get("type")
            payload = record.get("payload")
            if not isinstance(kind, str) or not isinstance(payload, dict):
                raise ImportFormatError(
                    f"{path}:{item.line}: record needs a string 'type' and an object 'payload'"
                    " (not a Codex rollout?)"
                )
            if kind == "session_meta":
                stamps.append(payload.get("timestamp"))  # when the session itself began
                _session_meta(builder, payload, item.line, meta)
            elif kind == "turn_context":
                model = payload.get("model")
                if isinstance(model, str) and model:
                    models[model] += 1
                builder.counts["turns"] += 1
            elif kind == "response_item":
                _response_item(builder, payload, item.line, dropped)
            elif kind == "compacted":
                history = payload.get("replacement_history")
                builder.marker(
                    kind="compacted",
                    line=item.line,
                    replacement_items=len(history) if isinstance(history, list) else 0,
                    message=str(payload.get("message") or ""),
                )
            elif kind == "event_msg":
                if payload.get("type") == "exec_command_end":
                    code = payload.get("exit_code")
                    if isinstance(code, int) and code != 0:
                        nonzero_exits += 1
            else:
                dropped[f"record.{kind}"] += 1
        if records == 0:
            raise ImportFormatError(f"{path}:1: empty file (no Codex rollout records)")
        builder.metadata.update(meta)
        builder.metadata["nonzero_exit_codes"] = nonzero_exits
        builder.metadata["torn_lines"] = torn_lines
        builder.metadata["records"] = records
        if dropped:
            builder.metadata["dropped_items"] = dict(sorted(dropped.items()))
        return [
            builder.build(
                source_format=FORMAT,
                skipped=dict(dropped),
                conversation_id=str(meta.get("session_id") or path.name.split(".")[0]),
                cwd=str(meta.get("cwd") or ""),
                model=models.most_common(1)[0][0] if models else "",
                started_at=earliest_timestamp(stamps),
            )
        ]


def _session_meta(
    builder: ConversationBuilder, payload: dict[str, Any], line: int, meta: dict[str, Any]
) -> None:
    if "session_id" not in meta:
        meta["session_id"] = payload.get("id")
        meta["cwd"] = payload.get("cwd")
        for key in ("originator", "cli_version", "source", "model_provider"):
            if key in payload:
                meta[key] = payload[key]
        git = payload.get("git")
        if isinstance(git, dict):
            meta["git"] = {k: v for k, v in git.items() if isinstance(v, str)}
    instructions = payload.get("base_instructions")
    text = instructions.get("text") if isinstance(instructions, dict) else instructions
    if isinstance(text, str) and text:
        builder.plain("system", text, line=line, flags=("base_instructions",))


def _response_item(
    builder: ConversationBuilder, payload: dict[str, Any], line: int, dropped: Counter[str]
) -> None:
    kind = payload.get("type")
    if kind == "message":
        role = payload.get("role")
        text = flatten_content(payload.get("content"))
        if role == "assistant":
            builder.assistant(text or None, line=line)
        elif role in ("developer", "system"):
            builder.plain(
                "system", text, line=line, flags=("developer",), harness="codex.developer_notice"
            )
        elif role == "user":
            start = text.lstrip()
            harness = next(
                (kind for prefix, kind in _INJECTED_PREFIXES.items() if start.startswith(prefix)),
                None,
            )
            flags = ("injected",) if harness else ()
            builder.plain("user", text, line=line, flags=flags, harness=harness)
        else:
            raise builder.error(line, f"message item has unknown role {role!r}")
    elif kind in _CALL_TYPES:
        builder.calls([_call_spec(builder, payload, line)], line=line)
    elif kind in _OUTPUT_TYPES:
        call_id = payload.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise builder.error(line, f"{kind} has no 'call_id'")
        output = payload.get("output")
        content = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        builder.tool_result(call_id, content, line=line)
    else:
        dropped[str(kind)] += 1


def _call_spec(builder: ConversationBuilder, payload: dict[str, Any], line: int) -> CallSpec:
    kind = payload["type"]
    call_id = payload.get("call_id") or payload.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise builder.error(line, f"{kind} has no 'call_id'")
    if kind == "custom_tool_call":
        arguments = json.dumps({"input": payload.get("input", "")}, ensure_ascii=False)
        name = payload.get("name")
    elif kind == "local_shell_call":
        arguments = json.dumps(payload.get("action", {}), ensure_ascii=False)
        name = "local_shell"
    else:
        arguments = json_arguments(payload.get("arguments", "{}"))
        name = payload.get("name")
    if not isinstance(name, str) or not name:
        raise builder.error(line, f"{kind} {call_id!r} has no 'name'")
    return CallSpec(id=call_id, name=name, arguments=arguments, line=line)


@hookimpl
def register_importers(register: Callable[[Importer], None]) -> None:
    """Register the ``codex-rollout`` importer."""
    register(CodexRolloutImporter())
