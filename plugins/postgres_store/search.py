"""Search over ``message_search`` with PostgreSQL's full-text machinery and pg_trgm.

What a query means and how hits rank is decided once, in
:mod:`hermes_core.searchkit` (both stores use it); this module finds the
candidate rows with PostgreSQL's own tools:

* **Ranked passes read the best rows first.** Without a session scope, a
  pass over one word, or any of several words, first reads ``k + 1`` matches
  (``k``: the rows it returns); a word with more is read through the score
  classes of the ``message_search_rank`` index (:data:`.migrations.RANK_SCALE`):
  ``ts_rank`` of a row holding one of the words is bounded by that word's
  class, so the best classes are read first and the pass stops when what it
  holds beats every class left (the rows holding two or more of the words
  are read whole first). The rows are exactly the best ``k`` of every match,
  ranked alike; only the heap reads are bounded: a word in 10,000 rows costs
  a few hundred, not 10,000 (:func:`_ranked_rows`).
* Each term becomes ``phraseto_tsquery('simple', term)``, which reads no
  operators (``&``, ``|``, ``!``, ``<->``, ``:*``, quotes and parentheses are
  ordinary characters); a term of several words is a phrase. Terms are
  passed as bind parameters, never spliced into SQL.
* **Every term as words:** the terms' tsqueries joined with ``&&``, matched
  against the ``tsvector`` (GIN index), ranked by ``ts_rank`` (length
  normalised; ``ts_rank_cd`` reads positions and costs 40% more a row, and
  every matching row is ranked); when that gives fewer than ``limit`` hits,
  **some of the terms as words**: the tsqueries joined with ``||``, ranked by
  ``ts_rank`` (each term's weight saturates, so a row covering more terms
  ranks higher), and the compaction summaries matching any term
  (:func:`summary_sql`), which length normalisation keeps out of the best.
* **As substrings:** when still short of ``limit``, ``body ILIKE`` every
  term, then any term (``%``, ``_`` and ``\\`` escaped), served by the
  ``pg_trgm`` GIN index when the extension is installed (including CJK text,
  which the word parser keeps as whole runs), newest first: read window by
  window of ids from the newest (a block-range index of ids makes a window a
  few runs of blocks), so a fragment in thousands of rows costs the heap pages
  of its newest matches, not of all. A row that
  covers every term only as substrings is looked for when the word index
  gives fewer than ``limit`` hits, as in the SQLite store.
* The ``simple`` configuration: no stemming and no stop words, the same
  words the SQLite store's unicode61 index matches.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

from hermes_core.searchkit import Candidate, has_word, query_terms, rank
from hermes_hookspecs.records import SearchHit

from .migrations import (
    RANK_CLASSES,
    RANK_FIRST_CLASS,
    RANK_SCALE,
    RANK_STEP,
    UNPARSED,
    rank_class_top,
)

if TYPE_CHECKING:
    import psycopg

MAX_CANDIDATES = 20_000
#: a fragment held by more vocabulary words than this is looked for in the trigram index
MAX_WORDS = 1_000
#: a fragment is first looked for in this many of the newest rows (read in id order)
PROBE_ROWS = 1_000
#: and in at most this many older rows when the first look found some but too few
PROBE_MORE_ROWS = 8_000
#: past the rows read first, a fragment's matches are read window by window of older ids,
#: the first at least this many ids, each next one WINDOW_GROWTH times the one before
FIRST_WINDOW = 20_000
WINDOW_GROWTH = 4
_PLAIN = re.compile(r"[^\W_]{3,}")
#: sessions of at most this many rows in all are read for substrings without the trigram index
SESSION_SCAN_ROWS = 20_000
_COLUMNS = (
    "SELECT m.id, m.session_id, m.role, m.active, m.compacted, m.created_at, "
    "coalesce(m.origin_root, m.id), f.body, {relevance} "
    "FROM message_search f JOIN messages m ON m.id = f.message_id WHERE {where} "
)


def like_pattern(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@dataclass(frozen=True)
class Indexes:
    """Which optional indexes the schema has (see :mod:`.migrations`): the store
    finds out when it opens; no default, since a wrong guess either reads the
    unindexed path or plans for an index that is not there."""

    #: pg_trgm: the trigram indexes and the vocabulary's
    trigram: bool
    #: the score classes of the words (``message_search_rank``): ranked passes read the
    #: best rows first
    ranked: bool


def lexeme(word: str) -> str:
    """``word`` as one quoted lexeme of a tsquery's text form."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


