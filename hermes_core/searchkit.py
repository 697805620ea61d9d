"""Search rules every session store shares: what a query means and how hits rank.

A store finds *candidates* with its own index (SQLite's FTS5 word and trigram
indexes, PostgreSQL's tsvector and pg_trgm) and hands them here; this module
decides the order, so both stores answer a query the same way.

* **Terms.** The query is split on whitespace into terms (NUL is a space),
  duplicates dropped, the first :data:`MAX_TERMS` kept, each cut to
  :data:`MAX_TERM_CHARS` characters. Nothing in a term is an operator:
  quotes, ``AND``/``OR``/``NOT``/``NEAR``, ``*``, ``^``, ``:``, ``-`` and
  parentheses are text.
* **Covering a term.** A row covers a term when the term occurs in the row's
  text as a substring, or its words (runs of letters and digits) occur there
  as consecutive words; case and diacritics are ignored. So ``session.go``
  is covered by ``session go``, ``checkpoints`` by ``CheckpointsCount`` and
  ``数据库`` by ``我们的数据库很大``.
* **Order.** Rows covering every term come first (score in ``[1, 2)``), then
  rows covering some (score in ``[0, 1)``). Within a tier the score grows
  with the store's text relevance (bm25, ``ts_rank``) as a fraction of the
  tier's best, multiplied by ``1 + near / terms``, so of two rows the index
  rates alike the one covering more distinct terms wins; word matches rank
  above rows found only as substrings that cover as many terms
  (:func:`scores`, :func:`substring_relevance`). ``near`` counts the terms
  found *near each other*: the most distinct terms within
  :data:`NEAR_CHARS` characters of the row (a passage and its neighbours, as
  the recall tool shows a hit), so words a page apart in a 30 KB file read
  count for less than the same words in one passage. The tier follows the
  whole row's coverage.
* **What the query asks for.** When the query's words ask for a kind of
  answer (a duration, an error, what the user asked for:
  :mod:`hermes_core.answer_kinds`), a row holding that kind has its
  within-tier value multiplied by ``1 + KIND_BONUS``, so among rows covering
  the words alike the one that can answer wins.
* **Once per family.** A row carried forward by compaction and its origin
  share a root (``origin_root``); only the best of them is reported, the
  active copy on a tie.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from hermes_core.answer_kinds import KIND_BONUS, asked_kinds, holds_any
from hermes_hookspecs.records import SearchHit

#: at most this many distinct terms of a query are searched (a 10 KB paste stays cheap)
MAX_TERMS = 32
#: a longer term is cut to this many characters
MAX_TERM_CHARS = 256
#: terms count towards a row's coverage within a tier when they occur within this many characters
NEAR_CHARS = 480
#: the proximity scan looks at most at this many occurrences of each term in a row
NEAR_OCCURRENCES = 200
#: characters of text shown around the first term found
SNIPPET_RADIUS = 60
#: a word, as the word indexes split text: a run of letters and digits
_WORD = re.compile(r"[^\W_]+")
_WORDISH = re.compile(r"\w", re.UNICODE)
_SPACES = re.compile(r"\s+")


def searchable_text(content: str, calls: Iterable[tuple[str, str]], cap: int) -> str:
    """The text of a message that search matches and snippets are cut from, in every store.

    The content (its text parts), then, when there are tool calls, a newline
    and each call's ``name arguments`` (raw JSON), one a line; cut to ``cap``
    characters (``fts_index_cap``). Nothing else of the message (not a tool
    result's ``name``) is searched, so a row is found, ranked and shown alike
    by both stores.
    """
    pieces = [f"{name} {arguments}" for name, arguments in calls]
    text = content + ("\n" + "\n".join(pieces) if pieces else "")
    return text[:cap]


def query_terms(query: str) -> tuple[str, ...]:
    """The terms of a user query (see the module docstring)."""
    seen: dict[str, None] = {}
    for term in query.replace("\x00", " ").split():
        seen.setdefault(term[:MAX_TERM_CHARS], None)
        if len(seen) >= MAX_TERMS:
            break
    return tuple(seen)


def has_word(term: str) -> bool:
    """Whether a word index can match ``term`` (it holds a letter or digit)."""
    return bool(_WORDISH.search(term))


_COMBINING: dict[int, None] | None = None


def _combining() -> dict[int, None]:
    global _COMBINING
    if _COMBINING is None:
        _COMBINING = {cp: None for cp in range(0x10000) if unicodedata.combining(chr(cp))}
    return _COMBINING


def fold(text: str) -> str:
    """Lower case without diacritics (``Café`` -> ``cafe``), as the word indexes compare."""
    lowered = text.lower()
    if lowered.isascii() or unicodedata.is_normalized("NFKD", lowered):
        return lowered
    return unicodedata.normalize("NFKD", lowered).translate(_combining())


class TermMatcher:
    """Which terms of a query a text covers."""

    def __init__(self, terms: Iterable[str]) -> None:
        self.terms = tuple(terms)
        self._folded = [fold(term) for term in self.terms]
        self._last: tuple[str | None, str] = (None, "")
        # a term that is not one plain word may also be covered by its words, apart:
        # (first word, pattern of the words with anything but letters and digits between)
        self._words: list[tuple[str, re.Pattern[str]] | None] = []
        self._spread: list[re.Pattern[str] | None] = []
        for folded in self._folded:
            words = _WORD.findall(folded)
            if not words or words == [folded]:  # the substring test says it all
                self._words.append(None)
                self._spread.append(None)
                continue
            pattern = r"[\W_]+".join(re.escape(w) for w in words)
            self._words.append((words[0], re.compile(rf"(?<![^\W_]){pattern}(?![^\W_])")))
            # the same led by its first word (fast to scan for), the boundary checked apart
            self._spread.append(re.compile(rf"{pattern}(?![^\W_])"))

    def _fold(self, text: str) -> str:
        """:func:`fold` of ``text``, remembered for the last text (coverage and
        proximity read the same row one after the other; folding 30 KB costs
        more than matching it)."""
        if text is not self._last[0]:
            self._last = (text, fold(text))
        return self._last[1]

    def covered(self, text: str) -> list[bool]:
        """For each term, whether ``text`` covers it."""
        folded = self._fold(text)
        out = []
        for term, words in zip(self._folded, self._words, strict=True):
            if term in folded:
                out.append(True)
            elif words is None or words[0] not in folded:
                out.append(False)
            else:
                out.append(words[1].search(folded) is not None)
        return out

    def count_near(self, text: str, span: int) -> int:
        """The most distinct terms ``text`` covers within ``span`` characters of it.

        Occurrences of each term are located (as a substring, each after the
        last one ends; a term found nowhere as one, by its words apart), at
        most :data:`NEAR_OCCURRENCES` of each, so a row of one repeated
        character or a dump of a common word costs no more than a few
        hundred positions; the result is the most distinct terms whose
        occurrences fit in a window of ``span`` characters (measured between
        their starts). The scan stops once a window holds every term found.
        """
        folded = self._fold(text)
        found: list[tuple[int, int]] = []  # (offset, term index), every occurrence kept
        present = 0
        for index, (term, spread) in enumerate(zip(self._folded, self._spread, strict=True)):
            before = len(found)
            at = folded.find(term) if term else -1
            if at < 0 and spread is not None:
                # no substring: its words apart (``session go`` for ``session.go``)
                for match in spread.finditer(folded):
                    if not match.start() or not _WORD.match(folded, match.start() - 1):
                        found.append((match.start(), index))
                        if len(found) - before >= NEAR_OCCURRENCES:
                            break
            while at >= 0 and len(found) - before < NEAR_OCCURRENCES:
                found.append((at, index))
                at = folded.find(term, at + len(term))
            present += len(found) > before
        found.sort()
        best = 0
        inside: dict[int, int] = {}  # term index -> occurrences in the window
        low = 0
        for at, index in found:
            inside[index] = inside.get(index, 0) + 1
            while at - found[low][0] > span:
                gone = found[low][1]
                inside[gone] -= 1
                if not inside[gone]:
                    del inside[gone]
                low += 1
            best = max(best, len(inside))
            if best == present:
                break
        return best

    def count(self, text: str) -> int:
        """How many distinct terms ``text`` covers."""
        return sum(self.covered(text))


def substring_relevance(text: str, terms: Iterable[str]) -> float:
    """A small relevance for a row found only as a substring: how often the
    terms occur, damped by the text's length (below any word match's)."""
    folded = fold(text)
    found = sum(folded.count(fold(term)) for term in terms)
    weight = found / (1.0 + len(folded) / 1000.0)
    return 0.1 * weight / (1.0 + weight)


#: a passage (:func:`passages`) is a line, or this many characters of a longer one
PASSAGE_CHARS = 160
#: a passage taken brings the rest of its line, up to this many passages in all
LINE_PIECES = 3
#: a gap between passages this short is shown rather than marked
GAP_SHOWN = 60


def _pieces(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each passage of ``text``: its lines, long ones cut up."""
    out: list[tuple[int, int]] = []
    start = 0
    for line in text.splitlines(keepends=True):
        end = start + len(line)
        while end - start > PASSAGE_CHARS:
            out.append((start, start + PASSAGE_CHARS))
            start += PASSAGE_CHARS
        if end > start:
            out.append((start, end))
        start = end
    return out


