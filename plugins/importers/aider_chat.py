"""Importer for aider's chat history (``aider-chat``): ``.aider.chat.history.md``.

aider appends every session to one markdown file:

* ``# aider chat started at <timestamp>`` opens a session; each session with
  user input and a model reply becomes one conversation (the others, such as
  a session that only ran ``/add`` and quit, are counted in ``skipped`` of
  the first conversation);
* ``#### `` lines ending in aider's markdown line break (two spaces) are the
  user's input (a blank input line is ``####``), including ``/commands``
  (``/add``, ``/run``, ``/ask`` ...), which become user messages in the
  user's own words (flag ``command``); a ``#### heading`` of the model's
  reply has no line break and stays reply text;
* ``> `` lines ending in the line break are aider's own output (tool output, lint and test results,
  commit notes, confirmations): a user message marked
  ``harness="aider.tool_output"``; the block of ``>`` lines before a
  session's first input is its startup banner, read for metadata (version,
  model) and counted in ``skipped``;
* every other line belongs to the model's reply, an assistant message; a
  fenced block is read whole, so ``#### `` or ``> `` inside it stays reply
  text.

aider ends user and output lines with two spaces (a markdown line break);
they are removed. The file carries no tool calls: edits are the
SEARCH/REPLACE blocks inside the reply text, as the model wrote them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from hermes_hookspecs import (
    ImportedConversation,
    Importer,
    ImportFormatError,
    Recognition,
    hookimpl,
)

from .builder import ConversationBuilder, parse_timestamp
from .reading import ImportLimits, decode_head, read_text

FORMAT = "aider-chat"
_SESSION = re.compile(r"^# aider chat started at (.+?)\s*$")
_SESSION_BYTES = re.compile(rb"(?m)^# aider chat started at \d{4}-\d\d-\d\d")
_USER_BYTES = re.compile(rb"(?m)^#### ")
#: aider's input and output lines end with a markdown line break (two spaces)
_AIDER_LINE = re.compile(rb"(?m)^(?:>|####)(?: [^\n]*)?  $")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_MODEL = re.compile(r"^(?:Main model|Models|Model): (\S+)")
_VERSION = re.compile(r"^Aider v(\S+)")

_Kind = Literal["user", "output", "reply"]


class AiderChatImporter(Importer):
    """aider's ``.aider.chat.history.md`` (one conversation per chat session)."""

    name = FORMAT
    description = "aider chat history markdown (.aider.chat.history.md)"

    def __init__(self, *, limits: ImportLimits | None = None) -> None:
        self.limits = limits

    def sniff(self, path: Path, head: bytes) -> bool:
        return self.recognise(path, head).matched

    def recognise(self, path: Path, sample: bytes) -> Recognition:
        data = decode_head(sample)
        if _SESSION_BYTES.search(data):
            return Recognition(matched=True, score=1.0, reason="'# aider chat started at' lines")
        if data.lstrip()[:1] in (b"{", b"["):
            return Recognition(matched=False, reason="JSON, not aider's markdown")
        aider_lines = len(_AIDER_LINE.findall(data))
        if aider_lines >= 3:  # a file whose first session header was cut off
            return Recognition(
                matched=True, score=0.7, reason=f"{aider_lines} aider '> '/'#### ' lines"
            )
        users = len(_USER_BYTES.findall(data))
        if users:
            return Recognition(
                matched=False,
                score=0.5,
                reason=f"{users} '#### ' input lines but no '# aider chat started at' line in"
                " the first 256 KiB",
            )
        return Recognition(matched=False, reason="no '# aider chat started at' line")

    def load(self, path: Path) -> list[ImportedConversation]:
        text = read_text(path, self.limits)
        if not text.strip():
            raise ImportFormatError(f"{path}:1: empty file (no aider chat history)")
        sessions = _sessions(text.split("\n"))
        conversations: list[ImportedConversation] = []
        empty = no_reply = 0
        for number, (start_line, started, lines) in enumerate(sessions, start=1):
            conversation = _conversation(path, number, start_line, started, lines)
            if conversation is None:
                empty += 1
                continue
            if not any(m.role == "assistant" for m in conversation.messages):
                no_reply += 1
                continue
            conversations.append(conversation)
        if not conversations:
            raise ImportFormatError(
                f"{path}:1: no aider chat session with user input and a reply"
                f" ({len(sessions)} session(s) read)"
            )
        if empty:
            conversations[0].skipped["session.without_input"] = empty
        if no_reply:
            conversations[0].skipped["session.without_reply"] = no_reply
        return conversations


