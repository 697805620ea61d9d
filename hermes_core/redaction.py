"""The redaction step: applies :class:`~hermes_hookspecs.RedactionRule` s to text that leaves.

Rules come from the ``redaction_rules`` hook (the ``redaction`` plugin ships
the defaults) and are applied one after another in ``name`` order, so the
outcome never depends on plugin load order. A :class:`Redactor` is immutable
after construction and safe to share between threads.

The same rules guard every text bound for an auxiliary service, at one place
each: the :class:`~hermes_core.memory.MemoryManager` redacts what it hands to
memory providers, the host wraps every summarizer it hands out in a
:class:`RedactingSummarizer` (so any summarizer, default or third-party, sees
redacted input), and :class:`RedactingLogFilter` scrubs the log records of the
``hermes_core`` and ``hermes_plugin_*`` loggers. The main model's own requests
are the integrator's: they are sent as the session holds them.
"""

from __future__ import annotations

import json
import logging
import operator
import re
import string
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import ahocorasick
from pydantic import BaseModel

from hermes_hookspecs import (
    HandoffSummary,
    Message,
    RedactionRule,
    RegistrationError,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    ToolCall,
    ToolFunction,
    TurnRecord,
)

# ---------------------------------------------------------------------------
# prefilters: skip a rule at once when a literal all its matches contain is absent
# ---------------------------------------------------------------------------


class _Unsupported(Exception):
    """The pattern uses a construct the literal analysis does not follow."""


def _leading(node: Any) -> str:
    """The literal characters a parsed sequence starts with."""
    from re import _constants as c  # type: ignore[attr-defined]

    head: list[str] = []
    for op, av in node.data:
        if op is not c.LITERAL:
            break
        head.append(chr(av))
    return "".join(head)


#: a literal set one of which every match holds (or, from a lookaround, the text), and the
#: most characters between the match's start and it (None: unbounded, or not in the match)
_Candidate = tuple[set[str], int | None]


def _candidates(node: Any) -> list[_Candidate]:
    """Every literal set the parsed ``node`` requires (see :data:`_Candidate`), in the order
    the sequence reads: literal runs, groups, repeats of at least one, alternations whose
    every branch has one (also the common prefix the parser took out of the branches, glued
    back to each), positive lookarounds. A group with its own flags is :class:`_Unsupported`."""
    from re import _constants as c  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]

    out: list[_Candidate] = []
    offset: int | None = 0  # the most characters the items so far can match
    run: list[str] = []
    run_at: int | None = 0

    def shifted(found: list[_Candidate]) -> list[_Candidate]:
        return [(lits, None if at is None or offset is None else offset + at) for lits, at in found]

    for op, av in node.data:
        if op is c.LITERAL:
            if not run:
                run_at = offset
            run.append(chr(av))
            offset = None if offset is None else offset + 1
            continue
        previous = "".join(run)
        if run:
            out.append(({previous}, run_at))
            run = []
        if op is c.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags or del_flags:  # local flags change how literals match
                raise _Unsupported
            out += shifted(_candidates(sub))
        elif op is c.ATOMIC_GROUP:
            out += shifted(_candidates(av))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            if av[0] >= 1:  # the first repetition starts here
                out += shifted(_candidates(av[2]))
        elif op is c.BRANCH:
            options = [_usable(_candidates(alternative)) for alternative in av[1]]
            if all(options):
                # the best each branch offers, for the prefilter and for the anchor
                picked = [_best_required(found) for found in options]
                out.append((set().union(*(lits for lits, _at in picked)), None))
                anchors = [_best_anchor(found) for found in options]
                reaches = [found[1] for found in anchors if found is not None]
                if len(reaches) == len(anchors):
                    union = set().union(*(found[0] for found in anchors if found is not None))
                    out += shifted([(union, max(r for r in reaches if r is not None))])
            heads = [_leading(alternative) for alternative in av[1]]
            if previous and all(heads):
                out.append(({previous + head for head in heads}, run_at))
        elif op is c.ASSERT:  # a lookahead or lookbehind: the text holds what it asserts
            out += [(lits, None) for lits, _at in _candidates(av[1])]
        # negative assertions, classes, references...: nothing every match must contain
        if offset is not None:
            width = _parser.SubPattern(node.state, [(op, av)]).getwidth()[1]
            offset = offset + width if offset + width <= ANCHOR_REACH else None
    if run:
        out.append(({"".join(run)}, run_at))
    return out


