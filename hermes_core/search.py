"""Search with context: store hits opened into the places they sit in a session.

:func:`search_with_context` is what a recovery tool, ``hermes-core sessions
search`` and the replay's one-search scoring call: one store search over a
set of sessions (a session and its rotation ancestors), each hit returned with
its neighbouring stored messages in write order, and the user's next messages
after them. Hits whose windows overlap are one place: the window is merged
and counts once against ``limit``, so five results are five distinct places
in the history.

:func:`content_words` is the query an agent would type for a question (the
rule of the recall probes), and :func:`message_text` the text of a message a
reader sees (content, tool-call names, raw arguments and their decoded
string values).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from hermes_core.answer_kinds import KIND_BONUS, asked_kinds, holds_any
from hermes_core.recall import STOPWORDS, content_words
from hermes_core.recall import message_text as wire_text
from hermes_core.searchkit import TermMatcher, query_terms, snippet
from hermes_core.storekit import check_count, check_search_scope
from hermes_hookspecs.errors import NotFoundError
from hermes_hookspecs.messages import HandoffSummary, Message
from hermes_hookspecs.records import SearchHit, StoredMessage
from hermes_hookspecs.store import SessionStore

__all__ = [
    "STOPWORDS",
    "SearchResult",
    "content_words",
    "message_text",
    "search_with_context",
]


def message_text(message: Message) -> str:
    """What a reader sees of ``message``: its content, then for each tool call the
    function name, the raw ``arguments`` string and the decoded string values of
    those arguments (the probe scoring rule, :func:`hermes_core.recall.message_text`)."""
    return wire_text(message.to_api())


class SearchResult(BaseModel):
    """One place in a session's history that a search found.

    ``hit`` is the best-ranked hit of the place and ``message`` its stored
    row; ``before`` and ``after`` are the stored messages around it in write
    order, within the same session. When the windows of several hits overlap
    they are merged into this one place: ``hits`` lists every hit inside it,
    best first (``hits[0] is hit``), and the window spans all of them plus
    ``neighbours`` messages on either side. ``duplicates`` are the ids of
    other hits whose text is the same as ``hit``'s (whitespace aside): a
    rerun's identical output is not shown as a place of its own.
    ``replies`` are the user's next messages after the window, at most
    :data:`REPLIES`, each within :data:`REPLY_REACH` stored messages of the
    one before (text a harness injected and summaries skipped): what the
    user said once the work shown was done (approved it, corrected it, asked
    for the next step, then chose from what the agent proposed) is the
    outcome a search hit in the middle of tool traffic does not show.
    """

    model_config = ConfigDict(extra="forbid")

    hit: SearchHit
    message: StoredMessage
    before: list[StoredMessage]
    after: list[StoredMessage]
    hits: list[SearchHit]
    duplicates: list[int] = Field(default_factory=list)
    replies: list[StoredMessage] = Field(default_factory=list)

    @property
    def window(self) -> list[StoredMessage]:
        """The messages around the hit, in write order (without :attr:`replies`)."""
        return [*self.before, self.message, *self.after]

    @property
    def rows(self) -> list[StoredMessage]:
        """Every message the place shows: the window, then the replies."""
        return [*self.window, *self.replies]

    def text(self) -> str:
        """The text of every message shown (:func:`message_text` of each of :attr:`rows`)."""
        return "\n\x00\n".join(message_text(row.message) for row in self.rows)


#: a search asks the store for at most this many hits while filling ``limit`` places
MAX_HITS = 400


def search_with_context(
    store: SessionStore,
    query: str,
    *,
    session_ids: Sequence[str] | None,
    limit: int = 5,
    neighbours: int = 1,
    include_compacted: bool = True,
    slight_chars: int | None = None,
) -> list[SearchResult]:
    """Search ``session_ids`` for ``query`` and open each hit with its neighbours.

    The store is asked for hits best first (:meth:`SessionStore.search`,
    at least :data:`TURN_POOL`), ordered again by what their turns were
    about (:func:`by_turn`); each opens a window of ``neighbours`` stored
    messages on either side, in write order, within the hit's session. A
    hit whose window overlaps a place already taken joins that place (its
    window widens) instead of counting again; a hit whose text is the same as a place's hit joins
    that place's ``duplicates``; more hits are asked for until ``limit``
    distinct places are filled or the store has no more. A hit on a compaction
    summary (``kind == "summary"``) first opens the originals that its lines
    covering the most query terms cite (``#N``, at most
    :data:`CITED_PER_SUMMARY`, in scope), where the summary ranked: a
    summary restates the facts of many messages beside each other, so it
    matches a question better than the one message holding the answer, and
    the place shown is that message. Hits on text a harness injected
    (:attr:`Message.harness`) and on the summaries themselves come after all
    others. Each place also shows the user's next messages after it
    (:attr:`SearchResult.replies`).

    :param store: the session store to search.
    :param query: plain text (search syntax in it is text, never operators).
    :param session_ids: the sessions to search, e.g. a session and its
        rotation ancestors; no row of any other session is returned. ``None``
        searches every session.
    :param limit: at most this many places, best first.
    :param neighbours: stored messages shown before and after each hit.
    :param include_compacted: also search compacted history; when false,
        the neighbours shown are active rows too.
    :param slight_chars: a neighbour with less text than this does not count
        as one of ``neighbours``: the window reaches one row further on its
        side, at most ``2 * neighbours`` rows a side (:data:`SLIGHT_CHARS`
        when None; 0 shows exactly ``neighbours``).
    :return: up to ``limit`` results, best first.
    :raises ValidationError: a bad ``limit``, ``neighbours`` or scope (the
        store's own checks apply to the query and the sessions).
    """
    check_count(limit, "limit")
    check_count(neighbours, "neighbours")
    if slight_chars is not None:
        check_count(slight_chars, "slight_chars")
    scope = check_search_scope(None, session_ids)
    if limit == 0 or scope == []:
        return []
    reach = _Reach(
        neighbours, include_compacted, SLIGHT_CHARS if slight_chars is None else slight_chars
    )
    wanted = limit * (2 * neighbours + 1)
    while True:
        hits = store.search(
            query,
            session_ids=scope,
            include_compacted=include_compacted,
            limit=max(wanted, TURN_POOL),
        )
        ranked = by_turn(store, hits, query)[:wanted]
        places = _places(store, ranked, limit, reach, query, scope)
        if len(places) >= limit or len(hits) < wanted or wanted >= MAX_HITS:
            return [place.result(_replies(store, place, include_compacted)) for place in places]
        wanted = min(MAX_HITS, wanted * 2)


#: the store's best this many hits are ordered again by their turns' requests (:func:`by_turn`)
TURN_POOL = 60
#: a hit's score grows by this times the share of the query's terms its turn's request covers
TURN_WEIGHT = 0.3


def by_turn(store: SessionStore, hits: Sequence[SearchHit], query: str) -> list[SearchHit]:
    """``hits`` ordered again by what their turns were about: best first.

    A turn is the work that answers one request of the user
    (:meth:`SessionStore.turn_requests`). A hit's value is its score plus
    :data:`TURN_WEIGHT` times the share of the query's terms its turn's
    request covers (:class:`~hermes_core.searchkit.TermMatcher`), so of two
    rows that match alike, the one done for a request about the same thing
    comes first: "what did the agent decide about the replicate no-thin
    rejection" finds the answer written in the turn the user asked about
    no-thin, though the answer itself says "drop the rejection". A message
    the user wrote (and any user-role row) is not lifted by a request:
    it is one or stands apart. Ties keep the store's order.
    """
    lifted = [hit.message_id for hit in hits if hit.role != "user"]
    requests = store.turn_requests(lifted) if lifted else {}
    if not requests:
        return list(hits)
    matcher = TermMatcher(query_terms(query))
    total = max(1, len(matcher.terms))
    covered: dict[int, int] = {}  # request id -> the query terms it covers
    values: dict[int, float] = {}
    for hit in hits:
        request = requests.get(hit.message_id)  # none for a user-role row
        lift = 0.0
        if request is not None:
            if request.id not in covered:
                covered[request.id] = matcher.count(message_text(request.message))
            lift = TURN_WEIGHT * covered[request.id] / total
        values[hit.message_id] = hit.score + lift
    return sorted(hits, key=lambda hit: values[hit.message_id], reverse=True)


#: a place shows at most this many of the user's next messages (:attr:`SearchResult.replies`)
REPLIES = 2
#: each reply is looked for this many stored messages past the window or the reply before
REPLY_REACH = 12


def _replies(store: SessionStore, place: _Place, include_compacted: bool) -> list[StoredMessage]:
    """The user's next messages after ``place`` (see :class:`SearchResult`), each looked
    for in the :data:`REPLY_REACH` stored messages after the window or the reply before
    (one read each: a reply is most often a few rows on, so no more is read)."""
    out: list[StoredMessage] = []
    anchor = max(place.rows)
    while len(out) < REPLIES:
        later = store.message_context(anchor, before=0, after=REPLY_REACH)[1:]
        reply = next(
            (
                row
                for row in later
                if (include_compacted or row.active)
                and row.message.written_by_user
                and row.id not in place.rows
            ),
            None,
        )
        if reply is None:
            break
        out.append(reply)
        anchor = reply.id
    return out


class _Place:
    """One place being filled: its hits (best first) and the rows of its window."""

    def __init__(self, hit: SearchHit, rows: list[StoredMessage]) -> None:
        self.hits = [hit]
        self.rows = {row.id: row for row in rows}
        self.duplicates: list[int] = []

    def overlaps(self, session_id: str, rows: list[StoredMessage]) -> bool:
        return self.hits[0].session_id == session_id and any(r.id in self.rows for r in rows)

    def absorb(self, hit: SearchHit, rows: list[StoredMessage]) -> None:
        self.hits.append(hit)
        for row in rows:
            self.rows.setdefault(row.id, row)

    def result(self, replies: Sequence[StoredMessage] = ()) -> SearchResult:
        best = self.hits[0]
        ordered = [self.rows[i] for i in sorted(self.rows)]
        at = next(i for i, row in enumerate(ordered) if row.id == best.message_id)
        return SearchResult(
            hit=best,
            message=ordered[at],
            before=ordered[:at],
            after=ordered[at + 1 :],
            hits=list(self.hits),
            duplicates=list(self.duplicates),
            replies=list(replies),
        )


#: a neighbour with less text than this (a bare tool call, an empty output, "ok") shows
#: little of a place: it does not count as one of the neighbours shown on its side
SLIGHT_CHARS = 500


@dataclass
class _Reach:
    """Which stored messages a window around a row shows (see :func:`search_with_context`),
    and the windows read so far in one search (a widening round reads the same hits again)."""

    neighbours: int
    include_compacted: bool
    slight_chars: int
    read: dict[int, list[StoredMessage]] = field(default_factory=dict)

    def window(self, store: SessionStore, message_id: int) -> list[StoredMessage]:
        """:meth:`_read`, remembered for this search."""
        found = self.read.get(message_id)
        if found is None:
            found = self.read[message_id] = self._read(store, message_id)
        return found

    def _read(self, store: SessionStore, message_id: int) -> list[StoredMessage]:
        """The row ``message_id`` and ``neighbours`` rows on either side, in write order.

        A neighbour with fewer than ``slight_chars`` characters of text does
        not count: the window takes the next row on that side too, up to
        ``2 * neighbours`` rows a side (a test run's output beyond the bare
        call that started it, the user's words beyond an empty output).
        Without ``include_compacted``, compacted rows are skipped, not shown.
        """
        wide = 2 * self.neighbours
        span = wide if self.include_compacted else 4 * wide + 4
        rows = [
            row
            for row in store.message_context(message_id, before=span, after=span)
            if row.id == message_id or row.active or self.include_compacted
        ]
        at = next(i for i, row in enumerate(rows) if row.id == message_id)
        return [*self._side(rows[:at][::-1])[::-1], rows[at], *self._side(rows[at + 1 :])]

    def _side(self, rows: list[StoredMessage]) -> list[StoredMessage]:
        """The nearest rows of one side (``rows`` nearest first)."""
        out: list[StoredMessage] = []
        counted = 0
        for row in rows[: 2 * self.neighbours]:
            if counted >= self.neighbours:
                break
            out.append(row)
            counted += len(message_text(row.message)) >= self.slight_chars
        return out


def _second_hand(hit: SearchHit, rows: list[StoredMessage]) -> bool:
    """Whether the hit is text a harness injected or a compaction summary."""
    row = next((r for r in rows if r.id == hit.message_id), None)
    return row is not None and (row.message.harness is not None or row.message.kind == "summary")


#: a compaction summary's line names the message it stands for as ``#N`` (a store id)
_CITATION = re.compile(r"#(\d{1,12})(?!\d)")
#: the head of a summary's fact line, ``- #N label: `` (the citation and the fact's label)
_FACT_HEAD = re.compile(r"\s*- #\d{1,12} \w+: ")
#: a cited line must cover at least this many query terms (all of a shorter query)
CITED_MIN_TERMS = 2
#: a cited line's weight must reach this share of the query's terms
CITED_SHARE = 1 / 3
#: a summary hit opens at most this many of the originals its lines cite
CITED_PER_SUMMARY = 2
#: ... or this many when that many of its lines tie for the best weight
CITED_TIED = 3


def _cited(
    store: SessionStore,
    hit: SearchHit,
    rows: list[StoredMessage],
    matcher: TermMatcher,
    scope: Sequence[str] | None,
    reach: _Reach,
) -> list[tuple[SearchHit, list[StoredMessage]]]:
    """The originals that a compaction summary hit's best-matching lines cite, each a hit.

    A summary restates many messages on lines that cite them (``- #N label:
    text``, ``(#N)``). Its lines holding a citation are taken by the query
    terms each covers (at least :data:`CITED_MIN_TERMS`; a fact line's
    ``- #N label:`` head is not searched), most first, a line
    holding a kind of text the query asks for (a duration, an error line:
    :mod:`hermes_core.answer_kinds`; the user's request on a line of
    :data:`USER_SECTIONS`) weighing ``1 + KIND_BONUS`` times its terms, as
    such a row ranks; then earliest. A line weighing less than
    :data:`CITED_SHARE` of the query's terms is no evidence (two words of an
    eight-word question). The first
    :data:`CITED_PER_SUMMARY` distinct cited rows that exist and lie in
    ``scope`` (up to :data:`CITED_TIED` when the lines beyond tie with the
    best one) become hits with the summary's score: the search shows the
    evidence the summary points at. Not a summary, or no such line: ``[]``.
    """
    row = next((r for r in rows if r.id == hit.message_id), None)
    if row is None or row.message.kind != "summary":
        return []
    least = min(CITED_MIN_TERMS, max(1, len(matcher.terms)))
    kinds = asked_kinds(matcher.terms)
    lines: list[tuple[float, int, int]] = []  # (-weight, line number, cited id)
    for number, (author, line) in enumerate(_summary_lines(row.message)):
        found = _CITATION.search(line)
        if found is None:
            continue
        # a fact line's label (``error``, ``user``, ``ran``) is the format's, not its text:
        # every error line would cover the query word "error"
        head = _FACT_HEAD.match(line)
        text = line[head.end() :] if head is not None else line
        if (covered := matcher.count(text)) < least:
            continue
        weight = float(covered)
        # a line holding what the query asks for (a duration, an error line, the user's
        # request) weighs as a row holding it ranks
        if kinds and holds_any(kinds, author, text):
            weight *= 1.0 + KIND_BONUS
        if weight < len(matcher.terms) * CITED_SHARE:
            continue
        lines.append((-weight, number, int(found.group(1))))
    out: list[tuple[SearchHit, list[StoredMessage]]] = []
    tried: set[int] = {row.id}
    ordered = sorted(lines)
    best = ordered[0][0] if ordered else 0.0  # the best line's -weight
    for key, _, cited in ordered:
        # past CITED_PER_SUMMARY, only lines as good as the best (ties) are opened
        if len(out) >= CITED_TIED or (len(out) >= CITED_PER_SUMMARY and key > best):
            break
        if cited in tried:
            continue
        tried.add(cited)
        try:
            window = reach.window(store, cited)
        except NotFoundError:  # a citation of a row that is not stored
            continue
        origin = next(r for r in window if r.id == cited)
        if scope is not None and origin.session_id not in scope:
            continue
        update = {
            "message_id": origin.id,
            "session_id": origin.session_id,
            "role": origin.message.role,
            "snippet": snippet(message_text(origin.message), matcher.terms),
            "active": origin.active,
            "compacted": origin.compacted,
            "created_at": origin.created_at,
        }
        out.append((hit.model_copy(update=update), window))
    return out


#: the standard handoff sections written in the user's words (what they asked for, the
#: rules they set: :class:`HandoffSummary` ``goal`` and ``constraints``)
USER_SECTIONS = frozenset({"goal", "constraints"})
_USER_TITLES = frozenset(
    f"## {title}" for attr, title in HandoffSummary.STANDARD_TITLES if attr in USER_SECTIONS
)


def _summary_lines(message: Message) -> Iterator[tuple[str, str]]:
    """The lines of a compaction summary's text, each with its author's role when its
    section says it: ``"user"`` under a heading of :data:`USER_SECTIONS` (as
    :meth:`HandoffSummary.render` writes them), ``""`` (unknown) elsewhere."""
    author = ""
    for line in message_text(message).splitlines():
        if line.startswith("## "):
            author = "user" if line.rstrip() in _USER_TITLES else ""
        yield author, line


def _places(
    store: SessionStore,
    hits: list[SearchHit],
    limit: int,
    reach: _Reach,
    query: str,
    scope: Sequence[str] | None,
) -> list[_Place]:
    windows = [(hit, reach.window(store, hit.message_id)) for hit in hits]
    if reach.include_compacted:  # a summary hit is first the originals it cites
        matcher = TermMatcher(query_terms(query))
        windows = [
            pair
            for hit, rows in windows
            for pair in (*_cited(store, hit, rows, matcher, scope, reach), (hit, rows))
        ]
    # text a harness injected (reminders, its own compaction summaries) matches many
    # queries and answers few, and our compaction summaries restate the messages they
    # stand for (each summary again, so one fact fills every place): such hits come
    # after every other one, in store order; the originals are the evidence (and
    # those a summary's matching lines cite stand where the summary ranked)
    windows.sort(key=lambda pair: _second_hand(*pair))
    places: list[_Place] = []
    by_text: dict[str, _Place] = {}  # a place's hit text -> the place
    for hit, rows in windows:
        joined = next((p for p in places if p.overlaps(hit.session_id, rows)), None)
        if joined is not None:
            joined.absorb(hit, rows)
            continue
        # the same text again (a rerun's identical output, a repeated message) is no new
        # place: the place holding it names where else it occurs
        text = _hit_text(hit, rows)
        same = by_text.get(text) if text else None
        if same is not None:
            same.duplicates.append(hit.message_id)
            continue
        if len(places) < limit:  # past the limit a hit may still widen a place
            places.append(_Place(hit, rows))
            if text:
                by_text.setdefault(text, places[-1])
    return places


def _hit_text(hit: SearchHit, rows: list[StoredMessage]) -> str:
    row = next((r for r in rows if r.id == hit.message_id), None)
    return " ".join(message_text(row.message).split()) if row is not None else ""
