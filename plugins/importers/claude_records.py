"""Claude Code records turned into builder events: responses, user text, queued input, system.

The parts of :mod:`.claude_code` that read one record at a time. Harness text
is marked here (:mod:`.harness`), and queued input is kept in file order.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from .builder import CallSpec, ConversationBuilder
from .claude_threads import Record
from .harness import CLAUDE_CODE
from .reading import flatten_content


def message_of(builder: ConversationBuilder, record: Record) -> dict[str, Any]:
    """The record's ``message`` object (an error naming the line when it has none)."""
    message = record.data.get("message")
    if not isinstance(message, dict):
        raise builder.error(record.line, f"{record.data['type']} record has no 'message' object")
    return message


def feed_assistant(builder: ConversationBuilder, record: Record, tool_calls: Counter[str]) -> str:
    """One streamed block of a response (merged by ``message.id``); returns the model name."""
    message = message_of(builder, record)
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


def user_text(builder: ConversationBuilder, record: Record, text: str) -> None:
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


def feed_user(builder: ConversationBuilder, record: Record) -> int:
    """Tool results and user text of one record; returns how many results were errors."""
    message = message_of(builder, record)
    content = message.get("content")
    if isinstance(content, str):
        user_text(builder, record, content)
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
        user_text(builder, record, flatten_content(others))
    return errors


class Queue:
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

    def operation(self, record: Record) -> None:
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

    def attachment(self, record: Record) -> None:
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


def feed_system(builder: ConversationBuilder, record: Record, skipped: Counter[str]) -> None:
    """Compaction boundaries become markers; every other subtype is counted as skipped."""
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