def passages(text: str, terms: Iterable[str], limit: int) -> str:
    """About ``limit`` characters of ``text``: its passages covering the most query terms
    (:meth:`Passages.excerpt`)."""
    return Passages(text, terms).excerpt(limit)


class Passages:
    """A text cut into passages, each with the query terms it covers: made once,
    excerpted at any size (a result fitted to a token budget cuts the same texts
    to several sizes; the coverage does not change with the size).

    :meth:`excerpt` is about ``limit`` characters of the text, its passages
    covering the most query terms.

    The text is cut into passages (lines; a long line into pieces of
    :data:`PASSAGE_CHARS`). Passages are taken best first: by the query terms
    they cover (:class:`TermMatcher`), each term weighing one over the number of
    passages of this text that cover it, then earliest, each with the rest of
    its line as room allows (up to :data:`LINE_PIECES` passages: a sentence cut
    at :data:`PASSAGE_CHARS` goes on past the words that matched, "I'm narrowing
    it to `/git-sync`"); then, room left, the passage after each (past blank
    lines and code fences, which say nothing: "The command is:" brings the
    command), then the one before. A term on every line of a long
    output says little about which line answers, and an identifier named once
    points at its line: a review citing ``containsIdentifier`` once and saying
    ``review`` and ``file`` on forty lines shows the citation. They are shown in
    text order, a gap of up to :data:`GAP_SHOWN` characters shown, a longer one marked
    ``…[N chars skipped]…`` (``…[N more chars]`` at the end). A text covering
    no term shows its head and its tail (a command's output ends with its
    verdict). The whole text when it fits.
    """

    def __init__(self, text: str, terms: Iterable[str]) -> None:
        self.text = text
        self._terms = tuple(terms)
        self._plan: tuple[list[tuple[int, int]], list[float]] | None = None

    def _planned(self) -> tuple[list[tuple[int, int]], list[float]]:
        """The passages' ``(start, end)`` and the weight of the terms each covers (made
        on first use; see the class docstring)."""
        if self._plan is None:
            matcher = TermMatcher(self._terms)
            pieces = _pieces(self.text)
            found = [matcher.covered(self.text[a:b]) for a, b in pieces]
            spread = [sum(column) for column in zip(*found, strict=True)]
            weights = [1.0 / count if count else 0.0 for count in spread]
            covered = [
                sum(weight for weight, hit in zip(weights, row, strict=True) if hit)
                for row in found
            ]
            self._plan = (pieces, covered)
        return self._plan

    def excerpt(self, limit: int) -> str:
        """About ``limit`` characters of the text (see the class docstring)."""
        text = self.text
        if len(text) <= limit:
            return text
        pieces, covered = self._planned()
        return _select(text, pieces, covered, limit)


