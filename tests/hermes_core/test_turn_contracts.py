"""The turn runtime's contracts that issue #15 found broken, one test per promise.

Real SQLite files and the default plugins; a tiny engine only where the test
is about *when* compression runs rather than what it produces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hermes_core.runtime import MAX_ARGUMENT_DEPTH, UNANSWERED_RESULT
from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    ConfigError,
    ContextEngine,
    Message,
    NewMessage,
    ValidationError,
    hookimpl,
)
from tests.hosts import HostFactory


@pytest.fixture
def host(make_host: HostFactory) -> HostFactory:
    """Hosts with the default plugins (memory_builtin blocked) and a 32K window."""
    return make_host.with_sections(model={"context_length": 32_000})


class KeepLast(ContextEngine):
    """Keeps the last stored user turn; ``due`` decides should_compress when set."""

    name = "keep-last"
    due: bool | None = None

    def compress(self, request: CompressionRequest) -> CompressionResult:
        rows = request.messages
        start = max(i for i, r in enumerate(rows) if r.message.role == "user")
        kept = [NewMessage(message=r.message, origin_id=r.id) for r in rows[start:]]
        return CompressionResult(status="compressed", engine=self.name, messages=kept)

    def should_compress(self, session_id: str, prompt_tokens: int, threshold_tokens: int) -> bool:
        if self.due is not None:
            return self.due
        return prompt_tokens >= threshold_tokens


class KeepLastPlugin:
    def __init__(self, engine: KeepLast | None = None) -> None:
        self.engine = engine or KeepLast()

    @hookimpl
    def register_context_engines(self, register):  # type: ignore[no-untyped-def]
        register(self.engine)


def call(call_id: str, name: str = "bash", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat(session: Any, text: str, usage: dict[str, Any] | None = None) -> None:
    with session.turn() as turn:
        turn.prepare(text)
        turn.record_response({"role": "assistant", "content": f"re: {text}"}, usage)
        turn.commit()


def usage(prompt_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": 10, "total_tokens": prompt_tokens}


def well_formed(messages: list[dict[str, Any]]) -> None:
    """What the chat-completions API demands of tool calls (else a 400)."""
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        ids = [c["id"] for c in message.get("tool_calls") or []]
        answered = []
        for follow in messages[i + 1 :]:
            if follow["role"] != "tool":
                break
            answered.append(follow["tool_call_id"])
        assert sorted(answered) == sorted(ids), f"message {i}: calls {ids} answered by {answered}"


# -- item 1: real usage drives compression --------------------------------------------
def test_reported_usage_over_the_threshold_compresses_at_commit(
    tmp_path: Path, host: HostFactory
) -> None:
    hermes = host()  # the default engine (compressor) and summarizer
    session = hermes.new_session(cwd=".")
    for i in range(7):  # ~17K estimated tokens, under the 20,928 trigger
        chat(session, f"step {i}: " + " ".join(f"w{i}x{j}" for j in range(300)))
    threshold = hermes.threshold(session.model).threshold_tokens
    assert session.active_tokens < threshold  # the estimate alone never fires
    assert hermes.store().get_session(session.id).compression_count == 0
    chat(session, "one more", usage(threshold + 5_000))
    assert hermes.store().get_session(session.id).compression_count == 1


def test_reported_usage_over_the_hygiene_line_compresses_before_the_turn(
    tmp_path: Path, host: HostFactory
) -> None:
    engine = KeepLast()
    engine.due = False  # the per-request checks never fire: only hygiene can
    hermes = host(KeepLastPlugin(engine), compression={"engine": "keep-last"})
    session = hermes.new_session(cwd=".")
    for i in range(3):
        chat(session, f"step {i}")
    hygiene = hermes.threshold(session.model).hygiene_tokens
    chat(session, "big", usage(hygiene + 900))
    assert hermes.store().get_session(session.id).compression_count == 0
    with session.turn():
        pass
    assert hermes.store().get_session(session.id).compression_count == 1


# -- item 2: select_context keeps the turn's injected context -----------------------
class Injector:
    @hookimpl
    def pre_llm_call(self, user_message):  # type: ignore[no-untyped-def]
        return "On-call today: Ada."


class DropOldest:
    @hookimpl
    def select_context(self, request):  # type: ignore[no-untyped-def]
        return [request.messages[0], *request.messages[2:]]


def test_a_select_context_answer_sends_the_injected_user_content(
    tmp_path: Path, host: HostFactory
) -> None:
    hermes = host(Injector(), DropOldest())
    session = hermes.new_session(cwd=".")
    chat(session, "first")
    with session.turn() as turn:
        request = turn.prepare("second")
        sent = request.messages[-1]
        assert "On-call today: Ada." in sent["content"]
        turn.record_response({"role": "assistant", "content": "ok"})
        turn.commit()
    stored = hermes.store().active_messages(session.id)[-2]
    assert stored.api_content == sent["content"]
    with session.turn() as turn:  # the next request resends the same bytes
        later = turn.prepare("third").messages
        assert sent in later


# -- item 3: tool bytes and the ledger ------------------------------------------------
UNSORTED_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
}


def _wire(tools: list[dict[str, Any]]) -> str:
    return json.dumps(tools)  # what an HTTP client sends: key order as given


def test_resume_sends_the_same_tool_bytes(tmp_path: Path, host: HostFactory) -> None:
    with_memory: dict[str, Any] = {"plugins": {"block": []}}  # the builtin memory tool's schema too
    first = host(**with_memory)
    session = first.new_session(cwd=".", tools=[UNSORTED_TOOL])
    with session.turn() as turn:
        created = _wire(turn.prepare("hello").chat_body()["tools"])
        turn.record_response({"role": "assistant", "content": "hi"})
        turn.commit()
    assert "memory" in created
    second = host(**with_memory)
    resumed = second.open_session(session.id)
    with resumed.turn() as turn:
        assert _wire(turn.prepare("again").chat_body()["tools"]) == created


def test_an_unanswered_prepare_is_not_a_request_of_the_ledger(
    tmp_path: Path, host: HostFactory
) -> None:
    hermes = host()
    session = hermes.new_session(cwd=".", tools=[UNSORTED_TOOL])
    chat(session, "one")
    with session.turn() as turn:
        turn.prepare("never sent")  # then the turn aborts
    again = host().open_session(session.id)
    chat(again, "two")
    entries = hermes.store().prefix_entries(session.id)
    assert [e.break_reason for e in entries] == ["first", None]
    assert [e.request_index for e in entries] == [0, 1]


# -- item 4: nothing is stored before commit() ---------------------------------------
def test_a_turn_compressed_mid_way_then_aborted_stores_nothing_of_itself(
    tmp_path: Path, host: HostFactory
) -> None:
    hermes = host(KeepLastPlugin(), compression={"engine": "keep-last"})
    session = hermes.new_session(cwd=".")
    for i in range(3):
        chat(session, f"step {i}")
    store = hermes.store()
    before = [r.model_dump() for r in store.all_messages(session.id)]
    threshold = hermes.threshold(session.model).threshold_tokens
    with session.turn() as turn:
        first = turn.prepare("long task")
        turn.record_response(
            {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
            usage(threshold + 100),
        )
        turn.add_tool_result("c1", "output")
        request = turn.prepare()  # compression is due in the middle of the turn
        assert request.compressed and len(request.messages) < len(first.messages) + 2
        assert [m["role"] for m in request.messages] == ["system", "user", "assistant", "tool"]
        # the abort: the with block ends without commit()
    assert [r.model_dump() for r in store.all_messages(session.id)] == before
    assert store.get_session(session.id).compression_count == 0
    chat(session, "long task")  # the retry stores the user message once
    texts = [r.message.text() for r in store.all_messages(session.id)]
    assert texts.count("long task") == 1


def _send_mid_turn_view(turn: Any, threshold: int) -> Any:
    """A turn's first request, a tool round past the threshold, then the mid-turn view."""
    turn.prepare("long task")
    turn.record_response(
        {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        usage(threshold + 100),
    )
    turn.add_tool_result("c1", "output")
    view = turn.prepare()
    assert view.compressed
    return view


def _after_three_steps(hermes: Any) -> tuple[Any, int]:
    """A new session with three turns behind it, and its compression threshold."""
    session = hermes.new_session(cwd=".")
    for i in range(3):
        chat(session, f"step {i}")
    return session, hermes.threshold(session.model).threshold_tokens


def test_commit_after_a_mid_turn_compression_stores_the_whole_turn(
    tmp_path: Path, host: HostFactory
) -> None:
    hermes = host(KeepLastPlugin(), compression={"engine": "keep-last"})
    session, threshold = _after_three_steps(hermes)
    with session.turn() as turn:
        _send_mid_turn_view(turn, threshold)
        turn.record_response({"role": "assistant", "content": "done"})
        stored = turn.commit()
    assert [m.message.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    store = hermes.store()
    assert store.get_session(session.id).compression_count == 1  # for real, after the commit
    originals = [m for m in store.all_messages(session.id) if m.origin_id is None]
    assert [m.message.role for m in originals].count("user") == 4


class SummarizeAllButLast(ContextEngine):
    """Keeps the last tool round on behind a summary naming the rows it stands for.

    Like a real handoff it quotes the ids of what it summarised, and a mid-turn view
    summarises rows of the turn, which are not stored yet (negative ids).
    """

    name = "summarize-all-but-last"

    def compress(self, request: CompressionRequest) -> CompressionResult:
        rows = request.messages
        rounds = [i for i, r in enumerate(rows) if r.message.tool_calls]
        start = max(rounds) if rounds else len(rows) - 1  # no tool round: keeps the last row
        ids = [r.id for r in rows[:start]]
        summary = NewMessage(message=Message(role="user", content=f"summary of {len(rows)}: {ids}"))
        kept = [NewMessage(message=r.message, origin_id=r.id) for r in rows[start:]]
        return CompressionResult(status="compressed", engine=self.name, messages=[summary, *kept])


class SummarizeAllButLastPlugin:
    @hookimpl
    def register_context_engines(self, register):  # type: ignore[no-untyped-def]
        register(SummarizeAllButLast())


def _turn_compressed_mid_way(session: Any, threshold: int, rest: str) -> list[dict[str, Any]]:
    """A turn whose second request is a mid-turn view, then ``rest``; the view's messages."""
    with session.turn() as turn:
        view = _send_mid_turn_view(turn, threshold)
        turn.record_response({"role": "assistant", "content": rest}, usage(100))
        turn.commit()
    messages: list[dict[str, Any]] = view.messages
    return messages


def test_commit_writes_the_mid_turn_view_so_the_next_request_keeps_its_prefix(
    tmp_path: Path, host: HostFactory
) -> None:
    hermes = host(SummarizeAllButLastPlugin(), compression={"engine": "summarize-all-but-last"})
    session, threshold = _after_three_steps(hermes)
    view = _turn_compressed_mid_way(session, threshold, "done")
    # the engine planned the view over 6 stored rows and the turn's first 3 messages; its
    # summary quotes the turn's user message, not stored yet, by its draft id
    assert view[1]["content"].startswith("summary of 9: [") and ", -1]" in view[1]["content"]
    active = session.active_messages()
    texts = [row.message.text() for row in active]
    assert texts == [view[1]["content"], "", "output", "done"]  # the view, then the turn's rest
    chat(session, "next")
    store = hermes.store()
    entries = store.prefix_entries(session.id)
    assert entries[-1].break_reason is None  # one cache break for the compaction, not two
    assert store.get_session(session.id).compression_count == 1
    # the view's copies of the turn's messages point at the stored originals
    originals = {r.id: r for r in store.all_messages(session.id) if r.origin_id is None}
    copies = [row for row in active if row.origin_id is not None]
    assert len(copies) == 2  # the assistant call and its result; "done" is stored as is
    assert all(originals[r.origin_id or 0].message.text() == r.message.text() for r in copies)


def test_commit_compresses_the_whole_turn_when_its_rest_outgrew_the_view(
    tmp_path: Path, host: HostFactory
) -> None:
    hermes = host(SummarizeAllButLastPlugin(), compression={"engine": "summarize-all-but-last"})
    session, threshold = _after_three_steps(hermes)
    # the rest of the turn alone takes most of the threshold: keeping the view would
    # leave no room, so commit compresses everything (the rest included)
    _turn_compressed_mid_way(session, threshold, "word " * int(threshold * 0.6))
    active = [row.message.text() for row in session.active_messages()]
    assert active[0].startswith("summary of 10: ")


class SummarizeDifferently(SummarizeAllButLast):
    """Like a model's summary: another text on every call; counts its calls."""

    name = "summarize-differently"

    def __init__(self) -> None:
        self.calls = 0

    def compress(self, request: CompressionRequest) -> CompressionResult:
        self.calls += 1
        result = super().compress(request)
        summary = result.messages[0].message
        result.messages[0] = NewMessage(
            message=summary.model_copy(update={"content": f"{summary.text()} (call {self.calls})"})
        )
        return result


def test_commit_writes_the_mid_turn_view_without_asking_the_engine_again(
    tmp_path: Path, host: HostFactory
) -> None:
    """A model would summarise the same rows in other words: commit writes the view the
    turn was sent on, so the prefix holds and no second summary is paid for."""
    engine = SummarizeDifferently()

    class Plugin:
        @hookimpl
        def register_context_engines(self, register):  # type: ignore[no-untyped-def]
            register(engine)

    hermes = host(Plugin(), compression={"engine": "summarize-differently"})
    session, threshold = _after_three_steps(hermes)
    view = _turn_compressed_mid_way(session, threshold, "done")
    assert engine.calls == 1
    assert view[1]["content"].endswith("(call 1)")
    texts = [row.message.text() for row in session.active_messages()]
    assert texts == [view[1]["content"], "", "output", "done"]
    chat(session, "next")
    assert hermes.store().prefix_entries(session.id)[-1].break_reason is None


def test_commit_does_not_replan_a_view_over_history_compressed_during_the_turn(
    tmp_path: Path, host: HostFactory
) -> None:
    """A manual compression after the mid-turn view replaces the history it was planned
    over: commit then compresses what is there now, never the archived rows again."""
    hermes = host(SummarizeAllButLastPlugin(), compression={"engine": "summarize-all-but-last"})
    session, threshold = _after_three_steps(hermes)
    with session.turn() as turn:
        _send_mid_turn_view(turn, threshold)
        assert turn.compress(manual=True).status == "compressed"
        kept = {row.id for row in session.active_messages()}
        archived = {row.id for row in hermes.store().all_messages(session.id)} - kept
        turn.record_response({"role": "assistant", "content": "done"}, usage(100))
        turn.commit()
    summary = session.active_messages()[0].message.text()
    assert summary.startswith("summary of ")
    quoted = {int(x) for x in summary.split("[", 1)[1].rstrip("]").split(", ") if x}
    # commit compressed what the manual compression left and the turn, not its archive
    assert quoted and not quoted & archived, (summary, archived)


def test_commit_names_the_stored_ids_of_the_facts_its_mid_turn_handoff_took_from_the_turn(
    tmp_path: Path, host: HostFactory
) -> None:
    """The real compressor plans a mid-turn view over the turn's own early tool rounds
    (draft rows, no id yet): the handoff quotes no id for them, and commit, writing
    that view byte for byte, names their stored ids in its facts, so the next
    compaction quotes ``#N`` that session_open opens. The insights ``on_pre_compress``
    gives are in the view as sent (commit asks the engine nothing), and
    ``on_compressed`` sees the stored ids too."""
    seen: list[CompressionResult] = []

    class Insights:
        @hookimpl
        def on_pre_compress(self, session_id, messages):  # type: ignore[no-untyped-def]
            return ["the pkg0 failure is a known flake"]

        @hookimpl
        def on_compressed(self, session_id, result):  # type: ignore[no-untyped-def]
            seen.append(result)

    hermes = host(Insights())
    session = hermes.new_session(cwd=".")
    for i in range(2):
        chat(session, f"step {i}")
    threshold = hermes.threshold(session.model).threshold_tokens
    log = "".join(f"log line {n} of the build\n" for n in range(700))
    with session.turn() as turn:
        turn.prepare("fix the failing build")
        for k in range(4):
            arguments = json.dumps({"command": f"go test ./pkg{k}"})
            reported = usage(threshold + 100) if k == 3 else None
            turn.record_response(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [call(f"c{k}", "bash", arguments)],
                },
                reported,
            )
            turn.add_tool_result(f"c{k}", f"--- FAIL: TestPkg{k}\n{log}FAIL\tpkg{k} 0.2s\n")
            view = turn.prepare()
        assert view.compressed
        [sent] = [m for m in view.messages if "[CONTEXT SUMMARY" in str(m.get("content"))]
        assert "go test ./pkg0" in sent["content"] and "#?" in sent["content"]
        assert "the pkg0 failure is a known flake" in sent["content"]
        turn.record_response({"role": "assistant", "content": "fixed"}, usage(100))
        turn.commit()
    active = session.active_messages()
    [summary_row] = [row for row in active if row.message.kind == "summary"]
    assert summary_row.message.text() == sent["content"]  # the view as it was sent
    summary = summary_row.message.summary
    assert summary is not None
    assert not [f for f in [*summary.facts, *summary.reserve] if f.draft_id is not None]
    stored = {
        row.message.tool_call_id: row.id
        for row in hermes.store().all_messages(session.id)
        if row.message.role == "tool" and row.origin_id is None
    }
    [ran] = [f for f in summary.facts if f.kind == "command" and "go test ./pkg0" in f.text]
    assert ran.message_id == stored["c0"]
    [result] = seen
    assert result.summary is not None
    assert not [f for f in result.summary.facts if f.draft_id is not None]


# -- item 5: an unanswered tool call ---------------------------------------------------
def test_commit_stubs_an_unanswered_tool_call_so_the_next_request_is_valid(
    tmp_path: Path,
    host: HostFactory,
) -> None:
    hermes = host()
    session = hermes.new_session(cwd=".")
    with session.turn() as turn:
        turn.prepare("run both")
        turn.record_response(
            {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]}
        )
        turn.add_tool_result("c2", "second done")
        turn.commit()
    with session.turn() as turn:
        messages = turn.prepare("next").messages
    well_formed(messages)
    stub = next(m for m in messages if m.get("tool_call_id") == "c1")
    assert stub["content"] == UNANSWERED_RESULT