class Query:
    """The SQL pieces and bind parameters of one user query."""

    def __init__(
        self, terms: tuple[str, ...], session_ids: Sequence[str] | None, active_only: bool
    ) -> None:
        self.terms = terms
        self.params: dict[str, Any] = {}
        words = []
        self._likes = []
        for index, term in enumerate(terms):
            self.params[f"p{index}"] = like_pattern(term)
            self._likes.append(f"{{body}} ILIKE %(p{index})s")
            if has_word(term):
                self.params[f"t{index}"] = term
                words.append(f"phraseto_tsquery('simple', %(t{index})s)")
        self.every_word = len(words) == len(terms)
        self.words = len(words)
        self.all_words = "(" + " && ".join(words) + ")" if words else None
        self.any_word = "(" + " || ".join(words) + ")" if words else None
        self.scope: list[str] = []
        #: the word terms' lexemes, one each (None: a term of several or none);
        #: asked for once, by the first ranked pass that needs them (:func:`_lexemes`)
        self.lexemes: list[str] | bool | None = False
        if session_ids is not None:
            self.scope.append("f.session_id = ANY(%(sids)s)")
            self.params["sids"] = list(session_ids)
        if active_only:
            self.scope.append("m.active")

    def where(self, *conditions: str) -> str:
        return " AND ".join([*conditions, *self.scope])

    def likes(self, *, every: bool, indexed: bool) -> str:
        """Every (or any) term as a substring. Not ``indexed``, the body is matched as
        ``(f.body || '')``, which pg_trgm's index cannot serve: the planner then reads
        rows in id order and stops after ``k`` matches."""
        body = "f.body" if indexed else "(f.body || '')"
        glue = " AND " if every else " OR "
        return "(" + glue.join(like.format(body=body) for like in self._likes) + ")"


def word_sql(query: Query, tsquery: str) -> str:
    """The best ``k`` rows whose tsvector matches ``tsquery`` by ``ts_rank`` (length
    normalised), newest first on a tie.

    Every match is found through the GIN index and ranked, reading its
    ``tsvector`` from the heap. The ranking reads ``message_search`` alone and
    keeps the best ``k``; only those are joined to ``messages`` (joining every
    match first costs an index lookup per matching row, most of a common word's
    search). The active-only condition needs ``messages``, so with it the join
    stays inside.
    """
    relevance = f"ts_rank(f.tsv, {tsquery}, 1)::float8 AS r"
    where = " AND ".join([f"f.tsv @@ {tsquery}", *query.scope])
    if "m.active" in query.scope:
        return (
            "SELECT m.id, m.session_id, m.role, m.active, m.compacted, m.created_at, "
            f"coalesce(m.origin_root, m.id) AS root, f.body, {relevance} "
            f"FROM message_search f JOIN messages m ON m.id = f.message_id WHERE {where} "
            "ORDER BY r DESC, m.id DESC LIMIT %(k)s"
        )
    rows = f"SELECT f.message_id, f.body, {relevance} FROM message_search f WHERE {where} "
    return (
        "SELECT m.id, m.session_id, m.role, m.active, m.compacted, m.created_at, "
        f"coalesce(m.origin_root, m.id), t.body, t.r FROM ({rows}"
        "ORDER BY r DESC, message_id DESC LIMIT %(k)s) t "
        "JOIN messages m ON m.id = t.message_id ORDER BY t.r DESC, m.id DESC"
    )


#: the any-term pass ranks at most this many of the newest compaction summaries asked for
SUMMARY_CANDIDATES = 4


