"""Facts of the compacted middle (plugins/compressor/facts.py) and the engine's use of them."""

from __future__ import annotations

import json

from hermes_hookspecs import HandoffFact, Message, ToolCall, ToolFunction
from hermes_plugin_compressor.engine import handoff_room, handoff_tokens
from hermes_plugin_compressor.facts import (
    extract_facts,
    polled_process,
    select_facts,
    strip_reasoning,
    unwrap_output,
)


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
    assert handoff_tokens(92_928, 4_000_000) == 14_000  # the absolute cap
    assert handoff_tokens(44_928, 4_000_000) == int(44_928 / 3.5)  # the window's cap
    assert handoff_room(92_928) == 14_000
    # what the system prompt, the tail and its sections leave of 57% of the threshold
    assert handoff_room(44_928, kept_tokens=20_000) == int(44_928 * 0.57) - 20_000
    # little room left after the system prompt and the tail: the handoff shrinks, to a floor
    assert handoff_tokens(20_928, 400_000, kept_tokens=11_000) == (20_928 // 24) * 2


def test_a_history_rich_in_words_gets_a_larger_handoff_never_larger_than_its_words() -> None:
    # 160K tokens of history: a 34th (4,705) however few words it holds
    assert handoff_tokens(92_928, 160_000, dialogue_tokens=1_000) == 160_000 // 34
    # many words: up to a 16th of the history (10,000)
    assert handoff_tokens(92_928, 160_000, dialogue_tokens=50_000) == 160_000 // 16
    # ... but never more than the words themselves
    assert handoff_tokens(92_928, 160_000, dialogue_tokens=8_000) == 8_000


def test_the_handoff_counts_the_words_of_the_history_it_stands_for() -> None:
    from hermes_plugin_compressor.engine import ContextCompressor
    from hermes_plugin_summarizer_deterministic import DeterministicSummarizer
    from hermes_plugin_tail_lean import LeanTail
    from tests.compressor_support import PluginHost, settings_for
    from tests.plugins.compressor.test_compressor import request, session

    engine = ContextCompressor()
    engine.bind(PluginHost(summarizers=[DeterministicSummarizer()], tails=[LeanTail()]))
    messages = session(turns=60, output_chars=3_000)
    result = engine.compress(request(messages, settings_for(40_000, tail="lean")))
    assert result.status == "compressed", result.reason
    assert result.summary is not None
    words = result.summary.covered_dialogue_tokens
    # the user's messages and the closing answers: a few tokens each, not the tool output
    assert words is not None and 0 < words < result.summary.covered_tokens // 4


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


def test_long_answers_are_packed_pieces_and_bare_headings_are_no_facts() -> None:
    items = "\n".join(f"- item {i}: the check that covers case {i} of the change" for i in range(9))
    answer = f"## Review Summary\n\n### Positives\n{items}\n\n### Issues\n1. **`a.go:10-20`** dup."
    facts = extract_facts([Message(role="assistant", content=answer)], [7])
    texts = [f.text for f in facts if f.kind == "answer"]
    assert not [t for t in texts if t.lstrip("# ").count(" ") < 2], texts  # no bare heading
    assert len(texts) < 5  # packed, not a fact per list item
    assert texts[0].startswith("## Review Summary ### Positives - item 0")
    assert any(t.startswith("### Issues 1. **`a.go:10-20`**") for t in texts)


def test_the_answer_that_closed_a_turn_outranks_narration_of_the_same_length() -> None:
    messages = [
        Message(role="user", content="Review the branch please."),
        Message(role="assistant", content="Now let me look at the reset command code."),
        Message(role="assistant", content="The review is in docs/review-01.md, two issues."),
        Message(role="user", content="Fix both issues."),
        Message(role="assistant", content="I checked the final version of the cache code."),
    ]
    facts = {
        f.message_id: f for f in extract_facts(messages, [1, 2, 3, 4, 5]) if f.kind == "answer"
    }
    assert facts[3].score > facts[5].score > facts[2].score
    # a request of a few words is worth its answer, not a full request
    requests = {
        f.message_id: f.score
        for f in extract_facts(messages, [1, 2, 3, 4, 5])
        if f.kind == "request"
    }
    short = extract_facts([Message(role="user", content="use postgres")], [9])
    assert short[0].score < requests[1] - 3


def test_file_views_and_code_lines_are_not_error_lines() -> None:
    code = "\n".join(
        ["func (e *Encoder) encodeLine(p []byte) error {", '\thttp.Error(w, "bad", 400)']
        + [f"\tline {i}" for i in range(80)]
    )
    report = "--- FAIL: TestSync (0.01s)\n    sync_test.go:51: sync failed: remote is empty\nFAIL"
    messages = [
        bash("c1", "sed -n '1,120p' internal/sync.go"),
        Message(role="tool", tool_call_id="c1", content=code),
        bash("c2", "go test ./..."),
        Message(role="tool", tool_call_id="c2", content=report + "\n" + code),
    ]
    errors = [f.text for f in extract_facts(messages, [1, 2, 3, 4]) if f.kind == "error"]
    assert errors and all("(from Bash: go test ./...)" in e for e in errors)
    assert not [e for e in errors if "func " in e or "http.Error" in e]
    assert any("sync failed: remote is empty" in e for e in errors)


def test_an_execution_envelope_is_reduced_to_its_exit_code_and_output() -> None:
    envelope = (
        "Command: /bin/zsh -lc 'git check-ignore -v cmd/app'\nChunk ID: 04a1\n"
        "Wall time: 0.0000 seconds\nProcess exited with code 1\nOriginal token count: 0\nOutput:\n"
    )
    call = Message(
        role="assistant",
        tool_calls=[
            ToolCall(
                id="e",
                function=ToolFunction(
                    name="exec_command", arguments='{"cmd": "git check-ignore -v cmd/app"}'
                ),
            )
        ],
    )
    facts = extract_facts([call, Message(role="tool", tool_call_id="e", content=envelope)], [1, 2])
    [command] = facts
    assert command.text == "exec_command: git check-ignore -v cmd/app → exit 1: (no output)"


def test_selection_keeps_one_copy_of_a_recurring_error_and_a_sentence_once() -> None:
    line = 'x_test.go:{}: push failed: "http://127.0.0.1:{}/r.git" status 500 (from Bash: go test)'
    errors = [
        HandoffFact(kind="error", text=line.format(200 + i, 5000 + i), position=i, score=8 + i / 10)
        for i in range(3)
    ]
    answer = "The push fails because the server collapses reports. I will fix the server."
    sentence = HandoffFact(
        kind="decision",
        text="The push fails because the server collapses reports.",
        message_id=9,
        position=5,
        score=7.5,
    )
    piece = HandoffFact(kind="answer", text=answer, message_id=9, position=5, score=6)
    chosen = select_facts([*errors, sentence, piece], 2_000)
    assert [f.text for f in chosen if f.kind == "error"] == [errors[2].text]  # the newest
    # the decision sentence inside the chosen piece of the same message is not repeated
    assert [f.kind for f in chosen if f.message_id == 9] == ["answer"]


def test_a_short_note_beside_a_tool_call_is_narration() -> None:
    note = Message(
        role="assistant",
        content="All green. Commit the cleanups:",
        tool_calls=[ToolCall(id="g", function=ToolFunction(name="Bash", arguments="{}"))],
    )
    plain = Message(role="assistant", content="All green. The cleanups are committed.")
    facts = extract_facts([note, plain], [1, 2])
    scores = {f.message_id: f.score for f in facts if f.kind == "answer"}
    assert scores[1] < scores[2] - 2


def test_handoff_budget_follows_the_facts_when_the_history_says_more_per_token() -> None:
    # 60K tokens of history is a 34th: 1,764 tokens; 20K tokens of facts deserve half of them
    assert handoff_tokens(92_928, 60_000) == 92_928 // 24
    assert handoff_tokens(92_928, 60_000, fact_tokens=20_000) == 10_000
    # still within the window's caps
    assert handoff_tokens(92_928, 60_000, fact_tokens=300_000) == 14_000
    assert handoff_tokens(20_928, 60_000, kept_tokens=11_000, fact_tokens=30_000) == 1_744


def test_a_reply_that_only_assents_is_no_fact_but_a_short_request_is() -> None:
    messages = [
        Message(role="assistant", content="Shall I also add the integration test?"),
        Message(role="user", content="yes, do that"),
        Message(role="assistant", content="Added the test in sync_test.go."),
        Message(role="user", content="ok, now continue"),
        Message(role="user", content="yeah do 2"),
        Message(role="user", content="use postgres"),
    ]
    requests = [f.text for f in extract_facts(messages, [1, 2, 3, 4, 5, 6]) if f.kind == "request"]
    # a reply naming one of the options offered is a choice, kept in the user's words
    assert requests == ["yeah do 2", "use postgres"]
    # the answer before the assent closed a turn and carries its meaning
    closing = [f for f in extract_facts(messages, [1, 2, 3, 4, 5, 6]) if f.message_id == 1]
    assert closing and closing[0].kind == "answer"


def test_questions_and_list_lead_ins_are_not_decisions() -> None:
    prose = (
        "Which approach would you prefer instead of the rewrite? "
        "Given this project, I would choose the relay approach because of memory:\n"
        "- relay\n\n"
        "I am removing the thin-pack capability because the store cannot resolve deltas."
    )
    facts = extract_facts([Message(role="assistant", content=prose)], [7])
    decisions = [f.text for f in facts if f.kind == "decision"]
    assert decisions == [
        "I am removing the thin-pack capability because the store cannot resolve deltas."
    ]


def test_a_background_task_report_is_an_answer_other_harness_text_is_not() -> None:
    notice = (
        "<task-notification>\n<task-id>a1</task-id>\n<status>completed</status>\n"
        '<summary>Agent "Cache feasibility" finished</summary>\n'
        "<note>A task-notification fires each time this agent stops.</note>\n"
        "<result>Recommendation: ship (c) now (few-line change, contract-safe).</result>\n"
        "</task-notification>"
    )
    messages = [
        Message(role="user", content=notice, harness="claude_code.task_notification"),
        Message(
            role="user",
            content="<system-reminder>x</system-reminder>",
            harness="claude_code.system_reminder",
        ),
    ]
    facts = extract_facts(messages, [5, 6])
    assert [(f.kind, f.message_id) for f in facts] == [("answer", 5)]
    assert "ship (c) now (few-line change, contract-safe)" in facts[0].text
    assert "fires each time" not in facts[0].text  # the harness's own note is not the report


def test_a_notice_that_a_background_task_ended_well_ranks_low() -> None:
    def notice(status: str, summary: str, result: str = "") -> Message:
        text = (
            f"<task-notification>\n<task-id>b1</task-id>\n<status>{status}</status>\n"
            f"<summary>{summary}</summary>\n{result}</task-notification>"
        )
        return Message(role="user", content=text, harness="claude_code.task_notification")

    messages = [
        notice("completed", 'Background command "Full check gate" completed (exit code 0)'),
        notice("completed", 'Monitor "wait for the build" stream ended'),
        notice("completed", 'Background command "go test ./..." completed (exit code 1)'),
        notice("failed", 'Background command "make lint" failed'),
        notice("completed", 'Agent "Review" finished', "<result>Two findings: ...</result>"),
    ]
    facts = extract_facts(messages, [1, 2, 3, 4, 5])
    scores = {f.message_id: f.score for f in facts}
    routine = max(scores[1], scores[2])
    # a failure, a non-zero exit and an agent's report are news: each outranks a status
    assert all(scores[news] > routine + 2 for news in (3, 4, 5))


def test_a_plan_update_acknowledgement_is_not_an_outcome_worth_keeping() -> None:
    call = Message(
        role="assistant",
        content=None,
        tool_calls=[ToolCall(id="p1", function=ToolFunction(name="update_plan", arguments="{}"))],
    )
    facts = extract_facts(
        [call, Message(role="tool", tool_call_id="p1", content="Plan updated")], [1, 2]
    )
    [command] = [f for f in facts if f.kind == "command"]
    assert command.text == "update_plan → ok" and command.score < 3


def test_outcomes_keep_the_runners_command_and_a_commit_and_failures_keep_their_location() -> None:
    runner = "[test:ci] $ go test -tags=integration -race ./...\n" + "=== RUN TestA\n" * 40
    runner += "ok  github.com/x/cli 28.304s\nok  github.com/x/cli/agent (cached)\n"
    commit = "[main ec5d9ff] Add protocol v2 packet primitives\n 2 files changed, 260 insertions(+)"
    failing = "\n".join(
        [
            "=== RUN   TestResync",
            "    integration_test.go:119: expected delta pack (2631) to be smaller than (2398)",
            "--- FAIL: TestResync (0.01s)",
            "FAIL",
        ]
        + ["padding line"] * 30
    )
    passing = "=== RUN   TestDebug\n    debug_test.go:65: response bytes: 72\n" + "x\n" * 200
    messages = [
        bash("c1", "mise run test:ci"),
        Message(role="tool", tool_call_id="c1", content=runner),
        bash("c2", "git commit -m 'Add protocol v2 packet primitives'"),
        Message(role="tool", tool_call_id="c2", content=commit),
        bash("c3", "go test ./internal/syncer"),
        Message(role="tool", tool_call_id="c3", content=failing),
        bash("c4", "go test -run TestDebug -v"),
        Message(role="tool", tool_call_id="c4", content=passing),
    ]
    detached = (
        "Running checks\n[detached HEAD 5e54c4f] Fix provider\n 5 files changed\n" + "x\n" * 200
    )
    messages += [
        bash("c5", "git commit -m 'Fix provider'"),
        Message(role="tool", tool_call_id="c5", content=detached),
    ]
    facts = extract_facts(messages, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    commands = {f.message_id: f for f in facts if f.kind == "command"}
    # a commit on a detached HEAD is git's commit line all the same
    assert commands[10].text.endswith("→ [detached HEAD 5e54c4f] Fix provider")
    assert "→ [test:ci] $ go test -tags=integration -race ./... | ok" in commands[2].text
    assert "28.304s" in commands[2].text
    # a commit is an outcome worth as much as a test summary
    assert commands[4].score >= commands[2].score - 0.5
    errors = [f.text for f in facts if f.kind == "error"]
    assert any("integration_test.go:119: expected delta pack (2631)" in e for e in errors)
    # a located line of a run that did not fail is a log line, not an error
    assert not any("debug_test.go:65" in e for e in errors)


def test_a_rerun_with_the_same_outcome_is_kept_once_and_a_shown_file_is_no_result() -> None:
    def poll(call_id: str) -> Message:
        return Message(
            role="assistant",
            content=None,
            tool_calls=[
                ToolCall(id=call_id, function=ToolFunction(name="write_stdin", arguments="{}"))
            ],
        )

    readme = "- If a target branch does not exist, it is created.\n" + "text line\n" * 80
    messages = [
        poll("p1"),
        Message(role="tool", tool_call_id="p1", content="ok  github.com/x/syncer 0.914s"),
        poll("p2"),
        Message(role="tool", tool_call_id="p2", content="ok  github.com/x/syncer 0.306s"),
        bash("c1", "go test ./... | tail -80"),
        Message(role="tool", tool_call_id="c1", content="ok  github.com/x/cli 71.643s"),
        bash("c2", "go test ./... | tail -20"),
        Message(role="tool", tool_call_id="c2", content="ok  github.com/x/cli 73.996s"),
        bash("c3", "sed -n '1,260p' README.md"),
        Message(role="tool", tool_call_id="c3", content=readme),
        bash("v1", "cat VERSION"),
        Message(role="tool", tool_call_id="v1", content="1.2.3"),
        bash("v2", "cat VERSION"),
        Message(role="tool", tool_call_id="v2", content="1.3.0"),
        bash("t1", "pytest -q"),
        Message(role="tool", tool_call_id="t1", content="3 failed, 10 passed in 2.1s"),
        bash("t2", "pytest -q"),
        Message(role="tool", tool_call_id="t2", content="1 failed, 12 passed in 2.3s"),
    ]
    facts = extract_facts(messages, list(range(1, 19)))
    chosen = [f.text for f in select_facts(facts, 10_000)]
    # the same poll passing again: the newest copy stands for both
    assert [t for t in chosen if t.startswith("write_stdin")] == [
        "write_stdin → ok github.com/x/syncer 0.306s"
    ]
    # two different commands: both kept, with their own timings
    assert any("71.643s" in t for t in chosen) and any("73.996s" in t for t in chosen)
    # the same command with another outcome (not a pass): both values are facts
    assert [t for t in chosen if "VERSION" in t] == [
        "Bash: cat VERSION → 1.2.3",
        "Bash: cat VERSION → 1.3.0",
    ]
    # a rerun that still fails is no pass: each failing count is a fact
    assert [t for t in chosen if "pytest" in t] == [
        "Bash: pytest -q → 3 failed, 10 passed in 2.1s",
        "Bash: pytest -q → 1 failed, 12 passed in 2.3s",
    ]
    # a file the shell printed: "created" in its text is no result of the command
    [view] = [f for f in facts if f.text.startswith("Bash: sed -n")]
    [run] = [f for f in facts if "71.643s" in f.text]
    assert view.score < run.score - 2


def test_an_outcome_names_a_repeated_result_line_once() -> None:
    # go test prints FAIL for the package and again at the end: one says it all
    output = "=== RUN   TestA\n" * 30 + "--- FAIL: TestA (0.00s)\nFAIL\nFAIL\n"
    messages = [
        bash("c1", "go test ./..."),
        Message(role="tool", tool_call_id="c1", content=output),
    ]
    [command] = [f for f in extract_facts(messages, [1, 2]) if f.kind == "command"]
    assert command.text.count("FAIL") == command.text.count("--- FAIL") + 1, command.text


def test_a_question_sets_no_constraint() -> None:
    """A rule word in a question ("why keep v1 for push?") asks; it sets no rule."""
    message = Message(role="user", content="Why keep v1 for push? You must keep the API stable.")
    facts = extract_facts([message], [7])
    assert [f.text for f in facts if f.kind == "constraint"] == ["You must keep the API stable."]


def test_the_users_answers_in_a_tool_result_are_the_users_rules() -> None:
    """Claude Code hands the user's answers to the agent's questions (AskUserQuestion) back
    as a tool result: they are the user's choices in their words, facts like a rule the
    user set (never the goal: a choice, not a task), not a command's outcome."""
    ask = ToolCall(
        id="q1", function=ToolFunction(name="AskUserQuestion", arguments='{"questions": []}')
    )
    messages = [
        Message(role="assistant", content="", tool_calls=[ask]),
        Message(
            role="tool",
            tool_call_id="q1",
            content='Your questions have been answered: "Who is the audience?"="Just me — global",'
            ' "What name?"="call it "foo"", "Anything else?"="two\nlines". You can now'
            " continue with these answers in mind.",
        ),
        Message(role="user", content="now build it"),
    ]
    facts = extract_facts(messages, [10, 11, 12])
    rules = [(f.text, f.message_id) for f in facts if f.kind == "constraint"]
    assert rules == [
        ("Who is the audience? → Just me — global", 11),
        ('What name? → call it "foo"', 11),
        ("Anything else? → two lines", 11),
    ]
    (command,) = [f for f in facts if f.kind == "command"]
    assert command.text.endswith("→ answered"), command.text
    assert [f.text for f in facts if f.kind == "request"] == ["now build it"]


def call(call_id: str, name: str, arguments: object) -> Message:
    encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Message(
        role="assistant",
        tool_calls=[ToolCall(id=call_id, function=ToolFunction(name=name, arguments=encoded))],
    )


def test_a_patch_names_the_files_it_changes_and_its_success_is_an_acknowledgement() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: /repo/sem/provider.go\n@@ var warnings\n-a\n+b\n"
        "*** Add File: /repo/sem/provider_test.go\n+package sem\n*** End Patch\n"
    )
    result = (
        "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\n"
        "M /repo/sem/provider.go\nA /repo/sem/provider_test.go\n"
    )
    facts = extract_facts(
        [
            call("p", "apply_patch", {"input": patch}),
            Message(role="tool", tool_call_id="p", content=result),
        ],
        [1, 2],
    )
    files = [f.text for f in facts if f.kind == "file"]
    assert files == ["/repo/sem/provider.go", "/repo/sem/provider_test.go"]
    [command] = [f for f in facts if f.kind == "command"]
    assert command.text == (
        "apply_patch: Update /repo/sem/provider.go, Add /repo/sem/provider_test.go → ok"
    )
    assert command.score < 3  # the files say what it did; "Success." adds nothing


def test_a_patch_that_fails_keeps_its_exit_code() -> None:
    patch = "*** Begin Patch\n*** Update File: x.go\n@@\n-a\n+b\n*** End Patch\n"
    result = "Exit code: 1\nWall time: 0 seconds\nOutput:\nFailed to find expected lines in x.go\n"
    facts = extract_facts(
        [
            call("p", "apply_patch", {"input": patch}),
            Message(role="tool", tool_call_id="p", content=result),
        ],
        [1, 2],
    )
    [command] = [f for f in facts if f.kind == "command"]
    assert (
        command.text == "apply_patch: Update x.go → exit 1: Failed to find expected lines in x.go"
    )


def test_a_poll_of_a_running_command_that_saw_nothing_new_is_no_fact() -> None:
    def envelope(state: str, output: str) -> str:
        return (
            f"Chunk ID: 1a\nWall time: 1.0 seconds\n{state}\nOriginal token count: 3\nOutput:\n"
            + output
        )

    def poll(call_id: str, session: int, result: str, chars: str = "") -> list[Message]:
        arguments = {"session_id": session, "chars": chars}
        return [
            call(call_id, "write_stdin", arguments),
            Message(role="tool", tool_call_id=call_id, content=result),
        ]

    running = "Process running with session ID 39297"
    exited = "Process exited with code 0"
    messages = [
        call("s", "exec_command", {"cmd": "go test ./..."}),
        Message(role="tool", tool_call_id="s", content=envelope(running, "=== RUN TestA")),
        *poll("p1", 39297, envelope(running, "⣷")),
        *poll("p2", 39297, envelope(running, "")),
        # a number or a word in any script is output: a count, a progress figure
        *poll("n1", 39297, envelope(running, "42")),
        *poll("n2", 39297, envelope(running, "完成")),
        # typing into the process is input, not a poll: kept though it printed nothing
        *poll("i", 39297, envelope(running, ""), chars="q"),
        *poll("p3", 39297, envelope(exited, "ok  github.com/x/sem 2.224s")),
        # the process ended: a later call naming its id polls nothing, and stays a fact
        *poll("p4", 39297, ""),
        # an argument of that name alone makes no poll: no output said it runs
        call("o", "open_session", {"session_id": 7}),
        Message(role="tool", tool_call_id="o", content="0"),
        # a poll whose start was compacted before: its own output is the process's
        *poll("p5", 4242, envelope("Process running with session ID 4242", "⡿")),
        # a poll that sees the process end says so, though it printed nothing
        *poll("p6", 4242, envelope(exited, "")),
    ]
    facts = extract_facts(messages, list(range(1, len(messages) + 1)))
    commands = [f.text for f in facts if f.kind == "command"]
    assert commands == [
        "exec_command: go test ./... → === RUN TestA",
        "write_stdin → 42",
        "write_stdin → 完成",
        "write_stdin: q → (no output)",
        "write_stdin → ok github.com/x/sem 2.224s",
        "write_stdin → (no output)",
        "open_session → 0",
        "write_stdin → (no output)",
    ]
    assert [f.message_id for f in facts if f.text == "write_stdin → (no output)"] == [16, 22]


def test_a_count_of_no_failures_is_no_error() -> None:
    summary = "=== RUN TestA\n    a_test.go:12: note: 3 rows\n" + "x\n" * 100
    summary += "2 agent(s) done — 2 succeeded, 0 failed, 0 cancelled\n"
    failing = "=== RUN TestB\n    b_test.go:9: got 2\n" + "x\n" * 100 + "1 failed, 0 passed\n"
    messages = [
        bash("c1", "make review"),
        Message(role="tool", tool_call_id="c1", content=summary),
        bash("c2", "make test"),
        Message(role="tool", tool_call_id="c2", content=failing),
    ]
    errors = [f.text for f in extract_facts(messages, [1, 2, 3, 4]) if f.kind == "error"]
    # nothing failed in the first run, so its located line is a log line
    assert errors == [
        "b_test.go:9: got 2 (from Bash: make test)",
        "1 failed, 0 passed (from Bash: make test)",
    ]


def test_only_a_patch_tools_patch_names_files() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: old.go\n*** Move to: new.go\n@@\n-a\n+b\n*** End Patch"
    )
    text = f"Notes on the patch format:\n{patch}"
    facts = extract_facts(
        [
            call("p", "apply_patch", {"input": patch}),
            call("w", "Write", {"file_path": "docs/patch.md", "content": patch}),
            call("e", "edit_file", {"path": "notes.md", "content": text}),
        ],
        [1, 2, 3],
    )
    assert [f.text for f in facts if f.kind == "file"] == [
        "old.go",
        "new.go",
        "docs/patch.md",
        "notes.md",
    ]
    assert [f.text for f in facts if f.kind == "command"] == [
        "apply_patch: Update old.go, Move new.go",
        "Write: docs/patch.md",
        "edit_file: notes.md",
    ]


