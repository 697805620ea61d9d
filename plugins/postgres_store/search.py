"""Search over ``message_search`` with PostgreSQL's full-text machinery and pg_trgm.

What a query means and how hits rank is decided once, in
:mod:`hermes_core.searchkit` (both stores use it); this module finds the
candidate rows with PostgreSQL's own tools:

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
  ranks higher).
* **As substrings:** when still short of ``limit``, ``body ILIKE`` every
  term, then any term (``%``, ``_`` and ``\\`` escaped), served by the
  ``pg_trgm`` GIN index when the extension is installed (including CJK text,
  which the word parser keeps as whole runs), newest first. So a row that
  covers every term only as substrings is looked for when the word index
  gives fewer than ``limit`` hits, as in the SQLite store.
* The ``simple`` configuration: no stemming and no stop words, the same
  words the SQLite store's unicode61 index matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hermes_core.searchkit import Candidate, has_word, query_terms, rank
from hermes_hookspecs.records import SearchHit

if TYPE_CHECKING:
    import psycopg

MAX_CANDIDATES = 20_000
#: substrings are looked for in the newest rows first (see _substring_rows)
NEWEST_WINDOW = 20_000
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
    """Rows whose tsvector matches ``tsquery``, best ``ts_rank`` first (length normalised).

    The ranking reads ``message_search`` alone and keeps the best ``k``; only
    those are joined to ``messages`` (joining every match first costs an index
    lookup per matching row, most of a common word's search). The active-only
    condition needs ``messages``, so with it the join stays inside.
    """
    relevance = f"ts_rank(f.tsv, {tsquery}, 1)::float8"
    if "m.active" in query.scope:
        where = query.where(f"f.tsv @@ {tsquery}")
        sql = _COLUMNS.format(relevance=f"{relevance} AS r", where=where)
        return sql + "ORDER BY r DESC, m.id DESC LIMIT %(k)s"
    inner = " AND ".join([f"f.tsv @@ {tsquery}", *query.scope])
    return (
        "SELECT m.id, m.session_id, m.role, m.active, m.compacted, m.created_at, "
        "coalesce(m.origin_root, m.id), t.body, t.r FROM ("
        f"SELECT f.message_id, f.body, {relevance} AS r FROM message_search f WHERE {inner} "
        "ORDER BY r DESC, f.message_id DESC LIMIT %(k)s) t "
        "JOIN messages m ON m.id = t.message_id ORDER BY t.r DESC, m.id DESC"
    )


def substring_sql(query: Query, likes: str, *, bounded: bool, indexed: bool) -> str:
    """Rows matching ``likes``, newest first (``bounded``: ids in ``(lo, hi]`` only).

    Through the trigram index (``indexed``) the order is ``message_id + 0``,
    which keeps the planner on that index instead of a backward id scan.
    """
    conditions = [likes]
    if bounded:
        conditions.append("f.message_id > %(lo)s AND f.message_id <= %(hi)s")
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
) -> list[SearchHit]:
    terms = query_terms(query)
    if not terms or limit <= 0 or (session_ids is not None and not session_ids):
        return []
    q = Query(terms, session_ids, not include_compacted)
    # a search reads few rows: starting parallel workers would cost more than they save
    conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
    # nor compiling the plan: JIT costs 15-20 ms on a ranked scan of a common word
    conn.execute("SET LOCAL jit = off")
    k = max(limit * 3 + 10, 30)
    while True:
        found: list[Candidate] = []
        full = False
        if q.all_words is not None:  # every term as words, then some of them
            rows = _run(conn, word_sql(q, q.all_words), q, k)
            full = len(rows) >= k
            found += _candidates(rows, every=q.every_word)
            if len(hits := rank(found, terms, limit)) >= limit:
                return hits
            if q.any_word is not None and q.words > 1:
                rows = _run(conn, word_sql(q, q.any_word), q, k)
                full = full or len(rows) >= k
                found += _candidates(rows, every=False)
                if len(hits := rank(found, terms, limit)) >= limit:
                    return hits
        rows = _substring_rows(conn, q, True, session_ids, k)  # as substrings
        full = full or len(rows) >= k
        found += _candidates(rows, every=False)
        if len(terms) > 1 and len(rank(found, terms, limit)) < limit:
            rows = _substring_rows(conn, q, False, session_ids, k)
            full = full or len(rows) >= k
            found += _candidates(rows, every=False)
        hits = rank(found, terms, limit)
        if len(hits) >= limit or not full or k >= MAX_CANDIDATES:
            return hits
        k *= 4


def _run(conn: psycopg.Connection[Any], sql: str, q: Query, k: int, **extra: Any) -> list[Any]:
    return list(conn.execute(sql.encode(), {**q.params, "k": k, **extra}).fetchall())


def _substring_rows(
    conn: psycopg.Connection[Any],
    q: Query,
    every: bool,
    session_ids: Sequence[str] | None,
    k: int,
) -> list[Any]:
    """The newest ``k`` rows holding every (or any) term as a substring.

    Sessions of at most :data:`SESSION_SCAN_ROWS` rows in all are read in id
    order (cheaper than the trigram index's long lists over a big database);
    otherwise the trigram index serves, first for the newest
    :data:`NEWEST_WINDOW` rows (if ``k`` matches are there they are the newest
    ``k`` of all), then for the older ones.
    """
    if session_ids is not None:
        count = conn.execute(
            "SELECT count(*) FROM message_search WHERE session_id = ANY(%s)", (list(session_ids),)
        ).fetchone()
        indexed = bool(count and int(count[0]) > SESSION_SCAN_ROWS)
        sql = substring_sql(
            q, q.likes(every=every, indexed=indexed), bounded=False, indexed=indexed
        )
        return _run(conn, sql, q, k)
    top = conn.execute("SELECT coalesce(max(message_id), 0) FROM message_search").fetchone()
    hi = int(top[0]) if top else 0
    likes = q.likes(every=every, indexed=True)
    sql = substring_sql(q, likes, bounded=True, indexed=True)
    found: list[Any] = []
    if hi > NEWEST_WINDOW:  # the newest rows first: a common fragment is found there
        found = _run(conn, sql, q, k, lo=hi - NEWEST_WINDOW, hi=hi)
        if len(found) >= k:
            return found
        hi -= NEWEST_WINDOW
    return found + _run(conn, sql, q, k - len(found), lo=0, hi=hi)


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