def summary_sql(query: Query, tsquery: str) -> str:
    """The newest :data:`SUMMARY_CANDIDATES` compaction summaries in scope whose
    tsvector matches ``tsquery``, best ``ts_rank`` (length normalised) first; the same in
    every round of a search, so asked for once.

    A summary restates the facts of a whole compacted stretch: a query of many
    words matches it better than any one message, yet length normalisation keeps
    it out of the best ``k``. So the any-term pass also ranks the newest ones (a
    partial index finds them; each carries the goal, the constraints and the
    facts of the ones before) and the shared ranking weighs the terms each covers
    (the SQLite store does the same).
    """
    scope = ["m.kind = 'summary'"]
    if "sids" in query.params:
        scope.append("m.session_id = ANY(%(sids)s)")
    if "m.active" in query.scope:
        scope.append("m.active")
    newest = (
        f"SELECT m.id FROM messages m WHERE {' AND '.join(scope)} "
        "ORDER BY m.id DESC LIMIT %(summaries)s"
    )
    relevance = f"ts_rank(f.tsv, {tsquery}, 1)::float8 AS r"
    return (
        "SELECT m.id, m.session_id, m.role, m.active, m.compacted, m.created_at, "
        f"coalesce(m.origin_root, m.id), f.body, {relevance} "
        f"FROM ({newest}) s JOIN message_search f ON f.message_id = s.id "
        f"JOIN messages m ON m.id = s.id WHERE f.tsv @@ {tsquery} "
        "ORDER BY r DESC, m.id DESC"
    )


#: ids in ``(lo, hi]`` through an index of ids (a bitmap of the range)
ID_RANGE = "f.message_id > %(lo)s AND f.message_id <= %(hi)s"
#: the same range tested on the rows another index found (``+ 0``: no index serves it)
ID_TESTED = "f.message_id + 0 > %(lo)s AND f.message_id + 0 <= %(hi)s"


def substring_sql(query: Query, likes: str, *, bounded: str | None, indexed: bool) -> str:
    """Rows matching ``likes``, newest first (``bounded``: ids in ``(lo, hi]`` only,
    :data:`ID_RANGE` or :data:`ID_TESTED`).

    Through the trigram index (``indexed``) the order is ``message_id + 0``,
    which keeps the planner on that index instead of a backward id scan.
    """
    conditions = [likes]
    if bounded is not None:
        conditions.append(bounded)
    order = "f.message_id + 0" if indexed else "f.message_id"
    sql = _COLUMNS.format(relevance="NULL::float8", where=query.where(*conditions))
    return sql + f"ORDER BY {order} DESC LIMIT %(k)s"


def search(
    conn: psycopg.Connection[Any],
    query: str,
    *,
    session_ids: Sequence[str] | None,
    include_compacted: bool,
    limit: int,
    indexes: Indexes,
) -> list[SearchHit]:
    terms = query_terms(query)
    if not terms or limit <= 0 or (session_ids is not None and not session_ids):
        return []
    q = Query(terms, session_ids, not include_compacted)
    # a search reads few rows: starting parallel workers would cost more than they save
    _exec(conn, "SET LOCAL max_parallel_workers_per_gather = 0")
    # nor compiling the plan: JIT costs 15-20 ms on a ranked scan of a common word
    _exec(conn, "SET LOCAL jit = off")
    # the score classes serve a search of every session (within a few, every match is few),
    # which reads through the indexes' bitmaps, never a scan of the table (_ranked_rows)
    ranked = indexes.ranked and session_ids is None
    previous = _set_local(conn, {"enable_seqscan": "off"}) if ranked else None
    hits = _passes(conn, q, session_ids, limit, indexes, ranked=ranked)
    if previous is not None:
        _set_local(conn, previous)  # the caller's later statements plan as before
    return hits


def _passes(
    conn: psycopg.Connection[Any],
    q: Query,
    session_ids: Sequence[str] | None,
    limit: int,
    indexes: Indexes,
    *,
    ranked: bool,
) -> list[SearchHit]:
    """The passes of :func:`search` (see the module's docstring)."""
    terms = q.terms
    k = max(limit * 3 + 10, 30)
    summaries: list[Any] | None = None  # the any-term pass's, once a search
    while True:
        found: list[Candidate] = []
        full = False
        if q.all_words is not None:  # every term as words, then some of them
            # one word ranks as one word of an any-term pass does (ts_rank's OR rule)
            rows = _word_rows(conn, q, q.all_words, k, ranked=ranked and q.words == 1)
            full = len(rows) >= k
            found += _candidates(rows, every=q.every_word)
            if len(hits := rank(found, terms, limit)) >= limit:
                return hits
            if q.any_word is not None and q.words > 1:
                rows = _word_rows(conn, q, q.any_word, k, ranked=ranked)
                full = full or len(rows) >= k
                found += _candidates(rows, every=False)
                if summaries is None:
                    sql = summary_sql(q, q.any_word)
                    summaries = _run(conn, sql, q, k, summaries=SUMMARY_CANDIDATES)
                found += _candidates(summaries, every=False)
                if len(hits := rank(found, terms, limit)) >= limit:
                    return hits
        rows = _substring_rows(conn, q, True, session_ids, k, indexes)  # as substrings
        full = full or len(rows) >= k
        found += _candidates(rows, every=False)
        if len(terms) > 1 and len(rank(found, terms, limit)) < limit:
            rows = _substring_rows(conn, q, False, session_ids, k, indexes)
            full = full or len(rows) >= k
            found += _candidates(rows, every=False)
        hits = rank(found, terms, limit)
        if len(hits) >= limit or not full or k >= MAX_CANDIDATES:
            return hits
        k *= 4


