"""The Gemini CLI importer (``gemini-cli``) on the bundled real sessions.

Two checkpoints of one real Gemini CLI 0.23 session (gemini-2.5-flash), as Entire stored them;
variants (other result shapes, notices, damage) are derived in code from the real files.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_core.detection import detect_importer
from hermes_core.testing.importer_suite import ImporterSuite
from hermes_hookspecs import ImportedConversation, ImportFormatError
from hermes_plugin_importers import builtin_importers, check_sequence
from hermes_plugin_importers.builder import FINAL_SYNTHETIC_RESULT, SYNTHETIC_RESULT
from hermes_plugin_importers.gemini_cli import GeminiCliImporter

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "transcripts" / "gemini-cli"
SESSION = FOLDER / "entireio-cli-ab2b9748b105.json.gz"  # 13 records, 9 tool calls
EARLIER = FOLDER / "entireio-cli-9c53780d06b7.json.gz"  # the same session 27 s earlier


def _document(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return value


def _write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def _load(path: Path) -> ImportedConversation:
    (conversation,) = GeminiCliImporter().load(path)
    assert check_sequence(conversation.messages) == []
    return conversation


class TestGeminiCliImporter(ImporterSuite):
    @pytest.fixture
    def importer(self) -> GeminiCliImporter:
        return GeminiCliImporter()

    @pytest.fixture
    def sample_files(self) -> list[Path]:
        return [SESSION, EARLIER]


# -- the bundled sessions ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "roles"),
    [
        (SESSION, "u" + "at" * 9 + "a"),
        (EARLIER, "u" + "at" * 4 + "a"),
    ],
    ids=lambda value: getattr(value, "name", "roles"),
)
def test_a_bundled_session_imports_as_recorded(path: Path, roles: str) -> None:
    document = _document(path)
    records = document["messages"]
    conversation = _load(path)
    assert "".join(m.role[0] for m in conversation.messages) == roles
    assert conversation.source_format == "gemini-cli"
    assert conversation.conversation_id == document["sessionId"]
    assert conversation.model == "gemini-2.5-flash"
    assert conversation.started_at is not None
    assert conversation.started_at.isoformat() == "2026-01-15T20:51:48.582000+00:00"
    # the user's words and every reply, verbatim; thoughts are not text
    assert conversation.messages[0].content == records[0]["content"]
    replies = [r["content"] for r in records if r["type"] == "gemini" and r["content"]]
    assert [m.content for m in conversation.messages if m.role == "assistant" and m.content] == (
        replies
    )
    thoughts = sum(len(r.get("thoughts", [])) for r in records)
    assert conversation.skipped == {"gemini.thought": thoughts, "message.info": 1}
    assert not any("update available" in m.text() for m in conversation.messages)
    # every call, with its id, name and args, answered by its recorded output
    calls = [c for r in records for c in r.get("toolCalls", [])]
    imported = [c for m in conversation.messages for c in m.tool_calls or []]
    assert [(c.id, c.function.name) for c in imported] == [(c["id"], c["name"]) for c in calls]
    assert [json.loads(c.function.arguments) for c in imported] == [c["args"] for c in calls]
    results = {m.tool_call_id: m.content for m in conversation.messages if m.role == "tool"}
    for call in calls:
        output = call["result"][0]["functionResponse"]["response"]["output"]
        assert results[call["id"]] == output
    assert conversation.metadata["unanswered_final_calls"] == 0
    assert "synthetic_tool_results" not in conversation.metadata.get("counts", {})


def test_a_tool_call_is_followed_by_its_result() -> None:
    conversation = _load(SESSION)
    call, result = conversation.messages[1:3]
    assert call.role == "assistant" and call.content == (
        "I will create a markdown file `docs/blue.md` and add content about the color blue to it."
    )
    assert call.tool_calls is not None and len(call.tool_calls) == 1
    (write,) = call.tool_calls
    assert write.id == "write_file-1768510312836-c85bc7ab6bf4a8"
    assert write.function.name == "write_file"
    assert json.loads(write.function.arguments)["file_path"] == "docs/blue.md"
    assert result.role == "tool" and result.tool_call_id == write.id
    assert result.content == (
        "Successfully created and wrote to new file:"
        " /Users/peytonmontei/Documents/entire/devenv/entireio/cli/docs/blue.md."
    )


def test_a_response_split_by_a_notice_is_one_assistant_message() -> None:
    """The CLI wrote the `rm` call of a reply in a record of its own, because an update
    notice arrived while the call waited for approval: it stays with the reply that made it."""
    records = _document(SESSION)["messages"]
    assert [r["type"] for r in records[4:7]] == ["gemini", "info", "gemini"]
    assert records[6]["content"] == "" and "toolCalls" not in records[4]
    conversation = _load(SESSION)
    reply = next(m for m in conversation.messages if m.text().startswith("I misread"))
    assert reply.tool_calls is not None
    assert [c.id for c in reply.tool_calls] == [records[6]["toolCalls"][0]["id"]]
    assert conversation.metadata["counts"]["calls_rejoined_after_notice"] == 1
    assert sum(m.role == "assistant" for m in conversation.messages) == 10  # of 11 records


def test_the_earlier_checkpoint_ends_before_its_last_call_was_recorded() -> None:
    """A checkpoint taken mid-turn: the last reply's call was not in the file yet."""
    earlier, later = _load(EARLIER), _load(SESSION)
    assert [m.to_api() for m in earlier.messages[:9]] == [m.to_api() for m in later.messages[:9]]
    assert earlier.messages[9].content == later.messages[9].content
    assert earlier.messages[9].tool_calls is None and len(earlier.messages) == 10
    assert later.messages[9].tool_calls is not None


