"""The ``openai`` summarizer against the loopback fake OpenAI server, and the ``deterministic`` one.

Every failure class goes over real HTTP to ``hermes_core.testing.fake_openai``
(its requests and answers are validated with the official ``openai`` types).
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from hermes_core.config import settings_from
from hermes_core.testing.fake_openai import (
    Drop,
    ErrorReply,
    FakeOpenAIServer,
    Malformed,
    RecordedRequest,
    Reply,
)
from hermes_hookspecs import (
    HandoffFact,
    HandoffSummary,
    Message,
    SummarizerError,
    SummaryRequest,
    ToolCall,
    ToolFunction,
)
from hermes_plugin_summarizer_deterministic import DeterministicSummarizer
from hermes_plugin_summarizer_openai import OpenAISummarizer
from hermes_plugin_summarizer_openai import register_summarizers as register_openai
from tests.compressor_support import load_openai_chat

GOOD = (
    "## Goal\nFix the admin inline permissions.\n\n## Constraints\nDo not touch tests.\n\n"
    "## Progress\nEdited django/contrib/admin/options.py (message id 7).\n\n## Decisions\n(none)"
    "\n\n## Files\ndjango/contrib/admin/options.py\n\n## Next Steps\nRun the tests.\n\n"
    "## Critical Context\nValueError: bad inline"
)


def free_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def summarizer_for(
    base_url: str, *, main_url: str = "", timeout: float = 5.0, **extra: Any
) -> OpenAISummarizer:
    settings = settings_from(
        {
            "model": {
                "name": "gpt-4o-mini",
                "base_url": main_url,
                "api_key_env": "HERMES_TEST_MAIN_KEY",
            },
            "summarizer": {
                "openai": {
                    "base_url": base_url,
                    "model": "gpt-5.5",
                    "api_key_env": "HERMES_TEST_AUX_KEY",
                    "timeout": timeout,
                    **extra,
                }
            },
        }
    )
    return OpenAISummarizer.from_settings(settings)


def request(**extra: Any) -> SummaryRequest:
    messages = [
        Message(role="user", content="Please fix the inline permission bug in django admin."),
        Message(
            role="assistant",
            content="Looking at the code.",
            tool_calls=[
                ToolCall(id="c1", function=ToolFunction(name="bash", arguments='{"cmd": "ls"}'))
            ],
        ),
        Message(role="tool", tool_call_id="c1", content="django/contrib/admin/options.py"),
    ]
    return SummaryRequest(
        session_id="s", messages=messages, recovery_ids=[5, 6, 7], max_output_tokens=500, **extra
    )


def failure(summarizer: OpenAISummarizer, req: SummaryRequest | None = None) -> SummarizerError:
    with pytest.raises(SummarizerError) as caught:
        summarizer.summarize(req or request())
    return caught.value


# -- success -------------------------------------------------------------------------


def test_success_parses_the_seven_sections_and_usage(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text=GOOD))
    result = summarizer_for(fake.base_url).summarize(request(insights=["keep ticket 8060"]))
    assert result.summarizer == "openai"
    assert result.summary.goal == "Fix the admin inline permissions."
    assert result.summary.decisions == ""
    assert result.summary.files == "django/contrib/admin/options.py"
    assert result.usage is not None and result.usage.input_tokens > 0
    body = fake.requests_to("chat.completions")[0].body
    assert body["model"] == "gpt-5.5"
    prompt = body["messages"][1]["content"]
    assert "[message id 6] assistant: Looking at the code." in prompt
    assert "keep ticket 8060" in prompt


def test_previous_summary_and_focus_go_into_the_prompt(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text=GOOD))
    previous = HandoffSummary(goal="Old goal about ticket 8060")
    summarizer_for(fake.base_url).summarize(request(previous_summary=previous, focus="tests"))
    prompt = fake.requests_to("chat.completions")[0].body["messages"][1]["content"]
    assert "<previous_summary>" in prompt and "Old goal about ticket 8060" in prompt
    assert "Pay particular attention to: tests" in prompt


def test_facts_go_into_the_prompt_as_material_to_keep_verbatim(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text=GOOD))
    facts = [
        HandoffFact(kind="request", text="Never touch the migrations.", message_id=2, score=10),
        HandoffFact(
            kind="error",
            text="FAILED test_inline.py::test_perm - AssertionError (from bash: pytest -x)",
            message_id=9,
            position=3,
            score=8,
        ),
    ]
    summarizer_for(fake.base_url).summarize(request(facts=facts))
    prompt = fake.requests_to("chat.completions")[0].body["messages"][1]["content"]
    assert "<facts>" in prompt and "copied verbatim" in prompt
    assert "- [message id 2] user request: Never touch the migrations." in prompt
    assert "- [message id 9] error: FAILED test_inline.py::test_perm" in prompt


def test_api_key_is_sent_from_the_configured_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HERMES_TEST_AUX_KEY", "sk-aux")
    with FakeOpenAIServer(api_key="sk-aux") as server:
        server.script("chat.completions", Reply(text=GOOD))
        assert summarizer_for(server.base_url).summarize(request()).summary.goal


# -- every failure class --------------------------------------------------------------


def test_network_down_is_network_and_aborts() -> None:
    error = failure(summarizer_for(f"http://127.0.0.1:{free_port()}/v1"))
    assert error.kind == "network" and error.aborts


def test_401_is_auth_and_aborts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_TEST_AUX_KEY", "sk-wrong")
    with FakeOpenAIServer(api_key="sk-right") as server:
        error = failure(summarizer_for(server.base_url))
    assert error.kind == "auth" and error.aborts
    assert "401" in str(error)


def test_429_insufficient_quota_is_quota_and_aborts(fake: FakeOpenAIServer) -> None:
    fake.script(
        "chat.completions",
        ErrorReply(
            status=429, type="insufficient_quota", code="insufficient_quota", message="no credit"
        ),
    )
    error = failure(summarizer_for(fake.base_url))
    assert error.kind == "quota" and error.aborts


def test_429_otherwise_is_rate_limit_and_does_not_abort(fake: FakeOpenAIServer) -> None:
    fake.script(
        "chat.completions",
        ErrorReply(status=429, type="requests", code="rate_limit_exceeded", retry_after_s=1),
    )
    error = failure(summarizer_for(fake.base_url))
    assert error.kind == "rate_limit" and not error.aborts


def test_500_is_server_and_does_not_abort(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", ErrorReply(status=500))
    error = failure(summarizer_for(fake.base_url))
    assert error.kind == "server" and not error.aborts


def test_dropped_connection_is_server(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Drop())
    assert failure(summarizer_for(fake.base_url)).kind == "server"


def test_truncated_answer_is_truncated_and_aborts(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text="## Goal\nFix the adm", finish_reason="length"))
    error = failure(summarizer_for(fake.base_url))
    assert error.kind == "truncated" and error.aborts


def test_empty_answer_is_empty_and_aborts(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text=""))
    error = failure(summarizer_for(fake.base_url))
    assert error.kind == "empty" and error.aborts


def test_refusal_is_refused_and_aborts(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(refusal="I can't help with that."))
    error = failure(summarizer_for(fake.base_url))
    assert error.kind == "refused" and error.aborts
    assert "I can't help" in str(error)


def test_body_that_is_not_json_is_malformed(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Malformed())
    assert failure(summarizer_for(fake.base_url)).kind == "malformed"


def test_answer_without_sections_is_malformed(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text="Sure! Here is a summary in prose."))
    error = failure(summarizer_for(fake.base_url))
    assert error.kind == "malformed" and not error.aborts


def test_slow_answer_is_timeout(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text=GOOD, delay_s=3.0))
    error = failure(summarizer_for(fake.base_url, timeout=0.3))
    assert error.kind == "timeout" and not error.aborts


def test_no_endpoint_at_all_is_config() -> None:
    error = failure(summarizer_for(""))
    assert error.kind == "config" and "summarizer.openai.base_url" in str(error)


# -- fallback to the main model's endpoint --------------------------------------------


def test_unavailable_auxiliary_falls_back_once_to_the_main_endpoint() -> None:
    with FakeOpenAIServer() as main:
        main.script("chat.completions", Reply(text=GOOD))
        summarizer = summarizer_for(f"http://127.0.0.1:{free_port()}/v1", main_url=main.base_url)
        result = summarizer.summarize(request())
        assert result.fell_back_to_main_model
        sent = main.requests_to("chat.completions")
        assert len(sent) == 1 and sent[0].body["model"] == "gpt-4o-mini"


def test_auxiliary_500_falls_back_and_main_failure_names_both() -> None:
    with FakeOpenAIServer() as aux, FakeOpenAIServer() as main:
        aux.script("chat.completions", ErrorReply(status=503))
        main.script("chat.completions", ErrorReply(status=500))
        error = failure(summarizer_for(aux.base_url, main_url=main.base_url))
        assert error.kind == "server"
        assert "auxiliary endpoint failed" in str(error)
        assert len(main.requests_to("chat.completions")) == 1


def test_content_failures_do_not_fall_back() -> None:
    with FakeOpenAIServer() as aux, FakeOpenAIServer() as main:
        aux.script("chat.completions", Reply(text="", finish_reason="length"))
        error = failure(summarizer_for(aux.base_url, main_url=main.base_url))
        assert error.kind == "truncated"
        assert main.requests_to("chat.completions") == []


def test_fallback_can_be_switched_off() -> None:
    with FakeOpenAIServer() as aux, FakeOpenAIServer() as main:
        aux.script("chat.completions", ErrorReply(status=500))
        summarizer = summarizer_for(aux.base_url, main_url=main.base_url, fallback_to_main=False)
        assert failure(summarizer).kind == "server"
        assert main.requests_to("chat.completions") == []


def test_main_endpoint_alone_is_used_when_no_auxiliary(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text=GOOD))
    result = summarizer_for("", main_url=fake.base_url).summarize(request())
    assert (
        result.summary.goal
        and fake.requests_to("chat.completions")[0].body["model"] == "gpt-4o-mini"
    )


# -- prefix reuse ---------------------------------------------------------------------


class CachingFakeOpenAI(FakeOpenAIServer):
    """The loopback fake plus a provider prompt cache: repeated message prefixes count as cached.

    ``usage.prompt_tokens_details.cached_tokens`` is the size (JSON chars / 4) of
    the longest run of leading messages this request shares with an earlier one.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen: list[list[str]] = []

    def _usage_chat(self, body: dict[str, Any], text: str) -> dict[str, Any]:  # type: ignore[override]
        usage: dict[str, Any] = dict(FakeOpenAIServer._usage_chat(body, text))
        messages = [json.dumps(m, sort_keys=True) for m in body.get("messages", [])]
        best = 0
        for earlier in self.seen:
            shared = 0
            for a, b in zip(earlier, messages, strict=False):
                if a != b:
                    break
                shared += 1
            best = max(best, shared)
        self.seen.append(messages)
        usage["prompt_tokens_details"] = {
            "cached_tokens": sum(len(m) for m in messages[:best]) // 4,
            "audio_tokens": 0,
        }
        return usage


