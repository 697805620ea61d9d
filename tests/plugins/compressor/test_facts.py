"""Facts of the compacted middle (plugins/compressor/facts.py) and the engine's use of them."""

from __future__ import annotations

import json

from hermes_hookspecs import HandoffFact, Message, ToolCall, ToolFunction
from hermes_plugin_compressor.engine import handoff_tokens
from hermes_plugin_compressor.facts import extract_facts, select_facts, strip_reasoning


def bash(call_id: str, command: str) -> Message:
    arguments = json.dumps({"command": command})
    return Message(
        role="assistant",
        content=None,
        tool_calls=[ToolCall(id=call_id, function=ToolFunction(name="Bash", arguments=arguments))],
    )


def test_facts_quote_requests_errors_with_their_command_and_outcomes() -> None:
    runs = [f"=== RUN TestCase{i}" for i in range(40)]
    tail = ["--- FAIL: TestCase7 (0.01s)", "    state_test.go:88: CheckpointsCount = 0, want 1"]
    output = "\n".join([*runs, *tail, "FAIL", "ok  pkg/a 71.643s"])
    messages = [
        Message(role="user", content="Fix the flaky test. Never change the public API."),
        bash("c1", "go test ./..."),
        Message(role="tool", tool_call_id="c1", content=output),
        Message(role="assistant", content="I'll skip the refactor because it would lose logs."),
    ]
    facts = extract_facts(messages, [10, 11, 12, 13])
    kinds = {(f.kind, f.text) for f in facts}
    assert ("request", "Fix the flaky test. Never change the public API.") in kinds
    assert ("constraint", "Never change the public API.") in kinds
    errors = [f.text for f in facts if f.kind == "error"]
    assert "state_test.go:88: CheckpointsCount = 0, want 1 (from Bash: go test ./...)" in errors
    [command] = [f for f in facts if f.kind == "command"]
    assert command.text.startswith("Bash: go test ./... → ")
    assert "71.643s" in command.text and command.message_id == 12
    assert any(f.kind == "decision" and "because it would lose logs" in f.text for f in facts)


def test_harness_text_and_file_listings_yield_no_facts() -> None:
    listing = "\n".join(f'{i:>6}→    t.Fatalf("failed: %v", err)' for i in range(1, 60))
    read = Message(
        role="assistant",
        tool_calls=[
            ToolCall(id="r", function=ToolFunction(name="Read", arguments='{"file_path": "x.go"}'))
        ],
    )
    messages = [
        Message(role="user", content="<system-reminder>noise</system-reminder>", harness="x.y"),
        read,
        Message(role="tool", tool_call_id="r", content=listing),
    ]
    facts = extract_facts(messages, [1, 2, 3])
    assert not [f for f in facts if f.kind in ("request", "error")]
    [command] = facts
    assert command.text.startswith("Read: x.go → 59 lines")


def test_reasoning_blocks_are_stripped() -> None:
    assert strip_reasoning("<think>secret plan</think>The answer.") == "The answer."
    assert strip_reasoning("A<reasoning>x\ny</reasoning>B") == "AB"
    assert strip_reasoning("<thinking>never closed") == ""
    facts = extract_facts([Message(role="assistant", content="<think>hidden</think>Done.")], [1])
    assert [f.text for f in facts] == ["Done."]


def test_selection_keeps_the_best_per_character_and_drops_duplicates() -> None:
    facts = [
        HandoffFact(kind="answer", text="x" * 900, position=0, score=6),
        HandoffFact(kind="command", text="Bash: make → ok", position=1, score=5),
        HandoffFact(kind="command", text="Bash: make → ok", position=2, score=5),
        HandoffFact(kind="error", text="E: boom", position=3, score=8),
    ]
    chosen = select_facts(facts, 200)
    assert [f.text for f in chosen] == ["Bash: make → ok", "E: boom"]


def test_handoff_budget_grows_with_the_history_within_the_window() -> None:
    assert handoff_tokens(92_928, 40_000) == 92_928 // 24  # the floor
    assert handoff_tokens(92_928, 340_000) == 10_000  # a 34th of the history
    assert handoff_tokens(92_928, 4_000_000) == 12_000  # the absolute cap
    assert handoff_tokens(44_928, 4_000_000) == 44_928 // 4  # the window's cap
    # little room left after the system prompt and the tail: the handoff shrinks, to a floor
    assert handoff_tokens(20_928, 400_000, kept_tokens=11_000) == (20_928 // 24) * 3 // 2


def test_facts_recorded_once_per_message_give_the_same_result() -> None:
    from hermes_plugin_compressor.facts import KEY, annotation

    output = "--- FAIL: TestX (0.01s)\n    x_test.go:9: got 0, want 1\nFAIL\nok  pkg 1.2s"
    messages = [
        Message(role="user", content="Fix it. Never touch the migrations."),
        Message(role="assistant", content="Because the test is flaky, I will rerun it."),
        bash("c1", "go test ./..."),
        Message(role="tool", tool_call_id="c1", content=output),
        Message(role="user", content="<x>y</x>", harness="x.y"),
    ]
    notes = [annotation(m) for m in messages]
    assert notes[-1] is None and all(KEY in n for n in notes[:-1] if n is not None)
    ids = [1, 2, 3, 4, 5]
    assert extract_facts(messages, ids, notes) == extract_facts(messages, ids)
    # a stale version is not trusted: the text is read again
    stale = [{KEY: {"v": -1, "request": "stale"}} for _ in messages]
    assert extract_facts(messages, ids, stale) == extract_facts(messages, ids)