#: a line of only this (once stripped; a fence may name its language) carries no content
_FENCES = ("```", "~~~")


def _slight(text: str, piece: tuple[int, int]) -> bool:
    """Whether a passage carries no content of its own: a blank line or a code fence."""
    line = text[piece[0] : piece[1]].strip()
    return not line or (line.startswith(_FENCES) and " " not in line)


def _select(text: str, pieces: list[tuple[int, int]], covered: list[float], limit: int) -> str:
    """The excerpt of :class:`Passages` (see its docstring) from the passages and their
    coverage."""
    chosen: set[int] = set()
    used = 0

    def take(i: int) -> bool:
        nonlocal used
        if i in chosen or not 0 <= i < len(pieces):
            return True
        size = pieces[i][1] - pieces[i][0]
        if used + size > limit:
            return False
        chosen.add(i)
        used += size
        return True

    order = sorted((i for i, c in enumerate(covered) if c), key=lambda i: (-covered[i], i))
    for i in order:  # the best passages first, each with the rest of its line
        if not take(i):
            break
        j = i
        while (
            j + 1 < min(len(pieces), i + LINE_PIECES)
            and text[pieces[j][1] - 1] != "\n"
            and take(j + 1)
        ):
            j += 1
    for step in (1, -1):  # then what follows each taken, then what precedes it
        for i in [i for i in order if i in chosen]:
            j = i + step
            # a blank line or a code fence says nothing: the neighbour is the line past it
            while step > 0 and j < len(pieces) and j not in chosen and _slight(text, pieces[j]):
                if not take(j):
                    break
                j += step
            take(j)
    if not chosen:  # no term here: the head, then the tail
        head = list(range(len(pieces)))
        for i in head:
            if used >= limit * 2 // 3 or not take(i):
                break
        for i in reversed(head):
            if not take(i):
                break
    if not chosen:  # not even one passage fits: the best one (or the head), cut
        a, b = pieces[order[0]] if order else pieces[0]
        cut = text[a : min(b, a + limit)]
        before = f"…[{a:,} chars skipped]…" if a else ""
        return f"{before}{cut}…[{len(text) - a - len(cut):,} more chars]"
    out: list[str] = []
    at = 0
    for i in sorted(chosen):
        a, b = pieces[i]
        if a - at <= GAP_SHOWN and out:  # a gap as short as its marker is shown
            a = at
        if a > at:
            out.append(f"…[{a - at:,} chars skipped]…")
        out.append(text[a:b])
        at = b
    if at < len(text):
        out.append(f"…[{len(text) - at:,} more chars]")
    return "".join(out)


