"""Full-text and substring search over ``message_search``.

* The query is text. Word matching uses ``plainto_tsquery('simple', query)``,
  which reads no operators: ``&``, ``|``, ``!``, ``:*``, quotes and
  parentheses are ordinary characters, and every word must match.
* Substring matching splits the query on whitespace; every term must occur
  (case-insensitively) in the row. ``%``, ``_`` and ``\\`` are escaped, so
  ``ILIKE`` treats them literally. With ``pg_trgm`` installed a trigram GIN
  index serves these (including CJK text, which the word parser keeps as
  whole runs); without it they scan.
* Rows matching every word come first, ranked by ``ts_rank_cd`` (length
  normalised) + :data:`SUBSTRING_BONUS` when the substrings match too. Rows
  matching only as substrings follow, all scored :data:`SUBSTRING_BONUS`,
  newest first (so a common fragment does not rank every match). Higher
  scores are better.
* A row carried forward by compaction and its origin share ``origin_root``:
  only the best of them is reported (the active copy on a tie).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes_hookspecs.records import SearchHit

if TYPE_CHECKING:
    import psycopg

SUBSTRING_BONUS = 0.1
SNIPPET_RADIUS = 60
MAX_CANDIDATES = 20_000
_WORDISH = re.compile(r"\w", re.UNICODE)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class ParsedQuery:
    text: str
    terms: tuple[str, ...]
    has_words: bool

    @property
    def empty(self) -> bool:
        return not self.terms


def parse(query: str) -> ParsedQuery:
    cleaned = query.replace("\x00", " ")
    seen: dict[str, None] = {}
    for term in cleaned.split():
        seen.setdefault(term, None)
    terms = tuple(seen)
    return ParsedQuery(" ".join(terms), terms, bool(_WORDISH.search(cleaned)))


def like_pattern(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def snippet(text: str, terms: tuple[str, ...]) -> str:
    """About ``2 * SNIPPET_RADIUS`` characters of ``text`` around the first term found."""
    lowered = text.lower()
    hits = [i for i in (lowered.find(t.lower()) for t in terms) if i >= 0]
    at = min(hits) if hits else 0
    start = max(0, at - SNIPPET_RADIUS)
    end = min(len(text), at + SNIPPET_RADIUS + max((len(t) for t in terms), default=0))
    piece = _SPACES.sub(" ", text[start:end]).strip()
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


def _filters(
    parsed: ParsedQuery, session_id: str | None, active_only: bool
) -> tuple[list[str], str, dict[str, Any]]:
    params: dict[str, Any] = {"q": parsed.text, "bonus": SUBSTRING_BONUS}
    subs = []
    for index, term in enumerate(parsed.terms):
        params[f"p{index}"] = like_pattern(term)
        subs.append(f"f.body ILIKE %(p{index})s")
    where = []
    if session_id is not None:
        where.append("f.session_id = %(sid)s")
        params["sid"] = session_id
    if active_only:
        where.append("m.active")
    return where, "(" + " AND ".join(subs) + ")", params


_SELECT = (
    "SELECT m.id, m.session_id, m.role, m.active, m.compacted, m.created_at, "
    "coalesce(m.origin_root, m.id), f.body, ({score})::float8 AS score "
    "FROM message_search f JOIN messages m ON m.id = f.message_id WHERE {where} "
)
_WORD = "f.tsv @@ plainto_tsquery('simple', %(q)s)"


def word_sql(
    parsed: ParsedQuery, session_id: str | None, active_only: bool
) -> tuple[str, dict[str, Any]]:
    """Rows matching every word, ranked: ``ts_rank_cd`` + the bonus when substrings match too."""
    where, substring, params = _filters(parsed, session_id, active_only)
    score = (
        "ts_rank_cd(f.tsv, plainto_tsquery('simple', %(q)s), 1)"
        f" + (CASE WHEN {substring} THEN %(bonus)s ELSE 0 END)"
    )
    sql = _SELECT.format(score=score, where=" AND ".join([_WORD, *where]))
    return sql + "ORDER BY score DESC, m.active DESC, m.id DESC LIMIT %(k)s", params


def substring_sql(
    parsed: ParsedQuery, session_id: str | None, active_only: bool
) -> tuple[str, dict[str, Any]]:
    """Rows matching every term as a substring but not as words: equal scores, newest first.

    Ordering by id lets PostgreSQL stop after ``k`` rows instead of ranking
    every match (a common fragment can match a large share of all rows).
    """
    where, substring, params = _filters(parsed, session_id, active_only)
    conditions = [substring, *where]
    if parsed.has_words:
        conditions.append(f"NOT ({_WORD})")
    sql = _SELECT.format(score="%(bonus)s", where=" AND ".join(conditions))
    return sql + "ORDER BY f.message_id DESC LIMIT %(k)s", params


def search(
    conn: psycopg.Connection[Any],
    query: str,
    *,
    session_id: str | None,
    include_compacted: bool,
    limit: int,
) -> list[SearchHit]:
    parsed = parse(query)
    if parsed.empty or limit <= 0:
        return []
    parts = [substring_sql(parsed, session_id, not include_compacted)]
    if parsed.has_words:
        parts.insert(0, word_sql(parsed, session_id, not include_compacted))
    k = max(limit * 3 + 10, 30)
    while True:
        rows: list[Any] = []
        full = False
        for sql, params in parts:  # word matches (ranked) first, then substring-only ones
            found = conn.execute(sql.encode(), {**params, "k": k}).fetchall()
            full |= len(found) >= k
            rows += found
        hits: list[SearchHit] = []
        seen: set[int] = set()
        for mid, sid, role, active, compacted, created_at, root, body, score in rows:
            if root in seen:
                continue
            seen.add(root)
            hits.append(
                SearchHit(
                    message_id=mid,
                    session_id=sid,
                    role=role,
                    snippet=snippet(body, parsed.terms),
                    score=score,
                    active=active,
                    compacted=compacted,
                    created_at=created_at,
                )
            )
            if len(hits) >= limit:
                return hits
        if not full or k >= MAX_CANDIDATES:
            return hits
        k *= 4
