"""Current transcript formats (#20) and importer caps (#16 item 10), on the bundled real files.

Claude Code 2.1.x sessions (record types, queued input, rewinds, sub-agent
files, harness marks), Codex mid-turn notices, aider and the Agent Data
Protocol, detection from a sample of records, and the read caps. Variants are
derived in code from the real files.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
import tracemalloc
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hermes_core.detection import detect_importer
from hermes_hookspecs import Importer, ImportFormatError
from hermes_plugin_importers import builtin_importers, check_sequence
from hermes_plugin_importers.adp import AdpImporter
from hermes_plugin_importers.aider_chat import AiderChatImporter
from hermes_plugin_importers.claude_code import _KNOWN_TYPES, ClaudeCodeImporter
from hermes_plugin_importers.codex_rollout import CodexRolloutImporter
from hermes_plugin_importers.harness import CLAUDE_CODE
from hermes_plugin_importers.reading import ImportLimits, iter_jsonl, read_bytes
from tests.hosts import HostFactory

ROOT = Path(__file__).resolve().parents[3]
TRANSCRIPTS = ROOT / "transcripts"
GRAPH = TRANSCRIPTS / "claude-code" / "entireio-entire-graph-1a6d96aa7834.jsonl.gz"
REWIND = TRANSCRIPTS / "claude-code" / "entireio-git-sync-7f01a5ec2f19.jsonl.gz"
CLAUDE_OLD = TRANSCRIPTS / "claude-code" / "entireio-cli-3dffd2ffdd52.jsonl.gz"
CODEX = TRANSCRIPTS / "codex-rollout" / "entireio-entire-graph-54fb8b1d18b6.jsonl.gz"
AIDER = TRANSCRIPTS / "aider-chat" / "aider-chat-history.md.gz"
ADP_OS = TRANSCRIPTS / "adp" / "agenttuning-os-sample-std.json.gz"
ADP_SWE = TRANSCRIPTS / "adp" / "swe-smith-sample-std.json.gz"


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _lines(path) if line.strip()]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def graph() -> Any:
    (conversation,) = ClaudeCodeImporter().load(GRAPH)
    return conversation


# -- detection -------------------------------------------------------------------------
def test_a_current_claude_code_session_is_detected_from_several_records() -> None:
    first = [r["type"] for r in _records(GRAPH)[:5]]
    assert first == ["last-prompt", "mode", "permission-mode", "bridge-session", "attachment"]
    assert detect_importer(GRAPH, builtin_importers()).name == "claude-code"
    assert detect_importer(REWIND, builtin_importers()).name == "claude-code"


def test_no_match_names_the_closest_format_and_why(tmp_path: Path) -> None:
    records = _records(CODEX)[:20]
    for record in records[2:]:
        record["body"] = record.pop("payload")  # not a rollout any more
    path = _write(tmp_path / "rollout-ish.jsonl", records)
    with pytest.raises(ImportFormatError) as caught:
        detect_importer(path, builtin_importers())
    text = str(caught.value)
    assert "rollout-ish.jsonl:1: no importer recognises this file" in text
    assert "closest format: codex-rollout (18 of 20 records are not rollout records" in text
    assert "known formats: adp, aider-chat, claude-code" in text


def test_a_torn_first_line_does_not_hide_the_format(tmp_path: Path) -> None:
    lines = _lines(REWIND)
    path = tmp_path / "torn.jsonl"
    path.write_text(lines[0] + lines[1] + "\n" + "\n".join(lines[2:]), encoding="utf-8")
    assert detect_importer(path, builtin_importers()).name == "claude-code"
    (conversation,) = ClaudeCodeImporter().load(path)
    (original,) = ClaudeCodeImporter().load(REWIND)
    assert [m.to_api() for m in conversation.messages] == [m.to_api() for m in original.messages]


def test_a_truncated_gzip_is_detected_but_refused_at_load(tmp_path: Path) -> None:
    raw = REWIND.read_bytes()
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(raw[: len(raw) // 2])
    importer = detect_importer(path, builtin_importers())
    assert importer.name == "claude-code"  # the sample decodes; the whole stream does not
    with pytest.raises(ImportFormatError, match="broken gzip stream: compressed file ended"):
        importer.load(path)


# -- Claude Code -----------------------------------------------------------------------
def test_every_record_type_of_the_bundled_sessions_is_handled_and_documented() -> None:
    seen: Counter[str] = Counter()
    for path in sorted((TRANSCRIPTS / "claude-code").glob("*.gz")):
        seen.update(r["type"] for r in _records(path))
    assert set(seen) <= _KNOWN_TYPES, set(seen) - _KNOWN_TYPES
    formats = (TRANSCRIPTS / "FORMATS.md").read_text(encoding="utf-8")
    for kind in _KNOWN_TYPES:
        assert f"| `{kind}` |" in formats, kind


def test_record_types_are_skipped_with_counts(graph: Any) -> None:
    skipped = graph.skipped
    assert skipped["record.last-prompt"] == 35
    assert skipped["record.bridge-session"] == 35
    assert skipped["record.ai-title"] == 34
    assert skipped["attachment.hook_success"] == 29
    assert skipped["system.turn_duration"] == 25
    assert graph.title == "Create skill for entire-graph tool"


def test_an_unknown_record_type_is_a_counted_skip(tmp_path: Path) -> None:
    records = _records(REWIND)
    records.insert(40, {"type": "hologram", "sessionId": records[0]["sessionId"]})
    (conversation,) = ClaudeCodeImporter().load(_write(tmp_path / "new.jsonl", records))
    assert conversation.skipped["unknown.hologram"] == 1


def test_queued_input_is_kept_in_order_and_popped_input_is_not(graph: Any) -> None:
    queued = graph.metadata["flags"]["queued"]
    assert len(queued) == 6 and queued == sorted(queued)
    assert check_sequence(graph.messages) == []  # never between a call and its result
    assert graph.skipped["queue.popped_unsent"] == 1  # '/settings', taken back unsent
    assert not any(m.text() == "/settings" for m in graph.messages)
    assert graph.skipped["attachment.queued_command.repeat"] == 2


def test_queued_input_left_out_is_counted_once() -> None:
    (kept,) = ClaudeCodeImporter().load(REWIND)
    (without,) = ClaudeCodeImporter(include_queued=False).load(REWIND)
    delivered = kept.metadata["counts"]["queued_delivered"]
    assert without.skipped["queue.delivered_left_out"] == delivered
    assert len(without.messages) == len(kept.messages) - delivered


def test_queued_words_typed_by_the_user_stay_unmarked() -> None:
    (conversation,) = ClaudeCodeImporter().load(REWIND)
    queued = [conversation.messages[i] for i in conversation.metadata["flags"]["queued"]]
    typed = [m for m in queued if m.harness is None]
    assert typed and all(not m.text().startswith("<task-notification>") for m in typed)


def test_a_rewind_follows_the_continued_branch() -> None:
    abandoned_text = "replicate --all-refs --stats --verbose \\\n    https://github.com/entireio"
    (main,) = ClaudeCodeImporter().load(REWIND)
    texts = [m.text() for m in main.messages if m.role == "user"]
    assert not any(t.startswith(abandoned_text) for t in texts)
    assert any(t.startswith("❯ go run ./cmd/git-sync replicate --all-refs") for t in texts)
    assert main.skipped["branch.abandoned"] == 1
    (branch,) = main.metadata["abandoned_branches"]
    assert branch["first_line"] == 412
    main_again, abandoned = ClaudeCodeImporter(include_abandoned_branches=True).load(REWIND)
    assert abandoned.metadata["abandoned_branch"] == 1
    assert abandoned.messages[-1].text().startswith(abandoned_text)
    assert check_sequence(abandoned.messages) == []
    assert len(main_again.messages) == len(main.messages)


def test_abandoned_branches_can_be_asked_for_by_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_CORE_IMPORT_BRANCHES", "all")
    assert len(ClaudeCodeImporter().load(REWIND)) == 2
    monkeypatch.setenv("HERMES_CORE_IMPORT_BRANCHES", "some")
    with pytest.raises(ImportFormatError, match="HERMES_CORE_IMPORT_BRANCHES='some'"):
        ClaudeCodeImporter().load(REWIND)


def test_a_rewind_after_a_reply_drops_the_whole_abandoned_turn(tmp_path: Path) -> None:
    records = _records(CLAUDE_OLD)
    users = [
        i
        for i, r in enumerate(records)
        if r["type"] == "user" and isinstance(r["message"]["content"], str) and i > 20
    ]
    fork_at = users[0]
    parent = records[fork_at]["parentUuid"]
    redo = dict(records[fork_at], uuid="redo-1", message={"role": "user", "content": "try again"})
    # the user rewinds to before this prompt and types a new one: it hangs off the same parent
    tail = [r for r in records[fork_at + 1 :] if r.get("parentUuid") is not None][:1]
    reply = dict(tail[0], uuid="redo-2", parentUuid="redo-1") if tail else None
    edited = [*records, {**redo, "parentUuid": parent}]
    if reply and reply["type"] == "assistant":
        edited.append(reply)
    (conversation,) = ClaudeCodeImporter().load(_write(tmp_path / "rewound.jsonl", edited))
    assert conversation.skipped["branch.abandoned"] == 1
    assert conversation.skipped["branch.abandoned_records"] > 10
    user_texts = [m.text() for m in conversation.messages if m.role == "user"]
    assert records[fork_at]["message"]["content"] not in user_texts
    assert "try again" in user_texts
    assert check_sequence(conversation.messages) == []


def test_harness_text_is_marked_from_structure(graph: Any) -> None:
    marks = Counter(m.harness for m in graph.messages if m.role == "user")
    assert marks["claude_code.task_notification"] == 25
    assert marks["claude_code.caveat"] == 1 and marks["claude_code.command"] == 1
    assert marks["claude_code.command_output"] == 1 and marks["claude_code.meta"] == 4
    typed = [m.text() for m in graph.messages if m.role == "user" and m.harness is None]
    assert typed[0] == "make me a skill (or set of skills) to use this entire-graph tool please"
    assert all(not t.startswith("<") for t in typed)


def test_interrupts_and_compaction_summaries_are_marked() -> None:
    main, *_ = ClaudeCodeImporter().load(
        TRANSCRIPTS / "claude-code" / "entireio-cli-38ecf75f2f1d.jsonl.gz"
    )
    marks = Counter(m.harness for m in main.messages)
    assert marks["claude_code.interrupt"] == 1
    assert marks["claude_code.compaction_summary"] == 1
    summary = next(m for m in main.messages if m.harness == "claude_code.compaction_summary")
    assert summary.text().startswith("This session is being continued")


def test_real_words_mixed_with_a_harness_wrapper_survive_unmarked(tmp_path: Path) -> None:
    records = _records(REWIND)
    index, record = next(
        (i, r)
        for i, r in enumerate(records)
        if (r["type"] == "user" and r["message"]["content"] == "yes lets do that")
        or (r["type"] == "user" and isinstance(r["message"]["content"], str) and i > 30)
    )
    words = record["message"]["content"]
    reminder = (
        "<system-reminder>\nThe user opened the file notes.md in the IDE.\n</system-reminder>"
    )
    records[index] = {**record, "message": {"role": "user", "content": f"{reminder}\n{words}"}}
    (conversation,) = ClaudeCodeImporter().load(_write(tmp_path / "mixed.jsonl", records))
    at = next(i for i, m in enumerate(conversation.messages) if m.text() == reminder)
    assert conversation.messages[at].harness == "claude_code.system_reminder"
    assert conversation.messages[at + 1].text() == words
    assert conversation.messages[at + 1].harness is None
    assert conversation.metadata["counts"]["user_records_split_at_harness_text"] == 1


def test_the_harness_splitter_keeps_words_and_wrappers_apart() -> None:
    parts = CLAUDE_CODE.split(
        "<command-message>review</command-message>\n<command-name>/review</command-name>\n"
        "<command-args>12</command-args>\nand check the tests too"
    )
    assert [p.harness for p in parts] == ["claude_code.command", None]
    assert parts[1].text == "and check the tests too"
    assert (
        CLAUDE_CODE.whole("[Request interrupted by user for tool use]") == "claude_code.interrupt"
    )
    assert CLAUDE_CODE.whole("please [Request interrupted by user] no") is None


def test_subagent_files_beside_a_session_become_linked_conversations(tmp_path: Path) -> None:
    records = _records(GRAPH)
    session = records[0]["sessionId"]
    launched = next(
        r
        for r in records
        if r["type"] == "user"
        and isinstance(r.get("toolUseResult"), dict)
        and r["toolUseResult"].get("agentId")
    )
    agent = launched["toolUseResult"]["agentId"]
    call_id = launched["message"]["content"][0]["tool_use_id"]
    prompt = launched["toolUseResult"]["prompt"]
    base = {"isSidechain": True, "agentId": agent, "sessionId": session, "version": "2.1.217"}
    agent_records = [
        {
            **base,
            "type": "user",
            "uuid": "s1",
            "parentUuid": None,
            "message": {"role": "user", "content": prompt},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "s2",
            "parentUuid": "s1",
            "message": {
                "id": "msg_s",
                "role": "assistant",
                "model": "claude-opus-4-8",
                "content": [{"type": "text", "text": "Here is my report."}],
            },
        },
    ]
    (tmp_path / "s.jsonl").write_bytes(gzip.decompress(GRAPH.read_bytes()))
    folder = tmp_path / "s" / "subagents"
    folder.mkdir(parents=True)
    _write(folder / f"agent-{agent}.jsonl", agent_records)
    _write(folder / "agent-acompact-1.jsonl", agent_records)
    main, sub = ClaudeCodeImporter().load(tmp_path / "s.jsonl")
    assert sub.metadata["subagent_source"] == "subagent_file"
    assert sub.metadata["task_call_id"] == call_id
    assert sub.metadata["parent_conversation_id"] == main.conversation_id
    assert [m.role for m in sub.messages] == ["user", "assistant"]
    assert main.skipped["subagent_file.compaction"] == 1
    assert any(c.id == call_id for m in main.messages for c in m.tool_calls or [])


# -- Codex -----------------------------------------------------------------------------
def test_a_mid_turn_developer_notice_goes_after_the_results_and_is_marked(tmp_path: Path) -> None:
    records = _records(CODEX)
    at = next(
        i
        for i, r in enumerate(records)
        if r["type"] == "response_item" and r["payload"].get("type") == "function_call"
    )
    notice = {
        "timestamp": records[at]["timestamp"],
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Approved command prefix saved"}],
        },
    }
    records.insert(at + 1, notice)  # between the call and its output, as Codex writes it
    (conversation,) = CodexRolloutImporter().load(_write(tmp_path / "rollout.jsonl", records))
    assert check_sequence(conversation.messages) == []
    index = next(
        i
        for i, m in enumerate(conversation.messages)
        if m.text() == "Approved command prefix saved"
    )
    message = conversation.messages[index]
    assert message.role == "system" and message.harness == "codex.developer_notice"
    assert conversation.messages[index - 1].role == "tool"
    assert conversation.metadata["counts"]["moved_after_tool_results"] >= 1


def test_real_mid_turn_approval_notices_follow_the_tool_results() -> None:
    path = TRANSCRIPTS / "codex-rollout" / "entireio-git-sync-07ebffc93812.jsonl.gz"
    (conversation,) = CodexRolloutImporter().load(path)
    notices = [
        i
        for i, m in enumerate(conversation.messages)
        if m.text().startswith("Approved command prefix saved")
    ]
    assert len(notices) == 7
    for index in notices:
        assert conversation.messages[index].harness == "codex.developer_notice"
        assert conversation.messages[index - 1].role == "tool"
    assert conversation.metadata["counts"]["moved_after_tool_results"] == 7
    assert check_sequence(conversation.messages) == []


def test_an_unknown_codex_record_type_is_a_counted_skip(tmp_path: Path) -> None:
    records = _records(CODEX)
    records.insert(5, {"timestamp": records[5]["timestamp"], "type": "hologram", "payload": {}})
    (conversation,) = CodexRolloutImporter().load(_write(tmp_path / "rollout.jsonl", records))
    assert conversation.skipped["record.hologram"] == 1
    assert conversation.skipped["reasoning"] >= 1


def test_codex_injected_user_items_are_marked() -> None:
    (conversation,) = CodexRolloutImporter().load(CODEX)
    marks = Counter(m.harness for m in conversation.messages if m.role == "user")
    assert marks["codex.environment_context"] >= 1
    for message in conversation.messages:
        if message.text().startswith("<environment_context>"):
            assert message.harness == "codex.environment_context"


# -- aider -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def aider() -> list[Any]:
    return AiderChatImporter().load(AIDER)


def test_aider_sessions_become_conversations(aider: list[Any]) -> None:
    assert len(aider) > 200
    first = aider[0]
    assert first.skipped["session.without_reply"] > 100
    graph = next(c for c in aider if c.metadata.get("started_at") == "2024-08-13 13:42:45")
    assert graph.started_at is not None and graph.started_at.isoformat() == (
        "2024-08-13T13:42:45+00:00"
    )
    roles = [m.role for m in graph.messages[:3]]
    assert roles == ["user", "assistant", "user"]
    assert graph.messages[0].text() == "do a bar graph with the % code on the y-axis"
    assert graph.messages[2].harness == "aider.tool_output"
    assert graph.messages[2].text().startswith("Tokens: 11,336 sent, 1,389 received.")
    undo = next(i for i, m in enumerate(graph.messages) if m.text() == "/undo")
    assert undo in graph.metadata["flags"]["command"]
    assert graph.messages[undo].harness is None


def test_aider_reply_fences_keep_markdown_that_looks_like_input(tmp_path: Path) -> None:
    text = gzip.decompress(AIDER.read_bytes()).decode("utf-8")
    start = text.index("# aider chat started at 2024-08-13 13:42:45")
    session = text[start : text.index("# aider chat started at", start + 10)]
    reply = "Here is the file:\n\n```markdown\n#### Not an input line\n> not output\n```\n"
    marker = "#### do a bar graph with the % code on the y-axis  \n"
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(session.replace(marker, marker + "\n" + reply, 1), encoding="utf-8")
    (conversation,) = AiderChatImporter().load(path)
    assert conversation.messages[1].role == "assistant"
    assert "#### Not an input line\n> not output" in conversation.messages[1].text()


def test_a_reply_heading_is_not_user_input(aider: list[Any]) -> None:
    # aider's input lines end with a markdown line break; the model's "#### " headings do not
    replies = [m for c in aider for m in c.messages if m.role == "assistant"]
    assert any("\n#### `Coder` Class\n" in m.text() for m in replies)
    users = [m.text() for c in aider for m in c.messages if m.role == "user"]
    assert not any(t.startswith("`Coder` Class") for t in users)


def test_every_bundled_aider_conversation_passes_the_validator(aider: list[Any]) -> None:
    for conversation in aider:
        assert check_sequence(conversation.messages) == []


# -- Agent Data Protocol ---------------------------------------------------------------
def _with_tool_call_ids(trajectories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The current schema (1.3+): adjacent action/observation pairs get ``call_%06d`` ids."""
    out = []
    for trajectory in trajectories:
        content = [dict(item) for item in trajectory["content"]]
        serial = 0
        for item, after in itertools.pairwise(content):
            if item["class_"] in ("code_action", "api_action") and after["class_"].endswith(
                "observation"
            ):
                serial += 1
                item["tool_call_id"] = after["tool_call_id"] = f"call_{serial:06d}"
                if after.get("source") == "user":
                    after["source"] = "environment"
        out.append({"schema_version": "1.5.0", **trajectory, "content": content})
    return out