def _best_required(found: list[_Candidate]) -> _Candidate:
    """The candidate whose shortest literal is longest (the first of equals); the
    prefilter's choice (any set of literals of two or more characters will do)."""
    best = found[0]
    for candidate in found[1:]:
        if min(map(len, candidate[0])) > min(map(len, best[0])):
            best = candidate
    return best


def _best_anchor(found: list[_Candidate]) -> _Candidate | None:
    """The anchor's choice among candidates within :data:`ANCHOR_REACH` (or None): each
    occurrence costs a try at ``reach + 1`` positions, so literals of three or more
    characters (rarer) first, then the nearest to the match's start, then the longest."""

    def value(candidate: _Candidate) -> tuple[bool, int, int]:
        shortest = min(map(len, candidate[0]))
        return shortest >= 3, -(candidate[1] or 0), shortest

    usable = [c for c in found if c[1] is not None and c[1] <= ANCHOR_REACH]
    return max(usable, key=value) if usable else None


def _usable(found: list[_Candidate]) -> list[_Candidate]:
    """The candidates whose literals all have two or more characters (one is too common)."""
    return [c for c in found if c[0] and min(map(len, c[0])) >= 2]


def _required(node: Any) -> set[str] | None:
    """Literal strings one of which every match of the parsed ``node`` contains (or the
    text holds, for a lookaround), or None."""
    found = _usable(_candidates(node))
    return _best_required(found)[0] if found else None


#: a rule runs only where its literals are when every match starts at most this many
#: characters before one of them (:func:`anchor`); otherwise over the whole text
ANCHOR_REACH = 64


def _anchor_of(node: Any) -> tuple[set[str], int] | None:
    """``(literals, reach)``: every match of the parsed ``node`` holds one of ``literals``
    starting at most ``reach`` characters after the match starts (or None)."""
    best = _best_anchor(_usable(_candidates(node)))
    return None if best is None or best[1] is None else (best[0], best[1])


class Literals:
    """Literal strings searched as a rule's pattern would match them.

    An ASCII literal is found by ``str.find``: without ``IGNORECASE`` in the
    text, with it in the text case-folded the way the pattern compares
    (:func:`folded`). A non-ASCII literal under ``IGNORECASE`` is left to the
    alternation of the literals, searched with the rule's flags. ``str.find``
    is many times faster than the regular expression engine on an alternation
    of words.
    """

    def __init__(self, literals: Iterable[str], flags: int) -> None:
        words = sorted(set(literals))
        self.pattern = re.compile("|".join(map(re.escape, words)), flags & ~re.VERBOSE)
        self.fold = bool(flags & re.IGNORECASE)
        self._plain = not self.fold or all(word.isascii() for word in words)
        self._words = tuple(word.lower() for word in words) if self.fold else tuple(words)
        #: ``(fold, word)`` of each literal as ``str.find`` looks for it (None: the regex does)
        self.keys = tuple((self.fold, word) for word in self._words) if self._plain else None

    def present(self, text: str, fold: str) -> bool:
        """Whether ``text`` holds one of the literals (``fold``: :func:`folded` of it)."""
        if not self._plain:
            return self.pattern.search(text) is not None
        haystack = fold if self.fold else text
        return any(word in haystack for word in self._words)

    def count(self, text: str, fold: str) -> int:
        """About how many occurrences ``text`` holds (``str.count``; non-overlapping)."""
        if not self._plain:
            return len(self.pattern.findall(text))
        haystack = fold if self.fold else text
        return sum(haystack.count(word) for word in self._words)

    def starts(self, text: str, fold: str) -> list[int]:
        """Every position where one of the literals starts, overlapping ones included, in order."""
        found: set[int] = set()
        if not self._plain:
            match = self.pattern.search(text)
            while match is not None:
                found.add(match.start())
                match = self.pattern.search(text, match.start() + 1)
            return sorted(found)
        haystack = fold if self.fold else text
        for word in self._words:
            at = haystack.find(word)
            while at >= 0:
                found.add(at)
                at = haystack.find(word, at + 1)
        return sorted(found)


#: the characters outside ASCII that ``IGNORECASE`` matches to an ASCII letter: dotted and
#: dotless i, long s, the Kelvin sign (a test scans every code point with the engine to
#: keep this list true)
FOLDED_TO_ASCII = "\u0130\u0131\u017f\u212a"
_FOLD: dict[int, int] | None = None