#: the rows holding two or more of a pass's words are read whole; when they are more
#: than this, the pass ranks every match instead
MULTI_MATCHES = 2_000
#: a class bound is raised by this share before it is compared: ts_rank sums in
#: single precision, the classes are cut in double
RANK_MARGIN = 1e-4


def _lexemes(conn: psycopg.Connection[Any], q: Query) -> list[str] | None:
    """The lexeme of each word term of ``q``, in order; None when a term parses into
    several (a phrase such as ``session.go``) or none, or when the score-class index is
    not there or not valid (dropped since the store opened: a class query would then
    compute every row's classes)."""
    words = [q.params[f"t{i}"] for i in range(len(q.terms)) if f"t{i}" in q.params]
    rows = _exec(
        conn,
        "SELECT numnode(phraseto_tsquery('simple', w)), "
        "tsvector_to_array(to_tsvector('simple', w)), "
        "coalesce((SELECT indisvalid FROM pg_index "
        "WHERE indexrelid = to_regclass('message_search_rank')), false) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS x(w, i) ORDER BY i",
        (words,),
    ).fetchall()
    out = []
    for nodes, lexemes, indexed in rows:
        if not indexed or nodes != 1 or len(lexemes) != 1:
            return None
        out.append(str(lexemes[0]))
    return out


def _word_rows(
    conn: psycopg.Connection[Any], q: Query, tsquery: str, k: int, *, ranked: bool
) -> list[Any]:
    """:func:`word_sql`'s rows: through the score classes when ``ranked`` and the terms
    allow (:func:`_ranked_rows`), else by ranking every match."""
    if ranked and q.lexemes is not None:  # None: not for this query (found before)
        rows = _ranked_rows(conn, q, tsquery, k)
        if rows is not None:
            return rows
    return _run(conn, word_sql(q, tsquery), q, k)


def _class_of(v: float) -> int:
    """The score class of a word's ``v`` (:data:`.migrations.RANK_STEP`)."""
    if v <= 0:
        return RANK_CLASSES - 1
    c = math.floor(math.log(rank_class_top(0) / v) / math.log(RANK_STEP))
    return min(RANK_CLASSES - 1, max(RANK_FIRST_CLASS, c))


#: a class query's text stays below this many characters (a tsquery holds at most 1 MB;
#: 32 terms of 256 four-byte characters, a dozen entries each, would pass it)
MAX_CLASS_TEXT = 200_000


def _classes_text(words: list[str], start: int, end: int) -> str:
    """A tsquery for ``words`` in classes ``start .. end``: a whole decade as one prefix
    (``'word 03':*``, classes 30-39), the others one by one (``'word 041'``)."""
    entries = []
    c = start
    while c <= end:
        if c % 10 == 0 and c + 9 <= end:
            entries += [f"{lexeme(f'{word} {c // 10:02d}')}:*" for word in words]
            c += 10
        else:
            entries += [lexeme(f"{word} {c:03d}") for word in words]
            c += 1
    return " | ".join(entries)


