"""The ``legacy`` and ``lean`` tail strategies and the identifier extractor they use."""

from __future__ import annotations

import json
from typing import Any

import pytest

import hermes_plugin_tail_lean.annotations as lean_annotations
from hermes_core.config import settings_from
from hermes_hookspecs import (
    CompressionSettings,
    HandoffSummary,
    Message,
    StoredMessage,
    SummarySection,
    TailRequest,
    ToolCall,
    ToolFunction,
)
from hermes_plugin_compressor.groups import group_starts
from hermes_plugin_compressor.identifiers import (
    IdentifierIndex,
    extract_identifiers,
    parse_index,
    render_index,
)
from hermes_plugin_tail_lean import LeanTail, LeanTailSettings, annotate_message
from hermes_plugin_tail_lean import register_tail_strategies as register_lean
from hermes_plugin_tail_lean.sections import id_ranges, parse_quotes
from hermes_plugin_tail_legacy import LegacyTail, LegacyTailSettings
from hermes_plugin_tail_legacy import register_tail_strategies as register_legacy
from tests.compressor_support import PluginHost, load_openai_chat, settings_for
from tests.hosts import HostFactory

HOST = PluginHost()


def stored(messages: list[Message], first_id: int = 1) -> list[StoredMessage]:
    return [
        StoredMessage(id=first_id + i, session_id="s", position=i, message=m, created_at=0.0)
        for i, m in enumerate(messages)
    ]


def tail_request(messages: list[Message], settings: CompressionSettings) -> TailRequest:
    rows = stored(messages)
    return TailRequest(
        messages=rows, token_counts=[HOST.count_message(m) for m in messages], settings=settings
    )


def transcript() -> list[Message]:
    return load_openai_chat()[1:]


def test_register_hooks() -> None:
    got: list[Any] = []
    settings = settings_from(
        {"compression": {"lean_tail_min_tokens": 5_000, "tail_min_messages": 4}}
    )
    register_lean(register=got.append, settings=settings)
    register_legacy(register=got.append, settings=settings)
    assert [t.name for t in got] == ["lean", "legacy"]
    # each is configured from its own keys of [compression]
    assert got[0].settings.lean_tail_min_tokens == 5_000
    assert got[1].settings.tail_min_messages == 4


# -- legacy -----------------------------------------------------------------------------------


def test_legacy_tail_fits_threshold_times_ratio_on_group_starts() -> None:
    messages = transcript()
    request = tail_request(messages, settings_for(40_000))
    plan = LegacyTail(LegacyTailSettings(target_ratio=0.2, tail_min_messages=2)).plan(request)
    assert plan.tail_start in group_starts(messages)
    kept = sum(request.token_counts[plan.tail_start :])
    assert kept <= 8_000 < kept + sum(request.token_counts[plan.tail_start - 2 : plan.tail_start])
    assert plan.extra_sections == [] and plan.digest_chunks is None


def test_legacy_tail_keeps_the_minimum_message_count() -> None:
    messages = transcript()
    tail = LegacyTail(LegacyTailSettings(tail_min_messages=9))
    plan = tail.plan(tail_request(messages, settings_for(1_000)))
    assert len(messages) - plan.tail_start >= 9


# -- lean ---------------------------------------------------------------------------------------


def test_lean_tail_band_on_a_large_window() -> None:
    messages = transcript()
    request = tail_request(messages, settings_for(96_000))
    plan = LeanTail().plan(request)
    kept = sum(request.token_counts[plan.tail_start :])
    assert 10_000 <= kept <= 25_000
    assert plan.tail_start in group_starts(messages)
    assert plan.digest_chunks == 20_000


def test_lean_tail_scales_down_on_small_windows() -> None:
    messages = transcript()
    request = tail_request(messages, settings_for(12_000))
    plan = LeanTail().plan(request)
    assert sum(request.token_counts[plan.tail_start :]) <= 12_000 * 0.35 or (
        plan.tail_start == group_starts(messages)[-1]
    )