@pytest.mark.parametrize("path", [ADP_OS, ADP_SWE], ids=lambda p: p.name)
def test_adp_trajectories_import_with_and_without_ids(tmp_path: Path, path: Path) -> None:
    conversations = AdpImporter().load(path)
    trajectories = json.loads(gzip.decompress(path.read_bytes()))
    assert [c.conversation_id for c in conversations] == [t["id"] for t in trajectories]
    for conversation, trajectory in zip(conversations, trajectories, strict=True):
        actions = [i for i in trajectory["content"] if i["class_"] in ("code_action", "api_action")]
        calls = [c for m in conversation.messages for c in m.tool_calls or []]
        assert len(calls) == len(actions)
        assert not conversation.metadata.get("counts", {}).get("synthetic_tool_results")
    current = tmp_path / "current.json"
    current.write_text(json.dumps(_with_tool_call_ids(trajectories)), encoding="utf-8")
    again = AdpImporter().load(current)
    assert [[m.to_api() for m in c.messages] for c in again] == [
        [m.to_api() for m in c.messages] for c in conversations
    ]


def test_adp_maps_actions_to_tool_calls() -> None:
    first = AdpImporter().load(ADP_SWE)[0]
    names = Counter(c.function.name for m in first.messages for c in m.tool_calls or [])
    assert {"execute_bash", "str_replace_editor"} <= set(names)
    editor = next(
        c
        for m in first.messages
        for c in m.tool_calls or []
        if c.function.name == "str_replace_editor"
    )
    assert json.loads(editor.function.arguments) == {
        "command": "view",
        "path": "/testbed/arrow/arrow.py",
    }