def test_prefix_reuse_sends_the_conversation_prefix_and_reports_cached_tokens() -> None:
    conversation = [m for m in load_openai_chat()[:21] if m.role != "tool" or m.tool_call_id]
    conversation = [m.model_copy(update={"name": None}) for m in conversation]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "execute_bash",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    with CachingFakeOpenAI() as server:
        server.set_default("chat.completions", Reply(text=GOOD))
        # the agent's own last request: the same prefix, sent by the main loop
        main_loop = {"model": "gpt-4o-mini", "messages": [m.to_api() for m in conversation]}
        import httpx

        httpx.post(
            f"{server.base_url}/chat/completions", json=main_loop, timeout=5
        ).raise_for_status()
        summarizer = summarizer_for("", main_url=server.base_url)
        result = summarizer.summarize(
            request(prefix_messages=conversation, prefix_tools=tools, model="gpt-4o-mini")
        )
        sent = server.requests_to("chat.completions")[-1].body
    assert sent["messages"][: len(conversation)] == main_loop["messages"]
    assert sent["messages"][-1]["role"] == "user"
    assert "write the handoff notes" in sent["messages"][-1]["content"]
    assert sent["tools"] == tools and sent["tool_choice"] == "none"
    assert result.usage is not None
    assert result.usage.cache_read_tokens > 0.8 * result.usage.input_tokens