def small_band(**extra: Any) -> LeanTail:
    """A lean tail whose band keeps only the last message group."""
    return LeanTail(LeanTailSettings(lean_tail_max_tokens=20, lean_tail_min_tokens=10, **extra))


def sections(plan: Any) -> dict[str, str]:
    return {section.title: section.body for section in plan.extra_sections}


def test_lean_sections_index_quote_and_point_at_evicted_messages() -> None:
    messages = [
        Message(
            role="user",
            content="Please fix bug #4512 on branch feature/inline-perms. Never push to main.",
        ),
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=[
                ToolCall(id="a", function=ToolFunction(name="bash", arguments='{"cmd": "git log"}'))
            ],
        ),
        Message(
            role="tool",
            tool_call_id="a",
            content="commit 3f9c2ab71d\nTraceback...\n"
            "ValueError: bad inline at /srv/app/admin/options.py",
        ),
        Message(role="user", content="Also see https://code.example.org/ticket/8060 please"),
        *[Message(role="assistant", content="thinking " * 300) for _ in range(6)],
        Message(role="user", content="latest instruction stays verbatim"),
        Message(role="assistant", content="tail mentions /srv/app/tail_only.py " + "x " * 30),
    ]
    plan = small_band(user_quote_budget_tokens=1_500).plan(
        tail_request(messages, settings_for(24_000))
    )
    assert plan.tail_start == len(messages) - 1
    body = sections(plan)
    index = body["Identifier Index"]
    for value in (
        "#4512",
        "3f9c2ab71d",
        "ValueError",
        "/srv/app/admin/options.py",
        "feature/inline-perms",
    ):
        assert value in index, value
    assert "https://code.example.org/ticket/8060" in index
    assert "ValueError: bad inline at /srv/app/admin/options.py" in index
    assert "/srv/app/tail_only.py" not in index  # still in the tail
    quotes = body["User Quotes"]
    assert (
        "(message id 1) Please fix bug #4512 on branch feature/inline-perms. Never push to main."
        in quotes
    )
    assert "latest instruction stays verbatim" not in quotes  # carried verbatim by the engine
    pointers = body["Recovery Pointers"]
    assert "message ids 1-10 (10 messages)" in pointers


def test_lean_quotes_only_what_the_user_wrote() -> None:
    """A harness's user-role text (a command caveat before the task, a reminder after the
    last request) is neither quoted as the user's words nor taken for the message the
    engine carries, so the real request is quoted or carried, never lost."""
    caveat = Message(
        role="user",
        content="<local-command-caveat>Caveat: the messages below were generated</...>",
        harness="claude_code.command_caveat",
    )
    reminder = Message(
        role="user",
        content="<system-reminder>the todo list is empty</system-reminder>",
        harness="claude_code.system_reminder",
    )
    messages = [
        caveat,
        Message(role="user", content="Please fix bug #4512 on branch feature/inline-perms."),
        *[Message(role="assistant", content="thinking " * 300) for _ in range(4)],
        Message(role="user", content="then rerun the inline tests"),
        *[Message(role="assistant", content="working " * 300) for _ in range(2)],
        reminder,
        *[Message(role="assistant", content="more " * 300) for _ in range(2)],
        Message(role="assistant", content="tail " + "x " * 30),
    ]
    plan = small_band(user_quote_budget_tokens=1_500).plan(
        tail_request(messages, settings_for(24_000))
    )
    assert plan.tail_start == len(messages) - 1
    quotes = sections(plan)["User Quotes"]
    assert "(message id 2) Please fix bug #4512" in quotes
    assert "Caveat" not in quotes and "todo list" not in quotes
    # the last request the user wrote is the engine's to carry: not quoted
    assert "then rerun the inline tests" not in quotes


