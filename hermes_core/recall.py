"""Recall probes and their scoring: what a compression kept, and what one search finds again.

A probe is a question an engineer resuming a session would ask, with the strings
that answer it verbatim (``transcripts/probes/``). Scoring follows the rules of
``transcripts/probes/README.md`` exactly, so our numbers agree with the reference
scorer beside the probes (``tests/hermes_core/test_recall.py`` checks that they do):

* the *text of a message* is its content (list content reduced to its text
  parts) plus, for each assistant tool call, the function name, the raw
  ``arguments`` string and the decoded string values of that JSON; other keys
  are ignored;
* an answer *matches* as a case-sensitive substring of one message's text;
* *closed-book recall* is the fraction of probes with an answer present in the
  final active context (:func:`closed_book`);
* the *one-search query* of a probe is ``" ".join(content_words(question))``
  (:func:`content_words`): the question's words without common words, first 8.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from hermes_hookspecs import string_values

from .errors import ImportFormatError

ProbeKind = Literal["path", "sha", "error", "decision", "constraint", "number", "command"]

#: Between two messages' texts, so no answer can match across a message boundary.
MESSAGE_SEPARATOR = "\n\x00\n"

#: Words left out of a one-search query (besides words shorter than three characters).
_STOPWORDS = """
a an the of to in on at for by with from what which who whom whose when where why how did
does do was were is are be been being that this these those it its into than then there
their they them his her agent user users asked ask tell said say says first last later again
exact exactly name named about after before while during under over as or and not no yes can
could would should will may might get got make made use used using run ran report reported
show shown kind via per
"""
STOPWORDS = frozenset(_STOPWORDS.split())
QUERY_WORDS = 8
_WORD = re.compile(r"[A-Za-z0-9_./'-]+")


class Probe(BaseModel):
    """One recall probe (a record of a ``transcripts/probes/*.json`` file)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answers: list[str] = Field(min_length=1, description="any one present counts")
    kind: ProbeKind
    message_index: int = Field(
        ge=0, description="first message holding an answer, in the reference importer's list"
    )

    def hit(self, text: str) -> bool:
        """Whether an answer occurs in ``text`` (case-sensitive substring)."""
        return any(answer and answer in text for answer in self.answers)

    def query(self) -> str:
        """The one-search query for this probe."""
        return " ".join(content_words(self.question))


class RecallScore(BaseModel):
    """The recall of a set of probes on one text: the fraction hit, and which were."""

    model_config = ConfigDict(extra="forbid")

    recall: float = Field(ge=0.0, le=1.0)
    hits: list[str] = Field(default_factory=list, description="ids of probes answered")
    misses: list[str] = Field(default_factory=list, description="ids of probes not answered")

    @property
    def total(self) -> int:
        return len(self.hits) + len(self.misses)


_PROBES = TypeAdapter(list[Probe])


def load_probes(path: Path | str) -> list[Probe]:
    """Read a probe file (a JSON list of probes); a bad one raises an error naming what is wrong."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"probes file {path}: {exc.strerror or exc}") from None
    try:
        probes = _PROBES.validate_json(raw)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "expected a JSON list of probes"
        raise ImportFormatError(
            f"probes file {path}: {where}: {first['msg']} ({exc.error_count()} error(s))"
        ) from None
    seen: set[str] = set()
    for probe in probes:
        if probe.id in seen:
            raise ImportFormatError(f"probes file {path}: duplicate probe id {probe.id!r}")
        seen.add(probe.id)
    return probes


# -- the text of a message ----------------------------------------------------------------------
def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif isinstance(part.get("content"), str):
                    parts.append(part["content"])
        return "\n".join(parts)
    if isinstance(content, dict):
        for key in ("text", "text_summary", "content"):
            if isinstance(content.get(key), str):
                return str(content[key])
    return str(content)


def message_text(message: dict[str, Any]) -> str:
    """The searchable text of one OpenAI chat message: content, then tool-call names and arguments.

    For each tool call: the function name, the raw ``arguments`` string (a non-string
    value is JSON-encoded first) and, when it parses as JSON, its decoded string
    leaves, so an answer holding quotes, newlines or backslashes matches although the
    raw JSON escapes them.
    """
    parts = [_content_text(message.get("content"))]
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        name = function.get("name")
        if isinstance(name, str):
            parts.append(name)
        arguments = function.get("arguments")
        if arguments is None:
            continue
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        parts.append(arguments)
        try:
            decoded = json.loads(arguments)
        except ValueError:
            continue
        parts.extend(string_values(decoded))
    return "\n".join(part for part in parts if part)


def messages_text(messages: Iterable[dict[str, Any]]) -> str:
    """The text of a message list, messages kept apart so no answer spans two of them."""
    return MESSAGE_SEPARATOR.join(message_text(message) for message in messages)


# -- scoring ------------------------------------------------------------------------------------
def score_text(text: str, probes: Sequence[Probe]) -> RecallScore:
    """Recall of ``probes`` on one text (a context's, or what a search returned)."""
    hits: list[str] = []
    misses: list[str] = []
    for probe in probes:
        (hits if probe.hit(text) else misses).append(probe.id)
    return RecallScore(recall=len(hits) / len(probes) if probes else 0.0, hits=hits, misses=misses)


def closed_book(messages: Sequence[dict[str, Any]], probes: Sequence[Probe]) -> RecallScore:
    """Closed-book recall: probes answered by the message list itself (system, summary and all)."""
    return score_text(messages_text(messages), probes)


def content_words(question: str, k: int = QUERY_WORDS) -> list[str]:
    """The one-search query words of ``question``: its words (letters, digits, ``_ . / ' -``)
    without :data:`STOPWORDS` and words shorter than three characters, the first ``k``."""
    words = [
        word
        for word in _WORD.findall(question)
        if word.lower().strip("'") not in STOPWORDS and len(word) > 2
    ]
    return words[:k]