# -- item 6: rotation with a stale handle ----------------------------------------------
def test_a_stale_handle_follows_a_rotation_to_the_live_session(
    tmp_path: Path, host: HostFactory
) -> None:
    settings: dict[str, Any] = {"compression": {"engine": "keep-last", "in_place": False}}
    a = host(KeepLastPlugin(), **settings)
    b = host(KeepLastPlugin(), **settings)
    session_a = a.new_session(cwd=".")
    for i in range(3):
        chat(session_a, f"step {i}")
    session_b = b.open_session(session_a.id)  # process B holds the parent
    parent = session_a.id
    outcome = session_a.compress()
    child = outcome.new_session_id
    assert child and session_a.id == child
    parent_rows = len(a.store().all_messages(parent))
    with session_b.turn() as turn:
        assert turn.session.id == child
        request = turn.prepare("from B")
        assert len(request.messages) > 2  # the history came along
        turn.record_response({"role": "assistant", "content": "ok"})
        turn.commit()
    assert len(a.store().all_messages(parent)) == parent_rows
    assert a.store().active_messages(child)[-1].message.text() == "ok"
    # on reload too, with the live session's own frozen prompt
    stale = b.open_session(child)
    chat(session_a, "A goes on")
    session_a.compress()
    assert session_a.id != child
    stale.reload()
    assert stale.id == session_a.id
    assert stale.prompt.prompt_hash == a.store().get_session(session_a.id).system_prompt_hash
    assert b.open_session(parent).id == session_a.id  # opening an old id finds the live one


