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
  ``elapsed``, ...); held by a row with a number and a time unit, written
  together as tools print them (``71.6s``, ``250ms``, ``1m4s``, ``1h2m3s``)
  or spelled (``3 seconds``, ``2 min``).
* ``error``: nouns naming a failure (``error``, ``exception``, ``panic``,
  ``failure``, ``traceback``); held by a row with an error line (``error:``,
  ``fatal:``, ``panic:``, ``ValueError:``, ``--- FAIL``, a line starting
  ``FAIL`` or ``FAILED``, an HTTP status 4xx/5xx after ``status`` or
  ``HTTP`` (``HTTP/1.1 503``, ``HTTP 502``), a non-zero exit status or code,
  a Python traceback). Code that merely mentions errors (``func f() error``) does not
  hold it, nor a message template (``t.Fatalf("sync error: %v", err)``: an
  error line whose rest holds a placeholder is code that would report one).
* ``request``: words of what someone asked for (``constraint``,
  ``require``, ``requirement``, ``want``, ``request``, ``prefer``,
  ``instruction``, ...); held by a message the user wrote (role ``user``;
  text a harness injected is placed after every other hit by
  :func:`hermes_core.search.search_with_context`), and by a compaction
  summary's line under its Goal or Constraints heading (the user's words:
  :data:`hermes_core.search.USER_SECTIONS`).
* ``hex_id``: words naming a commit or content id (``sha``, ``hash``,
  ``head``: "what was the HEAD commit"); held by a row holding a SHA as
  :mod:`hermes_core.identifiers` finds one (a word of 7-40 lower-case hex
  digits with both a digit and a letter: ``ba8e2c6f``, a full SHA-1).
  ``commit`` alone is no cue: "the commit message", "did it
  commit".
* ``http_status``: two words together (:attr:`AnswerKind.cue_pairs`):
  ``http status``, ``status code``, ``http code``, ``response code``,
  ``response status`` ("what HTTP status came back from the endpoint");
  held by a row with an HTTP status code as tools print one
  (``status code: 500``, ``status 404``, ``HTTP/1.1 503``, ``HTTP 502``).

