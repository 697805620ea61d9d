"""What kind of text a query asks for, and which rows hold that kind (answer typing).

A question names the kind of its answer: "how *long* did the tests take"
wants a duration, "what *error* did the push fail with" an error line, "what
*constraint* did the user set" the user's own words. Search ranks rows
covering the query's words (:mod:`hermes_core.searchkit`); among them, a row
holding the kind the query asks for is the likelier answer, so the ranking
raises it (:data:`KIND_BONUS`).

Each kind is recognised from general cue words of a query (any of its terms'
words, case folded) and held by a row through a general property of its text
or author; nothing here names a session's content:

* ``duration``: cue words of elapsed time (``long``, ``took``, ``duration``,
  ``elapsed``, ...); held by a row with a number and a time unit written
  together, as tools print them (``71.6s``, ``250ms``, ``1m4s``).
* ``error``: nouns naming a failure (``error``, ``exception``, ``panic``,
  ``status``, ``failure``, ``traceback``); held by a row with an error line
  (``error:``, ``fatal:``, ``panic:``, ``ValueError:``, ``--- FAIL``, a line
  starting ``FAIL``, an HTTP status 4xx/5xx after ``status``, a non-zero exit
  status or code, a Python traceback). Code that merely mentions errors
  (``func f() error``) does not hold it.
* ``request``: words of what someone asked for (``constraint``,
  ``require``, ``requirement``, ``want``, ``request``, ``prefer``,
  ``instruction``, ...); held by a message the user wrote (role ``user``;
  text a harness injected is placed after every other hit by
  :func:`hermes_core.search.search_with_context`).

Verbs describing a circumstance (``failed``, ``failing``) are not cues: "the
command that failed" asks for a command.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: a row holding a kind the query asks for has its within-tier score multiplied by 1 + this
KIND_BONUS = 0.5

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class AnswerKind:
    """A kind of answer: the query words that ask for it, and how a row holds it."""

    name: str
    cues: frozenset[str]
    #: text holding the kind (None: the author decides)
    pattern: re.Pattern[str] | None = None
    #: a row by this role holds the kind
    role: str | None = None

    def held_by(self, role: str, text: str) -> bool:
        """Whether a row of ``role`` with ``text`` holds this kind."""
        if self.role is not None and role == self.role:
            return True
        return self.pattern is not None and self.pattern.search(text) is not None


def _cues(words: str) -> frozenset[str]:
    return frozenset(words.split())


DURATION = AnswerKind(
    "duration",
    _cues(
        "long longer took take takes taking duration durations elapsed latency runtime "
        "timing timings seconds minutes hours"
    ),
    pattern=re.compile(
        r"(?<![\w.])\d+(?:\.\d+)?(?:ns|µs|us|ms|s)(?![\w])"  # 71.643s, 250ms
        r"|(?<![\w.])\d+h\d+m|(?<![\w.])\d+m\d+(?:\.\d+)?s(?![\w])"  # 1h2m, 1m4s
    ),
)
ERROR = AnswerKind(
    "error",
    _cues("error errors exception exceptions panic status failure failures traceback"),
    pattern=re.compile(
        r"(?i:\b(?:error|fatal|panic|exception)(?:\[\w+\])?:)"  # error: / fatal: / panic:
        r"|\b[A-Z]\w*(?:Error|Exception):"  # ValueError: ...
        r"|--- FAIL|(?m:^FAIL\b)"  # go test
        r"|(?i:status(?: code)?:? [45]\d\d\b)"  # HTTP status
        r"|(?i:exit(?:ed with)? (?:status|code) [1-9])"  # a command's non-zero exit
        r"|Traceback \(most recent call last\)"
    ),
)
REQUEST = AnswerKind(
    "request",
    _cues(
        "constraint constraints require required requires requirement requirements request "
        "requested requests want wanted wants prefer preferred preference preferences insist "
        "insisted instruct instructed instruction instructions told"
    ),
    role="user",
)
#: every kind a query may ask for
ANSWER_KINDS = (DURATION, ERROR, REQUEST)


def asked_kinds(terms: Iterable[str]) -> tuple[AnswerKind, ...]:
    """The kinds a query with ``terms`` asks for: those with a cue among the terms' words."""
    words = {word for term in terms for word in _WORD.findall(term.lower())}
    return tuple(kind for kind in ANSWER_KINDS if words & kind.cues)


def holds_any(kinds: Iterable[AnswerKind], role: str, text: str) -> bool:
    """Whether a row of ``role`` with ``text`` holds one of ``kinds``."""
    return any(kind.held_by(role, text) for kind in kinds)
