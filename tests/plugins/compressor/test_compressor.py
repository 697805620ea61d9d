"""The ``compressor`` engine: phases, repair, failure policy, status, real-transcript quality."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from hermes_core.config import settings_from
from hermes_core.identifiers import extract_all, flatten
from hermes_core.testing.engine_suite import ContextEngineSuite, sequence_problems
from hermes_core.testing.fake_openai import ErrorReply, FakeOpenAIServer, Reply
from hermes_hookspecs import (
    SUMMARY_BEGIN,
    SUMMARY_END,
    CompressionRequest,
    CompressionSettings,
    HandoffSummary,
    Message,
    SelectRequest,
    StoredMessage,
    Summarizer,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
    ToolCall,
    ToolFunction,
    Usage,
)
from hermes_plugin_compressor import CompressorSettings, ContextCompressor
from hermes_plugin_compressor import register_context_engines as register_engine
from hermes_plugin_compressor.prune import cut_arguments
from hermes_plugin_compressor.repair import plan_repair, repair_messages
from hermes_plugin_summarizer_openai import OpenAISummarizer
from hermes_plugin_tail_lean import LeanTail, LeanTailSettings
from tests.compressor_support import (
    FixedSummarizer,
    MemoryStore,
    PluginHost,
    load_openai_chat,
    replay,
    settings_for,
)

# -- helpers -----------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def call(call_id: str, name: str = "bash", **args: Any) -> ToolCall:
    return ToolCall(id=call_id, function=ToolFunction(name=name, arguments=json.dumps(args)))


def session(turns: int = 12, output_chars: int = 3_000) -> list[Message]:
    out: list[Message] = [Message(role="user", content="Fix the flaky test in src/app/models.py")]
    for t in range(turns):
        out.append(
            Message(
                role="assistant",
                content=f"Step {t}: checking",
                tool_calls=[
                    call(f"c{t}a", cmd=f"pytest tests/test_{t}.py"),
                    call(f"c{t}b", cmd="git log"),
                ],
            )
        )
        body = f"FAILED tests/test_{t}.py::test_x - KeyError: 'k{t}'\n" + "log line\n" * (
            output_chars // 9
        )
        out.append(Message(role="tool", tool_call_id=f"c{t}a", content=body))
        out.append(Message(role="tool", tool_call_id=f"c{t}b", content=f"commit a1b2c3d{t:02d}e\n"))
        if t % 4 == 3:
            out.append(Message(role="user", content=f"Keep going, turn {t}; never touch setup.py"))
    out.append(Message(role="assistant", content="Done for now."))
    return out


def rows(messages: list[Message], first_id: int = 1) -> list[StoredMessage]:
    return [
        StoredMessage(id=first_id + i, session_id="s1", position=i, message=m, created_at=0.0)
        for i, m in enumerate(messages)
    ]


def request(
    messages: list[Message], settings: CompressionSettings, **extra: Any
) -> CompressionRequest:
    return CompressionRequest(session_id="s1", messages=rows(messages), settings=settings, **extra)


@pytest.fixture
def host() -> PluginHost:
    return PluginHost(summarizers=[FixedSummarizer()])


@pytest.fixture
def engine(host: PluginHost) -> ContextCompressor:
    compressor = ContextCompressor(clock=Clock())
    compressor.bind(host)
    return compressor


def out_messages(result: Any) -> list[Message]:
    return [m.message for m in result.messages]


# -- the conformance suite of the core ------------------------------------------------------


class TestConformanceLean(ContextEngineSuite):
    @pytest.fixture
    def engine(self) -> ContextCompressor:
        return ContextCompressor()

    @pytest.fixture
    def host(self) -> PluginHost:
        return PluginHost()


class TestConformanceLegacy(TestConformanceLean):
    def settings(self, **extra: Any) -> CompressionSettings:
        return super().settings(tail="legacy", **extra)


def test_register_hook_contributes_the_engine() -> None:
    got: list[Any] = []
    register_engine(
        register=got.append, settings=settings_from({"compression": {"breaker_after": 5}})
    )
    assert [type(e) for e in got] == [ContextCompressor] and got[0].name == "compressor"
    assert got[0].settings.breaker_after == 5  # configured from its keys of [compression]


# -- repair rule -------------------------------------------------------------------------------


def test_repair_removes_orphans_and_stubs_missing_results_with_pointer() -> None:
    messages = [
        Message(role="tool", tool_call_id="ghost", content="orphan at start"),
        Message(role="user", content="go"),
        Message(role="assistant", tool_calls=[call("a"), call("b")]),
        Message(role="tool", tool_call_id="a", content="A"),
        Message(role="tool", tool_call_id="a", content="A again"),
        Message(role="user", content="next"),
        Message(role="tool", tool_call_id="b", content="B, too late"),
        Message(role="assistant", content="ok"),
    ]
    fixed = repair_messages(messages, {"b": 42})
    assert [m.role for m in fixed] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert fixed[3].tool_call_id == "b" and "session_open(message_id=42)" in str(fixed[3].content)
    assert not sequence_problems(fixed)
    assert repair_messages(fixed) == fixed


def test_repair_leaves_the_in_flight_last_assistant_alone() -> None:
    messages = [
        Message(role="user", content="go"),
        Message(role="assistant", tool_calls=[call("a"), call("b")]),
        Message(role="tool", tool_call_id="a", content="A"),
    ]
    assert not plan_repair(messages).changes
    assert repair_messages(messages) == messages


# -- prune ---------------------------------------------------------------------------------------


def test_cut_arguments_stays_json_with_keys_and_pointer() -> None:
    args = json.dumps({"path": "src/a.py", "new_str": "x" * 10_000, "n": 3})
    cut = cut_arguments(args, 500, 17)
    data = json.loads(cut)
    assert len(cut) <= 500 and data["path"] == "src/a.py" and data["n"] == 3
    assert "session_open(message_id=17)" in data["_compacted"]


def test_a_call_whose_cut_would_be_longer_keeps_its_arguments() -> None:
    # many strings a little over the cut's limit: each would gain a marker longer than
    # what it loses, so the cut would grow the call (the view's tokens with it)
    from hermes_plugin_compressor.prune import cut_calls

    edits = json.dumps({"edits": [{"old": "a" * 45, "new": "b" * 45} for _ in range(300)]})
    long = json.dumps({"path": "a.go", "content": "x" * 10_000})
    message = Message(
        role="assistant",
        content=None,
        tool_calls=[
            ToolCall(id="e", function=ToolFunction(name="edit", arguments=edits)),
            ToolCall(id="w", function=ToolFunction(name="write", arguments=long)),
        ],
    )
    cut = cut_calls(message, 2_000, 7)
    assert cut.tool_calls is not None
    assert cut.tool_calls[0].function.arguments == edits
    assert len(cut.tool_calls[1].function.arguments) <= 2_000


def test_prune_collapses_duplicates_and_placeholders_name_tool_and_pointer(
    engine: ContextCompressor,
) -> None:
    messages = session(turns=14)
    result = engine.compress(
        request(messages, settings_for(8_000, tail="legacy", protect_first_n=4))
    )
    assert result.status == "compressed", result.reason
    out = out_messages(result)
    head_tools = [m for m in out[:4] if m.role == "tool"]
    assert head_tools, "the protected head holds the first tool round"
    assert head_tools[0].content is not None
    assert str(head_tools[0].content).startswith(
        "[tool result compacted: bash(cmd=pytest tests/test_0.py)"
    )
    assert "session_open(message_id=3)" in str(head_tools[0].content)
    assert not result.messages[2].origin_id  # changed by pruning: no longer a copy
    assert result.messages[0].origin_id == 1  # the task, carried unchanged


def test_a_head_placeholder_says_what_the_result_was(engine: ContextCompressor) -> None:
    # the head stays in the view and is never summarized: its pruned tool result keeps
    # its outcome line, or what it said would be gone from the context
    messages = session(turns=14)
    result = engine.compress(
        request(messages, settings_for(8_000, tail="legacy", protect_first_n=4))
    )
    assert result.status == "compressed", result.reason
    [first, *_] = [m for m in out_messages(result)[:4] if m.role == "tool"]
    assert "returned 3," in str(first.content)
    assert ": FAILED tests/test_0.py::test_x - KeyError: 'k0'; open it with" in str(first.content)


def test_a_large_system_prompt_shrinks_the_tail_so_the_view_buys_room() -> None:
    # a 5.6K-token system prompt takes 28% of a 20K trigger: the lean tail's share of the
    # room, the handoff's floor and the tail's sections used to end the view near 60% of
    # the trigger, so the next compaction came a few turns later
    from hermes_plugin_compressor.engine import AFTER_TARGET
    from hermes_plugin_summarizer_deterministic import DeterministicSummarizer

    engine = ContextCompressor()
    tail = LeanTail(LeanTailSettings(lean_tail_min_tokens=3_000, lean_tail_max_tokens=8_000))
    engine.bind(PluginHost(summarizers=[DeterministicSummarizer()], tails=[tail]))
    settings = settings_for(20_000, tail="lean", summarizer="deterministic")
    result = engine.compress(
        request(session(turns=40, output_chars=1_500), settings, system_tokens=5_600)
    )
    assert result.status == "compressed", result.reason
    assert (result.tokens_after + 5_600) / 20_000 <= AFTER_TARGET
    assert any(note.startswith("tail planned again in ") for note in result.notes)


def test_a_system_prompt_that_fills_the_target_leaves_the_tail_its_last_group() -> None:
    # the system prompt alone is past 57% of the trigger: nothing is left for a tail band,
    # so the tail keeps its last round only (the view used to keep the whole band and end
    # near 70% of the trigger)
    from hermes_plugin_summarizer_deterministic import DeterministicSummarizer

    engine = ContextCompressor()
    tail = LeanTail(LeanTailSettings(lean_tail_min_tokens=3_000, lean_tail_max_tokens=8_000))
    engine.bind(PluginHost(summarizers=[DeterministicSummarizer()], tails=[tail]))
    settings = settings_for(20_000, tail="lean", summarizer="deterministic")
    messages = session(turns=40, output_chars=1_500)
    result = engine.compress(request(messages, settings, system_tokens=11_500))
    assert result.status == "compressed", result.reason
    assert any(note.startswith("tail planned again in 1 of ") for note in result.notes)
    kinds = [m.message.kind for m in result.messages]
    after = result.messages[kinds.index("summary") + 1 :]
    # after the handoff: the carried last user message and the last group, nothing more
    assert [m.message.role for m in after] == ["user", "assistant"]
    assert after[-1].message.content == messages[-1].content


def test_a_huge_tool_output_in_the_tail_yields_room_to_the_handoff() -> None:
    # the last round read a file as large as the after-compaction target: the handoff was
    # sized as if that output stayed whole, and got its floor; fit_tail cuts such an output
    # to an excerpt anyway, so the handoff is sized against the excerpt
    from hermes_plugin_compressor.engine import handoff_floor

    class Recording(FixedSummarizer):
        def __init__(self) -> None:
            super().__init__()
            self.budgets: list[int] = []

        def summarize(self, request: Any) -> Any:
            self.budgets.append(request.max_output_tokens)
            return super().summarize(request)

    summarizer = Recording()
    engine = ContextCompressor()
    tail = LeanTail(LeanTailSettings(lean_tail_min_tokens=20_000, lean_tail_max_tokens=25_000))
    engine.bind(PluginHost(summarizers=[summarizer], tails=[tail]))
    messages = session(turns=200, output_chars=3_000)  # a long history: a large budget
    messages[-1:] = [
        Message(role="assistant", content=None, tool_calls=[call("big", cmd="cat big.go")]),
        Message(role="tool", tool_call_id="big", content="x = 1\n" * 12_000),
    ]
    settings = settings_for(40_000, tail="lean", summarizer="fixed")
    result = engine.compress(request(messages, settings))
    assert result.status == "compressed", result.reason
    assert summarizer.budgets and min(summarizer.budgets) > handoff_floor(40_000)


# -- the four phases -------------------------------------------------------------------------


def test_summary_is_a_typed_record_with_markers_and_sections(engine: ContextCompressor) -> None:
    messages = session(turns=30)
    result = engine.compress(request(messages, settings_for(12_000), insights=["keep X"]))
    assert result.status == "compressed", result.reason
    summaries = [m for m in out_messages(result) if m.kind == "summary"]
    assert len(summaries) == 1
    summary = summaries[0]
    assert summary.role == "user" and isinstance(summary.summary, HandoffSummary)
    assert summary.content == summary.summary.render()
    assert str(summary.content).startswith(SUMMARY_BEGIN) and str(summary.content).endswith(
        SUMMARY_END
    )
    titles = [s.title for s in summary.summary.extra]
    # user quotes are off by default (the handoff quotes the user's requests itself)
    assert titles == ["Identifier Index", "Recovery Pointers"]
    assert result.summary == summary.summary and result.summary.compression_index == 1
    assert result.tokens_after < result.tokens_before
    assert not sequence_problems(out_messages(result))


def test_head_protection_decays_on_later_compressions(engine: ContextCompressor) -> None:
    messages = session(turns=30)
    settings = settings_for(12_000, protect_first_n=3)
    first = engine.compress(request(messages, settings, compression_index=1))
    fourth = engine.compress(request(messages, settings, compression_index=4))
    assert out_messages(first)[0].content == messages[0].content
    assert out_messages(first)[1].tool_calls  # head: task + first tool round
    assert out_messages(fourth)[0].kind == "summary"  # protection fully decayed


def test_last_user_message_survives_even_from_the_middle(engine: ContextCompressor) -> None:
    messages = session(turns=30)
    last_user = [m for m in messages if m.role == "user"][-1]
    more = [m for m in session(turns=6, output_chars=6_000) if m.role != "user"]
    tail_heavy = [*messages, *more]
    result = engine.compress(request(tail_heavy, settings_for(12_000), compression_index=5))
    assert result.status == "compressed", result.reason
    out = out_messages(result)
    users = [m for m in out if m.role == "user" and m.kind == "message"]
    assert users and users[-1].content == last_user.content
    assert out[0].kind == "summary" and out[1].content == last_user.content


def test_previous_summary_is_updated_and_tool_pairs_stay_whole(engine: ContextCompressor) -> None:
    host = PluginHost()
    engine.bind(host)
    store = MemoryStore(host)
    settings = settings_for(9_000, summarizer="deterministic")
    results = replay(session(turns=40), engine, store, settings)
    done = [r for r in results if r.status == "compressed"]
    assert len(done) >= 3
    summaries = [r.summary for r in done if r.summary is not None]
    # later compressions update the previous summary: the goal is the earliest request
    # seen; while the head (kept verbatim at first) holds it, the goal points at it, and
    # once the head joins a middle, its request, the session's task, is quoted as the goal
    goals = [s.goal for s in summaries]
    task = "Fix the flaky test in src/app/models.py"
    assert goals[0] == f"{task} (#1, kept verbatim before this summary)", goals[0]
    assert goals[-1] == f"{task} (#1)", goals
    switch = goals.index(goals[-1])
    assert switch > 0 and all(goal == goals[0] for goal in goals[:switch])
    # the later request the goal no longer quotes is a fact of its own
    assert "- #14 user: Keep going, turn 3" in summaries[0].progress
    assert len(summaries[-1].progress.splitlines()) > len(summaries[0].progress.splitlines())
    assert [s.compression_index for s in summaries] == [
        i + 1 for i, r in enumerate(results) if r.status == "compressed"
    ]
    assert not sequence_problems([row.message for row in store.view()])


def test_not_smaller_aborts_and_breaker_opens(host: PluginHost) -> None:
    engine = ContextCompressor(CompressorSettings(breaker_after=2), clock=Clock())
    huge = FixedSummarizer("z " * 20_000)
    huge.name = "huge"
    engine.bind(PluginHost(summarizers=[huge]))
    settings = settings_for(12_000, summarizer="huge")
    messages = session(turns=30)
    for _ in range(2):
        result = engine.compress(request(messages, settings))
        assert result.status == "aborted" and "not be smaller" in result.reason
        assert result.messages == []
    assert engine.status("s1", 12_000).circuit_open
    assert not engine.should_compress("s1", 50_000, 12_000)
    skipped = engine.compress(request(messages, settings))
    assert skipped.status == "skipped" and "circuit breaker" in skipped.reason
    engine.bind(PluginHost(summarizers=[FixedSummarizer()]))
    manual = engine.compress(
        request(messages, settings.model_copy(update={"summarizer": "fixed"}), manual=True)
    )
    assert manual.status == "compressed"
    assert not engine.status("s1", 12_000).circuit_open


def test_nothing_to_compress_is_skipped(engine: ContextCompressor) -> None:
    messages = session(turns=1)
    result = engine.compress(request(messages, settings_for(100_000)))
    assert result.status == "skipped" and result.reason


# -- failure policy over real HTTP ------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def openai_engine(base_url: str, **policy: Any) -> tuple[ContextCompressor, Clock]:
    settings = settings_from({"summarizer": {"openai": {"base_url": base_url, "model": "gpt-5.5"}}})
    clock = Clock()
    engine = ContextCompressor(CompressorSettings(**policy), clock=clock)
    engine.bind(PluginHost(summarizers=[OpenAISummarizer.from_settings(settings)]))
    return engine, clock


def test_aborting_failures_leave_the_session_untouched_and_cool_down() -> None:
    engine, clock = openai_engine(f"http://127.0.0.1:{free_port()}/v1", cooldown_seconds=60)
    settings = settings_for(12_000, summarizer="openai")
    result = engine.compress(request(session(turns=30), settings))
    assert result.status == "aborted" and "network" in result.reason
    assert result.messages == [] and not result.fallback_used
    status = engine.status("s1", 12_000)
    assert status.failures == 1 and status.cooldown_until == clock.now + 60
    again = engine.compress(request(session(turns=30), settings))
    assert again.status == "skipped" and "cooldown" in again.reason


@pytest.mark.parametrize(
    "reply",
    [
        Reply(text="", finish_reason="stop"),
        Reply(refusal="no"),
        Reply(text="## Goal\nx", finish_reason="length"),
    ],
    ids=["empty", "refused", "truncated"],
)
def test_content_failures_abort(fake: FakeOpenAIServer, reply: Reply) -> None:
    fake.script("chat.completions", reply)
    engine, _clock = openai_engine(fake.base_url)
    result = engine.compress(request(session(turns=30), settings_for(12_000, summarizer="openai")))
    assert result.status == "aborted" and result.messages == []


def test_other_failures_fall_back_to_deterministic_then_cooldown_grows(
    fake: FakeOpenAIServer,
) -> None:
    fake.set_default("chat.completions", ErrorReply(status=500))
    engine, clock = openai_engine(fake.base_url, cooldown_seconds=10, max_cooldown_seconds=25)
    settings = settings_for(12_000, summarizer="openai")
    first = engine.compress(request(session(turns=30), settings))
    assert first.status == "compressed" and first.fallback_used
    assert first.summarizer == "deterministic" and first.summary is not None
    assert engine.status("s1", 12_000).cooldown_until == clock.now + 10
    assert engine.compress(request(session(turns=30), settings)).status == "skipped"
    clock.now += 11
    engine.compress(request(session(turns=30), settings))
    assert engine.status("s1", 12_000).cooldown_until == clock.now + 20
    manual = engine.compress(request(session(turns=30), settings, manual=True))
    assert manual.status == "compressed"
    assert engine.status("s1", 12_000).cooldown_until == clock.now + 25  # capped
    fake.set_default("chat.completions", Reply(text="## Goal\nall good"))
    ok = engine.compress(request(session(turns=30), settings, manual=True))
    assert ok.status == "compressed" and not ok.fallback_used and ok.summarizer == "openai"
    assert engine.status("s1", 12_000).cooldown_until is None


def test_abort_on_summary_failure_keeps_session_until_manual(fake: FakeOpenAIServer) -> None:
    fake.set_default("chat.completions", ErrorReply(status=500))
    engine, _clock = openai_engine(fake.base_url, cooldown_seconds=0)
    settings = settings_for(12_000, summarizer="openai", abort_on_summary_failure=True)
    result = engine.compress(request(session(turns=30), settings))
    assert result.status == "aborted" and "abort_on_summary_failure" in result.reason
    manual = engine.compress(
        request(session(turns=30), settings, manual=True, focus="the KeyError")
    )
    assert manual.status == "compressed" and manual.fallback_used
    assert manual.summary is not None and "the KeyError" in manual.summary.goal


def test_prefix_reuse_sends_system_prompt_tools_and_reports_usage(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text="## Goal\nkeep going"))
    settings = settings_from({"model": {"base_url": fake.base_url}})
    engine = ContextCompressor(clock=Clock())
    engine.bind(PluginHost(summarizers=[OpenAISummarizer.from_settings(settings)]))
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    req = request(
        session(turns=30),
        settings_for(12_000, summarizer="openai", summary_prefix_reuse=True),
        system_prompt="You are the agent.",
        tools=tools,
        model="gpt-4o-mini",
    )
    result = engine.compress(req)
    assert result.status == "compressed", result.reason
    body = fake.requests_to("chat.completions")[0].body
    assert body["messages"][0] == {"role": "system", "content": "You are the agent."}
    assert body["messages"][1]["content"] == "Fix the flaky test in src/app/models.py"
    assert len(body["messages"]) == len(req.messages) + 2 and body["tools"] == tools
    assert body["model"] == "gpt-4o-mini"
    assert result.summary_usage is not None and result.summary_usage.input_tokens > 0
    assert engine.status("s1", 12_000).detail["last_summary_usage"]["input_tokens"] > 0


# -- usage, status, select_context ---------------------------------------------------------------


def test_usage_and_should_compress(engine: ContextCompressor) -> None:
    engine.update_usage("s1", Usage(input_tokens=9_000, cache_read_tokens=8_000))
    status = engine.status("s1", 10_000)
    assert status.engine == "compressor" and status.last_prompt_tokens == 9_000
    assert not engine.should_compress("s1", 9_000, 10_000)
    assert engine.should_compress("s1", 10_000, 10_000)


def test_repair_view_repairs_only_broken_views(engine: ContextCompressor) -> None:
    good = session(turns=2)
    settings = settings_for(10_000)
    assert (
        engine.repair_view(SelectRequest(session_id="s1", messages=good, settings=settings)) is None
    )
    broken = [Message(role="tool", tool_call_id="x", content="orphan"), *good]
    chosen = engine.repair_view(SelectRequest(session_id="s1", messages=broken, settings=settings))
    assert chosen == good


def test_select_context_leaves_requests_alone(engine: ContextCompressor) -> None:
    # the runtime validates every sequence it sends; the default engine costs nothing per request
    good = session(turns=2)
    request = SelectRequest(session_id="s1", messages=good, settings=settings_for(10_000))
    assert engine.select_context(request) is None


# -- quality on a real transcript ------------------------------------------------------------------


def test_quality_identifiers_survive_repeated_compression_of_a_real_transcript() -> None:
    """Replay the OpenHands django transcript with a 12K trigger: compression fires many times.

    Identifiers (the core's independent extractor: paths, SHAs, issue numbers,
    URLs, branches, exceptions, error lines) found in compacted rows are
    counted in the final active context; every one is found again by one
    search over the stored rows, and the final recovery pointers cover the
    rows evicted by the last compression.
    """
    host = PluginHost()
    engine = ContextCompressor(clock=Clock())
    engine.bind(host)
    store = MemoryStore(host)
    # the default summarizer: identifiers live in its facts and in the lean tail's index
    settings = settings_for(12_000, summarizer="deterministic")
    results = replay(load_openai_chat()[1:], engine, store, settings)
    compressed = [r for r in results if r.status == "compressed"]
    assert len(compressed) >= 5
    active = [row.message for row in store.view()]
    assert not sequence_problems(active)
    assert store.tokens() < 12_000 * 1.2

    def text(m: Message) -> str:
        return m.text() + " " + json.dumps([c.model_dump() for c in m.tool_calls or []])

    compacted = store.compacted()
    wanted = flatten(extract_all(text(row.message) for row in compacted))
    active_text = "\n".join(text(m) for m in active)
    kept = {value for value in wanted if value in active_text}
    ratio = len(kept) / len(wanted)
    print(
        f"identifiers kept {len(kept)}/{len(wanted)} = {ratio:.2f}, active {store.tokens()} tokens"
    )
    assert ratio >= 0.5
    assert all(store.search(value) for value in wanted - kept)
    summary = next(m.summary for m in active if m.kind == "summary")
    assert summary is not None
    pointers = next(s.body for s in summary.extra if s.title == "Recovery Pointers")
    assert "message ids" in pointers


def test_a_huge_tool_output_in_the_tail_is_cut_to_an_excerpt_so_the_view_fits(
    engine: ContextCompressor, host: PluginHost
) -> None:
    # the latest round returns one enormous output: the tail alone overflows the trigger
    messages = session(turns=6, output_chars=2_000)[:-1]
    huge = "build log line\n" * 6_000 + "ERROR: linker failed: undefined symbol foo_bar\n"
    messages += [
        Message(role="assistant", content="Building", tool_calls=[call("big", cmd="make")]),
        Message(role="tool", tool_call_id="big", content=huge),
    ]
    settings = settings_for(8_000, tail="lean")
    result = engine.compress(request(messages, settings))
    assert result.status == "compressed", result.reason
    assert result.tokens_after <= int(8_000 * 0.8)
    cut = next(m.message for m in result.messages if m.message.tool_call_id == "big")
    text = cut.text()
    assert "chars cut to fit the context" in text
    assert "undefined symbol foo_bar" in text  # the end of the output survives
    big_id = len(messages)  # rows() numbers messages from 1
    assert f"message_id={big_id}" in text
    assert not sequence_problems(out_messages(result))


def test_the_tail_is_fitted_beside_a_large_system_prompt(
    engine: ContextCompressor, host: PluginHost
) -> None:
    """The system prompt stays beside the messages: with one taking 40% of the trigger and
    a last round of three long outputs, the view after a compaction (prompt included)
    still ends well under the trigger."""
    from hermes_plugin_compressor.prune import FIT_RATIO, fit_limit

    messages = session(turns=6, output_chars=2_000)[:-1]
    ids = ["a", "b", "c"]
    calls = [call(i, cmd=f"make {i}") for i in ids]
    messages.append(Message(role="assistant", content="Building", tool_calls=calls))
    for i in ids:
        log = f"build {i} log line\n" * 300 + f"ERROR: linker failed on {i}\n"
        messages.append(Message(role="tool", tool_call_id=i, content=log))
    settings = settings_for(8_000, tail="lean")
    system = 3_200
    assert fit_limit(8_000, system) == int(8_000 * FIT_RATIO) - system
    assert fit_limit(8_000, 7_000) == 1_000  # a prompt past the limit: an eighth is left
    result = engine.compress(request(messages, settings, system_tokens=system))
    assert result.status == "compressed", result.reason
    # before, the messages alone were fitted to 55% and the view ended at 93% of the trigger
    assert system + result.tokens_after <= 8_000 * 0.7
    for i in ids:
        cut = next(m.message for m in result.messages if m.message.tool_call_id == i)
        assert f"ERROR: linker failed on {i}" in cut.text()  # each output's end survives
    assert not sequence_problems(out_messages(result))


def first_round(files: int = 4, lines: int = 700) -> list[Message]:
    """A task whose first round reads ``files`` large files in parallel."""
    calls = [call(f"r{i}", name="read", path=f"src/part{i}.go") for i in range(files)]
    out = [
        Message(role="user", content="Implement the plan in PLAN.md; keep the public API"),
        Message(role="assistant", content="Reading the files first.", tool_calls=calls),
    ]
    for i in range(files):
        body = "".join(f"func part{i}_{n}() int {{ return {n} }}\n" for n in range(lines))
        out.append(Message(role="tool", tool_call_id=f"r{i}", content=body + f"// END {i}\n"))
    return out


def test_a_first_round_over_the_trigger_is_fitted_without_a_summary(
    engine: ContextCompressor, host: PluginHost
) -> None:
    """The head and the tail's last group hold the whole view (the task, then one round
    of parallel reads larger than the trigger): there is no middle to summarize, and the
    compression was skipped, so every request of the round went out over the window. Now
    the outputs are cut to excerpts naming their stored rows, and no summary is made."""
    from hermes_plugin_compressor.prune import fit_limit

    messages = first_round()
    settings = settings_for(8_000, tail="lean")
    assert sum(host.count_message(m) for m in messages) > 8_000
    result = engine.compress(request(messages, settings, system_tokens=1_000))
    assert result.status == "compressed", result.reason
    assert result.summary is None
    out = out_messages(result)
    assert not any(m.kind == "summary" for m in out)
    assert 1_000 + result.tokens_after <= 1_000 + fit_limit(8_000, 1_000)
    assert out[0] == messages[0] and out[1] == messages[1]  # the task and the calls stand
    for i, message in enumerate(out[2:]):
        assert message.tool_call_id == f"r{i}" and f"// END {i}" in message.text()
        assert f"session_open(message_id={i + 3})" in message.text()  # rows 3-6 hold them
    assert not sequence_problems(out)
    assert any("no summary" in note for note in result.notes)
    # under the trigger there is nothing to do: skipped, as before
    small = engine.compress(request(first_round(lines=40), settings, manual=True))
    assert small.status == "skipped" and "nothing to compress" in small.reason


def test_harness_text_before_the_task_neither_fills_nor_uses_up_the_head(
    engine: ContextCompressor, host: PluginHost
) -> None:
    """A real Claude Code session opened with ``/release-notes``: a caveat, the command and
    its 13,904-token output came before the task, took the three protected head messages
    and stayed verbatim, so its first compaction ended at 0.79 of the trigger. Harness text
    does not count towards ``protect_first_n`` now, and a long one is cut in place."""
    notes = "".join(f"Version 0.2.{n}: fuzzy matching for /commands, fixes\n" for n in range(900))
    task = "Fix the `entire resume` bug after a merge; keep the CLI flags"
    messages = [
        Message(
            role="user",
            content="<local-command-caveat>Caveat</local-command-caveat>",
            harness="claude_code.caveat",
        ),
        Message(
            role="user",
            content="<command-name>/release-notes</command-name>",
            harness="claude_code.command",
        ),
        Message(
            role="user",
            content=f"<local-command-stdout>{notes}</local-command-stdout>",
            harness="claude_code.command_output",
        ),
        Message(role="user", content=task),
        *session(turns=8, output_chars=2_000)[1:],
    ]
    result = engine.compress(request(messages, settings_for(8_000, tail="lean")))
    assert result.status == "compressed", result.reason
    out = out_messages(result)
    # the head: the two short harness messages as they were, the output cut to its start
    # and a pointer, then the task itself (before, it was only summarized)
    assert out[0] == messages[0] and out[1] == messages[1]
    assert out[2].harness == "claude_code.command_output"
    assert "claude_code.command_output text compacted" in out[2].text()
    assert "session_open(message_id=3)" in out[2].text()
    assert len(out[2].text()) < 400
    assert out[3] == messages[3]
    assert out[4].kind != "summary"  # the head goes on past the task (its first round)
    assert result.tokens_after <= 8_000 * 0.6
    assert not sequence_problems(out)
    # standing context a harness injected (a project's instructions, its own summary of an
    # earlier conversation) is never cut
    from hermes_plugin_compressor.prune import cuttable_harness

    assert cuttable_harness("claude_code.command_output") and cuttable_harness("x.reminder")
    for kept in ("codex.user_instructions", "claude_code.compaction_summary", "claude_code.meta"):
        assert not cuttable_harness(kept)
        rules = Message(role="user", content="AGENTS.md: never push to main\n" * 200, harness=kept)
        standing = [rules, Message(role="user", content=task), *session(turns=8)[1:]]
        result = engine.compress(request(standing, settings_for(8_000, tail="lean")))
        assert result.status == "compressed", result.reason
        assert out_messages(result)[0] == rules


def test_the_carried_user_message_is_the_users_not_a_harness_reminder(
    engine: ContextCompressor, host: PluginHost
) -> None:
    """The last real user message is carried verbatim after the summary; a reminder the
    harness injected later (a user-role message) was taken for it, and the user's last
    request was left to the summary."""
    request_text = "Now also fix src/app/views.py, and keep the public API as it is"

    def rounds(prefix: str, count: int) -> list[Message]:
        out: list[Message] = []
        for t in range(count):
            out.append(
                Message(role="assistant", content="on it", tool_calls=[call(f"{prefix}{t}")])
            )
            log = f"{prefix}{t} log line\n" * 250
            out.append(Message(role="tool", tool_call_id=f"{prefix}{t}", content=log))
        return out

    reminder = Message(
        role="user",
        content="<system-reminder>The todo list is empty.</system-reminder>",
        harness="claude_code.system_reminder",
    )
    messages = [
        Message(role="user", content="Fix the flaky test in src/app/models.py"),
        *rounds("a", 4),
        Message(role="user", content=request_text),
        *rounds("b", 2),
        reminder,
        *rounds("c", 6),
    ]
    result = engine.compress(request(messages, settings_for(8_000, tail="lean")))
    assert result.status == "compressed", result.reason
    out = out_messages(result)
    at = next(i for i, m in enumerate(out) if m.kind == "summary")
    assert out[at + 1] == Message(role="user", content=request_text)
    assert not any(m.harness is not None for m in out[at + 1 :])
    assert not sequence_problems(out)


def test_a_huge_patch_in_the_tail_is_cut_so_the_compaction_buys_room(
    engine: ContextCompressor, host: PluginHost
) -> None:
    # the latest round wrote a file whole: the call's arguments, not a tool output, fill the
    # tail; left whole the view after the compaction stayed near the trigger
    from hermes_plugin_compressor.engine import AFTER_TARGET

    messages = session(turns=6, output_chars=2_000)[:-1]
    body = "".join(f"func f{i}() int {{ return {i} }}\n" for i in range(2_500))
    patch = json.dumps({"path": "engine.go", "content": body + "// END-OF-ENGINE\n"})
    messages += [
        Message(
            role="assistant",
            content="Rewriting the engine",
            tool_calls=[ToolCall(id="w", function=ToolFunction(name="write", arguments=patch))],
        ),
        Message(role="tool", tool_call_id="w", content="wrote engine.go"),
    ]
    settings = settings_for(8_000, tail="lean")
    result = engine.compress(request(messages, settings))
    assert result.status == "compressed", result.reason
    assert result.tokens_after <= 8_000 * (AFTER_TARGET + 0.05)
    assert any(note.startswith("cut oversized tool traffic") for note in result.notes)
    cut = next(
        m.message for m in result.messages if any(c.id == "w" for c in m.message.tool_calls or ())
    )
    assert cut.tool_calls is not None
    arguments = json.loads(cut.tool_calls[0].function.arguments)
    assert arguments["path"] == "engine.go"  # its keys and short values stay
    assert "chars cut" in arguments["content"]
    assert f"message_id={len(messages) - 1}" in arguments["_compacted"]
    assert not sequence_problems(out_messages(result))


@pytest.mark.parametrize("shape", ["a file written whole", "many small edits"])
def test_the_room_a_call_in_the_tail_claims_is_what_fit_tail_leaves_of_it(shape: str) -> None:
    # the handoff is sized against what the tail keeps once fitted: a call of one long
    # string shrinks to its share; one of many short strings cannot, and counts whole
    from hermes_plugin_compressor.items import Item
    from hermes_plugin_compressor.prune import fit_tail, fitted_tokens

    host = PluginHost()
    if shape == "a file written whole":
        arguments = json.dumps({"path": "a.go", "content": "x := 1\n" * 8_000})
    else:
        edits = [{"old": f"v{i}", "new": f"w{i}"} for i in range(1_500)]
        arguments = json.dumps({"path": "a.go", "edits": edits})
    call_message = Message(
        role="assistant",
        content="Writing",
        tool_calls=[ToolCall(id="w", function=ToolFunction(name="write", arguments=arguments))],
    )
    stored = rows([call_message, Message(role="tool", tool_call_id="w", content="ok")])
    items = [
        Item(message=r.message, tokens=host.count_message(r.message), stored=r) for r in stored
    ]
    limit = 2_000
    claimed = fitted_tokens(items, limit, host.count_message)
    fit_tail(items, 0, limit, host.count_message)
    assert claimed == sum(item.tokens for item in items)
    if shape == "many small edits":
        assert not items[0].changed  # a cut would not have made it smaller


# -- facts handed to the summarizer, its answer checked ----------------------------------


class _Recording(Summarizer):
    name = "recording"
    context_length = None

    def __init__(self, summary: HandoffSummary) -> None:
        self.summary = summary
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        return SummaryResult(summary=self.summary, summarizer=self.name)


def _compress(summarizer: Summarizer, **extra: Any) -> Any:
    engine = ContextCompressor(clock=Clock())
    engine.bind(PluginHost(summarizers=[summarizer]))
    settings = settings_for(12_000, summarizer=summarizer.name, **extra)
    return engine.compress(request(session(turns=30), settings))


def test_engine_hands_facts_to_the_summarizer_and_strips_reasoning_from_its_answer() -> None:
    recording = _Recording(HandoffSummary(goal="<think>plan</think>Ship it", progress="p"))
    result = _compress(recording)
    assert result.status == "compressed", result.reason
    assert recording.requests and recording.requests[0].facts
    assert result.summary.goal == "Ship it"


def test_an_empty_handoff_is_a_summarizer_failure_and_the_fallback_answers() -> None:
    empty = _Recording(HandoffSummary(goal="<think>only thoughts</think>"))
    result = _compress(empty)
    assert result.status == "compressed", result.reason
    assert result.fallback_used and result.summarizer == "deterministic"
    assert any("no content in any section" in note for note in result.notes)


class _Wordy(Summarizer):
    """Writes about two tokens for every token of its budget (``x0 x1 ...``)."""

    name = "wordy"
    context_length = None

    def __init__(self, *, in_process: bool) -> None:
        self.in_process = in_process
        self.budgets: list[int] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.budgets.append(request.max_output_tokens)
        text = " ".join(f"x{i}" for i in range(request.max_output_tokens))
        return SummaryResult(summary=HandoffSummary(progress=text), summarizer=self.name)


def test_an_in_process_handoff_over_its_room_is_written_again_in_a_smaller_budget() -> None:
    from hermes_plugin_compressor.engine import HANDOFF_CAP

    wordy = _Wordy(in_process=True)
    engine = ContextCompressor(clock=Clock())
    host = PluginHost(summarizers=[wordy])
    engine.bind(host)
    threshold = 4_000  # the history is large: the budget is the room the window leaves
    settings = settings_for(threshold, summarizer=wordy.name)
    result = engine.compress(request(session(turns=30), settings))
    assert result.status == "compressed", result.reason
    assert len(wordy.budgets) == 2 and wordy.budgets[1] < wordy.budgets[0] * 0.6
    assert result.summary is not None
    handoff = host.count_message(Message(role="user", content=result.summary.render()))
    assert handoff <= threshold / HANDOFF_CAP * 1.1  # about the room: no third run
    assert any("handoff written again" in note for note in result.notes)
    # a summarizer that calls a model is bounded by its own output limit: asked once
    remote = _Wordy(in_process=False)
    engine = ContextCompressor(clock=Clock())
    engine.bind(PluginHost(summarizers=[remote]))
    settings = settings_for(threshold, summarizer=remote.name)
    result = engine.compress(request(session(turns=30), settings))
    assert result.status == "compressed", result.reason
    assert len(remote.budgets) == 1


class _WordyOnce(_Wordy):
    """Its first handoff overshoots; writing it again fails."""

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.budgets:
            raise SummarizerError("malformed", "no second draft", summarizer=self.name)
        return super().summarize(request)


def test_a_failed_second_run_keeps_the_first_handoff_and_the_remarks_are_said_once() -> None:
    once = _WordyOnce(in_process=True)
    engine = ContextCompressor(clock=Clock())
    tail = LeanTail(LeanTailSettings(lean_tail_min_tokens=500, lean_tail_max_tokens=1_000))
    engine.bind(PluginHost(summarizers=[once], tails=[tail]))
    settings = settings_for(4_000, summarizer=once.name, tail="lean", summary_input_tokens=2_000)
    result = engine.compress(request(session(turns=30), settings))
    assert result.status == "compressed", result.reason
    assert not result.fallback_used and result.summarizer == once.name
    assert any(note.startswith("handoff kept at ") for note in result.notes)
    assert len(result.notes) == len(set(result.notes)), result.notes
    status = engine.status("s1", 4_000)
    assert status.cooldown_until is None and status.failures == 0


def test_the_view_after_a_compaction_stays_within_its_target_share_of_the_threshold() -> None:
    # the deterministic handoff sizes its text in characters, and the lean tail adds its
    # sections to the handoff's message: both count against the room the view leaves
    from hermes_plugin_compressor.engine import AFTER_TARGET
    from hermes_plugin_summarizer_deterministic import DeterministicSummarizer

    engine = ContextCompressor()
    engine.bind(PluginHost(summarizers=[DeterministicSummarizer()], tails=[LeanTail()]))
    threshold = 8_000
    result = engine.compress(
        request(session(turns=120, output_chars=3_000), settings_for(threshold, tail="lean"))
    )
    assert result.status == "compressed", result.reason
    assert result.tokens_after <= threshold * (AFTER_TARGET + 0.02)


def test_a_turns_draft_rows_get_no_message_id_in_the_handoff() -> None:
    # a mid-turn view is planned over the history and the turn's draft, whose rows are not
    # stored yet (negative ids): the handoff quotes no id for them (session_open could not
    # open one), and the view's copies keep the draft id for the runtime to map at commit
    from hermes_plugin_summarizer_deterministic import DeterministicSummarizer

    engine = ContextCompressor()
    tail = LeanTail(LeanTailSettings(lean_tail_min_tokens=2_000, lean_tail_max_tokens=4_000))
    engine.bind(PluginHost(summarizers=[DeterministicSummarizer()], tails=[tail]))
    messages = session(turns=40, output_chars=1_500)
    stored = rows(messages)
    turn = len(stored) - 60  # the last 60 messages are the turn's draft
    stored[turn:] = [row.model_copy(update={"id": -(i + 1)}) for i, row in enumerate(stored[turn:])]
    settings = settings_for(20_000, tail="lean", summarizer="deterministic")
    result = engine.compress(
        CompressionRequest(session_id="s1", messages=stored, settings=settings)
    )
    assert result.status == "compressed", result.reason
    assert result.summary is not None
    rendered = result.summary.render()
    assert "#-" not in rendered and "message id -" not in rendered
    assert "message_id=-" not in " ".join(m.message.text() for m in result.messages)
    assert any(m.origin_id is not None and m.origin_id < 0 for m in result.messages)
    # its facts from draft rows keep the draft id, for commit to name the stored one
    drafted = [f for f in result.summary.facts if f.draft_id is not None]
    assert drafted and all(f.message_id is None for f in drafted)
    ids = {row.id: 10_000 - row.id for row in stored if row.id < 0}
    named = result.summary.with_stored_ids(ids)
    assert {f.message_id for f in named.facts} >= {ids[d] for f in drafted if (d := f.draft_id)}
    # a draft id the map does not name (a row commit did not store) is left as it was
    first = drafted[0].draft_id
    assert first is not None
    partial = result.summary.with_stored_ids({d: i for d, i in ids.items() if d != first})
    left = [f for f in partial.facts if f.draft_id is not None]
    assert (
        left and {f.draft_id for f in left} == {first} and all(f.message_id is None for f in left)
    )


class RecordingSummarizer(Summarizer):
    """The deterministic handoff, remembering each request it was given."""

    name = "recording"
    in_process = True

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        from hermes_plugin_summarizer_deterministic import DeterministicSummarizer

        self.requests.append(request)
        return DeterministicSummarizer().summarize(request)


def test_a_task_kept_in_the_head_is_the_handoffs_goal_not_none() -> None:
    # the only request sits in the protected head: the middle holds none, and the goal
    # used to read "(none)" right below the task it should have named
    messages = [m for m in session(turns=30) if m.role != "user" or m is session()[0]]
    messages[0] = Message(role="user", content="Fix the flaky test in src/app/models.py")
    recording = RecordingSummarizer()
    compressor = ContextCompressor(clock=Clock())
    compressor.bind(PluginHost(summarizers=[recording]))
    first = compressor.compress(request(messages, settings_for(12_000, summarizer="recording")))
    assert first.status == "compressed", first.reason
    asked = recording.requests[-1]
    assert asked.head_request is not None and asked.head_request.message_id == 1
    assert not any(f.kind == "request" for f in asked.facts or [])
    assert out_messages(first)[0].content == messages[0].content  # the head, verbatim
    assert first.summary is not None and first.summary.goal == (
        "Fix the flaky test in src/app/models.py (#1, kept verbatim before this summary)"
    )
    # once the head has joined a middle, the goal quotes the task itself
    later = compressor.compress(
        request(
            messages,
            settings_for(12_000, summarizer="recording", protect_first_n=0),
            previous_summary=first.summary,
            compression_index=2,
        )
    )
    assert recording.requests[-1].head_request is None
    assert (
        later.summary is not None
        and later.summary.goal == "Fix the flaky test in src/app/models.py (#1)"
    )
