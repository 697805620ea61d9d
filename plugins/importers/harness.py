"""Telling harness-injected text from a person's words, from the transcript's own markup.

Agent harnesses wrap what they inject in fixed tags (Claude Code's
``<system-reminder>``, ``<local-command-caveat>``, command wrappers...) or
fixed phrases (``[Request interrupted by user]``). :func:`split_harness`
cuts a text into segments, each either harness text (with the construct's
name for :attr:`hermes_hookspecs.Message.harness`) or ordinary text, so an
importer can keep a user's real words unmarked when the harness wrapped them
together with its own text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Claude Code's wrapper tags and the harness construct each one marks
CLAUDE_CODE_TAGS: dict[str, str] = {
    "system-reminder": "claude_code.system_reminder",
    "local-command-caveat": "claude_code.caveat",
    "command-name": "claude_code.command",
    "command-message": "claude_code.command",
    "command-args": "claude_code.command",
    "command-contents": "claude_code.command",
    "local-command-stdout": "claude_code.command_output",
    "local-command-stderr": "claude_code.command_output",
    "bash-stdout": "claude_code.command_output",
    "bash-stderr": "claude_code.command_output",
    "task-notification": "claude_code.task_notification",
    "user-prompt-submit-hook": "claude_code.hook_context",
}
#: Claude Code's fixed phrases (a whole segment) and their construct
CLAUDE_CODE_PHRASES: dict[str, str] = {
    r"\[Request interrupted by user[^\]\n]*\]": "claude_code.interrupt",
}


@dataclass(frozen=True)
class Segment:
    """A run of text and, when the harness wrote it, the construct's name."""

    text: str
    harness: str | None = None


class HarnessSplitter:
    """Splits text on a harness's wrapper tags and fixed phrases."""

    def __init__(self, tags: dict[str, str], phrases: dict[str, str] | None = None) -> None:
        self.tags = dict(tags)
        self.phrases = dict(phrases or {})
        names = "|".join(re.escape(tag) for tag in sorted(self.tags, key=len, reverse=True))
        parts = [rf"<(?P<tag>{names})(?:\s[^>]*)?>.*?</(?P=tag)>"] if names else []
        self._phrase_kinds: list[str] = []
        for number, (pattern, kind) in enumerate(self.phrases.items()):
            parts.append(rf"(?P<p{number}>{pattern})")
            self._phrase_kinds.append(kind)
        self._pattern = re.compile("|".join(parts), re.DOTALL) if parts else None

    def _kind(self, match: re.Match[str]) -> str:
        tag = match.group("tag") if "tag" in match.re.groupindex else None
        if tag:
            return self.tags[tag]
        for number, kind in enumerate(self._phrase_kinds):
            if match.group(f"p{number}") is not None:
                return kind
        raise AssertionError("unreachable: a match names a tag or a phrase")

    def split(self, text: str) -> list[Segment]:
        """The segments of ``text`` in order; whitespace-only gaps are dropped.

        Adjacent harness segments (only whitespace between them) merge into
        one, named after the first (a command's name, message and args
        are one ``claude_code.command``).
        """
        if self._pattern is None or not text:
            return [Segment(text)] if text.strip() else []
        segments: list[Segment] = []
        position = 0
        for match in self._pattern.finditer(text):
            gap = text[position : match.start()]
            kind = self._kind(match)
            if gap.strip():
                segments.append(Segment(gap.strip("\n")))
            elif segments and segments[-1].harness is not None:
                previous = segments.pop()
                segments.append(Segment(previous.text + gap + match.group(), previous.harness))
                position = match.end()
                continue
            segments.append(Segment(match.group(), kind))
            position = match.end()
        rest = text[position:]
        if rest.strip():
            segments.append(Segment(rest.strip("\n") if segments else rest))
        return segments

    def whole(self, text: str) -> str | None:
        """The construct's name when ``text`` is harness text only, else None."""
        segments = self.split(text)
        if segments and all(segment.harness for segment in segments):
            return segments[0].harness
        return None


CLAUDE_CODE = HarnessSplitter(CLAUDE_CODE_TAGS, CLAUDE_CODE_PHRASES)
#: Gemini CLI's fixed phrases: the turn it sends by itself after an invalid model stream
GEMINI_CLI = HarnessSplitter({}, {r"System: Please continue\.": "gemini_cli.continue"})