def test_adp_observation_for_an_unknown_call_is_an_error(tmp_path: Path) -> None:
    trajectories = _with_tool_call_ids(json.loads(gzip.decompress(ADP_OS.read_bytes())))
    trajectories[0]["content"][2]["tool_call_id"] = "call_999999"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(trajectories), encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"trajectory 1 .*call_999999"):
        AdpImporter().load(path)


# -- caps ------------------------------------------------------------------------------
def test_a_gzip_bomb_stops_at_the_size_cap_without_the_memory(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.jsonl.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    line = (json.dumps({"type": "user", "uuid": "x", "message": {"content": "a"}}) + "\n").encode()
    with bomb.open("wb") as handle:
        handle.write(packer.compress(line))
        block = b"\n" * (1 << 20)
        for _ in range(512):  # 512 MiB of newlines in well under a megabyte
            handle.write(packer.compress(block))
        handle.write(packer.flush())
    assert bomb.stat().st_size < 1_000_000
    limits = ImportLimits(max_bytes=8 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(ImportFormatError) as caught:
            ClaudeCodeImporter(limits=limits).load(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, peak
    text = str(caught.value)
    assert "exceeds the import limit max_bytes=8388608" in text
    assert "HERMES_CORE_IMPORT_MAX_BYTES" in text


def test_the_caps_are_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HERMES_CORE_IMPORT_MAX_BYTES", "1000")
    assert ImportLimits.from_env().max_bytes == 1000
    with pytest.raises(ImportFormatError, match="max_bytes=1000; raise it with"):
        read_bytes(ADP_OS)
    monkeypatch.setenv("HERMES_CORE_IMPORT_MAX_DEPTH", "lots")
    with pytest.raises(ImportFormatError, match="HERMES_CORE_IMPORT_MAX_DEPTH='lots'"):
        ImportLimits.from_env()


def test_a_long_line_names_the_line_limit(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_text('{"type": "user"}\n{"type": "' + "x" * 5000 + '"}\n', encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"long\.jsonl:2: a line of .* max_line_bytes=1000"):
        list(iter_jsonl(path, ImportLimits(max_line_bytes=1000)))


@pytest.mark.parametrize("importer", builtin_importers(), ids=lambda i: i.name)
@pytest.mark.parametrize("shape", ["array", "object"])
def test_deep_json_is_a_clear_error_in_every_importer(
    tmp_path: Path, importer: Importer, shape: str
) -> None:
    depth = 100_000
    body = "[" * depth + "]" * depth if shape == "array" else '{"a":' * depth + "1" + "}" * depth
    for name, text in (("deep.jsonl", body + "\n"), ("deep.json", '{"messages": ' + body + "}")):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ImportFormatError) as caught:
            importer.load(path)
        if importer.name != "aider-chat":  # markdown: not JSON at all, refused as such
            assert re.search(
                r"max_depth=200; raise it with HERMES_CORE_IMPORT_MAX_DEPTH", str(caught.value)
            ), str(caught.value)


# -- the replay report -----------------------------------------------------------------
def test_the_replay_report_shows_what_the_importer_skipped(
    tmp_path: Path, make_host: HostFactory
) -> None:
    from hermes_core.config import settings_from
    from hermes_core.replay import replay

    records = _records(REWIND)
    cut = next(i for i, r in enumerate(records) if r["type"] == "assistant" and i > 40)
    path = _write(tmp_path / "short.jsonl", records[: cut + 1])  # a short real session
    host = make_host.like(
        settings_from(
            {
                "plugins": {"autoload": True, "block": ["memory_builtin"]},
                "session": {"path": str(tmp_path / "s.db")},
                "memory": {"home": str(tmp_path / "mem")},
            }
        )
    )
    report = replay(host, path)
    host.close()
    assert report.format == "claude-code"
    assert report.import_skipped["record.last-prompt"] >= 1
    assert report.import_skipped["attachment.hook_success"] == 1
    assert json.loads(report.model_dump_json())["import_skipped"] == report.import_skipped


def test_replay_branches_option_imports_the_abandoned_branch_as_a_conversation(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    def replayed_users(*extra: str) -> list[str]:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hermes_core",
                "replay",
                str(REWIND),
                "--json",
                "--db",
                str(tmp_path / "r.db"),
                "--context-length",
                "400000",
                *extra,
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-800:]
        final = json.loads(proc.stdout)["final_messages"]
        return [str(m["content"]) for m in final if m["role"] == "user"]

    abandoned_text = "replicate --all-refs --stats --verbose \\\n    https://github.com/entireio"
    assert not any(text.startswith(abandoned_text) for text in replayed_users())
    abandoned = replayed_users("--branches", "all", "--conversation", "1")
    assert abandoned[-1].startswith(abandoned_text)  # conversation 1: the abandoned branch
