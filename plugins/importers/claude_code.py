"""Importer for Claude Code session JSONL (``claude-code``).

One file gives one conversation for the main thread plus one per subagent
thread:

* records are deduplicated by ``uuid`` (resumed sessions repeat them);
* consecutive ``assistant`` records sharing ``message.id`` are one API
  response written block by block; they merge into one assistant message,
  even when the results of its first calls were written in between;
* ``tool_result`` blocks become ``tool`` messages; text blocks of the same
  record become a following user message;
* ``isSidechain`` records (CLI 1.0.x inline subagents) are split into one
  conversation per thread, found by walking ``parentUuid`` to the thread
  root; 2.x ``agent_progress`` records (subagent turns streamed into the
  parent file) give one conversation per ``agentId`` when
  ``include_progress_subagents`` is on;
* ``system`` records: ``compact_boundary`` and ``microcompact_boundary``
  become markers in ``metadata["markers"]``; the rest is dropped;
* ``isMeta`` / ``isCompactSummary`` user records are kept (the model saw
  them) and flagged in ``metadata["flags"]`` (``meta``, ``compact_summary``);
* ``queue-operation``: text typed while the agent worked. An ``enqueue``
  later ``remove``-d was delivered mid-turn and appears nowhere else, so it
  becomes a user message (flag ``queued``); a ``dequeue``-d one is repeated
  as an ordinary user record and is skipped.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_hookspecs import ImportedConversation, Importer, ImportFormatError, hookimpl

from .builder import CallSpec, ConversationBuilder
from .reading import decode_head, first_line, flatten_content, iter_jsonl, parse_first_record

FORMAT = "claude-code"
_MESSAGE_TYPES = frozenset({"user", "assistant", "system"})
_KNOWN_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "file-history-snapshot",
        "progress",
        "queue-operation",
        "pr-link",
        "permission-mode",
        "attachment",
        "custom-title",
        "tag",
    }
)
_SNIFF_KEYS = re.compile(
    rb'"(parentUuid|leafUuid|isSidechain)"\s*:'
    rb'|"type"\s*:\s*"(file-history-snapshot|queue-operation|permission-mode)"'
)


@dataclass
class _Record:
    line: int
    data: dict[str, Any]


@dataclass
class _Thread:
    key: str
    records: list[_Record] = field(default_factory=list)


class ClaudeCodeImporter(Importer):
    """Claude Code ``~/.claude/projects/*/<session>.jsonl`` files.

    :param include_queued: turn ``queue-operation`` text delivered mid-turn
        into user messages.
    :param include_progress_subagents: import the subagent turns found in
        2.x ``agent_progress`` records as extra conversations.
    """

    name = FORMAT
    description = "Claude Code session JSONL (main thread and subagent threads)"

    def __init__(
        self, *, include_queued: bool = True, include_progress_subagents: bool = True
    ) -> None:
        self.include_queued = include_queued
        self.include_progress_subagents = include_progress_subagents

    def sniff(self, path: Path, head: bytes) -> bool:
        data = decode_head(head)
        record = parse_first_record(data)
        if record is not None:
            kind = record.get("type")
            return (
                isinstance(kind, str)
                and kind in _KNOWN_TYPES
                and "payload" not in record
                and "history" not in record
            )
        line = first_line(data)
        return line.startswith(b"{") and bool(_SNIFF_KEYS.search(line[:4000]))

    # -- loading -------------------------------------------------------------
    def load(self, path: Path) -> list[ImportedConversation]:
        records: list[_Record] = []
        seen: set[str] = set()
        duplicates = 0
        dropped: Counter[str] = Counter()
        for item in iter_jsonl(path):
            if not isinstance(item.value, dict):
                raise ImportFormatError(f"{path}:{item.line}: expected a JSON object per line")
            kind = item.value.get("type")
            if not isinstance(kind, str):
                raise ImportFormatError(f"{path}:{item.line}: record has no string 'type'")
            uuid = item.value.get("uuid")
            if isinstance(uuid, str):
                if uuid in seen:
                    duplicates += 1
                    continue
                seen.add(uuid)
            records.append(_Record(item.line, item.value))
        if not records:
            raise ImportFormatError(f"{path}:1: empty file (no Claude Code records)")
        if not any(r.data["type"] in _MESSAGE_TYPES for r in records):
            raise ImportFormatError(
                f"{path}:{records[0].line}: no user/assistant records; not a Claude Code session"
            )
        main, sidechains = _split_threads(path, records)
        session_id = _first_str(records, "sessionId") or path.name.split(".")[0]
        title = next(
            (str(r.data.get("summary")) for r in records if r.data["type"] == "summary"), ""
        )
        task_prompts = _task_prompts(main.records)

        conversations = [
            self._convert(
                path,
                main,
                conversation_id=session_id,
                title=title,
                is_main=True,
                dropped=dropped,
            )
        ]
        conversations[0].metadata["duplicate_records"] = duplicates
        for number, thread in enumerate(sidechains, start=1):
            prompt = _root_prompt(thread)
            label = _agent_label(thread) or f"sidechain-{number}"
            conversation = self._convert(
                path,
                thread,
                conversation_id=f"{session_id}:{label}",
                title=f"subagent: {_first_line_of(prompt)}",
                is_main=False,
                dropped=Counter(),
            )
            conversation.metadata["parent_conversation_id"] = session_id
            conversation.metadata["subagent_source"] = "sidechain"
            if prompt in task_prompts:
                conversation.metadata["task_call_id"] = task_prompts[prompt]
            conversations.append(conversation)
        if self.include_progress_subagents:
            subagents, skipped = self._progress_subagents(path, records, session_id)
            conversations.extend(subagents)
            if skipped:
                conversations[0].metadata["skipped_subagents"] = skipped
        return conversations

    def _convert(
        self,
        path: Path,
        thread: _Thread,
        *,
        conversation_id: str,
        title: str,
        is_main: bool,
        dropped: Counter[str],
        session_id: str = "",
        version: str = "",
    ) -> ImportedConversation:
        builder = ConversationBuilder(str(path))
        queue: list[str] = []
        models: Counter[str] = Counter()
        tool_errors = 0
        tool_calls: Counter[str] = Counter()
        for record in thread.records:
            data = record.data
            kind = data["type"]
            if kind == "assistant":
                model = _feed_assistant(builder, record, tool_calls)
                if model and model != "<synthetic>":
                    models[model] += 1
            elif kind == "user":
                tool_errors += _feed_user(builder, record)
            elif kind == "system":
                _feed_system(builder, record, dropped)
            elif kind == "queue-operation" and is_main:
                self._feed_queue(builder, record, queue)
            else:
                dropped[kind] += 1
        if queue:
            builder.counts["queued_never_delivered"] += len(queue)
        builder.metadata["session_id"] = _first_str(thread.records, "sessionId") or session_id
        builder.metadata["version"] = _first_str(thread.records, "version") or version
        builder.metadata["git_branch"] = _first_str(thread.records, "gitBranch")
        builder.metadata["tool_errors"] = tool_errors
        builder.metadata["tool_calls_by_name"] = dict(sorted(tool_calls.items()))
        builder.metadata["first_line"] = thread.records[0].line if thread.records else None
        if dropped:
            builder.metadata["dropped_records"] = dict(sorted(dropped.items()))
        return builder.build(
            source_format=FORMAT,
            conversation_id=conversation_id,
            title=title,
            cwd=_first_str(thread.records, "cwd"),
            model=models.most_common(1)[0][0] if models else "",
        )

    def _feed_queue(self, builder: ConversationBuilder, record: _Record, queue: list[str]) -> None:
        operation = record.data.get("operation")
        if operation == "enqueue":
            content = record.data.get("content")
            queue.append(flatten_content(content))
        elif operation == "dequeue":
            if queue:
                queue.pop(0)
                builder.counts["queued_dequeued"] += 1
        elif operation == "remove" and queue:
            text = queue.pop(0)
            if self.include_queued and text:
                builder.plain("user", text, line=record.line, flags=("queued",))
                builder.counts["queued_delivered"] += 1

    def _progress_subagents(
        self, path: Path, records: list[_Record], session_id: str
    ) -> tuple[list[ImportedConversation], list[dict[str, str]]]:
        """Subagent conversations from ``agent_progress`` records, and the ones skipped.

        The progress stream is a copy the parent session kept of the
        subagent's turns; a stream that does not form a valid conversation
        is skipped (named with its error in the main conversation's
        ``metadata["skipped_subagents"]``) instead of failing the import.
        """
        threads: dict[str, _Thread] = {}
        prompts: dict[str, str] = {}
        calls: dict[str, str] = {}
        seen: set[str] = set()
        for record in records:
            data = record.data
            if data["type"] != "progress":
                continue
            payload = data.get("data")
            if not isinstance(payload, dict) or payload.get("type") != "agent_progress":
                continue
            inner = payload.get("message")
            agent = payload.get("agentId")
            if not isinstance(inner, dict) or not isinstance(agent, str):
                continue
            uuid = inner.get("uuid")
            if isinstance(uuid, str):
                if uuid in seen:
                    continue
                seen.add(uuid)
            if inner.get("type") not in ("user", "assistant"):
                continue
            thread = threads.setdefault(agent, _Thread(key=agent))
            thread.records.append(_Record(record.line, inner))
            if isinstance(payload.get("prompt"), str):
                prompts.setdefault(agent, payload["prompt"])
            if isinstance(data.get("parentToolUseID"), str):
                calls.setdefault(agent, data["parentToolUseID"])
        out: list[ImportedConversation] = []
        skipped: list[dict[str, str]] = []
        for agent, thread in threads.items():
            try:
                conversation = self._convert(
                    path,
                    thread,
                    conversation_id=f"{session_id}:agent-{agent}",
                    title=f"subagent: {_first_line_of(prompts.get(agent, ''))}",
                    is_main=False,
                    dropped=Counter(),
                    session_id=session_id,
                    version=_first_str(records, "version"),
                )
            except ImportFormatError as exc:
                skipped.append({"agent_id": agent, "error": str(exc)})
                continue
            conversation.metadata["parent_conversation_id"] = session_id
            conversation.metadata["subagent_source"] = "agent_progress"
            conversation.metadata["agent_id"] = agent
            if agent in calls:
                conversation.metadata["task_call_id"] = calls[agent]
            out.append(conversation)
        return out, skipped


# -- record handlers -----------------------------------------------------------
def _message_of(builder: ConversationBuilder, record: _Record) -> dict[str, Any]:
    message = record.data.get("message")
    if not isinstance(message, dict):
        raise builder.error(record.line, f"{record.data['type']} record has no 'message' object")
    return message


def _feed_assistant(builder: ConversationBuilder, record: _Record, tool_calls: Counter[str]) -> str:
    message = _message_of(builder, record)
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise builder.error(record.line, "assistant 'message.content' is not a list of blocks")
    texts: list[str] = []
    specs: list[CallSpec] = []
    for block in content:
        if not isinstance(block, dict):
            raise builder.error(record.line, "assistant content block is not an object")
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            name = str(block.get("name") or "")
            specs.append(
                CallSpec(
                    id=str(block.get("id") or ""),
                    name=name,
                    arguments=json.dumps(block.get("input", {}), ensure_ascii=False),
                    line=record.line,
                )
            )
            tool_calls[name] += 1
        elif kind in ("thinking", "redacted_thinking"):
            builder.counts["thinking_blocks_dropped"] += 1
        else:
            builder.counts[f"assistant_blocks_dropped.{kind}"] += 1
    flags: list[str] = []
    model = message.get("model")
    if model == "<synthetic>":
        flags.append("synthetic")
    if record.data.get("isApiErrorMessage"):
        flags.append("api_error")
    key = message.get("id")
    builder.assistant(
        "\n".join(t for t in texts if t) or None,
        specs,
        line=record.line,
        key=key if isinstance(key, str) else None,
        flags=tuple(flags),
    )
    return model if isinstance(model, str) else ""


def _feed_user(builder: ConversationBuilder, record: _Record) -> int:
    message = _message_of(builder, record)
    content = message.get("content")
    flags: list[str] = []
    if record.data.get("isMeta"):
        flags.append("meta")
    if record.data.get("isCompactSummary"):
        flags.append("compact_summary")
    if isinstance(content, str):
        builder.plain("user", content, line=record.line, flags=tuple(flags))
        return 0
    if not isinstance(content, list):
        raise builder.error(record.line, "user 'message.content' is neither text nor blocks")
    errors = 0
    others: list[Any] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise builder.error(record.line, "tool_result block has no 'tool_use_id'")
            if block.get("is_error"):
                errors += 1
            builder.tool_result(call_id, flatten_content(block.get("content")), line=record.line)
        else:
            others.append(block)
    if others:
        builder.plain("user", flatten_content(others), line=record.line, flags=tuple(flags))
    return errors


def _feed_system(builder: ConversationBuilder, record: _Record, dropped: Counter[str]) -> None:
    subtype = record.data.get("subtype")
    if subtype == "compact_boundary":
        meta = record.data.get("compactMetadata") or {}
        builder.marker(
            kind="compact_boundary",
            line=record.line,
            trigger=meta.get("trigger"),
            pre_tokens=meta.get("preTokens"),
        )
    elif subtype == "microcompact_boundary":
        meta = record.data.get("microcompactMetadata") or {}
        builder.marker(
            kind="microcompact_boundary",
            line=record.line,
            trigger=meta.get("trigger"),
            pre_tokens=meta.get("preTokens"),
            tokens_saved=meta.get("tokensSaved"),
            compacted_tool_ids=list(meta.get("compactedToolIds") or []),
        )
    else:
        dropped[f"system.{subtype}"] += 1


# -- threads -------------------------------------------------------------------
def _split_threads(path: Path, records: list[_Record]) -> tuple[_Thread, list[_Thread]]:
    """The main thread and the sidechain threads (keyed by their root uuid)."""
    by_uuid = {r.data["uuid"]: r for r in records if isinstance(r.data.get("uuid"), str)}
    roots: dict[str, str] = {}

    def root_of(record: _Record) -> str:
        chain: list[str] = []
        current = record
        while True:
            uuid = current.data.get("uuid")
            if isinstance(uuid, str):
                if uuid in roots:
                    found = roots[uuid]
                    break
                chain.append(uuid)
            parent = current.data.get("parentUuid")
            parent_record = by_uuid.get(parent) if isinstance(parent, str) else None
            if parent_record is None or not parent_record.data.get("isSidechain"):
                found = uuid if isinstance(uuid, str) else f"line-{current.line}"
                break
            if isinstance(parent, str) and parent in chain:
                raise ImportFormatError(f"{path}:{current.line}: parentUuid cycle")
            current = parent_record
        for uuid in chain:
            roots[uuid] = found
        return found

    main = _Thread(key="main")
    sidechains: dict[str, _Thread] = {}
    for record in records:
        if record.data.get("isSidechain"):
            key = root_of(record)
            sidechains.setdefault(key, _Thread(key=key)).records.append(record)
        else:
            main.records.append(record)
    return main, [
        t for t in sidechains.values() if any(r.data["type"] in _MESSAGE_TYPES for r in t.records)
    ]


def _task_prompts(records: list[_Record]) -> dict[str, str]:
    """Task tool prompts of the main thread mapped to their tool_use ids."""
    out: dict[str, str] = {}
    for record in records:
        if record.data["type"] != "assistant":
            continue
        message = record.data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                arguments = block.get("input")
                if isinstance(arguments, dict) and isinstance(arguments.get("prompt"), str):
                    out.setdefault(arguments["prompt"], str(block.get("id")))
    return out


def _root_prompt(thread: _Thread) -> str:
    for record in thread.records:
        if record.data["type"] == "user":
            message = record.data.get("message")
            if isinstance(message, dict):
                return flatten_content(message.get("content"))
    return ""


def _agent_label(thread: _Thread) -> str:
    agent = _first_str(thread.records, "agentId")
    return f"agent-{agent}" if agent else ""


def _first_str(records: list[_Record], key: str) -> str:
    for record in records:
        value = record.data.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _first_line_of(text: str, limit: int = 80) -> str:
    line = text.strip().split("\n", 1)[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


@hookimpl
def register_importers(register: Callable[[Importer], None]) -> None:
    """Register the ``claude-code`` importer."""
    register(ClaudeCodeImporter())