def _fold_table() -> dict[int, int]:
    """Each character that ``IGNORECASE`` matches to an ASCII letter -> that letter, lower
    case: ``A``-``Z`` and :data:`FOLDED_TO_ASCII`, each letter found by the engine itself."""
    global _FOLD
    if _FOLD is None:
        table = {ord(upper): ord(upper.lower()) for upper in string.ascii_uppercase}
        for char in FOLDED_TO_ASCII:
            letter = next(a for a in string.ascii_lowercase if re.fullmatch(f"(?i){a}", char))
            table[ord(char)] = ord(letter)
        _FOLD = table
    return _FOLD


def folded(text: str) -> str:
    """``text`` with every character ``IGNORECASE`` matches to an ASCII letter replaced by
    that letter in lower case, and nothing else changed: as long as ``text``, so a
    position in one is the same position in the other (what :class:`Literals` searches)."""
    if text.isascii():
        return text.lower()
    if any(char in text for char in FOLDED_TO_ASCII):
        return text.translate(_fold_table())
    # no character outside ASCII folds to an ASCII letter, and none lower-cases to one or
    # to several (``İ`` is the only one that does, and it is in the table): lower() is it
    return text.lower()


def _parsed(pattern: re.Pattern[str]) -> Any:
    from re import _parser  # type: ignore[attr-defined]

    return _parser.parse(pattern.pattern, pattern.flags)


def anchor(pattern: re.Pattern[str]) -> tuple[Literals, int] | None:
    """Where a match of ``pattern`` can start: ``(literals, reach)``, or None when unknown.

    Every match holds one of ``literals`` (searched with the pattern's own
    flags) starting at most ``reach`` characters (at most
    :data:`ANCHOR_REACH`) after the match's start; so a match can start only
    in the ``reach`` characters before an occurrence, and :class:`Redactor`
    tries the pattern there alone instead of at every position of the text
    (the same matches: :func:`anchored_sub`). Read from the parsed pattern
    like :func:`prefilter`: literal runs, groups, repeats of at least one and
    alternations whose every branch has one, each after items of bounded
    width; a group with its own flags stops the analysis.
    """
    try:
        found = _anchor_of(_parsed(pattern))
    except Exception:  # an unknown construct or a changed private parser: no anchor
        return None
    if found is None:
        return None
    return Literals(found[0], pattern.flags), found[1]


def anchored_sub(
    pattern: re.Pattern[str], replacement: str, text: str, starts: list[int], reach: int
) -> str:
    """``pattern.sub(replacement, text)`` for a pattern whose every match starts at most
    ``reach`` characters before one of ``starts`` (:func:`anchor`).

    Only the positions in those windows are tried, in order (``pattern.match(text,
    position)`` is the attempt a search makes there, lookbehinds included): when
    none matches, no match exists and ``text`` is returned as it is; at the first
    that does, ``sub`` itself runs (a text that needs redacting is rare, and
    ``sub`` replaces faster than a loop here could).
    """
    tried = -1  # every start up to here was tried
    for at in starts:
        for start in range(max(tried + 1, at - reach), at + 1):
            if pattern.match(text, start) is not None:
                return pattern.sub(replacement, text)
        tried = at
    return text


def _literals_of(pattern: re.Pattern[str]) -> set[str] | None:
    try:
        return _required(_parsed(pattern))
    except Exception:  # an unknown construct or a changed private parser: none known
        return None


def prefilter(pattern: re.Pattern[str]) -> re.Pattern[str] | None:
    """A cheap pattern that finds text a match of ``pattern`` needs, or None when none is known.

    The literal strings one of which every match contains (or the text holds,
    for a lookahead or lookbehind) are read from the parsed pattern (only
    sequences, groups, repeats of at least one, positive assertions and
    alternations whose every branch has one are followed; a group with its
    own flags stops the analysis). They are searched with the pattern's own
    flags, so case-insensitivity and the rest mean the same as in the rule
    (:class:`Redactor` searches them as :class:`Literals`).
    """
    literals = _literals_of(pattern)
    return Literals(literals, pattern.flags).pattern if literals else None


