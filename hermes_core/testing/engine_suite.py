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
* a row carried forward unchanged (its message is an input row's message)
  keeps what the store knows about it: ``origin_id`` pointing at the row (or
  at the row it already carried), its ``annotations``, its ``api_content``
  (the exact bytes once sent) and its ``turn_id`` -- use
  :meth:`hermes_hookspecs.NewMessage.carried_from`;
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
    NewMessage,
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
    """A session of user turns with tool rounds, paths and error strings in the outputs.

    Every row carries what a real store row does: a ``turn_id``, ``annotations``
    (as the ``annotate_message`` hook leaves them), and user rows an
    ``api_content`` with per-turn recall, so an engine that drops them shows.
    """
    rows: list[Message] = []
    turn_of: list[int] = []
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
        turn_of.extend([t] * (len(rows) - len(turn_of)))
    return [
        StoredMessage(
            id=i + 1,
            session_id="suite",
            position=i,
            message=m,
            created_at=0.0,
            turn_id=f"turn-{turn_of[i]}",
            annotations={"suite": {"row": i + 1}},
            api_content=(
                f"{m.content}\n\n[recalled for turn {turn_of[i]}: the suite's memory]"
                if m.role == "user"
                else None
            ),
        )
        for i, m in enumerate(rows)
    ]


def carry_problems(rows: list[StoredMessage], out: list[NewMessage]) -> list[str]:
    """How ``out`` loses what the store knew about rows it carries forward unchanged."""
    by_message: dict[str, StoredMessage] = {}
    for row in rows:
        by_message.setdefault(row.message.model_dump_json(), row)
    problems: list[str] = []
    for index, item in enumerate(out):
        found = by_message.get(item.message.model_dump_json())
        if found is None or item.message.role == "system":
            continue  # new or rewritten: not a carried row
        row = found
        where = f"output {index} (carries row {row.id}, {row.message.role})"
        allowed = {row.id} | ({row.origin_id} if row.origin_id is not None else set())
        if item.origin_id not in allowed:
            problems.append(
                f"{where}: expected origin_id in {sorted(allowed)}, got {item.origin_id!r}"
            )
        if item.annotations != row.annotations:
            problems.append(
                f"{where}: expected annotations {row.annotations!r}, got {item.annotations!r}"
            )
        if item.api_content != row.api_content:
            problems.append(
                f"{where}: expected api_content {row.api_content!r}, got {item.api_content!r}"
            )
        if item.turn_id != row.turn_id:
            problems.append(f"{where}: expected turn_id {row.turn_id!r}, got {item.turn_id!r}")
    return problems


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
        assert isinstance(bound_engine.name, str) and bound_engine.name, (
            f"expected a non-empty name on {type(bound_engine).__name__}, got {bound_engine.name!r}"
        )

    def test_compress_returns_a_valid_smaller_sequence(
        self, bound_engine: ContextEngine, host: Any
    ) -> None:
        rows = synthetic_session()
        result = bound_engine.compress(self.request(rows))
        assert result.engine == bound_engine.name, (
            f"expected CompressionResult.engine == {bound_engine.name!r}, got {result.engine!r}"
        )
        if self.expect_compressed:
            assert result.status == "compressed", (
                f"expected the synthetic session ({len(rows)} rows) to be compressed, got "
                f"{result.status!r}: {result.reason}"
            )
        if result.status != "compressed":
            assert result.reason, f"expected a {result.status!r} result to say why"
            return
        out = [m.message for m in result.messages if m.message.role != "system"]
        problems = sequence_problems(out)
        assert not problems, "expected a valid message sequence: " + "; ".join(problems)
        before = sum(host.count_message(r.message) for r in rows)
        after = sum(host.count_message(m) for m in out)
        assert after < before, (
            f"expected a compressed result smaller than its input ({before} tokens), "
            f"got {after} tokens"
        )

    def test_carried_rows_keep_origin_annotations_api_content_and_turn(
        self, bound_engine: ContextEngine
    ) -> None:
        rows = synthetic_session()
        result = bound_engine.compress(self.request(rows))
        if result.status != "compressed":
            return
        problems = carry_problems(rows, result.messages)
        assert not problems, (
            f"expected rows carried forward unchanged to keep what was stored about them "
            f"(NewMessage.carried_from(row)); {len(problems)} problems: " + "; ".join(problems[:6])
        )

    def test_compress_keeps_the_last_user_message(self, bound_engine: ContextEngine) -> None:
        rows = synthetic_session()
        result = bound_engine.compress(self.request(rows))
        if result.status == "compressed":
            last_user = [r.message.text() for r in rows if r.message.role == "user"][-1]
            assert any(last_user in m.message.text() for m in result.messages), (
                f"expected the last user message {last_user!r} in the compressed context"
            )

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
            problems = sequence_problems(out)
            assert not problems, (
                "expected a valid sequence when compressing the engine's own output: "
                + "; ".join(problems)
            )

    def test_select_context_is_none_or_valid(self, bound_engine: ContextEngine) -> None:
        messages = [r.message for r in synthetic_session(turns=5)]
        chosen = bound_engine.select_context(
            SelectRequest(session_id="suite", messages=messages, settings=self.settings())
        )
        if chosen is not None:
            problems = sequence_problems([m for m in chosen if m.role != "system"])
            assert not problems, "expected None or a valid sequence: " + "; ".join(problems)