# -- other shapes, derived from the real session ---------------------------------------------
def _first_call(document: dict[str, Any]) -> dict[str, Any]:
    call: dict[str, Any] = document["messages"][1]["toolCalls"][0]
    return call


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ({"error": "File not found: docs/blue.md"}, "File not found: docs/blue.md"),
        ({"output": {"lines": 3}}, '{"lines": 3}'),
        ({"output": "done", "exitCode": 0}, '{"output": "done", "exitCode": 0}'),
        ("plain text", "plain text"),
    ],
    ids=["error", "output-object", "other-keys", "string"],
)
def test_function_responses_become_tool_text(
    tmp_path: Path, response: object, expected: str
) -> None:
    document = _document(SESSION)
    _first_call(document)["result"][0]["functionResponse"]["response"] = response
    conversation = _load(_write(tmp_path / "session.json", document))
    assert conversation.messages[2].content == expected


def test_result_parts_besides_the_function_response_are_rendered(tmp_path: Path) -> None:
    document = _document(SESSION)
    call = _first_call(document)
    call["status"] = "error"
    call["result"].append({"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}})
    call["result"].append({"text": "and a note"})
    conversation = _load(_write(tmp_path / "session.json", document))
    assert conversation.messages[2].content == (
        "Successfully created and wrote to new file:"
        " /Users/peytonmontei/Documents/entire/devenv/entireio/cli/docs/blue.md.\n"
        "[inlineData image/png]\nand a note"
    )
    assert conversation.metadata["tool_errors"] == 1


def test_a_call_without_a_result_gets_the_marked_synthetic_result(tmp_path: Path) -> None:
    document = _document(SESSION)
    del _first_call(document)["result"]
    document["messages"][-1]["toolCalls"] = [
        {"id": "read_file-1", "name": "read_file", "args": {"file_path": "a"}, "status": "error"}
    ]
    conversation = _load(_write(tmp_path / "session.json", document))
    assert conversation.messages[2].content == SYNTHETIC_RESULT  # mid-conversation
    assert conversation.messages[-1].content == FINAL_SYNTHETIC_RESULT  # where the file ends
    assert conversation.metadata["counts"]["synthetic_tool_results"] == 1
    assert conversation.metadata["unanswered_final_calls"] == 1


def test_notices_are_skipped_and_counted(tmp_path: Path) -> None:
    document = _document(SESSION)
    warning = {"id": "w", "timestamp": "2026-01-15T20:51:50Z", "type": "warning", "content": "w"}
    error = {"id": "e", "timestamp": "2026-01-15T20:51:51Z", "type": "error", "content": "[API"}
    future = {"id": "f", "timestamp": "2026-01-15T20:51:52Z", "type": "hologram", "content": "?"}
    document["messages"][1:1] = [warning, error, future]
    conversation = _load(_write(tmp_path / "session.json", document))
    assert [m.to_api() for m in conversation.messages] == [
        m.to_api() for m in _load(SESSION).messages
    ]
    assert conversation.skipped == {
        "gemini.thought": 15,
        "message.error": 1,
        "message.info": 1,
        "message.warning": 1,
        "unknown.hologram": 1,
    }


def test_the_continue_prompt_the_cli_sends_is_marked(tmp_path: Path) -> None:
    document = _document(SESSION)
    nudge = {"id": "n", "timestamp": "2026-01-15T20:52:57Z", "type": "user"}
    document["messages"].append({**nudge, "content": "System: Please continue."})
    conversation = _load(_write(tmp_path / "session.json", document))
    last = conversation.messages[-1]
    assert last.role == "user" and last.content == "System: Please continue."
    assert last.harness == "gemini_cli.continue"
    assert conversation.messages[0].harness is None


def test_a_session_with_only_notices_is_refused(tmp_path: Path) -> None:
    document = _document(SESSION)
    document["messages"] = [
        {"id": "w", "timestamp": "2026-02-03T04:09:57.093Z", "type": "warning", "content": "Hook"}
    ]
    path = _write(tmp_path / "hook.json", document)
    assert detect_importer(path, builtin_importers()).name == "gemini-cli"
    with pytest.raises(ImportFormatError, match=r"hook\.json:1: .*no user or gemini message"):
        GeminiCliImporter().load(path)


# -- malformed files ------------------------------------------------------------------------
def _without_type(document: dict[str, Any]) -> None:
    del document["messages"][3]["type"]


def _call_without_id(document: dict[str, Any]) -> None:
    del _first_call(document)["id"]


def _call_without_name(document: dict[str, Any]) -> None:
    del _first_call(document)["name"]


def _messages_object(document: dict[str, Any]) -> None:
    document["messages"] = {"0": document["messages"][0]}


def _calls_object(document: dict[str, Any]) -> None:
    document["messages"][1]["toolCalls"] = _first_call(document)


def _record_string(document: dict[str, Any]) -> None:
    document["messages"][2] = "gemini"


@pytest.mark.parametrize(
    ("damage", "pattern"),
    [
        (_without_type, r"bad\.json: messages\[3\]: message has no 'type'"),
        (_call_without_id, r"bad\.json: messages\[1\]: toolCalls\[0\] has no 'id'"),
        (_call_without_name, r"bad\.json: messages\[1\]: toolCalls\[0\] .* has no 'name'"),
        (_messages_object, r"bad\.json:1: the session's 'messages' is not a list \(dict"),
        (_calls_object, r"bad\.json: messages\[1\]: 'toolCalls' is dict, not a list"),
        (_record_string, r"bad\.json: messages\[2\]: expected a message object, got str"),
    ],
    ids=lambda value: getattr(value, "__name__", "pattern").strip("_"),
)
def test_a_malformed_session_names_the_file_and_the_problem(
    tmp_path: Path, damage: Any, pattern: str
) -> None:
    document = _document(SESSION)
    damage(document)
    with pytest.raises(ImportFormatError, match=pattern):
        GeminiCliImporter().load(_write(tmp_path / "bad.json", document))


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("not json at all", r"bad\.json:1: invalid JSON at column 1"),
        ('{"sessionId": "s", "messages": [', r"bad\.json:1: invalid JSON"),
        ("[1, 2]", r"bad\.json:1: expected a Gemini CLI session object .* got list"),
        ('{"sessionId": "s"}', r"bad\.json:1: .*'messages' is not a list \(no 'messages' key"),
    ],
    ids=["text", "cut", "list", "no-messages"],
)
def test_a_file_that_is_no_session_names_the_file(tmp_path: Path, text: str, pattern: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ImportFormatError, match=pattern):
        GeminiCliImporter().load(path)