@dataclass(frozen=True)
class _Compiled:
    """One rule, compiled: its pattern and replacement, the literals a text must hold
    (:func:`prefilter`) and where its matches can start (:func:`anchor`)."""

    pattern: re.Pattern[str]
    replacement: str
    required: Literals | None
    anchor: tuple[Literals, int] | None

    @classmethod
    def of(cls, rule: RedactionRule) -> _Compiled:
        pattern = re.compile(rule.pattern)
        literals = _literals_of(pattern)
        required = Literals(literals, pattern.flags) if literals else None
        return cls(pattern, rule.replacement, required, anchor(pattern))

    def apply(self, text: str, fold: str, *, checked: bool = False) -> str:
        """``text`` with this rule applied: ``pattern.sub``, found faster (``fold``:
        :func:`folded` of ``text``; ``checked``: the caller saw that the text holds
        one of the literals the rule requires, when they have ``keys``)."""
        required = self.required
        unchecked = required is not None and not (checked and required.keys is not None)
        if unchecked and required is not None and not required.present(text, fold):
            return text  # the rule cannot match: a literal every match holds is absent
        if self.anchor is not None:
            literals, reach = self.anchor
            # windows covering more than a quarter of the text: sub is cheaper
            if literals.count(text, fold) * (reach + 1) <= len(text) // 4 + 64:
                starts = literals.starts(text, fold)
                return anchored_sub(self.pattern, self.replacement, text, starts, reach)
        return self.pattern.sub(self.replacement, text)


_second = operator.itemgetter(1)