def test_a_claude_code_background_shell_poll_is_unwrapped_and_an_idle_one_is_no_fact() -> None:
    def shell_output(call_id: str, result: str, **arguments: str) -> list[Message]:
        return [
            call(call_id, "BashOutput", {"bash_id": "bash_2", **arguments}),
            Message(role="tool", tool_call_id=call_id, content=result),
        ]

    started = "Command running in background with ID: bash_2"
    ready = (
        "<status>running</status>\n\n<stdout>\n> next dev\n ✓ Ready in 1098ms\n</stdout>\n\n"
        "<stderr>\nnpm warn Unknown env config\n</stderr>\n\n"
        "<timestamp>2025-09-03T01:00:10.112Z</timestamp>"
    )
    idle = "<status>running</status>\n\n<timestamp>2025-09-03T01:00:18.892Z</timestamp>"
    failed = (
        "<status>failed</status>\n\n<exit_code>1</exit_code>\n\n"
        "<stderr>\nError: listen EADDRINUSE: address already in use :::3000\n</stderr>"
    )
    messages = [
        call("s", "Bash", {"command": "npm run dev", "run_in_background": True}),
        Message(role="tool", tool_call_id="s", content=started),
        *shell_output("o1", ready),
        *shell_output("o2", idle),
        *shell_output("o3", idle, filter="error"),  # a filter narrows a poll: still one
        *shell_output("o4", failed),
        # the shell ended: a later poll that shows nothing says so, and stays a fact
        *shell_output("o5", "<status>failed</status>\n\n<exit_code>1</exit_code>"),
        # not the envelope (a tag it does not have): the text as it is
        *shell_output("o6", "<status>running</status>\n<pid>7</pid>"),
        # a shell started again, then seen ended with no exit code and no output: news
        call("s2", "Bash", {"command": "make serve", "run_in_background": True}),
        Message(role="tool", tool_call_id="s2", content=started.replace("bash_2", "bash_3")),
        call("o7", "BashOutput", {"bash_id": "bash_3"}),
        Message(role="tool", tool_call_id="o7", content="<status>completed</status>"),
    ]
    facts = extract_facts(messages, list(range(1, len(messages) + 1)))
    commands = [f.text for f in facts if f.kind == "command"]
    assert commands[0] == "Bash: npm run dev → Command running in background with ID: bash_2"
    assert commands[1].startswith("BashOutput: bash_2 → ") and "Ready in 1098ms" in commands[1]
    assert "<status>" not in commands[1] and "timestamp" not in commands[1]
    assert commands[2] == (
        "BashOutput: bash_2 → exit 1: Error: listen EADDRINUSE: address already in use :::3000"
    )
    assert commands[3] == "BashOutput: bash_2 → exit 1: (no output)"
    assert "<pid>7</pid>" in commands[4]
    assert commands[6] == "BashOutput: bash_3 → (no output)"
    assert len(commands) == 7  # the two idle polls are gone