def _ranked_rows(conn: psycopg.Connection[Any], q: Query, tsquery: str, k: int) -> list[Any] | None:
    """The rows of :func:`word_sql` (the best ``k`` matches of ``tsquery``, any of
    the query's words, by ``ts_rank``, newest first on a tie), reading few of the
    matches; None when a term is not one word (a phrase), the index is not there, or
    the rows holding two or more of the words are too many to read: the caller ranks
    every match (and later passes of the search do not try again).

    The first ``k + 1`` matches in index order are read and ranked: ``k`` or fewer,
    and they are every match. Otherwise the rows holding two or more of the words
    are read whole, then the rows holding a word in the best score classes
    (``search_rank_classes``): first the classes down to the one the best match read
    so far would have, then twice as many classes each time, never past the class
    of the ``k``-th best of them. A row not read holds one word, in a class not read
    yet, so its rank is below ``RANK_SCALE * top / n`` (``top``: the first class
    left's bound, ``n``: the words); the pass stops when the ``k``-th best row read
    ranks above that. Each row is ranked by ``ts_rank`` itself, so the result is the
    same as ranking every match, ties included.
    """
    rank_sql = f"ts_rank(f.tsv, {tsquery}, 1)::float8"
    join = " JOIN messages m ON m.id = f.message_id" if "m.active" in q.scope else ""

    def matching(condition: str, *, body: bool = True) -> str:
        where = " AND ".join([condition, *q.scope])
        text = ", f.body" if body else ""
        return (
            f"SELECT f.message_id, {rank_sql} AS r{text} FROM message_search f{join} WHERE {where}"
        )

    # search() turned scans of the table off: the first look would read rows in table
    # order until k + 1 match, and a class query would compute every row's classes (the
    # planner cannot estimate a class's rows); with the active-only condition, a nested
    # loop over the matches, not a join of all of messages
    if not join:
        return _ranked(conn, q, tsquery, k, matching)
    previous = _set_local(conn, dict.fromkeys(["enable_hashjoin", "enable_mergejoin"], "off"))
    rows = _ranked(conn, q, tsquery, k, matching)
    _set_local(conn, previous)  # the later passes plan as the caller's settings say
    return rows


def _ranked(
    conn: psycopg.Connection[Any],
    q: Query,
    tsquery: str,
    k: int,
    matching: Callable[..., str],
) -> list[Any] | None:
    """:func:`_ranked_rows` with its planner settings made."""
    # the first k + 1 matches in index order (every row read costs a heap page, often
    # not cached: this look reads no more than ranking k matches would)
    first = (
        "SELECT message_id, r, body, count(*) OVER () FROM ("
        f"{matching(f'f.tsv @@ {tsquery}')} LIMIT %(probe)s) s "
        "ORDER BY r DESC, message_id DESC LIMIT %(k)s"
    )
    rows = _run(conn, first, q, k, probe=k + 1)
    # message id -> rank, and the text of the rows read with theirs (the fetch reads the
    # others' again: a row read is a heap page, often not cached)
    seen = {int(mid): float(r) for mid, r, _, _ in rows}
    bodies = {int(mid): body for mid, _, body, _ in rows}
    if not rows or int(rows[0][3]) <= k:  # every match: ranked whole
        return _ranked_fetch(conn, seen, bodies, k)
    if q.lexemes is False:
        q.lexemes = _lexemes(conn, q)
    if not isinstance(q.lexemes, list):
        return None
    words = sorted(set(q.lexemes))
    n = len(words)
    first_ranks = dict(seen)
    if n > 1:  # every row holding two words or more, ranked
        pairs = " | ".join(f"({lexeme(a)} & {lexeme(b)})" for a, b in combinations(words, 2))
        sql = f"{matching('f.tsv @@ %(pairs)s::tsquery', body=False)} LIMIT %(cap)s"
        multi = _run(conn, sql, q, k, pairs=pairs, cap=MULTI_MATCHES + 1)
        if len(multi) > MULTI_MATCHES:
            q.lexemes = None  # so it is for every pass of this query: rank every match
            return None
        seen.update((int(mid), float(r)) for mid, r in multi)
        for mid, _ in multi:
            first_ranks.pop(int(mid), None)
    by_class = (
        f"{matching('search_rank_classes(f.tsv) @@ %(classes)s::tsquery')} "
        "ORDER BY r DESC, f.message_id DESC LIMIT %(k)s"
    )
    # the first classes: down to the one of the best first match holding one word;
    # then twice as many classes each time, never past the class of the k-th best of
    # them (once read, every row above it is held: the pass stops there)
    singles = sorted(first_ranks.values(), reverse=True)
    start = RANK_FIRST_CLASS
    end = _class_of(singles[0] * n / RANK_SCALE) if singles else start
    last = _class_of(singles[k - 1] * n / RANK_SCALE) if len(singles) >= k else None
    step = 2
    while True:
        classes = _classes_text(words, start, end)
        if len(classes) > MAX_CLASS_TEXT:
            q.lexemes = None
            return None
        for mid, r, body in _run(conn, by_class, q, k, classes=classes):
            seen[int(mid)] = float(r)
            bodies[int(mid)] = body
        if end >= RANK_CLASSES - 1:
            break
        if len(seen) >= k:
            kth = sorted(seen.values(), reverse=True)[k - 1]
            if kth > RANK_SCALE * rank_class_top(end + 1) / n * (1 + RANK_MARGIN):
                break
        start, end = end + 1, min(RANK_CLASSES - 1, end + step)
        if last is not None and start <= last < end:
            end = last
        step *= 2
    return _ranked_fetch(conn, seen, bodies, k)