# -- detection ------------------------------------------------------------------------------
def test_a_session_whose_first_message_outgrows_the_sample_is_still_detected(
    tmp_path: Path,
) -> None:
    document = _document(SESSION)
    document["messages"][0]["content"] = "paste " * 60_000  # 360 KB: past the 256 KiB sample
    path = tmp_path / "big.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document, indent=2).encode("utf-8")))
    assert detect_importer(path, builtin_importers()).name == "gemini-cli"
    assert _load(path).messages[0].content == document["messages"][0]["content"]


def test_jsonl_records_that_mention_a_session_are_not_claimed(tmp_path: Path) -> None:
    """A Claude Code session quoting a Gemini session (as one real Entire checkpoint does)."""
    text = gzip.decompress(SESSION.read_bytes()).decode("utf-8")
    compact = json.dumps(json.loads(text))
    lines = [compact, json.dumps({"type": "summary", "summary": "x", "leafUuid": "u"})]
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert not GeminiCliImporter().sniff(path, path.read_bytes())
    other = tmp_path / "quoted.json"
    other.write_text(json.dumps({"type": "user", "content": text}), encoding="utf-8")
    assert not GeminiCliImporter().sniff(other, other.read_bytes())


# -- the command line -------------------------------------------------------------------------
def _replay(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hermes-core replay ARGS`` in a child process, on a throw-away store."""
    env = {
        **os.environ,
        "HERMES_CORE__SESSION__PATH": str(tmp_path / "s.db"),
        "HERMES_CORE__MEMORY__HOME": str(tmp_path / "mem"),
        "PYTHONWARNINGS": "ignore",
    }
    env.pop("HERMES_CORE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "hermes_core", "replay", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("path", [SESSION, EARLIER], ids=lambda p: p.name)
def test_hermes_core_replay_detects_and_replays_a_session(tmp_path: Path, path: Path) -> None:
    proc = _replay(tmp_path, str(path), "--json")  # no --format: the file is detected
    assert proc.returncode == 0, proc.stderr[-800:]
    report = json.loads(proc.stdout)
    imported = _load(path)
    assert report["format"] == "gemini-cli"
    assert report["conversation_id"] == imported.conversation_id
    assert report["imported_messages"] == len(imported.messages)
    assert report["import_skipped"] == imported.skipped
    final = report["final_messages"]
    assert final[0]["role"] == "system"
    assert [m["role"] for m in final[1:]] == [m.role for m in imported.messages]
    assert final[1]["content"] == imported.messages[0].content


def test_hermes_core_replay_names_a_broken_session_without_a_traceback(tmp_path: Path) -> None:
    document = _document(SESSION)
    _call_without_id(document)
    path = _write(tmp_path / "broken.json", document)
    proc = _replay(tmp_path, str(path))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "broken.json: messages[1]: toolCalls[0] has no 'id'" in proc.stderr