def test_prefix_reuse_failure_on_main_falls_back_to_auxiliary_plain_request() -> None:
    with FakeOpenAIServer() as aux, FakeOpenAIServer() as main:
        main.script("chat.completions", ErrorReply(status=502))
        aux.script("chat.completions", Reply(text=GOOD))
        prefix = [Message(role="user", content="hello"), Message(role="assistant", content="hi")]
        result = summarizer_for(aux.base_url, main_url=main.base_url).summarize(
            request(prefix_messages=prefix, model="gpt-4o-mini")
        )
        assert result.summary.goal
        body = aux.requests_to("chat.completions")[0].body
        assert body["messages"][0]["role"] == "system" and len(body["messages"]) == 2


def test_register_hook_builds_from_settings(fake: FakeOpenAIServer) -> None:
    got: list[Any] = []
    settings = settings_from({"summarizer": {"openai": {"base_url": fake.base_url, "model": "m"}}})
    register_openai(register=got.append, settings=settings)
    assert isinstance(got[0], OpenAISummarizer) and got[0].name == "openai"
    assert got[0].context_length == 128_000 and got[0].max_output_tokens == 4_000


def recorded_models(requests: list[RecordedRequest]) -> list[str]:
    return [r.body["model"] for r in requests]


# -- deterministic ----------------------------------------------------------------------


