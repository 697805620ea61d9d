"""Conformance suite for context engines.

Subclass :class:`ContextEngineSuite` in your plugin's tests and provide an
``engine`` fixture (your engine, not yet bound); the suite binds it to a
minimal :class:`~hermes_hookspecs.compression.EngineHost` backed by the
registered summarizers and tails you name in ``summarizers``/``tails`` (or
the ``host`` fixture you override), then checks the contract:

* ``compress`` returns a valid message sequence: every tool message answers
  a call of the assistant message before it, calls are not split from their
  results, at least one real user message survives;
* a ``compressed`` result is strictly smaller than its input (in tokens);
* ``aborted``/``skipped`` results carry a reason and no messages are required;
* ``select_context`` returns None or a valid sequence, and changes nothing
  stored (it has no access to the store by construction).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hermes_hookspecs import (
    CompressionRequest,
    CompressionSettings,
    ContextEngine,
    Message,
    SelectRequest,
    StoredMessage,
    Summarizer,
    TailStrategy,
    ToolCall,
    ToolFunction,
    UnknownNameError,
)


def sequence_problems(messages: list[Message]) -> list[str]:
    """Problems with a chat-completions message sequence (empty list: valid)."""
    problems: list[str] = []
    open_calls: set[str] = set()
    last_assistant_calls: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "tool":
            if message.tool_call_id not in last_assistant_calls:
                problems.append(
                    f"message {index}: tool result for unknown call {message.tool_call_id!r}"
                )
            open_calls.discard(message.tool_call_id or "")
            continue
        if open_calls and message.role in ("assistant", "user"):
            problems.append(f"message {index}: calls {sorted(open_calls)} have no result before it")
            open_calls = set()
        if message.role == "assistant":
            last_assistant_calls = {c.id for c in message.tool_calls or []}
            open_calls = set(last_assistant_calls)
    if not any(m.role == "user" and m.kind == "message" for m in messages):
        problems.append("no real user message")
    return problems


class SimpleHost:
    """A minimal engine host: chars/4 counting and named summarizers/tails."""

    def __init__(self, summarizers: list[Summarizer], tails: list[TailStrategy]) -> None:
        self._summarizers = {s.name: s for s in summarizers}
        self._tails = {t.name: t for t in tails}

    def count_text(self, text: str) -> int:
        return (len(text) + 3) // 4

    def count_message(self, message: Message) -> int:
        calls = "".join(c.function.arguments for c in message.tool_calls or [])
        return 3 + self.count_text(message.text() + calls)

    def summarizer(self, name: str) -> Summarizer:
        try:
            return self._summarizers[name]
        except KeyError:
            raise UnknownNameError("summarizer", name, list(self._summarizers)) from None

    def tail_strategy(self, name: str) -> TailStrategy:
        try:
            return self._tails[name]
        except KeyError:
            raise UnknownNameError("tail strategy", name, list(self._tails)) from None


def synthetic_session(turns: int = 30, tool_output_chars: int = 1500) -> list[StoredMessage]:
    """A session of user turns with tool rounds, paths and error strings in the outputs."""
    rows: list[Message] = []
    for t in range(turns):
        rows.append(Message(role="user", content=f"Turn {t}: fix src/module_{t}.py please"))
        call = ToolCall(
            id=f"call_{t}",
            function=ToolFunction(
                name="bash", arguments=json.dumps({"cmd": f"pytest tests/test_{t}.py"})
            ),
        )
        rows.append(Message(role="assistant", content=f"Running tests for {t}", tool_calls=[call]))
        output = (
            f"FAILED tests/test_{t}.py::test_x - ValueError: bad {t}\n" + "x" * tool_output_chars
        )
        rows.append(Message(role="tool", tool_call_id=f"call_{t}", content=output))
        rows.append(
            Message(role="assistant", content=f"Fixed src/module_{t}.py in commit a1b2c3d{t}")
        )
    return [
        StoredMessage(id=i + 1, session_id="suite", position=i, message=m, created_at=0.0)
        for i, m in enumerate(rows)
    ]


class ContextEngineSuite:
    """Subclass and provide an ``engine`` fixture (and ``host`` if your engine needs parts)."""

    #: the tokens of the synthetic window the suite compresses against
    context_length = 16_000
    #: set True when your engine must compress the synthetic session (not abort or skip)
    expect_compressed = False

    @pytest.fixture
    def host(self) -> Any:
        return SimpleHost([], [])

    @pytest.fixture
    def bound_engine(self, engine: ContextEngine, host: Any) -> ContextEngine:
        engine.bind(host)
        return engine

    def settings(self, **extra: Any) -> CompressionSettings:
        return CompressionSettings(
            threshold_tokens=self.context_length // 2, context_length=self.context_length, **extra
        )

    def request(self, rows: list[StoredMessage], **extra: Any) -> CompressionRequest:
        return CompressionRequest(
            session_id="suite", messages=rows, settings=self.settings(), **extra
        )

    def test_engine_has_a_name(self, bound_engine: ContextEngine) -> None:
        assert isinstance(bound_engine.name, str) and bound_engine.name

    def test_compress_returns_a_valid_smaller_sequence(
        self, bound_engine: ContextEngine, host: Any
    ) -> None:
        rows = synthetic_session()
        result = bound_engine.compress(self.request(rows))
        assert result.engine == bound_engine.name
        if self.expect_compressed:
            assert result.status == "compressed", result.reason
        if result.status != "compressed":
            assert result.reason, "an aborted or skipped result must say why"
            return
        out = [m.message for m in result.messages if m.message.role != "system"]
        assert not sequence_problems(out), sequence_problems(out)
        before = sum(host.count_message(r.message) for r in rows)
        after = sum(host.count_message(m) for m in out)
        assert after < before

    def test_compress_keeps_the_last_user_message(self, bound_engine: ContextEngine) -> None:
        rows = synthetic_session()
        result = bound_engine.compress(self.request(rows))
        if result.status == "compressed":
            last_user = [r.message.text() for r in rows if r.message.role == "user"][-1]
            assert any(last_user in m.message.text() for m in result.messages)

    def test_compress_is_repeatable_on_its_own_output(self, bound_engine: ContextEngine) -> None:
        rows = synthetic_session(turns=60)
        first = bound_engine.compress(self.request(rows))
        if first.status != "compressed":
            return
        again = [
            StoredMessage(
                id=1000 + i, session_id="suite", position=i, message=m.message, created_at=0.0
            )
            for i, m in enumerate(first.messages)
            if m.message.role != "system"
        ]
        more = again + synthetic_session(turns=30)[:40]
        second = bound_engine.compress(self.request(more, compression_index=2, manual=True))
        if second.status == "compressed":
            out = [m.message for m in second.messages if m.message.role != "system"]
            assert not sequence_problems(out)

    def test_select_context_is_none_or_valid(self, bound_engine: ContextEngine) -> None:
        messages = [r.message for r in synthetic_session(turns=5)]
        chosen = bound_engine.select_context(
            SelectRequest(session_id="suite", messages=messages, settings=self.settings())
        )
        if chosen is not None:
            assert not sequence_problems([m for m in chosen if m.role != "system"])
