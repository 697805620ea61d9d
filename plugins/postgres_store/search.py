"""Search over ``message_search`` with PostgreSQL's full-text machinery and pg_trgm.

What a query means and how hits rank is decided once, in
:mod:`hermes_core.searchkit` (both stores use it); this module finds the
candidate rows with PostgreSQL's own tools:

* Each term becomes ``phraseto_tsquery('simple', term)``, which reads no
  operators (``&``, ``|``, ``!``, ``<->``, ``:*``, quotes and parentheses are
  ordinary characters); a term of several words is a phrase. Terms are
  passed as bind parameters, never spliced into SQL.
* **Every term as words:** the terms' tsqueries joined with ``&&``, matched
  against the ``tsvector`` (GIN index), ranked by ``ts_rank_cd`` (cover
  density: terms close together rank higher), length normalised.
* **Every term as substrings:** when that found fewer than ``limit`` rows,
  ``body ILIKE`` every term (``%``, ``_`` and ``\\`` escaped), served by the
  ``pg_trgm`` GIN index when the extension is installed (including CJK
  text, which the word parser keeps as whole runs), newest first.
* **Some of the terms:** when still short of ``limit``, the tsqueries
  joined with ``||``, ranked by ``ts_rank`` (each term's weight saturates,
  so a row covering more terms ranks higher), plus ``body ILIKE`` any term,
  newest first.
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
#: substring-only matches are looked for in the newest rows first (see substring_rows)
NEWEST_WINDOW = 20_000
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
        likes = []
        for index, term in enumerate(terms):
            self.params[f"p{index}"] = like_pattern(term)
            likes.append(f"f.body ILIKE %(p{index})s")
            if has_word(term):
                self.params[f"t{index}"] = term
                words.append(f"phraseto_tsquery('simple', %(t{index})s)")
        self.every_word = len(words) == len(terms)
        self.all_words = "(" + " && ".join(words) + ")" if words else None
        self.any_word = "(" + " || ".join(words) + ")" if words else None
        self.all_likes = "(" + " AND ".join(likes) + ")"
        self.any_like = "(" + " OR ".join(likes) + ")"
        self.scope: list[str] = []
        if session_ids is not None:
            self.scope.append("f.session_id = ANY(%(sids)s)")
            self.params["sids"] = list(session_ids)
        if active_only:
            self.scope.append("m.active")

    def where(self, *conditions: str) -> str:
        return " AND ".join([*conditions, *self.scope])


def word_sql(query: Query, tsquery: str, ranker: str) -> str:
    """Rows whose tsvector matches ``tsquery``, best ``ranker`` first."""
    relevance = f"{ranker}(f.tsv, {tsquery}, 1)::float8 AS r"
    sql = _COLUMNS.format(relevance=relevance, where=query.where(f"f.tsv @@ {tsquery}"))
    return sql + "ORDER BY r DESC, m.id DESC LIMIT %(k)s"


def substring_sql(query: Query, likes: str, *, floor: bool, global_order: bool) -> str:
    """Rows matching ``likes``, newest first.

    With ``floor`` only rows with a larger id are read (the newest
    :data:`NEWEST_WINDOW` rows): if ``k`` matches are there, they are the
    newest ``k`` of all. ``global_order`` orders by ``message_id + 0``, which
    keeps the planner on the trigram index instead of a backward id scan.
    """
    conditions = [likes]
    if floor:
        conditions.append("f.message_id > %(floor)s")
    order = "f.message_id + 0" if global_order and not floor else "f.message_id"
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
    k = max(limit * 3 + 10, 30)
    while True:
        found: list[Candidate] = []
        full = False
        if q.all_words is not None:  # every term as words
            rows = _run(conn, word_sql(q, q.all_words, "ts_rank_cd"), q, k)
            full = len(rows) >= k
            found += _candidates(rows, every=q.every_word)
            hits = rank(found, terms, limit)
            if len(hits) >= limit:
                return hits
        rows = _substring_rows(conn, q, q.all_likes, session_ids, k)  # every term as substrings
        full = full or len(rows) >= k
        found += _candidates(rows, every=False)
        if len(terms) > 1 and len(rank(found, terms, limit)) < limit:  # some of the terms
            if q.any_word is not None:
                rows = _run(conn, word_sql(q, q.any_word, "ts_rank"), q, k)
                full = full or len(rows) >= k
                found += _candidates(rows, every=False)
            rows = _substring_rows(conn, q, q.any_like, session_ids, k)
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
    likes: str,
    session_ids: Sequence[str] | None,
    k: int,
) -> list[Any]:
    if session_ids is None:
        top = conn.execute("SELECT coalesce(max(message_id), 0) FROM message_search").fetchone()
        floor = int(top[0]) - NEWEST_WINDOW if top else 0
        if floor > 0:
            sql = substring_sql(q, likes, floor=True, global_order=True)
            found = _run(conn, sql, q, k, floor=floor)
            if len(found) >= k:
                return found
    sql = substring_sql(q, likes, floor=False, global_order=session_ids is None)
    return _run(conn, sql, q, k)


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