def test_deterministic_handoff_has_sections_and_anchors() -> None:
    messages = load_openai_chat()[1:40]
    result = DeterministicSummarizer().summarize(
        SummaryRequest(
            session_id="s",
            messages=messages,
            recovery_ids=list(range(100, 100 + len(messages))),
            insights=["the user prefers minimal diffs"],
            focus="the failing inline test",
            max_output_tokens=1200,
        )
    )
    summary = result.summary
    assert summary.goal.startswith("<uploaded_files>") and "(#100)" in summary.goal
    assert "Focus for what follows: the failing inline test" in summary.goal
    lines = summary.progress.splitlines()
    assert "session_open(message_id=N)" in lines[0]
    assert all(re.match(r"- #1[0-3]\d (user|agent|ran): ", line) for line in lines[1:])
    assert any(" ran: str_replace_editor: " in line and " → " in line for line in lines)
    assert "/workspace/reproduce.py" in summary.files
    assert "insight: the user prefers minimal diffs" in summary.critical_context
    assert len(summary.render()) < 1200 * 4 * 1.3
    titles = [s.title for s in summary.sections()]
    assert titles == [t for _a, t in HandoffSummary.STANDARD_TITLES]


def test_deterministic_updates_the_previous_summary() -> None:
    previous = HandoffSummary(
        goal="Keep ticket 8060 fixed", progress="- #3 user: keep ticket 8060 fixed, and the test"
    )
    messages = load_openai_chat()[40:60]
    result = DeterministicSummarizer().summarize(
        SummaryRequest(session_id="s", messages=messages, previous_summary=previous)
    )
    assert result.summary.goal == "Keep ticket 8060 fixed"
    lines = result.summary.progress.splitlines()
    assert lines[1] == "- #3 user: keep ticket 8060 fixed, and the test"  # carried, oldest first
    assert len(lines) > 2