def _sessions(lines: list[str]) -> list[tuple[int, str, list[tuple[int, str]]]]:
    """(first line number, start timestamp, numbered lines) for each session."""
    out: list[tuple[int, str, list[tuple[int, str]]]] = []
    current: list[tuple[int, str]] = []
    start_line, started = 1, ""
    for number, line in enumerate(lines, start=1):
        match = _SESSION.match(line)
        if match:
            if current or started:
                out.append((start_line, started, current))
            start_line, started, current = number, match.group(1), []
            continue
        current.append((number, line))
    if current or started:
        out.append((start_line, started, current))
    return out


def _blocks(lines: list[tuple[int, str]]) -> list[tuple[_Kind, int, list[str]]]:
    """Consecutive lines grouped by kind; a fenced block in a reply stays reply text."""
    blocks: list[tuple[_Kind, int, list[str]]] = []
    fence: str | None = None
    for number, line in lines:
        kind: _Kind
        if fence is not None:
            kind = "reply"
            closing = _FENCE.match(line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                fence = None
        elif _is_input(line):
            kind = "user"
        elif _is_output(line):
            kind = "output"
        else:
            kind = "reply"
            opening = _FENCE.match(line)
            if opening:
                fence = opening.group(1)
        if kind == "reply" and not line.strip() and blocks and blocks[-1][0] != "reply":
            blocks[-1][2].append(line)  # a blank line after input or output is not a reply
            continue
        if blocks and blocks[-1][0] == kind:
            blocks[-1][2].append(line)
        else:
            blocks.append((kind, number, [line]))
    return blocks


def _is_input(line: str) -> bool:
    """An input line: ``#### `` and a markdown line break (a reply heading has none)."""
    if not line.startswith("####"):
        return False
    return line.endswith("  ") or line.rstrip() == "####" or line.startswith("#### /")


def _is_output(line: str) -> bool:
    """An output line: ``> `` and a line break (a reply quote or ``>>>>>>>`` has none)."""
    if not line.startswith(">") or line.startswith(">>>>>>>"):
        return False
    return line.endswith("  ") or line.rstrip() == ">"


def _strip(line: str, prefix: str) -> str:
    body = line[len(prefix) :] if line.startswith(prefix) else line
    if body.startswith(" "):
        body = body[1:]
    return body[:-2] if body.endswith("  ") else body.rstrip()


def _conversation(
    path: Path, number: int, start_line: int, started: str, lines: list[tuple[int, str]]
) -> ImportedConversation | None:
    builder = ConversationBuilder(str(path), where=f"session {number}")
    skipped: Counter[str] = Counter()
    model = version = ""
    seen_input = False
    for kind, line, raw in _blocks(lines):
        if kind == "user":
            body = "\n".join(_strip(item, "####") for item in raw).strip("\n")
            if not body.strip():
                continue
            seen_input = True
            flags = ("command",) if body.lstrip().startswith("/") else ()
            builder.plain("user", body, line=line, flags=flags)
        elif kind == "output":
            body = "\n".join(_strip(item, ">") for item in raw).strip("\n")
            if not seen_input:
                for item in body.split("\n"):
                    model = model or _match(_MODEL, item)
                    version = version or _match(_VERSION, item)
                skipped["output.startup_banner"] += 1
                continue
            if body.strip():
                builder.plain("user", body, line=line, harness="aider.tool_output")
        else:
            body = "\n".join(raw).strip("\n")
            if not body.strip():
                continue
            if not seen_input:
                skipped["reply.before_input"] += 1
                continue
            builder.assistant(body, line=line)
    if not seen_input:
        return None
    builder.metadata["started_at"] = started
    builder.metadata["session_number"] = number
    builder.metadata["first_line"] = start_line
    if version:
        builder.metadata["aider_version"] = version
    conversation = builder.build(
        source_format=FORMAT,
        conversation_id=f"{path.name.split('.md')[0]}:{started or number}",
        title=f"aider chat started at {started}" if started else f"aider session {number}",
        model=model,
        started_at=parse_timestamp(started),
    )
    conversation.skipped.update(sorted(skipped.items()))
    return conversation


def _match(pattern: re.Pattern[str], text: str) -> str:
    found = pattern.match(text.strip())
    return found.group(1) if found else ""


@hookimpl
def register_importers(register: Callable[[Importer], None]) -> None:
    """Register the ``aider-chat`` importer."""
    register(AiderChatImporter())