# -- item 7: a window the output reservation fills -------------------------------------
def test_max_output_tokens_at_or_over_the_window_is_a_config_error(
    tmp_path: Path, host: HostFactory
) -> None:
    hermes = host(model={"context_length": 8_000, "max_output_tokens": 8_000})
    with pytest.raises(ConfigError, match=r"max_output_tokens \(8000\).*context length \(8000\)"):
        hermes.threshold()


# -- item 9: tool arguments nested absurdly deep ----------------------------------------
def test_deeply_nested_tool_arguments_are_refused_before_anything_is_stored(
    tmp_path: Path,
    host: HostFactory,
) -> None:
    hermes = host()
    session = hermes.new_session(cwd=".")
    deep = "[" * 500 + "]" * 500
    with session.turn() as turn:
        turn.prepare("hi")
        with pytest.raises(ValidationError, match=r"'deep-1'.*nested 500 deep"):
            turn.record_response(
                {"role": "assistant", "content": None, "tool_calls": [call("deep-1", "x", deep)]}
            )
    assert hermes.store().all_messages(session.id) == []
    ok = "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH
    with session.turn() as turn:
        turn.prepare("hi")
        turn.record_response(
            {"role": "assistant", "content": None, "tool_calls": [call("c", "x", ok)]}
        )
        turn.add_tool_result("c", "ok")
        turn.commit()
    assert len(hermes.store().all_messages(session.id)) == 3