def test_lean_carries_the_previous_sections_forward() -> None:
    previous = HandoffSummary(
        goal="g",
        extra=[
            SummarySection(title="User Quotes", body="(message id 3) the original task"),
            SummarySection(title="Identifier Index", body="commits: abc1234f\npaths: /old/file.py"),
            SummarySection(title="Recovery Pointers", body="intro\n- message ids 1-9 (9 messages)"),
        ],
    )
    summary = Message(role="user", kind="summary", summary=previous, content=previous.render())
    messages = [
        summary,
        Message(role="assistant", content="edited /new/file.py"),
        *[Message(role="assistant", content="more " * 400) for _ in range(4)],
    ]
    plan = small_band(user_quote_budget_tokens=1_500).plan(
        tail_request(messages, settings_for(24_000))
    )
    body = sections(plan)
    assert "(message id 3) the original task" in body["User Quotes"]
    assert "abc1234f" in body["Identifier Index"] and "/old/file.py" in body["Identifier Index"]
    assert "/new/file.py" in body["Identifier Index"]
    assert "- message ids 1-9 (9 messages)" in body["Recovery Pointers"]


def test_lean_respects_the_identifier_budget() -> None:
    messages = [
        Message(
            role="assistant",
            content=" ".join(f"/srv/pkg/module_{i}/file_{i}.py" for i in range(400)),
        ),
        Message(role="assistant", content="the end " * 20),
    ]
    settings = settings_for(200_000)
    plan = small_band(identifier_budget_tokens=300).plan(tail_request(messages, settings))
    index = sections(plan)["Identifier Index"]
    assert 0 < HOST.count_text(index) <= 330
    assert "/srv/pkg/module_399/file_399.py" in index  # newest first


def test_the_commits_a_session_made_outlast_the_ids_it_only_saw() -> None:
    """A commit the session made keeps its own share of the index: a later log or
    listing of hundreds of commit ids does not push it out (ranked newest first in
    one list, it was), and its id is not listed again among the commits seen."""
    log = "\n".join(f"commit {i:07x}{'abcdef'[i % 6]}0 log line" for i in range(400))
    messages = [
        Message(role="user", content="add the packet primitives and commit"),
        Message(
            role="tool",
            tool_call_id="c1",
            content="[main 9529088] Add packet primitives\n 2 files changed, 260 insertions(+)",
        ),
        Message(role="assistant", content="Committed as 9529088. Now the git log:"),
        Message(role="tool", tool_call_id="c2", content="git log\n" + log),
        *[Message(role="assistant", content="more " * 400) for _ in range(4)],
    ]
    plan = small_band(identifier_budget_tokens=300).plan(
        tail_request(messages, settings_for(200_000))
    )
    index = sections(plan)["Identifier Index"]
    assert "commits made: 9529088" in index, index
    seen = next(line for line in index.splitlines() if line.startswith("commits: "))
    assert "9529088" not in seen and "0000000a0" not in seen  # the newest seen ids only
    assert ("commit", "9529088") in parse_index(index)


def test_a_commit_made_that_is_not_listed_keeps_its_id_among_the_commits_seen() -> None:
    index = IdentifierIndex()
    for i in range(200):  # far more commits made than a small budget lists
        index.add("commit", f"{i:07x}c", 1000.0 + i)
    index.add("sha", "0000000c", 0.5)  # the oldest commit made, also seen in a log
    index.add("sha", f"{199:07x}c", 0.4)  # the newest one, listed as made
    selected = index.select(60)
    assert f"{199:07x}c" in selected["commit"] and "0000000c" not in selected["commit"]
    assert "0000000c" in selected["sha"] and f"{199:07x}c" not in selected["sha"]