def _ranked_fetch(
    conn: psycopg.Connection[Any], seen: dict[int, float], bodies: dict[int, str], k: int
) -> list[Any]:
    """The best ``k`` of ``seen`` (message id -> rank) as :func:`word_sql` gives them,
    with the text in ``bodies`` (read from the index's table for the others)."""
    best = sorted(seen.items(), key=lambda item: (-item[1], -item[0]))[:k]
    if not best:
        return []
    ids = [mid for mid, _ in best]
    rows = {
        int(row[0]): row
        for row in _exec(
            conn,
            b"SELECT id, session_id, role, active, compacted, created_at, "
            b"coalesce(origin_root, id) FROM messages WHERE id = ANY(%s)",
            (ids,),
        ).fetchall()
    }
    missing = [mid for mid in ids if mid not in bodies]
    if missing:
        found = _exec(
            conn,
            b"SELECT message_id, body FROM message_search WHERE message_id = ANY(%s)",
            (missing,),
        ).fetchall()
        bodies = {**bodies, **{int(mid): body for mid, body in found}}
    return [(*rows[mid], bodies[mid], r) for mid, r in best]


def _run(conn: psycopg.Connection[Any], sql: str, q: Query, k: int, **extra: Any) -> list[Any]:
    params = {**q.params, "k": k, **extra}
    # never a prepared statement: psycopg prepares a query run five times, and the
    # server may then keep a generic plan, blind to how many rows the words or the id
    # range hold (and to the planner settings made for this query)
    return list(_exec(conn, sql.encode(), params).fetchall())


def _exec(conn: psycopg.Connection[Any], sql: str | bytes, params: Any = None) -> Any:
    """Run one statement of a search, never prepared (see :func:`_run`)."""
    return conn.execute(sql, params, prepare=False)


def _substring_rows(
    conn: psycopg.Connection[Any],
    q: Query,
    every: bool,
    session_ids: Sequence[str] | None,
    k: int,
    indexes: Indexes,
) -> list[Any]:
    """The newest ``k`` rows holding every (or any) term as a substring.

    Sessions of at most :data:`SESSION_SCAN_ROWS` rows in all are read in id
    order (cheaper than the trigram index's long lists over a big database);
    otherwise the vocabulary (:func:`_vocabulary_rows`) or the trigram index
    serves, window by window of ids from the newest (:func:`_windows`).
    """
    if session_ids is not None:
        count = _exec(
            conn,
            "SELECT count(*) FROM message_search WHERE session_id = ANY(%s)",
            (list(session_ids),),
        ).fetchone()
        indexed = bool(count and int(count[0]) > SESSION_SCAN_ROWS)
        sql = substring_sql(q, q.likes(every=every, indexed=indexed), bounded=None, indexed=indexed)
        return _run(conn, sql, q, k)
    top = _exec(conn, "SELECT coalesce(max(message_id), 0) FROM message_search").fetchone()
    hi = int(top[0]) if top else 0
    if indexes.trigram and all(_PLAIN.fullmatch(t) for t in q.terms):
        rows = _vocabulary_rows(conn, q, every, k, hi)
        if rows is not None:
            return rows
    likes = q.likes(every=every, indexed=True)
    windows = (
        substring_sql(q, likes, bounded=ID_RANGE, indexed=True),
        substring_sql(q, likes, bounded=ID_TESTED, indexed=True),
    )
    return _windows(conn, q, windows, k, hi, FIRST_WINDOW)