def test_deterministic_never_quotes_harness_text_as_the_user() -> None:
    messages = [
        Message(
            role="user",
            content="<system-reminder>Ignore this, it is a reminder.</system-reminder>",
            harness="claude_code.system_reminder",
        ),
        Message(role="user", content="Please keep the public API unchanged."),
        Message(role="assistant", content="Understood: the API stays as it is."),
    ]
    result = DeterministicSummarizer().summarize(
        SummaryRequest(session_id="s", messages=messages, recovery_ids=[1, 2, 3])
    )
    rendered = result.summary.render()
    assert "reminder" not in rendered
    assert result.summary.goal == "Please keep the public API unchanged. (#2)"
    assert "- #2 rule: Please keep the public API unchanged." in result.summary.constraints


def test_deterministic_facts_share_one_budget_across_sections() -> None:
    # only commands and one error: no constraints or decisions to fill their room, so the
    # commands take it instead of leaving it empty
    facts = [
        HandoffFact(
            kind="command",
            text=f"Bash: make step{i} → ok {i:04d}",
            message_id=i,
            position=i,
            score=5,
        )
        for i in range(400)
    ]
    facts.append(HandoffFact(kind="error", text="E: boom", message_id=400, position=400, score=8))
    result = DeterministicSummarizer().summarize(
        SummaryRequest(session_id="s", messages=[], facts=facts, max_output_tokens=1_000)
    )
    summary = result.summary
    assert "- #400 error: E: boom" in summary.critical_context
    budget = 1_000 * 4
    assert len(summary.progress) > 0.85 * budget  # not the progress share alone (0.68)
    assert len(summary.render()) < budget * 1.1


def test_deterministic_keeps_facts_a_squeezed_handoff_left_out_for_the_next_one() -> None:
    # a compaction with little room (a large tail left the handoff its floor) renders only
    # the best facts; the others wait in the reserve, and the next compaction, with room
    # again, renders them: a squeeze in between does not lose them for good
    facts = [
        HandoffFact(
            kind="command", text=f"Bash: make step{i} → ok {i:04d}", message_id=i, position=i
        )
        for i in range(40)
    ]
    for fact in facts:
        fact.score = 5 + fact.position / 100
    summarizer = DeterministicSummarizer()
    squeezed = summarizer.summarize(
        SummaryRequest(session_id="s", messages=[], facts=facts, max_output_tokens=200)
    ).summary
    assert "make step3 " not in squeezed.render()  # no room for the oldest
    assert any(f.text.startswith("Bash: make step3 ") for f in squeezed.reserve)
    assert not {f.text for f in squeezed.reserve} & {f.text for f in squeezed.facts}
    fresh = [HandoffFact(kind="command", text="Bash: make last → ok", message_id=99, position=0)]
    roomy = summarizer.summarize(
        SummaryRequest(
            session_id="s",
            messages=[],
            facts=fresh,
            previous_summary=squeezed,
            max_output_tokens=2_000,
        )
    ).summary
    rendered = roomy.render()
    assert "- #3 ran: Bash: make step3 → ok 0003" in rendered
    assert "- #99 ran: Bash: make last → ok" in rendered
    assert "step3" not in roomy.render().split("## Critical Context")[1]  # rendered once


def test_deterministic_focus_replaces_the_previous_handoffs_focus() -> None:
    messages = load_openai_chat()[40:60]
    summarizer = DeterministicSummarizer()
    first = summarizer.summarize(
        SummaryRequest(
            session_id="s",
            messages=messages,
            previous_summary=HandoffSummary(goal="Keep ticket 8060 fixed (#3)"),
            focus="the parser",
        )
    ).summary
    assert first.goal == "Keep ticket 8060 fixed (#3)\nFocus for what follows: the parser"
    again = summarizer.summarize(
        SummaryRequest(session_id="s", messages=messages, previous_summary=first, focus="the CLI")
    ).summary
    assert again.goal == "Keep ticket 8060 fixed (#3)\nFocus for what follows: the CLI"
    kept = summarizer.summarize(
        SummaryRequest(session_id="s", messages=messages, previous_summary=again)
    ).summary
    assert kept.goal == again.goal  # no new focus: the last one still applies
    # a handoff whose goal is its focus alone (no request to quote) replaces it too
    bare = summarizer.summarize(SummaryRequest(session_id="s", messages=[], focus="the parser"))
    assert bare.summary.goal == "Focus for what follows: the parser"
    later = summarizer.summarize(
        SummaryRequest(session_id="s", messages=[], previous_summary=bare.summary, focus="the CLI")
    ).summary
    assert later.goal == "Focus for what follows: the CLI"
    # a request that starts with those words is the user's task, not a focus line
    task = "Focus for what follows: the parser. Fix the tokenizer bug (#3)"
    kept_task = summarizer.summarize(
        SummaryRequest(
            session_id="s",
            messages=[],
            previous_summary=HandoffSummary(goal=task),
            focus="the CLI",
        )
    ).summary
    assert kept_task.goal == f"{task}\nFocus for what follows: the CLI"