# -- identifiers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("see /usr/lib/python3/site.py:12", "path", "/usr/lib/python3/site.py"),
        ("edit django/contrib/admin/options.py now", "path", "django/contrib/admin/options.py"),
        ("run ./scripts/check.sh", "path", "./scripts/check.sh"),
        (
            "git show 9fceb02d0ae598e95dc970b74767f19372d61af8",
            "sha",
            "9fceb02d0ae598e95dc970b74767f19372d61af8",
        ),
        ("git commit -m x\n[main 1a2b3c4] fix", "sha", "1a2b3c4"),
        ("git commit -m x\n[main 1a2b3c4] fix", "commit", "1a2b3c4"),
        # git's own line for the commit it made: its id may be all digits
        ("[main 9529088] Explain why\n 1 file changed, 11 insertions(+)", "commit", "9529088"),
        ("[main (root-commit) 3f2a9c1] first\n 4 files changed", "commit", "3f2a9c1"),
        ("git commit --allow-empty -m x\n[main 77aa001] x", "commit", "77aa001"),
        ("[detached HEAD ab12cd3] wip\n 2 files changed", "commit", "ab12cd3"),
        # an amend, a cherry-pick or another author: git prints Date / Author first
        ("[main df27482] side\n Date: Tue Dec 1 10:00\n 1 file changed", "commit", "df27482"),
        (
            "[main 1234abc] x\n Author: A <a@b>\n Date: Tue\n 3 files changed",
            "commit",
            "1234abc",
        ),
        ("fixes #1234.", "ref", "#1234"),
        ("see PR 77 for context", "ref", "PR 77"),
        ("git checkout -b fix/login-bug", "branch", "fix/login-bug"),
        ("pushed to origin/release-2.1", "branch", "release-2.1"),
        (
            "docs at https://docs.python.org/3/library/re.html.",
            "url",
            "https://docs.python.org/3/library/re.html",
        ),
        ("raised KeyError in handler", "exception", "KeyError"),
        (
            "  File x\nModuleNotFoundError: No module named 'foo'\n",
            "error",
            "ModuleNotFoundError: No module named 'foo'",
        ),
        ("fatal: not a git repository", "error", "fatal: not a git repository"),
    ],
)
def test_extracts_each_kind(text: str, kind: str, value: str) -> None:
    assert (kind, value) in extract_identifiers(text)


@pytest.mark.parametrize(
    "text",
    [
        "and/or either way",
        "ratio 1/2 and 2019/03/30",
        "color: #666;",
        "</IMPORTANT>",
        "deadbeefcafe in prose",
        "[pid 1234567] read(3, 0x7ffd, 832) = 832",  # strace: no git, no stat line
        "[INFO 2024010] started",
        "[INFO abc1234] committed offsets",  # no git output: "commit" alone is no cue
        "[worker 1234567] started\nwill commit later",
    ],
)
def test_skips_look_alikes(text: str) -> None:
    found = extract_identifiers(text)
    assert not [v for k, v in found if k in ("path", "ref", "sha", "commit")], found


@pytest.mark.parametrize(
    ("text", "wanted", "unwanted"),
    [
        # escaped text shown as is (a debug dump, JSON inside output): ``\n\t`` is no
        # part of the path after it, nor a backslash part of a URL
        (
            'SandboxDenied { message: "FAIL\\n\\tgithub.com/soph/sync/run.go:12 +0x1\\n" }',
            ("path", "github.com/soph/sync/run.go"),
            ("path", "tgithub.com/soph/sync/run.go"),
        ),
        (
            'trace "at\\n\\t/Users/me/src/app/main.go:3"',
            ("path", "/Users/me/src/app/main.go"),
            ("path", "t/Users/me/src/app/main.go"),
        ),
        (
            'remote = "https://github.com/entireio/cli.git\\"',
            ("url", "https://github.com/entireio/cli.git"),
            ("url", "https://github.com/entireio/cli.git\\"),
        ),
        # a UUID beside git words is a session or request id, not commits
        (
            "git log for conversation 019d6d29-8cf7-7fe3-adc9-8c3e4d9d5603 at commit 1a2b3c4",
            ("sha", "1a2b3c4"),
            ("sha", "8c3e4d9d5603"),
        ),
    ],
)
def test_escapes_and_ids_are_not_glued_to_identifiers(
    text: str, wanted: tuple[str, str], unwanted: tuple[str, str]
) -> None:
    found = extract_identifiers(text)
    assert wanted in found and unwanted not in found, found
    assert not any(kind == "sha" and value == "019d6d29" for kind, value in found)


