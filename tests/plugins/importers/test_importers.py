"""Tests for the transcript importers (hermes_plugin_importers) on the bundled real transcripts.

Every file in ``transcripts/`` is imported once per module (cached by a
fixture); malformed variants are derived in code from the real files.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pluggy
import pytest

from hermes_core.detection import read_sample
from hermes_hookspecs import (
    ENTRY_POINT_GROUP,
    PROJECT_NAME,
    ImportedConversation,
    Importer,
    ImportFormatError,
    Message,
    ToolCall,
    ToolFunction,
    specs,
)
from hermes_plugin_importers import (
    adp,
    aider_chat,
    builtin_importers,
    check_sequence,
    claude_code,
    codex_rollout,
    detect_importer,
    gemini_cli,
    load_transcript,
    openai_chat,
    openhands_events,
    swe_agent,
)
from hermes_plugin_importers.builder import (
    CALL_BEFORE_START,
    FINAL_SYNTHETIC_RESULT,
    SYNTHETIC_RESULT,
)
from hermes_plugin_importers.claude_code import ClaudeCodeImporter
from hermes_plugin_importers.codex_rollout import CodexRolloutImporter
from hermes_plugin_importers.gemini_cli import GeminiCliImporter
from hermes_plugin_importers.openai_chat import OpenAIChatImporter
from hermes_plugin_importers.openhands_events import OpenHandsEventsImporter
from hermes_plugin_importers.reading import iter_jsonl
from hermes_plugin_importers.swe_agent import SweAgentImporter

ROOT = Path(__file__).resolve().parents[3]
TRANSCRIPTS = ROOT / "transcripts"
FILES = sorted(TRANSCRIPTS.rglob("*.gz"))
FILE_IDS = [f"{p.parent.name}/{p.name}" for p in FILES]
PLUGIN_DIR = ROOT / "plugins" / "importers"


def _file(name: str) -> Path:
    matches = [p for p in FILES if p.name.startswith(name)]
    assert len(matches) == 1, name
    return matches[0]


def _raw_lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def importers() -> list[Importer]:
    return builtin_importers()


Loader = Callable[[Path], list[ImportedConversation]]


@pytest.fixture(scope="module")
def load(importers: list[Importer]) -> Loader:
    """Import a bundled transcript with its detected importer, once per test module."""
    cache: dict[Path, list[ImportedConversation]] = {}

    def get(path: Path) -> list[ImportedConversation]:
        if path not in cache:
            cache[path] = detect_importer(path, importers).load(path)
        return cache[path]

    return get


# -- the bundled files ---------------------------------------------------------
def test_bundle_is_complete_and_byte_identical() -> None:
    sources = (TRANSCRIPTS / "SOURCES.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| (\S+) \| \d+ \| `([0-9a-f]{64})` \|$", sources, re.M))
    assert len(FILES) == 19
    assert set(table) == {p.relative_to(TRANSCRIPTS).with_suffix("").as_posix() for p in FILES}
    for path in FILES:
        name = path.relative_to(TRANSCRIPTS).with_suffix("").as_posix()
        digest = hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest()
        assert digest == table[name], name
        assert f"| {name} |" in sources.split("## Checksums")[0], f"{name} not described"
    for doc in ("FORMATS.md", "LICENSES.md"):
        assert (TRANSCRIPTS / doc).stat().st_size > 1000
    assert "MIT" in (TRANSCRIPTS / "LICENSES.md").read_text(encoding="utf-8")


def test_nothing_reads_the_shared_folder_at_run_time() -> None:
    needle = "/".join(("..", "shared"))
    for source in PLUGIN_DIR.glob("*.py"):
        text = source.read_text(encoding="utf-8")
        assert needle not in text and "/work/" not in text, source.name


# -- detection -----------------------------------------------------------------
@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_sniff_picks_the_format_of_the_folder(path: Path, importers: list[Importer]) -> None:
    accepted = [imp.name for imp in importers if imp.sniff(path, path.read_bytes()[:65536])]
    assert accepted == [path.parent.name]
    assert detect_importer(path, importers).name == path.parent.name


def test_detection_over_every_file_under_transcripts(importers: list[Importer]) -> None:
    """Each transcript is claimed by its folder's importer alone; the docs, probes and
    scripts beside them by none."""
    for path in sorted(p for p in TRANSCRIPTS.rglob("*") if p.is_file()):
        sample = read_sample(path)
        accepted = [imp.name for imp in importers if imp.recognise(path, sample).matched]
        expected = [path.parent.name] if path.suffix == ".gz" else []
        assert accepted == expected, path.relative_to(TRANSCRIPTS)


def test_sniff_works_on_uncompressed_heads(tmp_path: Path, importers: list[Importer]) -> None:
    for path in FILES:
        plain = tmp_path / path.name.removesuffix(".gz")
        plain.write_bytes(gzip.decompress(path.read_bytes()))
        assert detect_importer(plain, importers).name == path.parent.name
        head = plain.read_bytes()[:300]  # a head that cuts the first record short
        assert [i.name for i in importers if i.sniff(plain, head)] == [path.parent.name]


# -- the ordering invariant on every bundled file ----------------------------------
def _independent_problems(messages: list[Message]) -> list[str]:
    """A second, simpler statement of the rules (not sharing code with check_sequence)."""
    problems = []
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    all_ids = Counter(c.id for m in messages for c in (m.tool_calls or []))
    problems += [f"id {i} used {n} times" for i, n in all_ids.items() if n > 1]
    for index, message in enumerate(messages):
        if message.role == "tool":
            back = index - 1
            while back >= 0 and messages[back].role == "tool":
                back -= 1
            owner = messages[back] if back >= 0 else None
            if owner is None or owner.role != "assistant":
                problems.append(f"{index}: tool message without assistant before its run")
            elif message.tool_call_id not in {c.id for c in owner.tool_calls or []}:
                problems.append(f"{index}: answers a call its assistant did not make")
        if message.role == "assistant" and message.tool_calls:
            answered = set()
            after = index + 1
            while after < len(messages) and messages[after].role == "tool":
                answered.add(messages[after].tool_call_id)
                after += 1
            missing = {c.id for c in message.tool_calls} - answered
            if missing and not (index == last_assistant and after == len(messages)):
                problems.append(f"{index}: unanswered {sorted(missing)} mid-conversation")
        for call in message.tool_calls or []:
            json.loads(call.function.arguments)
    return problems


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_every_tool_result_matches_its_call(path: Path, load: Loader) -> None:
    conversations = load(path)
    assert conversations
    for conversation in conversations:
        assert conversation.source_format == path.parent.name
        assert conversation.source_path == str(path)
        assert len(conversation.messages) >= 2
        assert check_sequence(conversation.messages) == []
        assert _independent_problems(conversation.messages) == []
        unanswered = conversation.metadata["unanswered_final_calls"]
        assert unanswered in (0, 1), conversation.conversation_id
        for message in conversation.messages:
            assert message.content is None or isinstance(message.content, str)
            Message.from_api(message.to_api())  # round-trips through the wire format


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_no_synthetic_results_or_dropped_turns_in_real_files(path: Path, load: Loader) -> None:
    for conversation in load(path):
        counts = conversation.metadata.get("counts", {})
        assert counts.get("synthetic_tool_results", 0) == 0
        assert counts.get("dropped_empty_assistant", 0) == 0
        assert counts.get("unparseable_arguments", 0) == 0
        assert not any(m.content == SYNTHETIC_RESULT for m in conversation.messages)


# -- counts against the raw files -------------------------------------------------------
def _claude_tool_uses(path: Path) -> tuple[Counter[str], Counter[str], int, int]:
    """(main tool_use names, sidechain tool_use names, main tool_results, main is_error)."""
    main: Counter[str] = Counter()
    side: Counter[str] = Counter()
    results = errors = 0
    seen = set()
    for line in _raw_lines(path):
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("uuid") in seen:
            continue
        seen.add(record.get("uuid"))
        content = (record.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if record["type"] == "assistant" and block.get("type") == "tool_use":
                (side if record.get("isSidechain") else main)[block["name"]] += 1
            is_result = record["type"] == "user" and block.get("type") == "tool_result"
            if is_result and not record.get("isSidechain"):
                results += 1
                errors += bool(block.get("is_error"))
    return main, side, results, errors


@pytest.mark.parametrize(
    "path", [p for p in FILES if p.parent.name == "claude-code"], ids=lambda p: p.name
)
def test_claude_code_call_counts_match_the_source(path: Path, load: Loader) -> None:
    main_uses, side_uses, results, errors = _claude_tool_uses(path)
    main, *others = load(path)
    imported = Counter(c.function.name for m in main.messages for c in m.tool_calls or [])
    assert imported == main_uses
    assert sum(m.role == "tool" for m in main.messages) == results
    assert main.metadata["tool_errors"] == errors
    sidechains = [c for c in others if c.metadata["subagent_source"] == "sidechain"]
    side_imported = Counter(
        c.function.name for conv in sidechains for m in conv.messages for c in m.tool_calls or []
    )
    assert side_imported == side_uses


def test_claude_code_pr_review_session(load: Loader) -> None:
    conversations = load(_file("entireio-cli-3dffd2ffdd52"))
    assert len(conversations) == 1
    (session,) = conversations
    calls = [c for m in session.messages for c in m.tool_calls or []]
    assert sum(c.function.name == "Bash" for c in calls) == 91
    assert session.metadata["tool_errors"] == 10
    assert session.conversation_id == "58e50d6c-eec7-4ae4-a366-a1aa111d2a6b"
    assert session.model == "claude-opus-4-5-20251101"
    # streaming split: records sharing message.id merge, parallel calls stay together
    assert max(len(m.tool_calls or []) for m in session.messages) == 6
    # the three queued inputs ("remove"d, delivered mid-turn) become user messages after
    # the tool results they arrived with
    queued = session.metadata["flags"]["queued"]
    assert [session.messages[i].content for i in queued] == [
        "also we have conflicts with main",
        "or maybe fmt",
        "mise run fmt",
    ]
    for index in queued:
        assert session.messages[index - 1].role == "tool"
        assert session.messages[index + 1].role == "assistant"
    assert len(session.metadata["flags"]["meta"]) == 2


def test_claude_code_queue_dequeue_is_not_doubled(
    load: Loader,
) -> None:
    (session,) = load(_file("entireio-git-sync-516fe4e51170"))
    texts = [m.content for m in session.messages if m.role == "user"]
    assert (
        texts.count('I\'m using "entiredb auth login" that sets a credential in the keychain') == 1
    )
    assert session.metadata["counts"]["queued_dequeued"] == 3
    assert session.metadata["counts"]["queued_delivered"] == 1
    assert "api_error" in session.metadata["flags"]


def test_claude_code_compaction_markers(load: Loader) -> None:
    main, *subagents = load(_file("entireio-cli-38ecf75f2f1d"))
    markers = {m["kind"]: m for m in main.metadata["markers"]}
    boundary = markers["compact_boundary"]
    assert boundary["trigger"] == "auto" and boundary["pre_tokens"] == 155099
    summary = main.messages[boundary["index"]]
    assert summary.role == "user"
    assert summary.text().startswith("This session is being continued from a previous conversation")
    assert main.metadata["flags"]["compact_summary"] == [boundary["index"]]
    assert len(markers["microcompact_boundary"]["compacted_tool_ids"]) == 7
    # 2.x subagents streamed as agent_progress become their own conversations
    assert {s.metadata["agent_id"] for s in subagents} == {"a89e4b2", "a88d57b"}
    main_ids = {c.id for m in main.messages for c in m.tool_calls or []}
    for subagent in subagents:
        assert subagent.metadata["task_call_id"] in main_ids
        assert subagent.messages[0].role == "user"


def test_claude_code_inline_sidechains_split_by_parent_uuid(
    load: Loader,
) -> None:
    main, *sidechains = load(_file("claude-code-viewer"))
    assert main.title == "Empty Repo Setup: CLAUDE.md Foundation Created"
    assert len(sidechains) == 5
    task_calls = {
        c.id: json.loads(c.function.arguments)["prompt"]
        for m in main.messages
        for c in m.tool_calls or []
        if c.function.name == "Task"
    }
    assert len(task_calls) == 5
    for sidechain in sidechains:
        assert sidechain.metadata["parent_conversation_id"] == main.conversation_id
        call_id = sidechain.metadata["task_call_id"]
        assert sidechain.messages[0].content == task_calls[call_id]
    assert len({s.conversation_id for s in sidechains}) == 5


def _codex_items(path: Path) -> Counter[str]:
    decoder = json.JSONDecoder()
    counts: Counter[str] = Counter()
    for line in _raw_lines(path):
        text, position = line.strip(), 0
        while position < len(text):
            value, position = decoder.raw_decode(text, position)
            if value["type"] == "response_item":
                counts[value["payload"]["type"]] += 1
    return counts


@pytest.mark.parametrize(
    "path", [p for p in FILES if p.parent.name == "codex-rollout"], ids=lambda p: p.name
)
def test_codex_call_counts_match_the_source(path: Path, load: Loader) -> None:
    items = _codex_items(path)
    (session,) = load(path)
    calls = [c for m in session.messages for c in m.tool_calls or []]
    assert len(calls) == items["function_call"] + items["custom_tool_call"]
    assert sum(m.role == "tool" for m in session.messages) == (
        items["function_call_output"] + items["custom_tool_call_output"]
    )
    assert session.messages[0].role == "system"
    assert session.messages[0].text().startswith("You are Codex")
    for call in calls:
        if call.function.name == "apply_patch":
            assert json.loads(call.function.arguments)["input"].startswith("*** Begin Patch")


def test_codex_entire_graph_has_112_calls(load: Loader) -> None:
    (session,) = load(_file("entireio-entire-graph-54fb"))
    assert sum(len(m.tool_calls or []) for m in session.messages) == 112
    assert session.model == "gpt-5.5"


def test_codex_torn_line_is_read_as_two_records(
    load: Loader,
) -> None:
    path = _file("entireio-git-sync-2dcf2f1a3166-glued-lines")
    torn = _raw_lines(path)[1836]
    with pytest.raises(json.JSONDecodeError, match="Extra data"):
        json.loads(torn)
    records = [r for r in iter_jsonl(path) if r.line == 1837]
    assert [(r.part, r.value["payload"]["type"]) for r in records] == [
        (0, "token_count"),
        (1, "task_started"),
    ]
    (session,) = load(path)
    assert session.metadata["torn_lines"] == [1837]
    assert [m["kind"] for m in session.metadata["markers"]] == ["compacted", "compacted"]
    # approval notices written while a command ran are moved after its result
    assert session.metadata["counts"]["moved_after_tool_results"] == 7


def test_openai_chat_completion_log(load: Loader) -> None:
    (conversation,) = load(_file("openhands-django-11149"))
    assert len(conversation.messages) == 102
    assert conversation.metadata["response_appended"] is True
    last, stub = conversation.messages[-2:]
    assert last.role == "assistant" and last.tool_calls and len(last.tool_calls) == 1
    # the run stopped before the final call's result: stubbed, marked and counted
    assert stub.role == "tool" and stub.tool_call_id == last.tool_calls[0].id
    assert stub.content == FINAL_SYNTHETIC_RESULT
    assert conversation.metadata["unanswered_final_calls"] == 1
    assert conversation.metadata["counts"]["synthetic_final_results"] == 1
    assert all(isinstance(m.content, str) for m in conversation.messages if m.role != "assistant")


def test_openhands_instances_keep_ids_per_conversation(
    load: Loader,
) -> None:
    conversations = load(_file("multi-swe-bench-output"))
    assert [c.conversation_id for c in conversations] == [
        "ponylang__ponyc-4595",
        "ponylang__ponyc-4593",
        "ponylang__ponyc-4588",
    ]
    for conversation in conversations:
        first_call = conversation.messages[2].tool_calls
        assert first_call and first_call[0].id == "toolu_01"
    finished = [c.messages[-2].tool_calls for c in conversations[:2]]
    assert [calls[0].function.name for calls in finished if calls] == ["finish", "finish"]
    assert [c.messages[-1].content for c in conversations[:2]] == [FINAL_SYNTHETIC_RESULT] * 2
    # the run that hit max iterations ends on a tool result; rejected calls became user text
    assert conversations[2].messages[-1].role == "tool"
    assert conversations[1].metadata["flags"]["error_observation"]


def test_swe_agent_text_actions(load: Loader) -> None:
    (conversation,) = load(_file("pydicom-1458"))
    assert conversation.metadata["version"] == "0.x"
    assert conversation.metadata["counts"]["demo_messages_skipped"] == 1
    assert not any("demonstration" in m.text()[:200] for m in conversation.messages)
    calls = [c for m in conversation.messages for c in m.tool_calls or []]
    assert len(calls) == 12 and all(c.function.name == "bash" for c in calls)
    assert json.loads(calls[-1].function.arguments) == {"command": "submit"}
    assert conversation.messages[-2].tool_calls == [calls[-1]]
    assert conversation.messages[-1].content == FINAL_SYNTHETIC_RESULT
    assert conversation.messages[3].role == "tool"
    assert conversation.messages[3].text().rstrip().endswith("bash-$")


def test_swe_agent_demos_can_be_kept() -> None:
    (conversation,) = SweAgentImporter(include_demos=True).load(_file("pydicom-1458"))
    assert conversation.metadata["flags"]["demo"] == [1]


def test_swe_agent_function_calling(load: Loader) -> None:
    (conversation,) = load(_file("marshmallow-1867-fc"))
    assert conversation.metadata["version"] == "1.x"
    assert sum(m.role == "tool" for m in conversation.messages) == 13
    # the replay reuses call ids across turns; they are made unique within the conversation
    assert conversation.metadata["counts"]["renamed_call_ids"] == 4
    assert conversation.messages[-2].tool_calls
    assert conversation.messages[-2].tool_calls[0].function.name == "submit"


# -- registration ----------------------------------------------------------------------
def test_each_module_registers_its_importer_through_the_hook() -> None:
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(specs)
    modules = [
        openai_chat,
        claude_code,
        codex_rollout,
        openhands_events,
        swe_agent,
        aider_chat,
        adp,
        gemini_cli,
    ]
    for module in modules:
        pm.register(module)
    registered: list[Importer] = []
    pm.hook.register_importers(register=registered.append, settings=None)
    assert sorted(i.name for i in registered) == [
        "adp",
        "aider-chat",
        "claude-code",
        "codex-rollout",
        "gemini-cli",
        "openai-chat",
        "openhands-events",
        "swe-agent",
    ]
    declared = {
        e.value for e in entry_points(group=ENTRY_POINT_GROUP) if e.name.startswith("importer_")
    }
    assert declared == {m.__name__ for m in modules}


# -- malformed input ------------------------------------------------------------------
def test_truncated_json_line_names_the_line(tmp_path: Path) -> None:
    lines = _raw_lines(_file("entireio-cli-3dffd2ffdd52"))[:30]
    lines[11] = lines[11][: len(lines[11]) // 2]
    path = _write_lines(tmp_path / "cut.jsonl", lines)
    with pytest.raises(ImportFormatError, match=r"cut\.jsonl:12: invalid JSON"):
        ClaudeCodeImporter().load(path)

    codex = _raw_lines(_file("entireio-entire-graph-54fb"))[:40]
    codex[-1] = codex[-1][:50]
    path = _write_lines(tmp_path / "codex.jsonl", codex)
    with pytest.raises(ImportFormatError, match=r"codex\.jsonl:40: invalid JSON"):
        CodexRolloutImporter().load(path)

    events = _raw_lines(_file("multi-swe-bench-output"))
    events[1] = events[1][:-500]
    path = _write_lines(tmp_path / "events.jsonl", events)
    with pytest.raises(ImportFormatError, match=r"events\.jsonl:2: invalid JSON"):
        OpenHandsEventsImporter().load(path)

    document = gzip.decompress(_file("openhands-django").read_bytes())[:-20]
    path = tmp_path / "chat.json"
    path.write_bytes(document)
    with pytest.raises(ImportFormatError, match=r"chat\.json:1: invalid JSON"):
        OpenAIChatImporter().load(path)


def test_truncated_gzip_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "short.jsonl.gz"
    path.write_bytes(_file("entireio-cli-3dffd2ffdd52").read_bytes()[:5000])
    with pytest.raises(ImportFormatError, match="broken gzip"):
        ClaudeCodeImporter().load(path)


@pytest.mark.parametrize(
    "importer",
    builtin_importers(),
    ids=lambda i: i.name,
)
def test_empty_file_is_an_error(tmp_path: Path, importer: Importer) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(ImportFormatError, match=r"empty\.jsonl:1: empty"):
        importer.load(path)
    blank = tmp_path / "blank.json"
    blank.write_text("\n\n  \n", encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"blank\.json"):
        importer.load(blank)


def test_detect_rejects_empty_and_unknown_files(tmp_path: Path, importers: list[Importer]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(ImportFormatError, match=r"empty\.jsonl:1: empty file"):
        detect_importer(empty, importers)
    other = tmp_path / "notes.jsonl"
    other.write_text('{"hello": "world"}\n{"hello": "again"}\n', encoding="utf-8")
    with pytest.raises(ImportFormatError, match="no importer recognises"):
        load_transcript(other, importers)
    with pytest.raises(ImportFormatError, match="unknown transcript format 'nope'"):
        load_transcript(other, importers, format_name="nope")


@pytest.mark.parametrize(
    ("importer", "source", "pattern"),
    [
        (
            ClaudeCodeImporter(),
            "entireio-entire-graph-54fb",
            r":1: .*(no user/assistant|not a Claude)",
        ),
        (CodexRolloutImporter(), "entireio-cli-3dffd2ffdd52", r":1: record needs .*'payload'"),
        (OpenHandsEventsImporter(), "entireio-cli-3dffd2ffdd52", r":1: expected an instance"),
        (OpenAIChatImporter(), "pydicom-1458", r":1: expected a JSON list of messages"),
        (SweAgentImporter(), "openhands-django", r":1: expected a \.traj object"),
        (OpenAIChatImporter(), "entireio-cli-3dffd2ffdd52", r":2: invalid JSON"),
        (GeminiCliImporter(), "entireio-cli-3dffd2ffdd52", r":2: invalid JSON"),
        (GeminiCliImporter(), "openhands-django", r": messages\[0\]: message has no 'type'"),
        (GeminiCliImporter(), "pydicom-1458", r":1: the session's 'messages' is not a list"),
        (OpenAIChatImporter(), "entireio-cli-ab2b9748b105", r"messages\[0\]: unknown role None"),
        (SweAgentImporter(), "entireio-cli-9c53780d06b7", r":1: expected a \.traj object"),
    ],
    ids=lambda value: getattr(value, "name", None) or str(value)[:24],
)
def test_wrong_format_is_an_error_naming_the_line(
    importer: Importer, source: str, pattern: str
) -> None:
    with pytest.raises(ImportFormatError, match=pattern):
        importer.load(_file(source))


def _edit_json_line(lines: list[str], index: int, edit: Callable[[dict[str, Any]], None]) -> None:
    record = json.loads(lines[index])
    edit(record)
    lines[index] = json.dumps(record)


def test_unknown_call_id_names_the_line(tmp_path: Path) -> None:
    lines = _raw_lines(_file("entireio-cli-3dffd2ffdd52"))
    _edit_json_line(lines, 7, lambda r: r["message"]["content"][0].update(tool_use_id="toolu_X"))
    path = _write_lines(tmp_path / "claude.jsonl", lines)
    with pytest.raises(ImportFormatError, match=r"claude\.jsonl:8: .*unknown call id 'toolu_X'"):
        ClaudeCodeImporter().load(path)

    codex = _raw_lines(_file("entireio-entire-graph-54fb"))
    index = next(i for i, line in enumerate(codex) if '"function_call_output"' in line)
    _edit_json_line(codex, index, lambda r: r["payload"].update(call_id="call_X"))
    path = _write_lines(tmp_path / "codex.jsonl", codex)
    with pytest.raises(ImportFormatError, match=rf"codex\.jsonl:{index + 1}: .*'call_X'"):
        CodexRolloutImporter().load(path)

    document = json.loads(gzip.decompress(_file("openhands-django").read_bytes()))
    document["messages"][5]["tool_call_id"] = "toolu_X"
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"messages\[5\]: .*unknown call id 'toolu_X'"):
        OpenAIChatImporter().load(path)

    events = _raw_lines(_file("multi-swe-bench-output"))

    def retarget(instance: dict[str, Any]) -> None:
        observation = next(e for e in instance["history"] if e.get("observation") == "run")
        observation["tool_call_metadata"]["tool_call_id"] = "toolu_X"

    _edit_json_line(events, 2, retarget)
    path = _write_lines(tmp_path / "events.jsonl", events)
    with pytest.raises(ImportFormatError, match=r"events\.jsonl:3: instance .*'toolu_X'"):
        OpenHandsEventsImporter().load(path)


def _messages(conversation: ImportedConversation) -> list[dict[str, Any]]:
    return [message.to_api() for message in conversation.messages]


def test_records_are_read_in_the_order_of_their_parent_tree(tmp_path: Path) -> None:
    """A record written before its parent (as some session writers flush a tool result
    ahead of the streamed block that made the call) is read after it."""
    lines = _raw_lines(_file("entireio-cli-3dffd2ffdd52"))
    (original,) = ClaudeCodeImporter().load(_file("entireio-cli-3dffd2ffdd52"))
    # line 8 answers the call of line 7: written first, as in real checkpoint files
    ahead = [*lines[:6], lines[7], lines[6], *lines[8:]]
    (session,) = ClaudeCodeImporter().load(_write_lines(tmp_path / "ahead.jsonl", ahead))
    assert _messages(session) == _messages(original)
    # the next turn (lines 9-12, which descend from line 8) written before line 8
    late = [*lines[:7], *lines[8:12], lines[7], *lines[12:]]
    (session,) = ClaudeCodeImporter().load(_write_lines(tmp_path / "late.jsonl", late))
    assert _messages(session) == _messages(original)


def test_a_transcript_that_begins_with_a_result_keeps_it_under_a_synthetic_call(
    tmp_path: Path,
) -> None:
    """A session continued from an earlier file begins with the result of a call made there."""
    lines = _raw_lines(_file("entireio-cli-3dffd2ffdd52"))
    (original,) = ClaudeCodeImporter().load(_file("entireio-cli-3dffd2ffdd52"))
    (session,) = ClaudeCodeImporter().load(_write_lines(tmp_path / "cut.jsonl", lines[7:]))
    first, result, *rest = _messages(session)
    (call,) = first["tool_calls"]
    assert call["function"]["name"] == CALL_BEFORE_START[0]
    assert "before this transcript begins" in call["function"]["arguments"]
    at = next(i for i, m in enumerate(_messages(original)) if m.get("role") == "tool")
    assert result == _messages(original)[at]  # the output, its id and content, is kept
    assert rest[-100:] == _messages(original)[-100:]  # and the rest of the session as it was
    assert session.metadata["counts"]["synthetic_calls_before_start"] == 1
    assert session.metadata["flags"]["synthetic_call"] == [0]

    codex = _raw_lines(_file("entireio-entire-graph-54fb"))
    index = next(i for i, line in enumerate(codex) if '"function_call_output"' in line)
    cut = [codex[0], *codex[index:]]  # the session's meta, then a result whose call is gone
    (rollout,) = CodexRolloutImporter().load(_write_lines(tmp_path / "codex.jsonl", cut))
    start = next(i for i, m in enumerate(rollout.messages) if m.role != "system")
    calls = rollout.messages[start].tool_calls
    assert calls is not None and calls[0].function.name == CALL_BEFORE_START[0]
    assert rollout.messages[start + 1].role == "tool"
    first_call = next(i for i, line in enumerate(cut) if '"type":"function_call"' in line)
    orphans = sum('"function_call_output"' in line for line in cut[:first_call])
    assert rollout.metadata["counts"]["synthetic_calls_before_start"] == orphans >= 1


def test_a_result_after_the_conversation_moved_on_is_an_error(tmp_path: Path) -> None:
    lines = _raw_lines(_file("entireio-cli-3dffd2ffdd52"))
    # line 8 answers the call made on line 7; move it after the next turn's call and result,
    # in the file and in the parent tree (the next turn hangs off the call, line 8 off
    # the record it now follows)
    _edit_json_line(lines, 8, lambda r: r.update(parentUuid=json.loads(lines[6])["uuid"]))
    _edit_json_line(lines, 7, lambda r: r.update(parentUuid=json.loads(lines[11])["uuid"]))
    moved = lines.pop(7)
    lines.insert(11, moved)
    path = _write_lines(tmp_path / "late.jsonl", lines)
    with pytest.raises(ImportFormatError, match=r"late\.jsonl:12: .*moved on from its call"):
        ClaudeCodeImporter().load(path)


def test_interrupted_call_mid_conversation_gets_a_synthetic_result(tmp_path: Path) -> None:
    lines = _raw_lines(_file("entireio-cli-3dffd2ffdd52"))
    del lines[7]  # the result of the first Bash call, as if the tool was interrupted
    path = _write_lines(tmp_path / "interrupted.jsonl", lines)
    (session,) = ClaudeCodeImporter().load(path)
    assert session.metadata["counts"]["synthetic_tool_results"] == 1
    (index,) = session.metadata["flags"]["synthetic_tool_result"]
    assert session.messages[index].role == "tool"
    assert session.messages[index].content == SYNTHETIC_RESULT
    assert session.messages[index].tool_call_id == "toolu_012EhH4VyAvkZ7y6yErLywc4"
    assert check_sequence(session.messages) == []


def test_torn_claude_line_imports_like_the_original(tmp_path: Path) -> None:
    lines = _raw_lines(_file("entireio-cli-3dffd2ffdd52"))
    glued = [*lines[:20], lines[20] + lines[21], *lines[22:]]
    path = _write_lines(tmp_path / "glued.jsonl", glued)
    (original,) = ClaudeCodeImporter().load(_file("entireio-cli-3dffd2ffdd52"))
    (session,) = ClaudeCodeImporter().load(path)
    assert [m.to_api() for m in session.messages] == [m.to_api() for m in original.messages]


def test_uncompressed_and_gzip_import_the_same(tmp_path: Path) -> None:
    source = _file("marshmallow-1867-fc")
    plain = tmp_path / "marshmallow.traj"
    plain.write_bytes(gzip.decompress(source.read_bytes()))
    (a,) = SweAgentImporter().load(source)
    (b,) = SweAgentImporter().load(plain)
    assert [m.to_api() for m in a.messages] == [m.to_api() for m in b.messages]


def test_queued_input_can_be_left_out() -> None:
    (session,) = ClaudeCodeImporter(include_queued=False).load(_file("entireio-cli-3dffd2ffdd52"))
    assert "queued" not in session.metadata.get("flags", {})
    assert sum(m.role == "user" for m in session.messages) == 6


# -- check_sequence itself --------------------------------------------------------------
def _assistant(*ids: str) -> Message:
    return Message(
        role="assistant",
        content=None if ids else "text",
        tool_calls=[ToolCall(id=i, function=ToolFunction(name="bash")) for i in ids] or None,
    )


def _tool(call_id: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, content="ok")


def _user() -> Message:
    return Message(role="user", content="hi")


def _cases() -> Iterator[tuple[list[Message], str | None]]:
    yield [_user(), _assistant("a", "b"), _tool("b"), _tool("a"), _assistant()], None
    yield [_user(), _assistant("a"), _tool("a"), _assistant("b")], "never answered"
    yield [_user(), _assistant("a", "b"), _tool("a")], "never answered"  # partly answered
    yield [_user(), _tool("a")], "does not follow"
    yield [_user(), _assistant("a"), _user(), _tool("a")], "does not follow"
    yield [_user(), _assistant("a"), _tool("x")], "unknown call id 'x'"
    yield [_user(), _assistant("a"), _tool("a"), _tool("a")], "second tool result"
    yield [_user(), _assistant("a"), _user(), _assistant()], "unanswered"
    yield [_user(), _assistant("a"), _tool("a"), _assistant("a"), _tool("a")], "already used"
    yield [_user(), Message(role="assistant", content="")], "neither text nor tool calls"


def test_check_sequence_can_allow_a_live_turn_open_at_the_end() -> None:
    messages = [_user(), _assistant("a", "b"), _tool("a")]
    assert check_sequence(messages, allow_open_end=True) == []
    assert check_sequence([*messages, _user()], allow_open_end=True)  # mid-conversation: never


@pytest.mark.parametrize(("messages", "problem"), list(_cases()))
def test_check_sequence(messages: list[Message], problem: str | None) -> None:
    problems = check_sequence(messages)
    if problem is None:
        assert problems == []
    else:
        assert problems and any(problem in text for text in problems), problems


def test_repeated_records_are_deduplicated_by_uuid(tmp_path: Path) -> None:
    lines = _raw_lines(_file("entireio-cli-3dffd2ffdd52"))
    resumed = [*lines[:30], *lines[4:30], *lines[30:]]  # a resume wrote 26 records again
    path = _write_lines(tmp_path / "resumed.jsonl", resumed)
    (original,) = ClaudeCodeImporter().load(_file("entireio-cli-3dffd2ffdd52"))
    (session,) = ClaudeCodeImporter().load(path)
    assert session.metadata["duplicate_records"] == 26
    assert [m.to_api() for m in session.messages] == [m.to_api() for m in original.messages]


def test_a_broken_progress_subagent_is_skipped_and_named(tmp_path: Path) -> None:
    lines = _raw_lines(_file("entireio-cli-38ecf75f2f1d"))

    def retarget(record: dict[str, Any]) -> None:
        block = record["data"]["message"]["message"]["content"][0]
        assert block["type"] == "tool_result"
        block["tool_use_id"] = "toolu_X"

    _edit_json_line(lines, 52, retarget)
    path = _write_lines(tmp_path / "progress.jsonl", lines)
    main, *subagents = ClaudeCodeImporter().load(path)
    assert [s.metadata["agent_id"] for s in subagents] == ["a88d57b"]
    (skipped,) = main.metadata["skipped_subagents"]
    assert skipped["agent_id"] == "a89e4b2"
    assert "progress.jsonl:53" in skipped["error"] and "toolu_X" in skipped["error"]
    assert len(main.messages) == 307


# -- every importer on every bundled file ------------------------------------------------
def test_every_importer_on_every_bundled_file_refuses_or_passes_the_validator(
    tmp_path: Path,
) -> None:
    """Each importer meets each format: a clear ImportFormatError, or a valid sequence.

    JSONL and markdown files are cut at a line boundary after 400 KB to keep
    this fast; JSON documents are read whole.
    """
    for source in FILES:
        raw = gzip.decompress(source.read_bytes())
        name = source.name.removesuffix(".gz")
        if not name.endswith(".json") and not name.endswith(".traj") and len(raw) > 400_000:
            raw = raw[: raw.index(b"\n", 400_000) + 1]
        path = tmp_path / name
        path.write_bytes(raw)
        for importer in builtin_importers():
            try:
                conversations = importer.load(path)
            except ImportFormatError as exc:
                assert str(exc).startswith(str(path)), (importer.name, name, str(exc)[:200])
                continue
            for conversation in conversations:
                assert check_sequence(conversation.messages) == [], (importer.name, name)


@pytest.mark.parametrize(
    ("name", "began"),
    [
        # the session_meta's own timestamp is earlier than every record's
        ("entireio-git-sync-07eb", "2026-04-08T12:55:32.856000+00:00"),
        ("entireio-cli-38ec", "2026-02-14T21:28:25.876000+00:00"),
    ],
)
def test_a_conversation_is_dated_by_its_earliest_timestamp(
    name: str, began: str, load: Loader
) -> None:
    session = load(_file(name))[0]
    assert session.started_at is not None and session.started_at.isoformat() == began


def test_a_transcript_without_timestamps_is_not_dated(load: Loader) -> None:
    (session,) = load(_file("openhands-django-11149"))
    assert session.started_at is None


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ("2026-04-08T12:58:53.226Z", "2026-04-08T12:58:53.226000+00:00"),
        ("2024-08-05 19:33:32", "2024-08-05T19:33:32+00:00"),  # no zone: UTC
        ("2026-04-08T14:58:53+02:00", "2026-04-08T14:58:53+02:00"),
        ("yesterday", None),
        ("0001-01-01T00:00:00+01:00", None),  # no date in UTC: replaying it overflowed
        ("9999-12-31T23:59:59-01:00", None),
        ("", None),
        (1712581133, None),
        (None, None),
    ],
)
def test_timestamps_are_read_as_iso_8601_or_not_at_all(value: object, read: str | None) -> None:
    from hermes_plugin_importers.builder import parse_timestamp

    parsed = parse_timestamp(value)
    assert (parsed.isoformat() if parsed is not None else None) == read
