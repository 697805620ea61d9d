"""Importer for Claude Code session JSONL (``claude-code``).

One file gives one conversation for the main thread, plus one per subagent
(inline sidechains, ``agent_progress`` copies, or the ``subagents/agent-*.jsonl``
files beside the session) and, on request, one per abandoned branch:

* records are deduplicated by ``uuid`` (resumed sessions repeat them);
* the branch that was continued after a rewind is followed
  (:mod:`.claude_branches`); abandoned branches are counted in ``skipped``
  and imported as their own conversations with ``include_abandoned_branches``;
* consecutive ``assistant`` records sharing ``message.id`` are one API
  response written block by block; they merge into one assistant message,
  even when the results of its first calls were written in between;
* ``tool_result`` blocks become ``tool`` messages; text blocks of the same
  record become a following user message;
* harness text is marked with ``Message.harness`` from structure:
  ``isMeta`` and ``isCompactSummary`` records, and the wrapper tags and
  interrupt markers of :mod:`.harness`; a user record mixing harness
  wrappers and typed words is split so the words stay unmarked;
* ``queue-operation``: text typed while the agent worked. An ``enqueue``
  later ``remove``-d was delivered mid-turn and appears nowhere else, so it
  becomes a user message (flag ``queued``; a ``queued_command`` attachment
  repeating it is skipped); a ``dequeue``-d one is repeated as an ordinary
  user record and is skipped; ``popAll`` took it back unsent;
* ``system`` records: ``compact_boundary`` and ``microcompact_boundary``
  become markers in ``metadata["markers"]``; every other record type is
  skipped and counted in ``skipped`` (``transcripts/FORMATS.md`` lists them).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
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
from .claude_branches import branch_with_context, follow_branches
from .harness import CLAUDE_CODE
from .reading import (
    ImportLimits,
    decode_head,
    first_line,
    flatten_content,
    iter_jsonl,
    sample_records,
)

FORMAT = "claude-code"
#: ``continued`` (default) or ``all``: whether abandoned branches become conversations too
BRANCHES_ENV = "HERMES_CORE_IMPORT_BRANCHES"
_MESSAGE_TYPES = frozenset({"user", "assistant", "system"})
#: record types read for metadata only or deliberately left out (counted in ``skipped``)
_SKIPPED_TYPES = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "file-history-delta",
        "progress",
        "pr-link",
        "permission-mode",
        "mode",
        "custom-title",
        "ai-title",
        "agent-name",
        "last-prompt",
        "bridge-session",
        "tag",
    }
)
_KNOWN_TYPES = _MESSAGE_TYPES | _SKIPPED_TYPES | {"queue-operation", "attachment"}
#: keys only Claude Code records carry
_CLAUDE_KEYS = frozenset({"parentUuid", "leafUuid", "isSidechain", "sessionId", "uuid"})
#: the same, found in a first record cut short by the sample size
_SNIFF_KEYS = re.compile(
    rb'"(parentUuid|leafUuid|isSidechain)"\s*:'
    rb'|"type"\s*:\s*"(file-history-snapshot|queue-operation|permission-mode|last-prompt)"'
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
    :param include_subagent_files: import ``<session>/subagents/agent-*.jsonl``
        beside the file as extra conversations.
    :param include_abandoned_branches: import each branch abandoned by a
        rewind as an extra conversation (its context up to the fork, then
        the abandoned turns); None (the default) reads
        ``HERMES_CORE_IMPORT_BRANCHES`` (``continued``, the default, or ``all``).
    :param limits: read caps (default: :meth:`ImportLimits.from_env`).
    """

    name = FORMAT
    description = "Claude Code session JSONL (main thread, subagents, rewinds)"

    def __init__(
        self,
        *,
        include_queued: bool = True,
        include_progress_subagents: bool = True,
        include_subagent_files: bool = True,
        include_abandoned_branches: bool | None = None,
        limits: ImportLimits | None = None,
    ) -> None:
        self.include_queued = include_queued
        self.include_progress_subagents = include_progress_subagents
        self.include_subagent_files = include_subagent_files
        self.include_abandoned_branches = include_abandoned_branches
        self.limits = limits

    def sniff(self, path: Path, head: bytes) -> bool:
        return self.recognise(path, head).matched

    def recognise(self, path: Path, sample: bytes) -> Recognition:
        values, bad = sample_records(sample)
        objects = [v for v in values if isinstance(v, dict)]
        if not objects:
            line = first_line(decode_head(sample))
            if (
                line.startswith(b"{")
                and _SNIFF_KEYS.search(line[:4000])
                and b'"payload"' not in line[:400]
            ):
                return Recognition(
                    matched=True, score=0.6, reason="a first record with Claude Code's keys"
                )
            return Recognition(matched=False, reason="no JSON object on any complete line")
        typed = [v for v in objects if isinstance(v.get("type"), str)]
        known = [v for v in typed if v["type"] in _KNOWN_TYPES and "payload" not in v]
        claude = [v for v in known if _CLAUDE_KEYS & v.keys() or v["type"] in _SKIPPED_TYPES]
        score = len(claude) / (len(objects) + bad)
        if not claude:
            return Recognition(
                matched=False,
                score=0.2 * len(known) / len(objects),
                reason=f"none of the {len(objects)} records has Claude Code's record keys"
                " (uuid, parentUuid, sessionId) or record types",
            )
        if len(claude) < 0.8 * len(objects):
            odd = next(v for v in objects if v not in claude)
            return Recognition(
                matched=False,
                score=score,
                reason=f"{len(objects) - len(claude)} of {len(objects)} records are not Claude"
                f" Code records (e.g. type {str(odd.get('type'))[:40]!r})",
            )
        return Recognition(matched=True, score=score, reason="Claude Code record types and keys")

    # -- loading -------------------------------------------------------------
    def load(self, path: Path) -> list[ImportedConversation]:
        records, duplicates = self._read(path, path)
        if not any(r.data["type"] in _MESSAGE_TYPES for r in records):
            raise ImportFormatError(
                f"{path}:{records[0].line}: no user/assistant records; not a Claude Code session"
            )
        main, sidechains = _split_threads(path, records)
        branches = follow_branches(main.records)
        main.records = branches.kept
        session_id = _first_str(records, "sessionId") or path.name.split(".")[0]
        title = _title(records)
        task_prompts = _task_prompts(main.records)

        first = self._convert(path, main, conversation_id=session_id, title=title, is_main=True)
        first.metadata["duplicate_records"] = duplicates
        if branches.abandoned:
            first.skipped["branch.abandoned"] = len(branches.abandoned)
            first.skipped["branch.abandoned_records"] = sum(len(b) for b in branches.abandoned)
            first.metadata["abandoned_branches"] = [
                {"fork_uuid": fork, "first_line": branch[0].line, "records": len(branch)}
                for fork, branch in zip(branches.fork_points, branches.abandoned, strict=True)
            ]
        conversations = [first]
        for number, thread in enumerate(sidechains, start=1):
            prompt = _root_prompt(thread)
            label = _agent_label(thread) or f"sidechain-{number}"
            conversation = self._convert(
                path,
                thread,
                conversation_id=f"{session_id}:{label}",
                title=f"subagent: {_first_line_of(prompt)}",
                is_main=False,
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
                first.metadata["skipped_subagents"] = skipped
        if self.include_subagent_files:
            conversations.extend(self._subagent_files(path, main.records, session_id, first))
        if self._abandoned_wanted():
            for number, branch in enumerate(branches.abandoned, start=1):
                thread = _Thread(
                    key=f"branch-{number}", records=branch_with_context(branches.kept, branch)
                )
                conversation = self._convert(
                    path,
                    thread,
                    conversation_id=f"{session_id}:branch-{number}",
                    title=f"abandoned branch {number}: {title}".strip(": "),
                    is_main=True,
                )
                conversation.metadata["parent_conversation_id"] = session_id
                conversation.metadata["abandoned_branch"] = number
                conversation.metadata["fork_uuid"] = branches.fork_points[number - 1]
                conversations.append(conversation)
        return conversations

    def _abandoned_wanted(self) -> bool:
        if self.include_abandoned_branches is not None:
            return self.include_abandoned_branches
        value = os.environ.get(BRANCHES_ENV, "").strip().lower() or "continued"
        if value not in ("continued", "all"):
            raise ImportFormatError(
                f"{BRANCHES_ENV}={value!r}: expected 'continued' (import the branch that was"
                " continued after a rewind) or 'all' (also each abandoned branch)"
            )
        return value == "all"

    def _read(self, path: Path, shown: Path) -> tuple[list[_Record], int]:
        records: list[_Record] = []
        seen: set[str] = set()
        duplicates = 0
        for item in iter_jsonl(path, self.limits):
            if not isinstance(item.value, dict):
                raise ImportFormatError(f"{shown}:{item.line}: expected a JSON object per line")
            kind = item.value.get("type")
            if not isinstance(kind, str):
                raise ImportFormatError(f"{shown}:{item.line}: record has no string 'type'")
            uuid = item.value.get("uuid")
            if isinstance(uuid, str):
                if uuid in seen:
                    duplicates += 1
                    continue
                seen.add(uuid)
            records.append(_Record(item.line, item.value))
        if not records:
            raise ImportFormatError(f"{shown}:1: empty file (no Claude Code records)")
        return records, duplicates

    def _subagent_files(
        self,
        path: Path,
        main_records: list[_Record],
        session_id: str,
        first: ImportedConversation,
    ) -> list[ImportedConversation]:
        """Conversations from ``<session>/subagents/agent-*.jsonl`` beside ``path``.

        Each is linked to the main thread's tool call that started it
        (``metadata["task_call_id"]``) through the agent id its tool result
        reports. Claude Code's own compaction agents (``agent-acompact-*``)
        are skipped and counted.
        """
        stem = path.name
        for suffix in (".gz", ".jsonl"):
            stem = stem.removesuffix(suffix)
        folder = path.parent / stem / "subagents"
        if not folder.is_dir():
            return []
        calls = _agent_calls(main_records)
        out: list[ImportedConversation] = []
        for file in sorted(folder.glob("agent-*.jsonl*")):
            agent = file.name.split(".", 1)[0].removeprefix("agent-")
            if agent.startswith("acompact"):
                first.skipped["subagent_file.compaction"] = (
                    first.skipped.get("subagent_file.compaction", 0) + 1
                )
                continue
            records, _ = self._read(file, file)
            thread = _Thread(key=agent, records=records)
            conversation = self._convert(
                file,
                thread,
                conversation_id=f"{session_id}:agent-{agent}",
                title=f"subagent: {_first_line_of(_root_prompt(thread))}",
                is_main=False,
                session_id=session_id,
            )
            conversation.metadata["parent_conversation_id"] = session_id
            conversation.metadata["subagent_source"] = "subagent_file"
            conversation.metadata["agent_id"] = _first_str(records, "agentId") or agent
            call = calls.get(conversation.metadata["agent_id"])
            if call:
                conversation.metadata["task_call_id"] = call
            out.append(conversation)
        return out

    def _convert(
        self,
        path: Path,
        thread: _Thread,
        *,
        conversation_id: str,
        title: str,
        is_main: bool,
        session_id: str = "",
        version: str = "",
    ) -> ImportedConversation:
        builder = ConversationBuilder(str(path))
        skipped: Counter[str] = Counter()
        queue = _Queue(builder, skipped, deliver=self.include_queued)
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
                _feed_system(builder, record, skipped)
            elif kind == "queue-operation":
                queue.operation(record)
            elif kind == "attachment":
                queue.attachment(record)
            elif kind in _SKIPPED_TYPES:
                skipped[f"record.{kind}"] += 1
            else:
                skipped[f"unknown.{kind}"] += 1
        queue.finish()
        builder.metadata["session_id"] = _first_str(thread.records, "sessionId") or session_id
        builder.metadata["version"] = _first_str(thread.records, "version") or version
        builder.metadata["git_branch"] = _first_str(thread.records, "gitBranch")
        builder.metadata["tool_errors"] = tool_errors
        builder.metadata["tool_calls_by_name"] = dict(sorted(tool_calls.items()))
        builder.metadata["first_line"] = thread.records[0].line if thread.records else None
        conversation = builder.build(
            source_format=FORMAT,
            conversation_id=conversation_id,
            title=title,
            cwd=_first_str(thread.records, "cwd"),
            model=models.most_common(1)[0][0] if models else "",
        )
        conversation.skipped.update(sorted(skipped.items()))
        return conversation

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


def _user_text(builder: ConversationBuilder, record: _Record, text: str) -> None:
    """A user text, split into harness and typed segments (each its own user message)."""
    data = record.data
    flags: list[str] = []
    if data.get("isMeta"):
        flags.append("meta")
    if data.get("isCompactSummary"):
        flags.append("compact_summary")
        builder.plain(
            "user",
            text,
            line=record.line,
            flags=tuple(flags),
            harness="claude_code.compaction_summary",
        )
        return
    if data.get("isMeta"):
        harness = CLAUDE_CODE.whole(text) or "claude_code.meta"
        builder.plain("user", text, line=record.line, flags=tuple(flags), harness=harness)
        return
    segments = CLAUDE_CODE.split(text)
    if len(segments) <= 1:
        only = segments[0].harness if segments else None
        builder.plain("user", text, line=record.line, flags=tuple(flags), harness=only)
        return
    builder.counts["user_records_split_at_harness_text"] += 1
    for segment in segments:
        builder.plain(
            "user", segment.text, line=record.line, flags=tuple(flags), harness=segment.harness
        )


def _feed_user(builder: ConversationBuilder, record: _Record) -> int:
    message = _message_of(builder, record)
    content = message.get("content")
    if isinstance(content, str):
        _user_text(builder, record, content)
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
        _user_text(builder, record, flatten_content(others))
    return errors


class _Queue:
    """Input typed while the agent worked (``queue-operation`` records), kept in file order."""

    def __init__(
        self, builder: ConversationBuilder, skipped: Counter[str], *, deliver: bool
    ) -> None:
        self.builder = builder
        self.skipped = skipped
        self.deliver = deliver
        self.pending: list[str] = []
        self.delivered: list[str] = []
        self.left_out: list[str] = []

    def _emit(self, text: str, line: int) -> None:
        if not text:
            return
        harness = CLAUDE_CODE.whole(text)
        self.builder.plain("user", text, line=line, flags=("queued",), harness=harness)
        self.builder.counts["queued_delivered"] += 1
        self.delivered.append(text)

    def operation(self, record: _Record) -> None:
        operation = record.data.get("operation")
        if operation == "enqueue":
            self.pending.append(flatten_content(record.data.get("content")))
        elif operation == "dequeue":  # sent as the next ordinary user record
            if self.pending:
                self.pending.pop(0)
                self.builder.counts["queued_dequeued"] += 1
        elif operation == "remove":  # delivered into the running turn; written nowhere else
            if self.pending:
                text = self.pending.pop(0)
                if self.deliver:
                    self._emit(text, record.line)
                else:
                    self.skipped["queue.delivered_left_out"] += 1
                    self.left_out.append(text)
        elif operation == "popAll":  # taken back into the input box, never sent
            self.skipped["queue.popped_unsent"] += len(self.pending)
            self.pending.clear()
        else:
            self.skipped[f"queue.{operation}"] += 1

    def attachment(self, record: _Record) -> None:
        attachment = record.data.get("attachment")
        kind = attachment.get("type") if isinstance(attachment, dict) else None
        if kind != "queued_command" or not isinstance(attachment, dict):
            self.skipped[f"attachment.{kind}"] += 1
            return
        text = flatten_content(attachment.get("prompt"))
        if text in self.delivered:  # the same delivery, already kept at its remove record
            self.delivered.remove(text)
            self.skipped["attachment.queued_command.repeat"] += 1
        elif text in self.left_out:  # the same delivery, left out at its remove record
            self.left_out.remove(text)
        elif self.deliver:
            if text in self.pending:
                self.pending.remove(text)
            self._emit(text, record.line)
            self.delivered.remove(text)
        else:
            self.skipped["queue.delivered_left_out"] += 1

    def finish(self) -> None:
        if self.pending:
            self.builder.counts["queued_never_delivered"] += len(self.pending)


def _feed_system(builder: ConversationBuilder, record: _Record, skipped: Counter[str]) -> None:
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
        skipped[f"system.{subtype}"] += 1


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


def _title(records: list[_Record]) -> str:
    """The session's title: the last user-set title, else the last AI title, else a summary."""
    for kind, key in (
        ("custom-title", "customTitle"),
        ("ai-title", "aiTitle"),
        ("summary", "summary"),
    ):
        titles = [r.data.get(key) for r in records if r.data["type"] == kind]
        titles = [t for t in titles if isinstance(t, str) and t.strip()]
        if titles:
            return str(titles[-1] if kind != "summary" else titles[0])
    return ""


_AGENT_ID = re.compile(r"agentId:\s*([A-Za-z0-9_-]+)")


def _agent_calls(records: list[_Record]) -> dict[str, str]:
    """Agent ids of the main thread's Task/Agent tool results mapped to their tool_use ids."""
    out: dict[str, str] = {}
    for record in records:
        if record.data["type"] != "user":
            continue
        message = record.data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if not results:
            continue
        structured = record.data.get("toolUseResult")
        agent = structured.get("agentId") if isinstance(structured, dict) else None
        if isinstance(agent, str) and agent and len(results) == 1:
            out.setdefault(agent, str(results[0].get("tool_use_id")))
            continue
        for block in results:
            found = _AGENT_ID.search(flatten_content(block.get("content")))
            if found:
                out.setdefault(found.group(1), str(block.get("tool_use_id")))
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