def test_call_arguments_are_read_decoded_for_identifiers() -> None:
    # the raw JSON of a patch has ``\n`` before each line: read raw, the path of a
    # line's start came out glued to an ``n``
    notes = "Moved:\ninternal/syncer/run.go\n-internal/old/run.go\n+./docs/run.md"
    call = ToolCall(
        id="p", function=ToolFunction(name="write", arguments=json.dumps({"text": notes}))
    )
    message = Message(role="assistant", tool_calls=[call])
    found = {
        value for _kind, value in extract_identifiers(lean_annotations.identifier_text(message))
    }
    # and a diff line's sign is no part of its path
    assert {"internal/syncer/run.go", "internal/old/run.go", "./docs/run.md"} <= found, found
    assert not {"ninternal/syncer/run.go", "-internal/old/run.go", "+./docs/run.md"} & found


def test_index_renders_and_parses_back() -> None:
    index = IdentifierIndex()
    items = extract_identifiers(
        "ValueError: x at /a/b.py\ncommit 1234abcd on branch origin/dev see #12 https://x.org/y"
    )
    index.add_all(items, 1.0)
    rendered = render_index(index.select(500))
    assert sorted(parse_index(rendered)) == sorted(items)


def test_quote_parsing_and_ranges() -> None:
    body = "(message id 4) first\nline two\n\n(message id 9) second"
    assert parse_quotes(body) == [
        (4, "(message id 4) first\nline two"),
        (9, "(message id 9) second"),
    ]
    assert id_ranges([9, 3, 4, 5, 11, 12]) == "3-5, 9, 11-12"
    # a quote of a turn's draft row has no id yet: it stays a quote of its own
    drafted = "(message id 3) first task\n\n(message id ?) also do X"
    assert parse_quotes(drafted) == [
        (3, "(message id 3) first task"),
        (None, "(message id ?) also do X"),
    ]


def test_json_of_tool_arguments_is_searched_for_identifiers() -> None:
    call = ToolCall(
        id="x", function=ToolFunction(name="edit", arguments=json.dumps({"path": "/srv/x/y.py"}))
    )
    messages = [
        Message(role="assistant", tool_calls=[call]),
        Message(role="tool", tool_call_id="x", content="ok"),
        *[Message(role="assistant", content="pad " * 500) for _ in range(3)],
    ]
    plan = small_band().plan(tail_request(messages, settings_for(24_000)))
    assert "/srv/x/y.py" in sections(plan)["Identifier Index"]


# -- identifiers annotated once per message -----------------------------------------------------


def annotated(rows: list[StoredMessage]) -> list[StoredMessage]:
    """The rows as the runtime stores them: with the lean tail's annotation."""
    return [
        row.model_copy(update={"annotations": lean_annotations.annotation(row.message)})
        for row in rows
    ]


def test_annotation_matches_extraction_on_a_real_transcript() -> None:
    messages = transcript()
    settings = settings_for(20_000)
    plain = tail_request(messages, settings)
    marked = plain.model_copy(update={"messages": annotated(plain.messages)})
    for row in marked.messages:
        found = lean_annotations.message_identifiers(row)
        assert found == extract_identifiers(lean_annotations.identifier_text(row.message))
    assert LeanTail().plan(marked) == LeanTail().plan(plain)
    assert sum(len(row.annotations["lean_identifiers"]) > 1 for row in marked.messages) > 10  # type: ignore[arg-type]


