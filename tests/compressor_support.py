"""Shared helpers of the compressor, tail and summarizer tests (not a test module).

``PluginHost`` is a real :class:`~hermes_hookspecs.compression.EngineHost`
built from the real plugins (summarizers and tail strategies instantiated
directly); it counts tokens with the tiktoken plugin when it is installed,
else ``len // 4``. ``MemoryStore`` is a tiny in-memory stand-in for the
session store's compaction semantics (ids, active view, compacted rows, origin
ids), enough to replay a transcript through several compressions.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    CompressionSettings,
    Message,
    NewMessage,
    StoredMessage,
    Summarizer,
    TailStrategy,
    UnknownNameError,
)
from hermes_plugin_compressor import ContextCompressor
from hermes_plugin_summarizer_deterministic import DeterministicSummarizer
from hermes_plugin_tail_lean import LeanTail
from hermes_plugin_tail_legacy import LegacyTail

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "transcripts"
DJANGO = TRANSCRIPTS / "openai-chat" / "openhands-django-11149.json.gz"
MESSAGE_OVERHEAD = 3


def _text_counter() -> Callable[[str], int]:
    try:
        from hermes_plugin_tiktoken_counter.counter import TiktokenCounter
    except ImportError:  # pragma: no cover - the counter plugin is part of the repo
        return lambda text: len(text) // 4
    counter = TiktokenCounter()
    return lambda text: counter.count(text, "gpt-4o-mini") if text else 0


class PluginHost:
    """An EngineHost over the real summarizer and tail plugins."""

    def __init__(
        self,
        summarizers: Iterable[Summarizer] = (),
        tails: Iterable[TailStrategy] = (),
        count_text: Callable[[str], int] | None = None,
    ) -> None:
        self._summarizers = {s.name: s for s in [DeterministicSummarizer(), *summarizers]}
        self._tails = {t.name: t for t in [LeanTail(), LegacyTail(), *tails]}
        self._count = count_text or _text_counter()

    def count_text(self, text: str) -> int:
        return self._count(text)

    def count_message(self, message: Message) -> int:
        text = message.text()
        for call in message.tool_calls or []:
            text += "\n" + call.function.name + "\n" + call.function.arguments
        return MESSAGE_OVERHEAD + self._count(text)

    def summarizer(self, name: str) -> Summarizer:
        if name not in self._summarizers:
            raise UnknownNameError("summarizer", name, list(self._summarizers))
        return self._summarizers[name]

    def tail_strategy(self, name: str) -> TailStrategy:
        if name not in self._tails:
            raise UnknownNameError("tail strategy", name, list(self._tails))
        return self._tails[name]


class FixedSummarizer(Summarizer):
    """A summarizer that always returns the same handoff (benchmarks, quality runs)."""

    name = "fixed"

    def __init__(self, text: str = "Work continues; see the sections below.") -> None:
        from hermes_hookspecs import HandoffSummary, SummaryResult

        self._result = SummaryResult(
            summary=HandoffSummary(goal=text, progress=text), summarizer=self.name
        )

    def summarize(self, request: Any) -> Any:
        self.calls = getattr(self, "calls", 0) + 1
        return self._result


def flatten_content(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    return "\n".join(
        part.get("text", "") if part.get("type") == "text" else f"[{part.get('type')}]"
        for part in content
    )


def load_openai_chat(path: Path = DJANGO) -> list[Message]:
    """The transcript's messages (system prompt first), content parts flattened."""
    raw_bytes = path.read_bytes()
    data = json.loads(gzip.decompress(raw_bytes) if path.suffix == ".gz" else raw_bytes)
    out = []
    for raw in data["messages"]:
        raw = dict(raw)
        raw["content"] = flatten_content(raw.get("content"))
        out.append(Message.from_api(raw))
    return out


def settings_for(threshold: int, **extra: Any) -> CompressionSettings:
    return CompressionSettings(threshold_tokens=threshold, context_length=threshold * 2, **extra)


class MemoryStore:
    """Rows with ids, an active view and compacted rows, as archive_and_compact leaves them."""

    def __init__(self, host: PluginHost, session_id: str = "s1") -> None:
        self.host = host
        self.session_id = session_id
        self.rows: dict[int, StoredMessage] = {}
        self.active: list[int] = []
        self._next = 1

    def _row(self, new: NewMessage) -> StoredMessage:
        row = StoredMessage(
            id=self._next,
            session_id=self.session_id,
            position=len(self.active),
            message=new.message,
            api_content=new.api_content,
            token_count=new.token_count
            if new.token_count is not None
            else self.host.count_message(new.message),
            turn_id=new.turn_id,
            origin_id=new.origin_id,
            created_at=time.time(),
        )
        self._next += 1
        self.rows[row.id] = row
        return row

    def append(self, message: Message) -> StoredMessage:
        row = self._row(NewMessage(message=message))
        self.active.append(row.id)
        return row

    def view(self) -> list[StoredMessage]:
        return [self.rows[i] for i in self.active]

    def tokens(self) -> int:
        return sum(row.token_count or 0 for row in self.view())

    def commit(self, result: CompressionResult) -> None:
        assert result.status == "compressed", result.reason
        for row_id in self.active:
            self.rows[row_id] = self.rows[row_id].model_copy(
                update={"active": False, "compacted": True}
            )
        self.active = [self._row(new).id for new in result.messages]

    def compacted(self) -> list[StoredMessage]:
        return [row for row in self.rows.values() if row.compacted]

    def search(self, needle: str) -> list[int]:
        """Ids of rows (active or compacted) whose text holds ``needle``."""
        return [row.id for row in self.rows.values() if needle in row_text(row.message)]


def row_text(message: Message) -> str:
    text = message.text()
    for call in message.tool_calls or []:
        text += "\n" + call.function.arguments
    return text


def replay(
    messages: Sequence[Message],
    engine: ContextCompressor,
    store: MemoryStore,
    settings: CompressionSettings,
) -> list[CompressionResult]:
    """Append messages one by one; before each model call, compress at the threshold."""
    results: list[CompressionResult] = []
    index = 0
    for position, message in enumerate(messages):
        store.append(message)
        following = messages[position + 1] if position + 1 < len(messages) else None
        before_model_call = following is None or following.role == "assistant"
        if before_model_call and store.tokens() >= settings.threshold_tokens:
            index += 1
            result = engine.compress(
                CompressionRequest(
                    session_id=store.session_id,
                    messages=store.view(),
                    settings=settings,
                    compression_index=index,
                    manual=True,
                )
            )
            results.append(result)
            if result.status == "compressed":
                store.commit(result)
    return results