def test_only_an_envelopes_own_lines_give_the_commands_state() -> None:
    # the command line itself names "Process running": the envelope says it exited
    ended = (
        "Command: grep 'Process running with session ID 7' log\nChunk ID: 1a\n"
        "Wall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nmatched\n"
    )
    assert unwrap_output(ended) == ("matched\n", 0, "ended")
    running = "Chunk ID: 1b\nProcess running with session ID 7\nOutput:\n"
    assert unwrap_output(running) == ("", None, "running")
    assert unwrap_output("<status>failed</status>") == ("", None, "ended")
    # an exit code says the command ended, whatever else the envelope says
    assert unwrap_output("<status>running</status>\n<exit_code>0</exit_code>")[2] == "ended"
    assert unwrap_output("plain output") == ("plain output", None, None)


def test_a_filter_makes_a_poll_only_of_a_background_shell() -> None:
    assert polled_process('{"bash_id": "bash_1", "filter": "error"}') == "bash_1"
    assert polled_process('{"session_id": 7, "filter": "error"}') is None  # typed input
    assert polled_process('{"session_id": 7, "chars": ""}') == "7"


def test_a_period_inside_a_word_ends_no_sentence() -> None:
    answer = (
        "I changed main.go to skip v1.2.3 tags because the old remote.List call broke. "
        "Next I run the tests."
    )
    request = "Keep README.md as it is, never touch go.mod. Then commit."
    messages = [
        Message(role="user", content=request),
        Message(role="assistant", content=answer),
    ]
    facts = extract_facts(messages, [1, 2])
    assert [f.text for f in facts if f.kind == "decision"] == [
        "I changed main.go to skip v1.2.3 tags because the old remote.List call broke."
    ]
    assert [f.text for f in facts if f.kind == "constraint"] == [
        "Keep README.md as it is, never touch go.mod."
    ]
    # an end mark with a closing quote, bracket or emphasis after it ends the sentence
    closed = [
        Message(role="user", content='Never push to "main." Always open a PR first, please.'),
        Message(role="assistant", content="**I decided to keep v1 push.** Then I ran tests."),
    ]
    facts = extract_facts(closed, [1, 2])
    assert [f.text for f in facts if f.kind == "constraint"] == [
        'Never push to "main."',
        "Always open a PR first, please.",
    ]
    assert [f.text for f in facts if f.kind == "decision"] == ["**I decided to keep v1 push.**"]