def _windows(
    conn: psycopg.Connection[Any],
    q: Query,
    sql: tuple[str, str],
    k: int,
    hi: int,
    first: int,
    **params: Any,
) -> list[Any]:
    """The newest ``k`` rows of ``sql`` (newest first, ids in ``(lo, hi]``) among the ids
    up to ``hi``, read window by window from the newest: ``first`` ids, then
    :data:`WINDOW_GROWTH` times as many each time (or as many as the rate of matches
    found so far says hold the rest, twice over, when that is more), until ``k``
    are found.

    An index (GIN) gives a fragment's matches in block order, so the newest ``k``
    of them cannot be read alone: reading every match costs a heap page each,
    mostly not cached (320 ms for 3,500 matches at 10^6 messages, where the 70
    newest are in the newest 20,000 rows: 23 ms). Each window is the bitmap of
    the matches ANDed with the bitmap of its id range (``sql[0]``, through the
    block-range index ``message_search_newest``: a few runs of blocks); the
    window that reaches the oldest row tests the ids on the matches instead
    (``sql[1]``): all of them are read then, and a bitmap of every id costs more.
    The windows' ids grow fourfold, so a fragment in few rows costs a few more
    index reads, never many more heap pages.
    """
    found: list[Any] = []
    size = first
    top = hi
    while hi > 0 and len(found) < k:
        lo = max(0, hi - size)
        found += _run(conn, sql[0] if lo > 0 else sql[1], q, k - len(found), lo=lo, hi=hi, **params)
        hi = lo
        # the next window: larger by WINDOW_GROWTH, or as large as the rate found so far
        # says holds the rest, twice over
        size *= WINDOW_GROWTH
        if found:
            size = max(size, _ids_for(k - len(found), len(found), top - hi))
    return found


def _ids_for(wanted: int, matched: int, ids: int) -> int:
    """How many older ids hold ``wanted`` more matches, twice over, at the rate of
    ``matched`` in the ``ids`` read so far."""
    return 2 * wanted * ids // matched


def _vocabulary_rows(
    conn: psycopg.Connection[Any], q: Query, every: bool, k: int, hi: int
) -> list[Any] | None:
    """The newest ``k`` rows holding every (or any) term, each a run of letters and digits;
    None when a term is in too many words to ask the vocabulary.

    First the newest :data:`PROBE_ROWS` rows are read in id order, every one
    checked (exact, and what a common fragment needs: ``k`` are there); when
    that finds some but too few, as many older rows again as the rate found
    says should hold the rest (at most :data:`PROBE_MORE_ROWS`). Then, for the
    rarer fragments, every row through the vocabulary: a row holds such a term
    when one of its lexemes does (``search_words`` gives the words holding it
    through its trigram index, the word index the rows holding those words), or,
    for the rows whose text the parser does not wholly index
    (:data:`.migrations.UNPARSED`), when its text does (the partial trigram
    index). Those rows are read window by window of ids from the newest
    (:func:`_windows`), the first as large as the rate found says holds the
    rest, twice over (at least :data:`FIRST_WINDOW`).
    """
    probe = substring_sql(q, q.likes(every=every, indexed=False), bounded=ID_RANGE, indexed=False)
    lo = max(0, hi - PROBE_ROWS)
    found = _run(conn, probe, q, k, lo=lo, hi=hi)
    if len(found) >= k or lo == 0:
        return found
    if found:
        more = (k - len(found)) * PROBE_ROWS * 2 // len(found)
        if more <= PROBE_MORE_ROWS:
            found += _run(conn, probe, q, k - len(found), lo=max(0, lo - more), hi=lo)
            if len(found) >= k or lo <= more:
                return found
            lo -= more
    # the rows older than those read, through the indexes: a bitmap of each, ANDed with
    # a window's id range, so only the rows matching both are read (an index scan would
    # test the words on every row of the range). The vocabulary too is read through its
    # trigram index: a scan tests ILIKE on every word (14 ms for 26,000), which the
    # planner prices as nothing
    off = ["enable_seqscan", "enable_indexscan"]
    if "m.active" in q.scope:  # a nested loop over the newest matches, not a hash of messages
        off += ["enable_hashjoin", "enable_mergejoin"]
    previous = _set_local(conn, dict.fromkeys(off, "off"))
    groups: list[list[str]] = []
    for index in range(len(q.terms)):
        words = _exec(
            conn,
            "SELECT DISTINCT word FROM search_words WHERE word ILIKE %s LIMIT %s",
            (q.params[f"p{index}"], MAX_WORDS + 1),
        ).fetchall()
        if len(words) > MAX_WORDS:
            _set_local(conn, previous)
            return None
        groups.append([lexeme(str(row[0])) for row in words])
    rows: dict[int, Any] = {int(row[0]): row for row in found}
    # one index scan a word (the word index tests a query of many alternatives against
    # every posting); the estimate of such a query is half the table, so the planner
    # would read it all rather than the bitmap of the real matches
    arrays = [g for g in groups if g] if not every else (groups if all(groups) else [])
    if arrays and not every:
        arrays = [[w for g in arrays for w in g]]
    tests = [f"f.tsv @@ ANY(%(w{i})s::text[]::tsquery[])" for i in range(len(arrays))]
    params = {f"w{i}": group for i, group in enumerate(arrays)}
    unparsed = f"({q.likes(every=every, indexed=True)} AND {UNPARSED.format(alias='f.')})"
    holds = f"(({' AND '.join(tests)}) OR {unparsed})" if tests else unparsed
    # window by window from the newest (_windows): the first as many ids as the rate
    # found says hold the rest, twice over
    first = FIRST_WINDOW
    if found:
        first = max(first, _ids_for(k - len(found), len(found), hi - lo))
    sql = (newest_sql(q, holds, ID_RANGE), newest_sql(q, holds, ID_TESTED))
    for row in _windows(conn, q, sql, k - len(found), lo, first, **params):
        rows[int(row[0])] = row
    _set_local(conn, previous)  # the later passes plan as the caller's settings say
    return [rows[mid] for mid in sorted(rows, reverse=True)[:k]]


