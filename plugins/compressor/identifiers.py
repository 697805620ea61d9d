"""Mechanical identifier extraction: the things a summary must never paraphrase.

Kinds (in index priority order): ``error`` (an error line, ANSI stripped,
whitespace collapsed, at most :data:`MAX_ERROR_CHARS`), ``commit`` (a commit
the session made, from the ``[branch sha] subject`` line ``git commit``
prints; its own share of the index, so the commit ids a log or a ref
listing shows cannot crowd the session's milestones out), ``exception``
(``SomethingError`` / ``SomethingException``), ``sha`` (a 7-40 hex commit id
holding a digit and a letter, only in text that mentions git), ``ref`` (``#123``
issue / PR numbers), ``branch`` (after ``refs/heads/``, ``origin/``,
``checkout -b``, ``On branch`` ...), ``url`` and ``path`` (absolute paths,
``./`` ``../`` ``~/`` paths, and relative paths with a file extension or two
slashes).

Every pattern starts with a literal (``/``, ``http``, ``#``, ``rror``...), so
one pass over a megabyte of tool output costs a few milliseconds; text is
never sent to a model for this.

:class:`IdentifierIndex` collects identifiers with a recency rank, picks
what fits a token budget round-robin across kinds, renders the index and
parses a rendered index back (so a re-compression carries it forward).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable
from typing import Literal

from hermes_core.identifiers import SHA_WORD, looks_like_sha
from hermes_core.terminal import plain_text

IdentifierKind = Literal["error", "commit", "exception", "sha", "ref", "branch", "url", "path"]
KIND_ORDER: tuple[IdentifierKind, ...] = (
    "error",
    "commit",
    "exception",
    "sha",
    "ref",
    "branch",
    "url",
    "path",
)
KIND_LABELS: dict[IdentifierKind, str] = {
    "error": "errors",
    "commit": "commits made",
    "exception": "exceptions",
    "sha": "commits",
    "ref": "PRs/issues",
    "branch": "branches",
    "url": "URLs",
    "path": "paths",
}
_LABEL_KINDS: dict[str, IdentifierKind] = {label: kind for kind, label in KIND_LABELS.items()}
#: kinds rendered one value a line (``- value``): their values may hold ``, ``
_LIST_KINDS: frozenset[IdentifierKind] = frozenset({"error"})
MAX_ERROR_CHARS = 200
MAX_VALUE_CHARS = 200
BRANCH_PREFIXES = frozenset({"feature", "fix", "bugfix", "hotfix", "release", "chore"})

_URL = re.compile(r"https?://[^\s<>\"'`)\]\\]+")
_SLASH_RUN = re.compile(r"/[\w.@+-]+(?:/[\w.@+-]+)*/?")
_LEFT_RUN = re.compile(r"[\w.~@+-]+")
_NOT_BEFORE_PATH = frozenset(":/\\<")
#: the letters of the escapes (``\n``, ``\t``, ``\r``) that escaped text shows literally
_ESCAPE_LETTERS = frozenset("ntr")
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.~@+-")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_GIT_WORDS = ("git ", "commit ", "HEAD", "rebase", "cherry-pick")
_GIT_HINT = re.compile(r"git |commit |HEAD|rebase|cherry-pick")
_SHA_WINDOW = 8_000
#: a UUID (a session, request or conversation id): its hex groups are no commits
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_REF = re.compile(r"#\d{1,6}(?![\w#;])")
_REF_WORDS = (
    ("PR", re.compile(r"PR ?#?\d{1,6}\b")),
    ("ssue", re.compile(r"[Ii]ssue ?#?\d{1,6}\b")),
)
_EXC = re.compile(r"(?:Error|Exception|Warning|Exit)\b")
_WORD_LEFT = re.compile(r"[A-Za-z0-9_]+")
_ERROR_HITS = (
    re.compile(r"rror: "),
    re.compile(r"Exception: "),
    re.compile(r"ERROR"),
    re.compile(r"FAILED"),
    re.compile(r"fatal: "),
    re.compile(r"panic: "),
)
_BRANCH_PATTERNS = (
    ("refs/heads/", re.compile(r"refs/heads/([\w./-]+)")),
    ("origin/", re.compile(r"origin/([\w.-]+(?:/[\w.-]+)*)")),
    ("checkout -b ", re.compile(r"checkout -b ([\w./-]+)")),
    ("switch -c ", re.compile(r"switch -c ([\w./-]+)")),
    ("On branch ", re.compile(r"On branch ([\w./-]+)")),
    ("branch '", re.compile(r"Switched to (?:a new )?branch '([^'\s]+)'")),
    ("--branch", re.compile(r"--branch[ =]([\w./-]+)")),
)


def _paths(text: str, out: list[tuple[IdentifierKind, str]]) -> None:
    raw: list[str] = []
    for match in _SLASH_RUN.finditer(text):
        start = match.start()
        before = text[start - 1] if start else " "
        if before in _NOT_BEFORE_PATH:
            continue
        if before in _PATH_CHARS:
            left = _LEFT_RUN.match(text[max(0, start - 80) : start][::-1])
            head = left.group()[::-1] if left else ""
            if head and start - len(head) > 0 and text[start - len(head) - 1] == "\\":
                # ``\n``, ``\t`` of escaped text (a JSON or debug dump): the letter is
                # the escape's, not the path's
                head = head[1:] if head[0] in _ESCAPE_LETTERS else head
            raw.append(head + match.group())
        else:
            raw.append(match.group())
    for value in dict.fromkeys(raw):
        # a diff line's sign (``+src/a.py``, ``-src/a.py``) is no part of its path
        value = value.rstrip(".,").lstrip("+-")
        if _is_path(value):
            out.append(("path", value))
        elif value.count("/") == 1 and value.split("/", 1)[0] in BRANCH_PREFIXES:
            out.append(("branch", value))


#: a path segment that is a content hash (``.git/objects/ab/<38 hex>``, cache entries)
_DIGEST_SEGMENT = re.compile(r"[0-9a-f]{20,}(?:\.\w+)?")
#: device files every tool prints, never what the work is about
_DEVICE_PATHS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin"})
#: a line of a file listing (``  12→code``, ``12\tcode``): code, not an error that happened
_LISTING_LINE = re.compile(r"\s*\d+(?:→|\t)")


def _is_path(value: str) -> bool:
    if len(value) < 3 or len(value) > MAX_VALUE_CHARS or value in _DEVICE_PATHS:
        return False
    segments = [s for s in value.split("/") if s]
    if not segments or all(s.replace(".", "").isdigit() for s in segments):
        return False
    if _DIGEST_SEGMENT.fullmatch(segments[-1]):  # content-addressed storage, not a file of the work
        return False
    if not any(c.isalpha() for c in value):
        return False
    if value[0] in "/~.":
        return value[0] != "." or value.startswith(("./", "../"))
    return value.count("/") >= 2 or bool(_EXTENSION.search(segments[-1]))


#: git's line for a commit it made, ``[main 1a2b3c4] subject`` (``[main (root-commit)
#: 1a2b3c4]``, ``[detached HEAD 1a2b3c4]``): the commits made here, and a result line of
#: the handoff's facts (:mod:`.facts`)
COMMIT_LINE = r"\[(?:[^\]\s]+|detached HEAD)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (?=[^\n])"
_COMMIT_MADE = re.compile("^" + COMMIT_LINE, re.MULTILINE)
#: what git prints after it: `` Date: ...`` / `` Author: ...`` (an amend, a cherry-pick,
#: another author) and then the stat line `` 2 files changed, 260 insertions(+)``
_AFTER_COMMIT_MADE = re.compile(r"\n(?: (?:Author|Date): [^\n]*\n){0,2} \d+ files? changed")


def _commits(text: str, out: list[tuple[IdentifierKind, str]]) -> None:
    """Commits the session made: the session's milestones, which rank apart from the
    commit ids it only saw (a log, a listing of refs). The line must be git's: its
    stat line follows, or the text ran ``git commit`` (an empty commit prints none)."""
    if "] " not in text:
        return
    ran = "git commit" in text
    for match in _COMMIT_MADE.finditer(text):
        end = text.find("\n", match.end())
        if ran or (end >= 0 and _AFTER_COMMIT_MADE.match(text, end) is not None):
            out.append(("commit", match.group(1)))


def _shas(text: str, out: list[tuple[IdentifierKind, str]]) -> None:
    """Commit ids, looked for only in windows of text that follow a git hint."""
    if not any(hint in text for hint in _GIT_WORDS):
        return
    uuids = [(m.start(), m.end()) for m in _UUID.finditer(text)] if "-" in text else []
    uuid_starts = [a for a, _b in uuids]
    end = -1
    for hint in _GIT_HINT.finditer(text):
        if hint.start() < end:
            continue
        begin = max(end, hint.start() - 200)
        end = min(len(text), hint.end() + _SHA_WINDOW)
        for match in SHA_WORD.finditer(text, begin, end):
            value = match.group()
            start = match.start()
            if start >= 2 and text[start - 2 : start] == "0x":
                continue
            if uuids and _inside(uuids, uuid_starts, start):
                continue
            if looks_like_sha(value):
                out.append(("sha", value))


def _inside(spans: list[tuple[int, int]], starts: list[int], at: int) -> bool:
    """Whether ``at`` lies in one of ``spans`` (sorted, apart; ``starts`` their starts)."""
    i = bisect.bisect_right(starts, at) - 1
    return i >= 0 and at < spans[i][1]


def _refs(text: str, out: list[tuple[IdentifierKind, str]]) -> None:
    for match in _REF.finditer(text):
        start = match.start()
        if start and text[start - 1] not in " \t\n([,":
            continue
        out.append(("ref", match.group()))
    for hint, pattern in _REF_WORDS:
        if hint in text:
            for match in pattern.finditer(text):
                start = match.start()
                if start and text[start - 1].isalnum():
                    continue
                out.append(("ref", match.group()))


def _branches(text: str, out: list[tuple[IdentifierKind, str]]) -> None:
    for hint, pattern in _BRANCH_PATTERNS:
        if hint not in text:
            continue
        for match in pattern.finditer(text):
            value = match.group(1).rstrip(".,/")
            if value and not value.isdigit() and len(value) <= MAX_VALUE_CHARS:
                out.append(("branch", value))


def _exceptions(text: str, out: list[tuple[IdentifierKind, str]]) -> None:
    for match in _EXC.finditer(text):
        start = match.start()
        if not start or text[start - 1] not in _PATH_CHARS:
            continue
        left = _WORD_LEFT.match(text[max(0, start - 60) : start][::-1])
        if left is None:
            continue
        name = left.group()[::-1] + match.group()
        if name[0].isupper() and len(name) > len(match.group()) + 2:
            out.append(("exception", name))


def clean_error_line(line: str) -> str:
    """An error line as indexed: ANSI escapes and surrounding blanks removed, length capped.

    Inner whitespace is kept so the line stays a literal substring of the
    original (search and comparisons find it as is).
    """
    # a carriage return inside one line (a progress frame after the error) keeps both
    line = plain_text(line.replace("\r", " ")).strip()
    return line[:MAX_ERROR_CHARS].rstrip()


def _errors(text: str, out: list[tuple[IdentifierKind, str]]) -> None:
    starts: set[int] = set()
    for pattern in _ERROR_HITS:
        for match in pattern.finditer(text):
            starts.add(text.rfind("\n", 0, match.start()) + 1)
    for start in sorted(starts):
        end = text.find("\n", start)
        raw = text[start : end if end >= 0 else len(text)]
        if _LISTING_LINE.match(raw):  # a file's code that mentions an error, not one that happened
            continue
        line = clean_error_line(raw)
        if len(line) >= 8:
            out.append(("error", line))


def _urls(text: str, out: list[tuple[IdentifierKind, str]]) -> None:
    for match in _URL.finditer(text):
        url = match.group().rstrip(".:;!?")
        if len(url) <= MAX_VALUE_CHARS:
            out.append(("url", url))


_EXTRACTORS: dict[IdentifierKind, Callable[[str, list[tuple[IdentifierKind, str]]], None]] = {
    "error": _errors,
    "commit": _commits,
    "exception": _exceptions,
    "sha": _shas,
    "ref": _refs,
    "branch": _branches,
    "url": _urls,
    "path": _paths,
}


def extract_identifiers(
    text: str, kinds: Iterable[IdentifierKind] = KIND_ORDER
) -> list[tuple[IdentifierKind, str]]:
    """Identifiers of the given ``kinds`` in ``text``, each ``(kind, value)`` once."""
    if not text:
        return []
    found: list[tuple[IdentifierKind, str]] = []
    for kind in kinds:
        _EXTRACTORS[kind](text, found)
    return list(dict.fromkeys(found))


def estimate_tokens(value: str) -> int:
    """A conservative token estimate for identifier-like text (about 3 chars a token)."""
    return math.ceil(len(value) / 3) + 1


class IdentifierIndex:
    """Identifiers with a recency rank; selects what fits a budget and renders it."""

    def __init__(self) -> None:
        self._rank: dict[tuple[IdentifierKind, str], float] = {}

    def __len__(self) -> int:
        return len(self._rank)

    def add(self, kind: IdentifierKind, value: str, rank: float) -> bool:
        """Record ``value`` (a higher ``rank`` is more recent; the highest is kept).

        Returns True when the identifier was not in the index before.
        """
        key = (kind, value)
        known = self._rank.get(key)
        if known is None or rank > known:
            self._rank[key] = rank
        return known is None

    def add_all(self, items: Iterable[tuple[IdentifierKind, str]], rank: float) -> None:
        for kind, value in items:
            self.add(kind, value, rank)

    def items(self) -> list[tuple[IdentifierKind, str]]:
        return list(self._rank)

    def select(
        self, budget_tokens: int, *, skip: Callable[[str], bool] | None = None
    ) -> dict[IdentifierKind, list[str]]:
        """Pick identifiers newest first within ``budget_tokens``, sharing tokens across kinds.

        Each step serves the kind that has spent the fewest tokens so far, so
        long error lines cannot crowd out paths and SHAs (nor the reverse).
        ``skip(value)`` drops identifiers that need no entry (for instance
        because they are still in the verbatim tail). The id of a commit made
        that is listed is not listed again among the commits seen. An error line that
        starts like an already chosen, shorter one is a near-duplicate and is
        left out.
        """
        queues: dict[IdentifierKind, list[str]] = {kind: [] for kind in KIND_ORDER}
        ordered = sorted(self._rank.items(), key=lambda item: -item[1])
        for (kind, value), _rank in ordered:
            if skip is None or not skip(value):
                queues[kind].append(value)
        chosen: dict[IdentifierKind, list[str]] = {kind: [] for kind in KIND_ORDER}
        spent = dict.fromkeys(KIND_ORDER, 0)
        cursors = dict.fromkeys(KIND_ORDER, 0)
        left = budget_tokens
        active = [kind for kind in KIND_ORDER if queues[kind]]
        while active and left > 0:
            kind = min(active, key=lambda k: (spent[k], KIND_ORDER.index(k)))
            queue = queues[kind]
            value = queue[cursors[kind]]
            cursors[kind] += 1
            if cursors[kind] >= len(queue):
                active.remove(kind)
            if kind == "error" and _near_duplicate(value, chosen["error"]):
                continue
            cost = estimate_tokens(value) + (4 if not chosen[kind] else 0)
            if cost <= left:
                chosen[kind].append(value)
                left -= cost
                spent[kind] += cost
            else:
                spent[kind] += cost  # too big now: let the other kinds go first
        made = set(chosen["commit"])  # a commit made listed is not listed again as seen
        chosen["sha"] = [value for value in chosen["sha"] if value not in made]
        return {kind: values for kind, values in chosen.items() if values}


def _near_duplicate(line: str, chosen: list[str]) -> bool:
    head = line[:60]
    return any(other[:60] == head for other in chosen)


def render_index(selected: dict[IdentifierKind, list[str]]) -> str:
    """The ``Identifier Index`` section body (see :func:`parse_index`)."""
    lines: list[str] = []
    for kind in KIND_ORDER:
        values = selected.get(kind)
        if not values:
            continue
        label = KIND_LABELS[kind]
        if kind in _LIST_KINDS:  # values holding ", " (an error line): one a line
            lines.append(f"{label}:")
            lines.extend(f"- {value}" for value in values)
        else:
            lines.append(f"{label}: " + ", ".join(values))
    return "\n".join(lines)


def parse_index(body: str) -> list[tuple[IdentifierKind, str]]:
    """Read back a body written by :func:`render_index` (oldest-ranked last)."""
    out: list[tuple[IdentifierKind, str]] = []
    listing: IdentifierKind | None = None  # the kind whose ``- value`` lines follow
    for raw in body.splitlines():
        line = raw.rstrip()
        if listing is not None and line.startswith("- "):
            out.append((listing, line[2:]))
            continue
        listing = None
        label, sep, rest = line.partition(": ")
        if line.endswith(":") and line[:-1] in _LABEL_KINDS:
            kind = _LABEL_KINDS[line[:-1]]
            listing = kind if kind in _LIST_KINDS else None
            continue
        if sep and label in _LABEL_KINDS:
            kind = _LABEL_KINDS[label]
            out.extend((kind, value) for value in rest.split(", ") if value)
    return out