class Redactor:
    """Apply redaction rules to text, messages, nested values and turn records.

    :param rules: the rules to apply; sorted by ``name`` here. Two rules with
        the same name are a :class:`~hermes_hookspecs.RegistrationError`
        (the order between them would be undefined).
    """

    def __init__(self, rules: Iterable[RedactionRule]) -> None:
        ordered = sorted(rules, key=lambda rule: rule.name)
        seen: set[str] = set()
        for rule in ordered:
            if rule.name in seen:
                raise RegistrationError(
                    f"redaction rule name {rule.name!r} is contributed twice; rule names "
                    "must be unique (block one plugin or rename the rule)"
                )
            seen.add(rule.name)
        self._rules: tuple[RedactionRule, ...] = tuple(ordered)
        self._compiled = tuple(_Compiled.of(rule) for rule in ordered)
        # every rule's required literals, looked for once per text rather than once per rule:
        # a rule runs when the text holds one of its literals, or when it has none that
        # str.find can look for
        self._always: list[int] = []
        self._by_key: dict[tuple[bool, str], list[int]] = {}
        for index, compiled in enumerate(self._compiled):
            keys = compiled.required.keys if compiled.required is not None else None
            if keys is None:
                self._always.append(index)
            for key in keys or ():
                self._by_key.setdefault(key, []).append(index)
        # the keys are found in one pass over the text (and one over its folded form)
        # by an Aho-Corasick automaton, not by a scan of the text for each key
        self._key_rules: list[list[int]] = list(self._by_key.values())
        self._scans: list[tuple[bool, ahocorasick.Automaton]] = []
        for folds in (False, True):
            automaton = ahocorasick.Automaton()
            for number, (case_blind, literal) in enumerate(self._by_key):
                if case_blind is folds:
                    automaton.add_word(literal, number)
            if len(automaton):
                automaton.make_automaton()
                self._scans.append((folds, automaton))

    @classmethod
    def from_hook(cls, hook: Any) -> Redactor:
        """Collect rules from a pluggy hook relay (``plugin_manager.hook``).

        Every ``redaction_rules`` implementation is called; ``None`` results are
        skipped; anything that is not a :class:`RedactionRule` is a
        :class:`~hermes_hookspecs.RegistrationError` naming the offending value.
        """
        rules: list[RedactionRule] = []
        for result in hook.redaction_rules():
            if result is None:
                continue
            for rule in result:
                if not isinstance(rule, RedactionRule):
                    raise RegistrationError(
                        f"redaction_rules returned {rule!r:.80}; expected RedactionRule objects"
                    )
                rules.append(rule)
        return cls(rules)

    @property
    def rules(self) -> tuple[RedactionRule, ...]:
        """The rules in the order they are applied."""
        return self._rules

    # -- text ---------------------------------------------------------------
    def redact(self, text: str) -> str:
        """``text`` with every rule applied in name order."""
        if not text:
            return text
        fold = folded(text)
        for index in self._todo(text, fold):
            redacted = self._compiled[index].apply(text, fold, checked=True)
            if redacted is not text:
                # the later rules see the new text, each checking its own literals (a text
                # that needs redacting is rare; scanning it for every key again is not cheap)
                text, fold = redacted, folded(redacted)
                for later in self._compiled[index + 1 :]:
                    redacted = later.apply(text, fold)
                    if redacted is not text:
                        text, fold = redacted, folded(redacted)
                break
        return text

    def _todo(self, text: str, fold: str) -> list[int]:
        """The rules that can match ``text``, in order: those without keys, and those
        with a key the text (or, for a case-blind key, its folded form) holds."""
        picked = set(self._always)
        for folds, automaton in self._scans:
            for number in set(map(_second, automaton.iter(fold if folds else text))):
                picked.update(self._key_rules[number])
        return sorted(picked)

    def redact_value(self, value: Any) -> Any:
        """A copy of a JSON-like value (dicts, lists, tuples) with every string redacted.

        Dict keys are kept as they are; non-string scalars pass unchanged. The
        walk uses an explicit stack, so a value nested thousands deep is
        redacted like any other (no ``RecursionError``).
        """
        if isinstance(value, str):
            return self.redact(value)
        if not isinstance(value, dict | list | tuple):
            return value
        root: list[Any] = [None]
        # (source container, target container, key in target's parent is already set)
        stack: list[tuple[Any, Any]] = []

        def copy_of(item: Any) -> Any:
            if isinstance(item, str):
                return self.redact(item)
            if isinstance(item, dict):
                target: Any = {}
            elif isinstance(item, list | tuple):
                target = []
            else:
                return item
            stack.append((item, target))
            return target

        root[0] = copy_of(value)
        while stack:
            source, target = stack.pop()
            if isinstance(source, dict):
                for key, item in source.items():
                    target[key] = copy_of(item)
            else:
                target.extend(copy_of(item) for item in source)
        return root[0]

    def redact_any(self, value: Any) -> Any:
        """A redacted copy of any value: messages and summaries as below, other models field by
        field, strings, lists, tuples and dict values; other scalars unchanged."""
        if isinstance(value, Message):
            return self.redact_message(value)
        if isinstance(value, HandoffSummary):
            return self.redact_summary(value)
        if isinstance(value, BaseModel):  # field by field; enums and numbers come back as they are
            fields = type(value).model_fields
            return value.model_copy(
                update={name: self.redact_any(getattr(value, name)) for name in fields}
            )
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {key: self.redact_any(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_any(item) for item in value]
        return value

    # -- structured ---------------------------------------------------------
    def redact_message(self, message: Message) -> Message:
        """A redacted copy of ``message``.

        Covered: text content (a string, or the ``text`` of content parts),
        tool-call arguments (parsed, every string value redacted, re-encoded so
        they stay valid JSON) and the fields of a handoff ``summary``. The
        opaque ``provider_item`` of a compaction message is provider-encrypted
        state, not text, and is passed unchanged.
        """
        update: dict[str, Any] = {}
        if isinstance(message.content, str):
            update["content"] = self.redact(message.content)
        elif isinstance(message.content, list):
            update["content"] = [self._redact_part(part) for part in message.content]
        if message.tool_calls:
            update["tool_calls"] = [self._redact_call(call) for call in message.tool_calls]
        if message.summary is not None:
            update["summary"] = self.redact_summary(message.summary)
        return message.model_copy(update=update)

    def redact_messages(self, messages: Iterable[Message]) -> list[Message]:
        """:meth:`redact_message` applied to each message."""
        return [self.redact_message(message) for message in messages]

    def redact_turn(self, turn: TurnRecord) -> TurnRecord:
        """A redacted copy of a committed turn (texts and messages)."""
        return turn.model_copy(
            update={
                "user_text": self.redact(turn.user_text),
                "assistant_text": self.redact(turn.assistant_text),
                "messages": self.redact_messages(turn.messages),
            }
        )

    def _redact_part(self, part: dict[str, Any]) -> dict[str, Any]:
        if isinstance(part.get("text"), str):
            return {**part, "text": self.redact(part["text"])}
        return dict(part)

    def _redact_call(self, call: ToolCall) -> ToolCall:
        parsed = json.loads(call.function.arguments)  # valid JSON: checked by ToolFunction
        redacted = self.redact_value(parsed)
        if redacted == parsed:
            return call  # keep the original bytes
        arguments = json.dumps(redacted, ensure_ascii=False)
        return call.model_copy(
            update={"function": ToolFunction(name=call.function.name, arguments=arguments)}
        )

    def redact_summary(self, summary: HandoffSummary) -> HandoffSummary:
        """A redacted copy of a handoff summary: every field but ``summarizer`` (a name).

        Standard and extra sections, the facts it was built from, and any field a
        later version adds go through :meth:`redact_any`.
        """
        return summary.model_copy(
            update={
                name: self.redact_any(getattr(summary, name))
                for name in type(summary).model_fields
                if name != "summarizer"
            }
        )


# ---------------------------------------------------------------------------
# summarizers: every request is redacted before a summarizer sees it
# ---------------------------------------------------------------------------


#: fields of a summary request that are identifiers, not text, and pass unchanged
SUMMARY_REQUEST_IDS = frozenset({"session_id", "model"})


def redact_summary_request(redactor: Redactor, request: SummaryRequest) -> SummaryRequest:
    """A copy of ``request`` with every text redacted.

    Every field but the identifiers in :data:`SUMMARY_REQUEST_IDS` goes
    through :meth:`Redactor.redact_any`: the messages, the previous summary,
    insights, focus, facts, the reused prefix and its tool schemas, and any
    field a later version adds (redacted by default, so a new text field
    cannot leak). A reused prefix differs from the main model's bytes only
    where a secret was removed, so a provider cache still serves it up to there.
    """
    # a request repeats texts (fact kinds, paths, outcomes): each is redacted once; a
    # subclass may redact more than its rules do, so it is asked as it is
    once = _OnceRedactor(redactor) if type(redactor) is Redactor else redactor
    update = {
        name: once.redact_any(getattr(request, name))
        for name in type(request).model_fields
        if name not in SUMMARY_REQUEST_IDS
    }
    return request.model_copy(update=update)


class _OnceRedactor(Redactor):
    """``redactor``'s rules, each distinct text redacted once: for one request only.

    A summary request holds the same strings many times (every fact's ``kind``, a
    working directory in each fact, a rerun's identical output); redacting each
    once gives the same result (a plain :class:`Redactor`'s ``redact`` is a function
    of the text) in about a fifth less time. It lives as long as one request, so it
    holds no text beyond it.
    """

    def __init__(self, redactor: Redactor) -> None:  # the rules are shared, not re-checked
        self._inner = redactor
        self._rules = redactor.rules
        self._done: dict[str, str] = {}

    def redact(self, text: str) -> str:
        done = self._done.get(text)
        if done is None:
            done = self._done[text] = self._inner.redact(text)
        return done


class RedactingSummarizer(Summarizer):
    """Wraps a summarizer so that it only ever receives redacted requests.

    The wrapper takes the inner summarizer's ``name`` and ``context_length``
    and forwards any other attribute (``max_output_tokens``...) to it, so
    code that reads a summarizer's settings sees the real ones.

    :param inner: the summarizer chosen by name (any implementation).
    :param redactor: the rules to apply (the host's).
    """

    def __init__(self, inner: Summarizer, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor
        self.name = inner.name
        self.context_length = inner.context_length

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        return self.inner.summarize(redact_summary_request(self.redactor, request))

    def __getattr__(self, attr: str) -> Any:
        # only called for attributes the wrapper lacks; "inner" is set first in __init__
        if attr == "inner":
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def __repr__(self) -> str:
        return f"RedactingSummarizer({self.inner!r})"


# ---------------------------------------------------------------------------
# logs: the same rules over hermes-core's own log records
# ---------------------------------------------------------------------------

#: logger name prefixes whose records are redacted
LOGGER_PREFIXES = ("hermes_core", "hermes_plugin_")


class RedactingLogFilter(logging.Filter):
    """A logging filter that redacts a record's message, arguments and traceback text.

    The record is rewritten in place (``msg`` becomes the redacted, formatted
    message and ``args`` empty; a traceback is formatted now and redacted into
    ``exc_text``), so every handler downstream sees only redacted text. It
    never drops a record. Attach it to a logger or a handler; the host attaches
    one to the ``hermes_core`` and ``hermes_plugin_*`` loggers
    (:func:`install_log_redaction`).
    """

    def __init__(self, *redactors: Redactor) -> None:
        super().__init__()
        self._redactors = list(redactors)

    def redactors(self) -> list[Redactor]:
        """The rules applied, in order."""
        return list(self._redactors)

    def redact(self, text: str, redactors: Iterable[Redactor] | None = None) -> str:
        for redactor in self.redactors() if redactors is None else redactors:
            text = redactor.redact(text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_hermes_redacted", False):
            return True
        rules = self.redactors()  # one set of rules for every part of the record
        if not rules:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a broken format: leave it to the handler to report
            return True
        record.msg = self.redact(message, rules)
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text, rules)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info, rules)
        setattr(record, "_hermes_redacted", True)  # noqa: B010 - LogRecord has no such field
        return True


class _LiveHostsFilter(RedactingLogFilter):
    """The one filter on the hermes-core loggers: the rules of every host alive in the
    process, oldest host first.

    The loggers are the process's, not a host's, so a record is redacted with the
    rules of each live host: a second host (another tenant of a gateway) must not
    take the first one's rules away. A host's redactor is held weakly, so a host
    dropped without :meth:`~hermes_core.host.Hermes.close` takes its rules along
    once it is collected.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._live: list[weakref.ref[Redactor]] = []

    def redactors(self) -> list[Redactor]:
        return [r for r in (ref() for ref in list(self._live)) if r is not None]

    def add(self, redactor: Redactor) -> None:
        with self._lock:
            if not any(ref() is redactor for ref in self._live):
                self._live.append(weakref.ref(redactor, self._collected))

    def _collected(self, ref: weakref.ref[Redactor]) -> None:
        with self._lock:
            self._live = [live for live in self._live if live is not ref]

    def discard(self, redactor: Redactor) -> None:
        with self._lock:
            self._live = [ref for ref in self._live if ref() not in (None, redactor)]


#: the process's logging is global state: one filter, holding the live hosts' rules
_LOG_FILTER = _LiveHostsFilter()
#: the loggers the core and the default plugins log to (created here if not yet used)
KNOWN_LOGGERS = (
    "hermes_core",
    "hermes_core.compression",
    "hermes_core.memory",
    "hermes_core.runtime",
    "hermes_plugin_sqlite_store",
    "hermes_plugin_postgres_store",
    "hermes_plugin_codex_compaction.client",
)


def live_redactors() -> list[Redactor]:
    """The rules of every host alive in this process (log redaction applies them all)."""
    return _LOG_FILTER.redactors()


_PREVIOUS_FACTORY: Any = None
_FACTORY_LOCK = threading.Lock()


def _redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record: logging.LogRecord = _PREVIOUS_FACTORY(*args, **kwargs)
    if record.name.startswith(LOGGER_PREFIXES):
        _LOG_FILTER.filter(record)
    return record


def install_log_redaction(redactor: Redactor) -> RedactingLogFilter:
    """Add a host's rules to the one :class:`RedactingLogFilter` on every hermes-core
    logger; returns that filter.

    A logger's filters see only the records logged on that very logger (not
    its children's), so the filter goes on each logger: the known ones and
    every existing logger under :data:`LOGGER_PREFIXES`. A logger created
    later is covered by a log-record factory (chained to the one in place)
    that applies the same filter to records of those names when they are
    made. Each host in the process adds its rules to the one shared filter
    (none replaces another's); :func:`release_log_redaction` takes them out.
    """
    global _PREVIOUS_FACTORY
    _LOG_FILTER.add(redactor)
    with _FACTORY_LOCK:
        # once per process: a library that wrapped the factory since would otherwise
        # become our "previous" one while it calls ours, and every record would recurse
        if _PREVIOUS_FACTORY is None:
            _PREVIOUS_FACTORY = logging.getLogRecordFactory()
            logging.setLogRecordFactory(_redacting_factory)
    names = set(KNOWN_LOGGERS)
    names.update(
        name for name in list(logging.Logger.manager.loggerDict) if name.startswith(LOGGER_PREFIXES)
    )
    for name in sorted(names):
        log = logging.getLogger(name)
        if _LOG_FILTER not in log.filters:
            log.addFilter(_LOG_FILTER)
    return _LOG_FILTER


def release_log_redaction(redactor: Redactor) -> None:
    """Take a host's rules out of the log filter (the host is closed)."""
    _LOG_FILTER.discard(redactor)