def _set_local(conn: psycopg.Connection[Any], settings: dict[str, str]) -> dict[str, str]:
    """Set ``settings`` for the rest of the transaction; return their previous values
    (to set back: ``RESET`` would give the server's default, not the session's value).
    On an error the transaction is rolled back, and its ``SET LOCAL`` with it."""
    names = list(settings)
    # one statement: the subquery (kept apart by OFFSET 0) reads every setting before the
    # outer list sets them
    olds = ", ".join(f"current_setting(%(n{i})s) AS o{i}" for i in range(len(names)))
    sets = ", ".join(f"set_config(%(n{i})s, %(v{i})s, true)" for i in range(len(names)))
    keep = ", ".join(f"o{i}" for i in range(len(names)))
    params = {f"n{i}": name for i, name in enumerate(names)}
    params.update({f"v{i}": settings[name] for i, name in enumerate(names)})
    sql = f"SELECT {keep}, {sets} FROM (SELECT {olds} OFFSET 0) s"
    row = _exec(conn, sql, params).fetchone() or ()
    return {name: str(value) for name, value in zip(names, row[: len(names)], strict=True)}


def newest_sql(query: Query, *conditions: str) -> str:
    """The newest ``k`` rows matching ``conditions`` through a bitmap of their index
    (``message_id + 0`` keeps the planner off a backward id scan, which would test
    the conditions on every row until ``k`` match).

    The newest ``k`` are taken from ``message_search`` alone and only those are
    joined to ``messages`` (joining every match first made the planner read all
    of ``messages``); the active-only condition needs ``messages``, so with it
    the join stays inside, as a nested loop.
    """
    if "m.active" in query.scope:
        where = query.where(*conditions)
        sql = _COLUMNS.format(relevance="NULL::float8", where=where)
        return sql + "ORDER BY f.message_id + 0 DESC LIMIT %(k)s"
    inner = " AND ".join([*conditions, *query.scope])
    return (
        "SELECT m.id, m.session_id, m.role, m.active, m.compacted, m.created_at, "
        "coalesce(m.origin_root, m.id), t.body, NULL::float8 FROM ("
        f"SELECT f.message_id, f.body FROM message_search f WHERE {inner} "
        "ORDER BY f.message_id + 0 DESC LIMIT %(k)s) t "
        "JOIN messages m ON m.id = t.message_id ORDER BY m.id DESC"
    )


def _candidates(rows: list[Any], *, every: bool) -> list[Candidate]:
    return [
        Candidate(
            message_id=int(mid),
            session_id=sid,
            role=role,
            active=bool(active),
            compacted=bool(compacted),
            created_at=float(created_at),
            root=int(root),
            text=body,
            relevance=None if relevance is None else float(relevance),
            all_words=every,
        )
        for mid, sid, role, active, compacted, created_at, root, body, relevance in rows
    ]
