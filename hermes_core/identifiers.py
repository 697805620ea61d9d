"""Verifiable identifiers in text: paths, SHAs, PR/issue numbers, URLs, branches, errors.

Used by the replay report to measure what a compaction kept ("identifiers
from the compacted part present in the final active context") and what one
search recovers. Extraction is mechanical (regular expressions), never an LLM.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PATTERNS: dict[str, re.Pattern[str]] = {
    "url": re.compile(r"https?://[^\s\"'<>)\]]{4,200}"),
    "path": re.compile(
        r"(?<![\w/.])(?:~?/|\./|\.\./)?(?:[\w.-]+/){1,12}[\w.-]+\.[A-Za-z][\w]{0,7}(?![\w/])"
    ),
    "sha": re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])"),  # SHA_WORD
    "issue": re.compile(r"(?:(?<=\s)|^)(?:#\d{2,6}|(?:PR|pr|issue|Issue)\s?#?\d{2,6})\b"),
    "branch": re.compile(r"\b(?:feature|fix|bugfix|hotfix|release|chore|entire)/[\w./-]{2,60}"),
    "exception": re.compile(r"\b[A-Z][A-Za-z]{2,60}(?:Error|Exception|Warning|Exit)\b"),
    "error": re.compile(r"(?m)^(?:error|Error|ERROR|fatal|FAIL|FAILED)[:\s][^\n]{8,160}"),
}

#: a commit id as Git prints it: a word of 7-40 lower-case hex digits (one a SHA only when
#: :func:`looks_like_sha`); the compressor's identifier index and answer typing use it too
SHA_WORD = PATTERNS["sha"]
#: the same words found hex run first (:func:`has_sha`)
_HEX_RUN = re.compile(r"[0-9a-f]{7,40}")
_WORD_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


def looks_like_sha(value: str) -> bool:
    """Whether a :data:`SHA_WORD` can be a commit id: it holds a digit and a letter, so
    plain words (``defaced``) and numbers (``1234567``) do not count."""
    return not value.isdigit() and any(c.isdigit() for c in value)


def has_sha(text: str) -> bool:
    """Whether ``text`` holds a SHA (a :data:`SHA_WORD` that :func:`looks_like_sha`),
    scanned for the hex run first: the lookbehind-led pattern costs ten times as much on a
    30 KB file read, and answer typing tests every candidate row."""
    for match in _HEX_RUN.finditer(text):
        start, end = match.span()
        if start and text[start - 1] in _WORD_CHARS:
            continue
        if end < len(text) and text[end] in _WORD_CHARS:
            continue
        if looks_like_sha(match.group()):
            return True
    return False


def extract(text: str) -> dict[str, set[str]]:
    """Identifiers found in ``text``, by kind."""
    found: dict[str, set[str]] = {}
    for kind, pattern in PATTERNS.items():
        values = set()
        for match in pattern.finditer(text):
            value = match.group(0).strip().rstrip(".,;:")
            if kind == "sha" and not looks_like_sha(value):
                continue
            if len(value) >= 4:
                values.add(value)
        if values:
            found[kind] = values
    return found


def extract_all(texts: Iterable[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for text in texts:
        for kind, values in extract(text).items():
            out.setdefault(kind, set()).update(values)
    return out


def flatten(found: dict[str, set[str]]) -> set[str]:
    return {value for values in found.values() for value in values}
