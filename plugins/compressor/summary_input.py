"""Bounding and chunking what the summarizer reads.

The middle handed to a summarizer is bounded twice: every message is cut to
``per_message`` tokens (head and end kept, pointer in the cut), and the
whole input to ``total`` tokens, keeping the newest messages (older ones
stay covered by the identifier index and recovery pointers, and remain
searchable). The bounded input is then split into chunks of at most
``chunk`` tokens for a chunked digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hermes_hookspecs import Message

from .items import Item, recovery_pointer


@dataclass(frozen=True)
class SummaryInput:
    """Chunks of (message, recovery id, tokens) plus the ids left out by the bound."""

    chunks: list[list[tuple[Message, int | None, int]]]
    omitted_ids: list[int]
    tokens: int


def cut_text(text: str, keep_chars: int, message_id: int | None) -> str:
    """``text`` cut to about ``keep_chars``: two thirds from the start, one third from the end."""
    if len(text) <= keep_chars:
        return text
    head = keep_chars * 2 // 3
    tail = keep_chars - head
    pointer = recovery_pointer(message_id)
    where = f"; full text: {pointer}" if pointer else ""
    return f"{text[:head]}\n…[{len(text) - keep_chars:,} chars cut{where}]…\n{text[-tail:]}"


def _bounded(item: Item, per_message: int) -> tuple[Message, int]:
    message = item.message
    if item.tokens <= per_message or not isinstance(message.content, str):
        return message, item.tokens
    ratio = per_message / max(1, item.tokens)
    keep = max(200, int(len(message.content) * ratio))
    content = cut_text(message.content, keep, item.recovery_id)
    return message.model_copy(update={"content": content}), per_message


def build_summary_input(
    items: Sequence[Item], *, total: int, per_message: int, chunk: int
) -> SummaryInput:
    """Bound ``items`` (oldest first) and split them into chunks (see the module docstring)."""
    picked: list[tuple[Message, int | None, int]] = []
    used = 0
    omitted: list[int] = []
    for position in range(len(items) - 1, -1, -1):
        item = items[position]
        message, tokens = _bounded(item, per_message)
        if used + tokens > total and picked:
            omitted.extend(
                i.recovery_id for i in items[: position + 1] if i.recovery_id is not None
            )
            break
        picked.append((message, item.recovery_id, tokens))
        used += tokens
    picked.reverse()
    omitted.reverse()
    chunks: list[list[tuple[Message, int | None, int]]] = []
    current: list[tuple[Message, int | None, int]] = []
    size = 0
    for entry in picked:
        if current and size + entry[2] > chunk:
            chunks.append(current)
            current, size = [], 0
        current.append(entry)
        size += entry[2]
    if current:
        chunks.append(current)
    return SummaryInput(chunks=chunks, omitted_ids=omitted, tokens=used)
