"""Fact extraction's fast scans give exactly what the line-by-line definitions give.

:func:`hermes_plugin_compressor.facts._outcome` tests only the lines of a tool
output where a literal its patterns need occurs, and the sentence and failed-run
patterns are written so a search skips ahead fast. The references below are the
plain definitions (every line tested, the patterns as first written); the fast
forms must agree with them on real transcripts and on generated text, so the
facts (and their :data:`~hermes_plugin_compressor.facts.VERSION`) do not change.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_core import Hermes
from hermes_core.config import settings_from
from hermes_core.replay import pick_importer
from hermes_core.terminal import plain_text
from hermes_hookspecs import Message
from hermes_plugin_compressor import facts

TRANSCRIPTS = Path(__file__).resolve().parents[3] / "transcripts"
SESSIONS = (
    TRANSCRIPTS / "openai-chat" / "openhands-django-11149.json.gz",
    TRANSCRIPTS / "codex-rollout" / "entireio-git-sync-07ebffc93812.jsonl.gz",
)

REFERENCE_SENTENCE = re.compile(
    r"(?:[^.!?\n]|[.!?](?![\"'’”)\]*_`]*(?:\s|$)))+(?:[.!?][\"'’”)\]*_`]*(?=\s|$)|$)",
    re.MULTILINE,
)
REFERENCE_FAILED_RUN = re.compile(r"^(?:--- )?FAIL(?:ED)?\b|\bfailed\b|\berror\b", re.MULTILINE)
REFERENCE_HEXISH = re.compile(r"\b[0-9a-f]{12,64}\b")
REFERENCE_ERROR_WORD = re.compile(
    r"(?:\berror\b|\bError\b|ERROR|\bfailed\b|\bFAIL(?:ED)?\b|\bfatal\b|\bpanic\b|Traceback|"
    r"Exception\b|not found|No such file|[Pp]ermission denied|refused|\bcannot\b|"
    r"\bundefined\b|, want \S|has not been|mismatch)"
)
REFERENCE_WANT_GOT = re.compile(r"\bwant\b.*\bgot\b|\bgot\b.*\bwant\b|expected .* (?:got|but)")
#: what precedes a failure word that counts none (``0 failed``)
REFERENCE_NONE = re.compile(r"(?<![\w.])0 \Z")


def reference_some(pattern: re.Pattern[str], text: str) -> bool:
    """A match of ``pattern`` in ``text`` not preceded by a count of none."""
    return any(not REFERENCE_NONE.search(text[: m.start()]) for m in pattern.finditer(text))


def reference_error_line(line: str) -> bool:
    return reference_some(REFERENCE_ERROR_WORD, line) or bool(REFERENCE_WANT_GOT.search(line))


REFERENCE_RESULT_LINE = re.compile(
    r"(?:^ok\s|^PASS\b|^FAIL\b|^---\s(?:PASS|FAIL)|\b\d+ (?:passed|failed|tests?)\b|"
    r"\b\d+(?:\.\d+)?s\b|exit (?:code|status)|Exit code|\bSuccess|\bsucceeded\b|\bcreated\b|"
    r"\bwritten\b|\bupdated\b|\bcommitted\b|\bmerged\b|\bpushed\b|"
    r"^\[(?:[^\]\s]+|detached HEAD)(?: \(root-commit\))? [0-9a-f]{7,40}\] (?=[^\n]))"
)


def reference_outcome(text: str) -> tuple[str, list[str], float]:
    """:func:`facts._outcome` as first written: every non-blank line of the region tested."""
    text = text.strip()
    if not text:
        return "(no output)", [], 0.0
    lines = [line for line in facts._scan_region(text).splitlines() if line.strip()]
    errors: list[str] = []
    results: list[str] = []
    listing = sum(1 for line in lines[:20] if facts._LISTING.match(line)) > len(lines[:20]) // 2
    if listing:
        return f"{len(lines)} lines, starting {facts._line(lines[0])}", [], -1.0
    scan = facts.SCAN_CHARS
    failed = reference_some(REFERENCE_FAILED_RUN, text[:scan]) or reference_some(
        REFERENCE_FAILED_RUN, text[-scan:]
    )
    echo = ""
    for raw in lines:
        if (
            len(errors) < facts.MAX_ERRORS_PER_OUTPUT
            and len(raw.strip()) >= facts.MIN_ERROR_CHARS
            and (reference_error_line(raw) or (failed and facts._LOCATED_LINE.match(raw)))
            and not facts._CODE_LINE.search(raw)
        ):
            line = facts._line(raw)
            if line not in errors:
                errors.append(line)
        elif len(results) < 2 and REFERENCE_RESULT_LINE.search(raw):
            results.append(facts._line(raw))
        elif not echo and facts._ECHO_LINE.match(raw):
            echo = facts._line(raw)
    boost = 2.5 if errors or results else 0.0
    results = list(dict.fromkeys(results))
    if echo and echo not in results:
        results.insert(0, echo)
    if len(text) <= facts.SHORT_OUTPUT_CHARS:
        return (
            facts._fold(plain_text(text)),
            errors if len(lines) > 1 else [],
            max(boost, 1.0),
        )
    hexes = [h for h in dict.fromkeys(REFERENCE_HEXISH.findall(text[:scan]))][:2]
    parts = results or [facts._line(lines[0])]
    if hexes and not any(h in " ".join(parts) for h in hexes):
        parts.append("ids " + ", ".join(hexes))
    return " | ".join(parts), errors, boost


@pytest.fixture(scope="module")
def sessions() -> list[list[Message]]:
    hermes = Hermes(settings_from({"session": {"path": ":memory:"}}))
    try:
        out = []
        for path in SESSIONS:
            for conversation in pick_importer(hermes.importers(), path).load(path):
                out.append([hermes.harness(m) for m in conversation.messages])
        return out
    finally:
        hermes.close()


def test_message_and_session_facts_equal_the_line_by_line_definitions(
    sessions: list[list[Message]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = [[facts.message_facts(m) for m in messages] for messages in sessions]
    fast_session = [facts.extract_facts(m, list(range(len(m)))) for m in sessions]
    with monkeypatch.context() as patch:
        patch.setattr(facts, "_outcome", reference_outcome)
        patch.setattr(facts, "_SENTENCE", REFERENCE_SENTENCE)
        patch.setattr(facts, "_FAILED_RUN", REFERENCE_FAILED_RUN)
        slow = [[facts.message_facts(m) for m in messages] for messages in sessions]
        slow_session = [facts.extract_facts(m, list(range(len(m)))) for m in sessions]
    assert sum(map(len, sessions)) > 1_000  # both sessions loaded, tool outputs among them
    assert sum(1 for parts in fast for part in parts if part.get("errors")) > 20
    assert fast == slow
    assert fast_session == slow_session


#: pieces the patterns care about: keywords, line breaks of every kind, word characters
_PIECES = [
    "error",
    "Error",
    "ERROR",
    "errors",
    "failed",
    "0 ",
    "v1.0 ",
    "FAIL",
    "FAILED",
    "--- FAIL",
    "--- PASS",
    "PASS",
    "ok ",
    "ok\t",
    "fatal",
    "panic",
    "Traceback",
    "Exception",
    "not found",
    "cannot",
    "want",
    " got ",
    "got",
    "gotten",
    "wanted",
    "but",
    ", want 1",
    "expected ",
    " but",
    "mismatch",
    "3 passed",
    "1 tests",
    "12s",
    "0.5s",
    "exit code 1",
    "Exit code",
    "Success",
    "created",
    "pushed",
    "[main 1a2b3c4] msg",
    "$ go test",
    "[test:ci] $ make",
    "a.go:12: ",
    "x.py:3:4: bad",
    "  12→",
    "7\t",
    "def f(",
    "{",
    ";",
    "// ",
    "deadbeefcafe1234",
    "0123456789abcdef0123",
    "g",
    "\n",
    "\n\n",
    "\r",
    "\r\n",
    "\x0b",
    "\x1c",
    "\x85",
    "\u2028",
    " ",
    "  ",
    "x",
    "é",
    "_",
    "1",
    ".",
    "!",
    "?",
    "file.py",
    "\x1b[31m",
]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=60).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT)
def test_outcome_equals_the_line_by_line_definition(text: str) -> None:
    assert facts._outcome(text) == reference_outcome(text)
    assert bool(facts._FAILED_RUN.search(text)) == bool(REFERENCE_FAILED_RUN.search(text))
    assert facts._names_some(facts._FAILED_RUN, text) == reference_some(REFERENCE_FAILED_RUN, text)
    assert facts._HEXISH.findall(text) == REFERENCE_HEXISH.findall(text)
    for line in text.splitlines():
        assert facts._error_line(line) == reference_error_line(line)
        assert facts._result_line(line) == bool(REFERENCE_RESULT_LINE.search(line))


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_sentences_equal_the_plain_pattern(text: str) -> None:
    assert facts._SENTENCE.findall(text) == REFERENCE_SENTENCE.findall(text)


def test_a_long_line_of_want_without_got_costs_linear_time() -> None:
    """``want`` 4,800 times and no ``got`` (``\\bwant\\b.*\\bgot\\b``) took 0.8 s."""
    start = time.process_time()
    assert facts._outcome("want " * 4_800)[1] == []
    assert time.process_time() - start < 0.2


def test_a_long_run_that_is_no_sentence_costs_linear_time() -> None:
    """A 20,000-character run without a sentence end (a pasted blob, minified code) used
    to be retried from each character: seconds per message, at record time."""
    message = Message(role="user", content="x" * 20_000 + ". y must stay here")
    start = time.process_time()
    part = facts.message_facts(message)
    assert time.process_time() - start < 0.5
    assert part["constraints"] == ["y must stay here"]