Words with other common senses are not cues: verbs describing a
circumstance (``failed``, ``failing``: "the command that failed" asks for a
command), ``take`` ("which approach did we take") and ``status`` alone ("git
status", "the status of the migration").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from hermes_core.identifiers import has_sha

#: a row holding a kind the query asks for has its within-tier score multiplied by 1 + this
KIND_BONUS = 0.5

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class AnswerKind:
    """A kind of answer: the query words that ask for it, and how a row holds it."""

    name: str
    cues: frozenset[str]
    #: whether a text holds the kind (None: the author decides)
    test: Callable[[str], bool] | None = None
    #: a row by this role holds the kind
    role: str | None = None
    #: pairs of words that ask for the kind together, where neither alone does
    #: (``status code``: "status" alone is "git status")
    cue_pairs: frozenset[frozenset[str]] = frozenset()

    def asked_by(self, words: set[str]) -> bool:
        """Whether a query with ``words`` (case folded) asks for this kind."""
        return not self.cues.isdisjoint(words) or any(pair <= words for pair in self.cue_pairs)

    def held_by(self, role: str, text: str) -> bool:
        """Whether a row of ``role`` with ``text`` holds this kind."""
        if self.role is not None and role == self.role:
            return True
        return self.test is not None and self.test(text)


def _cues(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _cue_pairs(*pairs: str) -> frozenset[frozenset[str]]:
    return frozenset(_cues(pair) for pair in pairs)


def _occurrences(text: str, needle: str) -> Iterator[int]:
    at = text.find(needle)
    while at >= 0:
        yield at
        at = text.find(needle, at + 1)


def _starts_word(text: str, at: int) -> bool:
    return at == 0 or not (text[at - 1].isalnum() or text[at - 1] in "_.")


# (each test looks for a literal or a digit first: a pattern led by a lookbehind or
# a case-insensitive alternation costs ten times as much on a 30 KB file read)
#: a number (each run of digits matched once: no rescan of a long run from its every digit)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: a time unit written together with its number, as tools print them (``71.643s``,
#: ``250ms``, Go's ``1m4s`` / ``1h2m3s``); a unit spelled out is not one: a harness's
#: ``Wall time: 0.61 seconds`` wraps every command's output
_UNIT = re.compile(r"(?:ns|µs|us|ms|s|m(?:\d+(?:\.\d+)?s)?|h(?:\d+m)?(?:\d+(?:\.\d+)?s)?)(?!\w)")


def has_duration(text: str) -> bool:
    """A number with a time unit written together: ``71.643s``, ``250ms``, ``1m4s``, ``1h2m3s``."""
    return any(
        _starts_word(text, match.start()) and _UNIT.match(text, match.end()) is not None
        for match in _NUMBER.finditer(text)
    )


_AFTER_MARK = re.compile(r"(?:\[\w+\])?:")
#: an HTTP status code after ``status`` / ``status code`` (in lower case text), its class
#: (first digit) grouped
_STATUS = re.compile(r"status(?: code)?:? ([1-5])\d\d(?!\d)")
_EXIT = re.compile(r"exit(?:ed with)? (?:status|code) [1-9]")
_FAIL_LINE = re.compile(r"(?:^|\n)FAIL(?:ED)?(?!\w)")  # go test's FAIL, pytest's FAILED
#: an HTTP status code after ``HTTP`` (a status line, ``HTTP/1.1 503``; ``HTTP 502``)
_HTTP_STATUS = re.compile(r"HTTP(?:/\d(?:\.\d)?)? ([1-5])\d\d(?!\d)")
#: a placeholder of a message template: printf's (``%v``, ``%w``, ``%s``, ``%d``, ``%q``, ``%r``:
#: Go, C, Python's ``%``), ``str.format``'s and f-strings' (``{}``, ``{0}``, ``{err}``, ``{e!r}``)
_PLACEHOLDER = re.compile(r"%[-+# 0]?\d*[vwsdqxr]|\{[\w.]{0,24}(?:![rsa])?\}")
#: a template's placeholder is looked for this far past its error mark, on the same line
TEMPLATE_REACH = 200


def _template(text: str, at: int) -> bool:
    """Whether the error mark at ``at`` stands in a message template: the rest of its
    line (within :data:`TEMPLATE_REACH` characters) holds a placeholder."""
    end = text.find("\n", at, at + TEMPLATE_REACH)
    return _PLACEHOLDER.search(text, at, at + TEMPLATE_REACH if end < 0 else end) is not None


def has_http_status(text: str, classes: str = "12345") -> bool:
    """An HTTP status code as tools print one, of one of ``classes`` (first digits): after
    ``status`` or ``status code`` (``status code: 500``), or after ``HTTP`` (``HTTP/1.1
    503``, ``HTTP 502``)."""
    lower = text.lower()
    if "status" in lower and any(m.group(1) in classes for m in _STATUS.finditer(lower)):
        return True
    return "HTTP" in text and any(m.group(1) in classes for m in _HTTP_STATUS.finditer(text))


def has_error_line(text: str) -> bool:
    """An error line: ``error:``, ``fatal:``, ``panic:``, ``exception:`` (any case, also
    ``error[E0308]:``), ``ValueError:``, ``--- FAIL``, a line starting ``FAIL`` or
    ``FAILED``, an HTTP status 4xx/5xx (:func:`has_http_status`), a non-zero exit status
    or code, a Python traceback; not a message template's (:func:`_template`)."""
    if "--- FAIL" in text or "Traceback (most recent call last)" in text:
        return True
    if "FAIL" in text and _FAIL_LINE.search(text):
        return True
    for needle in ("Error:", "Exception:"):  # ValueError:, RuntimeException:
        if any(
            at > 0 and text[at - 1].isalpha() and not _template(text, at)
            for at in _occurrences(text, needle)
        ):
            return True
    lower = text.lower()
    for word in ("error", "fatal", "panic", "exception"):
        for at in _occurrences(lower, word):
            if (
                _starts_word(lower, at)
                and _AFTER_MARK.match(lower, at + len(word))
                and not _template(text, at)
            ):
                return True
    if has_http_status(text, "45"):
        return True
    return "exit" in lower and _EXIT.search(lower) is not None


DURATION = AnswerKind(
    "duration",
    _cues(
        "long longer took duration durations elapsed latency runtime "
        "timing timings seconds minutes hours"
    ),
    test=has_duration,
)
ERROR = AnswerKind(
    "error",
    _cues("error errors exception exceptions panic failure failures traceback"),
    test=has_error_line,
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
HEX_ID = AnswerKind("hex_id", _cues("sha shas hash hashes head"), test=has_sha)
HTTP_STATUS = AnswerKind(
    "http_status",
    frozenset(),
    test=has_http_status,
    cue_pairs=_cue_pairs(
        "http status", "status code", "http code", "response code", "response status"
    ),
)
#: every kind a query may ask for
ANSWER_KINDS = (DURATION, ERROR, REQUEST, HEX_ID, HTTP_STATUS)


def asked_kinds(terms: Iterable[str]) -> tuple[AnswerKind, ...]:
    """The kinds a query with ``terms`` asks for: those with a cue (or both words of a
    cue pair) among the terms' words."""
    words = {word for term in terms for word in _WORD.findall(term.lower())}
    return tuple(kind for kind in ANSWER_KINDS if kind.asked_by(words))


def holds_any(kinds: Iterable[AnswerKind], role: str, text: str) -> bool:
    """Whether a row of ``role`` with ``text`` holds one of ``kinds``; ``role`` ``""``
    when the author is not known (a line of a compaction summary outside the user's
    sections): a kind held only by its author (``request``) then never counts."""
    return any(kind.held_by(role, text) for kind in kinds)