def snippet(text: str, terms: Iterable[str]) -> str:
    """About ``2 * SNIPPET_RADIUS`` characters of ``text`` around the first term found."""
    terms = tuple(terms)
    lowered = text.lower()
    found = [i for i in (lowered.find(t.lower()) for t in terms) if i >= 0]
    if not found:  # covered by its words only: look for the first word of a term
        words = [w for t in terms for w in _WORD.findall(t.lower())[:1]]
        found = [i for i in (lowered.find(w) for w in words) if i >= 0]
    at = min(found) if found else 0
    start = max(0, at - SNIPPET_RADIUS)
    end = min(len(text), at + SNIPPET_RADIUS + max((len(t) for t in terms), default=0))
    piece = _SPACES.sub(" ", text[start:end]).strip()
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


@dataclass
class Candidate:
    """A row a store's index found for a query, with what the ranking needs.

    ``relevance`` is the index's own text relevance (>= 0, larger is better;
    ``None`` when the row was found only as a substring). ``all_words`` says
    the word index matched every term, which puts the row in the first tier
    even when the text check cannot tell (a stemmed or folded form).
    """

    message_id: int
    session_id: str
    role: str
    active: bool
    compacted: bool
    created_at: float
    root: int
    text: str
    relevance: float | None = None
    all_words: bool = False
    covered: int | None = None  # filled in by rank()
    near: int | None = None  # filled in by scores()
    typed: bool | None = None  # holds a kind the query asks for; filled in by scores()