def test_stored_annotation_is_what_the_index_reads() -> None:
    messages = [
        Message(role="user", content="start"),
        Message(role="assistant", content="see /srv/app/real.py"),
        *[Message(role="assistant", content="pad " * 500) for _ in range(3)],
    ]
    rows = annotated(stored(messages))
    fake = {
        "lean_identifiers": {"v": lean_annotations.VERSION, "path": ["/only/in/the/annotation.py"]}
    }
    rows[1] = rows[1].model_copy(update={"annotations": fake})
    request = TailRequest(
        messages=rows,
        token_counts=[HOST.count_message(m) for m in messages],
        settings=settings_for(24_000),
    )
    index = sections(small_band().plan(request))["Identifier Index"]
    assert "/only/in/the/annotation.py" in index and "/srv/app/real.py" not in index
    # another version, or a shape not ours, is ignored: the text is read instead
    for other in (
        {"lean_identifiers": {"v": 99, "path": ["/stale.py"]}},
        {"lean_identifiers": {"v": 1, "nonsense": ["/bad.py"]}},
        {"lean_identifiers": {"v": 1, "path": [7, "/bad.py"]}},
        {"lean_identifiers": "garbage"},
    ):
        rows[1] = rows[1].model_copy(update={"annotations": other})
        index = sections(small_band().plan(request.model_copy(update={"messages": rows})))[
            "Identifier Index"
        ]
        assert "/srv/app/real.py" in index and ".py" not in index.replace("/srv/app/real.py", "")


def test_annotation_keeps_the_newest_identifiers_per_kind() -> None:
    limit = lean_annotations.MAX_PER_KIND
    text = " ".join(f"/srv/f{i}.py" for i in range(limit + 50)) + " #12"
    found = lean_annotations.extract(Message(role="tool", tool_call_id="x", content=text))
    paths = [value for kind, value in found if kind == "path"]
    assert (
        len(paths) == limit and paths[0] == "/srv/f50.py" and paths[-1] == f"/srv/f{limit + 49}.py"
    )
    assert ("ref", "#12") in found


def test_annotate_hook_only_for_conversation_messages_under_the_lean_tail() -> None:
    from hermes_core.config import Settings

    lean, legacy = Settings(), Settings.model_validate({"compression": {"tail": "legacy"}})
    message = Message(role="user", content="fix /srv/a.py")
    assert annotate_message(message=message, settings=lean) == {
        "lean_identifiers": {"v": lean_annotations.VERSION, "path": ["/srv/a.py"]}
    }
    assert annotate_message(message=message, settings=legacy) is None
    summary = Message(role="user", kind="summary", summary=HandoffSummary(goal="g"), content="x")
    assert annotate_message(message=summary, settings=lean) is None


@pytest.mark.parametrize(
    ("budget", "threshold", "expected"),
    [
        (2_000, 8_928, 1_000),  # 16K window: the floor
        (2_000, 300_000, 2_000),  # the default budget, untouched
        (8_000, 20_928, 1_000),  # 32K window: the floor (a 120th is less)
        (8_000, 96_000, 1_000),  # 128K window: the floor (a 120th is 800)
        (8_000, 240_000, 2_000),  # a 120th of the threshold
        (20_000, 600_000, 5_000),
        (8_000, 3_900, 975),  # tiny window: a quarter, under the floor
        (0, 96_000, 0),
    ],
)
def test_index_budget_stays_within_a_share_of_the_threshold(
    budget: int, threshold: int, expected: int
) -> None:
    from hermes_plugin_tail_lean.strategy import index_budget

    assert index_budget(settings_for(threshold), budget) == expected