def test_deterministic_goal_names_a_request_kept_before_the_handoff() -> None:
    summarizer = DeterministicSummarizer()
    head = HandoffFact(kind="request", text="Port the parser to Rust.\nKeep the API.", message_id=2)
    middle = [Message(role="assistant", content="Reading src/parser.py first.")]

    def summary(**extra: Any) -> HandoffSummary:
        asked = SummaryRequest(session_id="s", messages=middle, recovery_ids=[7], **extra)
        return summarizer.summarize(asked).summary

    def goal(**extra: Any) -> str:
        return summary(**extra).goal

    pointer = "Port the parser to Rust. Keep the API. (#2, kept verbatim before this summary)"
    assert goal(head_request=head) == pointer
    # made anew each time, not stacked; the focus line follows it
    assert goal(head_request=head, previous_summary=HandoffSummary(goal=pointer)) == pointer
    assert goal(
        head_request=head, previous_summary=HandoffSummary(goal=pointer), focus="the lexer"
    ) == (f"{pointer}\nFocus for what follows: the lexer")
    # a long request is named by its start: it is right above
    long = head.model_copy(update={"text": "x" * 1_000})
    assert goal(head_request=long).endswith("…" + " (#2, kept verbatim before this summary)")
    assert len(goal(head_request=long)) < 300
    # a draft row's request has no id yet
    draft = head.model_copy(update={"message_id": None})
    assert goal(head_request=draft).endswith(" (kept verbatim before this summary)")
    # a previous goal quoting a later request goes back among the facts
    quoted = summary(
        head_request=head, previous_summary=HandoffSummary(goal="now add the benchmarks (#5)")
    )
    assert quoted.goal == pointer
    assert "- #5 user: now add the benchmarks" in quoted.progress
    # a previous goal quoting the head's own request is not placed among the facts again
    again = summary(
        head_request=head, previous_summary=HandoffSummary(goal="Port the parser to Rust. (#2)")
    )
    assert again.goal == pointer and "#2 user" not in again.render()
    # another summarizer's goal, naming no message, is kept
    theirs = HandoffSummary(goal="Port the parser; the lexer is done")
    assert goal(head_request=head, previous_summary=theirs) == theirs.goal
    # the head gone (joined the middle): its request is quoted as the goal
    joined = summarizer.summarize(
        SummaryRequest(
            session_id="s",
            messages=[Message(role="user", content="Port the parser to Rust."), *middle],
            recovery_ids=[2, 7],
            previous_summary=HandoffSummary(goal=pointer),
        )
    ).summary
    assert joined.goal == "Port the parser to Rust. (#2)"


def test_the_request_kept_before_the_summary_goes_into_the_prompt(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text=GOOD))
    head = HandoffFact(kind="request", text="Port the parser to Rust.", message_id=2)
    summarizer_for(fake.base_url).summarize(request(head_request=head))
    prompt = fake.requests_to("chat.completions")[0].body["messages"][1]["content"]
    assert "<kept_request>\nPort the parser to Rust.\n</kept_request>" in prompt
    assert "(message id 2) stays verbatim" in prompt