def _measure(cand: Candidate, matcher: TermMatcher) -> int:
    """Fill in the terms ``cand`` covers and how many of them lie near each other;
    return the first."""
    if cand.covered is None:
        cand.covered = matcher.count(cand.text)
    if cand.near is None:
        # one term is near itself; a short row holds its terms near each other
        far = cand.covered > 1 and len(cand.text) > NEAR_CHARS
        cand.near = matcher.count_near(cand.text, NEAR_CHARS) if far else cand.covered
    return cand.covered


def scores(candidates: list[Candidate], matcher: TermMatcher) -> list[float]:
    """The score of each candidate (see the module docstring); larger is better.

    Relevance is compared within a tier as a fraction of the tier's best, so
    the index's scale (bm25 against ``ts_rank``, a tiny or a huge corpus)
    does not matter: a word match weighs ``0.5 + 0.5 * fraction``, a
    substring-only match below ``0.5``, and either is multiplied by
    ``1 + near / terms`` (the distinct terms within :data:`NEAR_CHARS`
    characters of each other), and by ``1 + KIND_BONUS`` when the row holds
    a kind of answer the query asks for (:mod:`hermes_core.answer_kinds`);
    the tier's values are scaled by ``1 + KIND_BONUS`` so typed rows keep
    their order. The tier (every term or some) follows the whole row.
    """
    total = max(1, len(matcher.terms))
    kinds = asked_kinds(matcher.terms)
    facts = []
    for cand in candidates:
        covered = min(_measure(cand, matcher), total)
        every = cand.all_words or covered >= total
        facts.append((every, covered, cand))
    best = {True: 0.0, False: 0.0}
    for every, _, cand in facts:
        if cand.relevance is not None:
            best[every] = max(best[every], cand.relevance)
    out = []
    for every, covered, cand in facts:
        near = min(cand.near or 0, covered)
        if cand.relevance is None:
            weight = 5.0 * substring_relevance(cand.text, matcher.terms)
        elif best[every] > 0:
            weight = 0.5 + 0.5 * max(0.0, cand.relevance) / best[every]
        else:
            weight = 1.0
        value = weight * (1.0 + near / total)  # in [0, 2]
        if cand.typed is None:
            cand.typed = bool(kinds) and holds_any(kinds, cand.role, cand.text)
        if cand.typed:
            value *= 1.0 + KIND_BONUS
        out.append((1.0 if every else 0.0) + value / (2.001 * (1.0 + KIND_BONUS)))
    return out


def rank(candidates: Iterable[Candidate], terms: Iterable[str], limit: int) -> list[SearchHit]:
    """The best ``limit`` hits of ``candidates``, best first, one per family.

    A candidate that covers no term (the index's match was only a trigram
    coincidence) is dropped. The same message offered twice keeps the first
    relevance offered (stores offer their every-term pass first).
    """
    matcher = TermMatcher(terms)
    merged: dict[int, Candidate] = {}
    for cand in candidates:
        seen = merged.get(cand.message_id)
        if seen is None:
            merged[cand.message_id] = cand
            continue
        seen.all_words = seen.all_words or cand.all_words
        if seen.relevance is None:
            seen.relevance = cand.relevance
    for cand in merged.values():
        _measure(cand, matcher)
    kept = [
        cand
        for cand in merged.values()
        if cand.relevance is not None or cand.all_words or cand.covered
    ]
    best: dict[int, tuple[tuple[float, int, int], Candidate]] = {}
    for cand, value in zip(kept, scores(kept, matcher), strict=True):
        key = (value, int(cand.active), cand.message_id)
        held = best.get(cand.root)
        if held is None or held[0] < key:
            best[cand.root] = (key, cand)
    ordered = sorted(best.values(), key=lambda item: item[0], reverse=True)[:limit]
    return [
        SearchHit(
            message_id=cand.message_id,
            session_id=cand.session_id,
            role=cand.role,
            snippet=snippet(cand.text, matcher.terms),
            score=key[0],
            active=cand.active,
            compacted=cand.compacted,
            created_at=cand.created_at,
        )
        for key, cand in ordered
    ]
