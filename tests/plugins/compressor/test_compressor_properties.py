"""Property tests: repair and compress over generated message lists (parallel tool calls too)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_core.testing.engine_suite import sequence_problems
from hermes_hookspecs import CompressionRequest, Message, StoredMessage, ToolCall, ToolFunction
from hermes_plugin_compressor import ContextCompressor
from hermes_plugin_compressor.prune import short_args
from hermes_plugin_compressor.repair import plan_repair, repair_messages
from hermes_plugin_tail_lean import LeanTail, LeanTailSettings
from hermes_plugin_tail_legacy import LegacyTail, LegacyTailSettings
from tests.compressor_support import PluginHost, settings_for


def COUNT(text: str) -> int:
    return len(text) // 4


HOST = PluginHost(count_text=COUNT)
WORDS = st.sampled_from(
    ["fix", "src/app/models.py", "ValueError", "#42", "commit a1b2c3d4", "ok", "retry", "tests"]
)
TEXT = st.lists(WORDS, min_size=1, max_size=60).map(" ".join)


@st.composite
def tool_round(draw: Any, counter: list[int]) -> list[Message]:
    """An assistant message with 1-3 parallel calls and some (maybe odd) results."""
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        counter[0] += 1
        calls.append(
            ToolCall(
                id=f"call_{counter[0]}",
                function=ToolFunction(name="bash", arguments=json.dumps({"cmd": draw(TEXT)})),
            )
        )
    out = [Message(role="assistant", content=draw(st.one_of(st.none(), TEXT)), tool_calls=calls)]
    answered = draw(st.lists(st.sampled_from(calls), max_size=4))  # missing, duplicated, reordered
    if draw(st.booleans()):
        answered = list(calls)  # the common case: every call answered once
    for call in answered:
        out.append(
            Message(
                role="tool", tool_call_id=call.id, content=draw(TEXT) * draw(st.integers(1, 30))
            )
        )
    return out


@st.composite
def conversations(draw: Any) -> list[Message]:
    counter = [0]
    out: list[Message] = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "tools", "orphan"]))
        if kind == "user":
            out.append(Message(role="user", content=draw(TEXT)))
        elif kind == "assistant":
            out.append(Message(role="assistant", content=draw(TEXT)))
        elif kind == "orphan":
            out.append(Message(role="tool", tool_call_id=f"ghost_{len(out)}", content=draw(TEXT)))
        else:
            out.extend(draw(tool_round(counter)))
    return out


def is_valid(messages: list[Message]) -> bool:
    return not [p for p in sequence_problems(messages) if p != "no real user message"]


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_repair_leaves_no_orphans_or_unanswered_calls_and_is_idempotent(
    messages: list[Message],
) -> None:
    fixed = repair_messages(messages)
    assert is_valid(fixed)
    assert repair_messages(fixed) == fixed
    assert not plan_repair(fixed).changes
    # real user turns are never touched
    assert [m for m in fixed if m.role == "user"] == [m for m in messages if m.role == "user"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversations(),
    st.sampled_from(["lean", "legacy"]),
    st.integers(1, 5),
    st.integers(300, 3_000),
)
def test_compress_output_is_valid_smaller_and_keeps_a_user_turn(
    messages: list[Message], tail: str, index: int, threshold: int
) -> None:
    engine = ContextCompressor()
    engine.bind(
        PluginHost(
            tails=[
                LeanTail(
                    LeanTailSettings(
                        lean_tail_min_tokens=threshold // 8, lean_tail_max_tokens=threshold // 4
                    )
                ),
                LegacyTail(LegacyTailSettings(tail_min_messages=2)),
            ],
            count_text=COUNT,
        )
    )
    rows = [
        StoredMessage(id=i + 1, session_id="p", position=i, message=m, created_at=0.0)
        for i, m in enumerate(messages)
    ]
    request = CompressionRequest(
        session_id="p",
        messages=rows,
        settings=settings_for(threshold, tail=tail),
        compression_index=index,
        manual=True,
    )
    result = engine.compress(request)
    if result.status != "compressed":
        assert result.status in ("aborted", "skipped") and result.reason
        assert result.messages == []
        return
    out = [m.message for m in result.messages]
    before = sum(HOST.count_message(m) for m in messages)
    assert sum(HOST.count_message(m) for m in out) < before
    assert result.tokens_after < result.tokens_before
    # every row of the new view carries its exact count (estimates never leak out of pruning)
    assert [new.token_count for new in result.messages] == [HOST.count_message(m) for m in out]
    assert result.tokens_after == sum(HOST.count_message(m) for m in out)
    assert is_valid(out)
    users = [m for m in messages if m.role == "user" and m.kind == "message"]
    if users:
        kept = [m for m in out if m.role == "user" and m.kind == "message"]
        assert kept and kept[-1].content == users[-1].content
    # one summary; none when there was nothing to summarize and the view was only fitted
    assert sum(1 for m in out if m.kind == "summary") == (result.summary is not None)
    # pairs are never split: a call whose result was in its group keeps a real result
    by_id = {row.id: row.message for row in rows}
    answered_in_input = {m.tool_call_id for m in repair_messages(messages) if m.role == "tool"} - {
        m.tool_call_id
        for m in repair_messages(messages)
        if m.role == "tool" and str(m.content).startswith("[tool result of ")
    }
    for new, message in zip(result.messages, out, strict=True):
        if message.role == "tool" and message.tool_call_id in answered_in_input:
            assert not str(message.content).startswith("[tool result of "), message
        if new.origin_id is not None:
            assert by_id[new.origin_id] == message
    # compressing the output again keeps everything valid (repair is idempotent on it)
    assert repair_messages(out) == out


def _short_args_reference(arguments: str, limit: int) -> str:
    """The plain definition :func:`short_args` must match (it only skips needless work)."""
    try:
        data = json.loads(arguments)
    except ValueError:
        data = arguments
    if isinstance(data, dict):
        shown = (
            v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in data.values()
        )
        text = ", ".join(
            f"{k}={' '.join(v.split())[:60]}" for k, v in zip(data, shown, strict=True)
        )
    else:
        text = " ".join(str(data).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=300),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    value=JSON_VALUES,
    as_json=st.booleans(),
    limit=st.integers(min_value=2, max_value=160),
)
def test_short_args_matches_its_plain_definition(value: Any, as_json: bool, limit: int) -> None:
    arguments = json.dumps(value, ensure_ascii=False) if as_json else str(value)
    assert short_args(arguments, limit) == _short_args_reference(arguments, limit)