@pytest.mark.parametrize(("window", "budget"), [(16_000, 2_000), (32_000, 8_000)])
def test_a_long_session_with_a_large_system_prompt_stays_inside_a_small_window(
    tmp_path: Any, window: int, budget: int, make_host: HostFactory
) -> None:
    # 259K tokens of a real Codex session (its system prompt alone is 5.4K tokens) replayed
    # with the default (deterministic) summarizer. When the lean tail sized its band and
    # sections from the whole threshold, every compression at 16K ended above the trigger,
    # the breaker stopped them and the session grew to 173K tokens; at 32K an 8,000-token
    # index budget (a quarter of the threshold allowed) did the same up to 66K tokens.
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    from benchmarks.transcript_inputs import large_session, write_wire
    from hermes_core.config import settings_from
    from hermes_core.replay import replay

    source = write_wire(large_session().messages, Path(tmp_path) / "large.json")
    host = make_host.like(
        settings_from(
            {
                "session": {"path": str(Path(tmp_path) / "s.db")},
                "memory": {"home": str(Path(tmp_path) / "mem")},
                "compression": {"identifier_budget_tokens": budget},
            }
        )
    )
    report = replay(host, source, format="openai-chat", context_length=window)
    host.close()
    # stored compactions: a long turn compresses mid-turn as a view sent to the model (nothing
    # is stored before commit) and is compacted once, when it is committed
    assert len(report.compressions) > 5
    assert report.final_active_tokens <= report.threshold_tokens


def test_a_first_round_larger_than_the_window_is_sent_inside_it(
    tmp_path: Any, make_host: HostFactory
) -> None:
    # a task whose first round reads four large files in parallel: 45K tokens before the
    # model answers once, at a 32K window. Nothing precedes the round to summarize, and the
    # compression was skipped, so both requests of the round went out over the window
    # (seen on two real Claude Code sessions of entireio/cli); their outputs are now cut
    # to excerpts in the view the round is sent on, and the turn compacts when committed
    from pathlib import Path

    from benchmarks.transcript_inputs import write_wire
    from hermes_core.config import settings_from
    from hermes_core.replay import replay
    from hermes_hookspecs import Message, ToolCall, ToolFunction

    def read(i: int) -> ToolCall:
        arguments = json.dumps({"path": f"src/part{i}.go"})
        return ToolCall(id=f"r{i}", function=ToolFunction(name="read", arguments=arguments))

    messages = [
        Message(role="user", content="Implement the plan in PLAN.md; keep the public API"),
        Message(
            role="assistant", content="Reading the files.", tool_calls=[read(i) for i in range(4)]
        ),
    ]
    for i in range(4):
        body = "".join(f"func part{i}_{n}(x int) int {{ return x * {n} }}\n" for n in range(700))
        messages.append(Message(role="tool", tool_call_id=f"r{i}", content=body))
    messages.append(Message(role="assistant", content="Read them; the plan touches part2.go."))
    for t in range(6):
        messages += [
            Message(role="user", content=f"Now step {t} of the plan"),
            Message(role="assistant", content=f"Step {t} done: edited part{t % 4}.go " * 20),
        ]
    source = write_wire(messages, Path(tmp_path) / "first.json")
    host = make_host.like(
        settings_from(
            {
                "session": {"path": str(Path(tmp_path) / "s.db")},
                "memory": {"home": str(Path(tmp_path) / "mem")},
            }
        )
    )
    report = replay(host, source, format="openai-chat", context_length=32_000)
    host.close()
    assert report.requests >= 8
    assert max(report.request_tokens) <= report.threshold_tokens, report.request_tokens
    assert not report.skipped_compressions, report.skipped_compressions
    assert report.compressions  # the turn holding the round is compacted once committed


def test_index_skips_content_hashes_device_files_and_code_that_mentions_errors() -> None:
    text = (
        "/repo/.git/objects/7a/0c7ceb28a1ff77b8724f900af21034ce2e856e\n"
        "2>/dev/null; see /repo/cmd/app/main.go\n"
        '   141→\t\tt.Errorf("Agent failed with error: %v", err)\n'
        "Error: open /repo/config.yaml: no such file\n"
    )
    found = extract_identifiers(text)
    paths = [v for k, v in found if k == "path"]
    errors = [v for k, v in found if k == "error"]
    assert paths == ["/repo/cmd/app/main.go", "/repo/config.yaml"]
    assert errors == ["Error: open /repo/config.yaml: no such file"]
