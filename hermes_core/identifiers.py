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
    "sha": re.compile(r"(?<![0-9a-fA-Z])[0-9a-f]{7,40}(?![0-9a-zA-Z])"),
    "issue": re.compile(r"(?:(?<=\s)|^)(?:#\d{2,6}|(?:PR|pr|issue|Issue)\s?#?\d{2,6})\b"),
    "branch": re.compile(r"\b(?:feature|fix|bugfix|hotfix|release|chore|entire)/[\w./-]{2,60}"),
    "exception": re.compile(r"\b[A-Z][A-Za-z]{2,60}(?:Error|Exception|Warning|Exit)\b"),
    "error": re.compile(r"(?m)^(?:error|Error|ERROR|fatal|FAIL|FAILED)[:\s][^\n]{8,160}"),
}

# SHAs must contain a digit and a letter so plain words and numbers don't count
_SHA_OK = re.compile(r"(?=.*\d)(?=.*[a-f])")


def extract(text: str) -> dict[str, set[str]]:
    """Identifiers found in ``text``, by kind."""
    found: dict[str, set[str]] = {}
    for kind, pattern in PATTERNS.items():
        values = set()
        for match in pattern.finditer(text):
            value = match.group(0).strip().rstrip(".,;:")
            if kind == "sha" and not _SHA_OK.match(value):
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
