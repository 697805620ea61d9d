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
#: substring-only matches are looked for in the newest rows first (see substring_sql)
NEWEST_WINDOW = 20_000
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
    parsed: ParsedQuery, session_id: str | None, active_only: bool, *, floor: int | None
) -> tuple[str, dict[str, Any]]:
    """Rows matching every term as a substring but not as words: equal scores, newest first.

    With ``floor`` only rows with a larger id are read (the newest
    :data:`NEWEST_WINDOW` rows): if ``k`` matches are there, they are the
    newest ``k`` of all. Without it the trigram index is used for every match
    (``message_id + 0`` keeps the planner off a whole-table backward id scan).
    """
    where, substring, params = _filters(parsed, session_id, active_only)
    conditions = [substring, *where]
    if parsed.has_words:
        conditions.append(f"NOT ({_WORD})")
    order = "f.message_id"
    if floor is not None:
        conditions.append("f.message_id > %(floor)s")
        params["floor"] = floor
    elif session_id is None:
        order = "f.message_id + 0"
    sql = _SELECT.format(score="%(bonus)s", where=" AND ".join(conditions))
    return sql + f"ORDER BY {order} DESC LIMIT %(k)s", params


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
    active_only = not include_compacted
    k = max(limit * 3 + 10, 30)
    while True:
        rows: list[Any] = []
        full = False
        if parsed.has_words:  # word matches, ranked, come first
            sql, params = word_sql(parsed, session_id, active_only)
            rows = conn.execute(sql.encode(), {**params, "k": k}).fetchall()
            full = len(rows) >= k
        if len(_dedupe(rows, limit)) < limit:  # then substring-only matches, newest first
            rows += _substring_rows(conn, parsed, session_id, active_only, k)
            full = full or len(rows) >= k
        hits = _dedupe(rows, limit)
        if len(hits) >= limit or not full or k >= MAX_CANDIDATES:
            return [_hit(row, parsed) for row in hits]
        k *= 4


def _substring_rows(
    conn: psycopg.Connection[Any],
    parsed: ParsedQuery,
    session_id: str | None,
    active_only: bool,
    k: int,
) -> list[Any]:
    if session_id is None:
        top = conn.execute("SELECT coalesce(max(message_id), 0) FROM message_search").fetchone()
        floor = int(top[0]) - NEWEST_WINDOW if top else 0
        if floor > 0:
            sql, params = substring_sql(parsed, None, active_only, floor=floor)
            found = conn.execute(sql.encode(), {**params, "k": k}).fetchall()
            if len(found) >= k:
                return list(found)
    sql, params = substring_sql(parsed, session_id, active_only, floor=None)
    return list(conn.execute(sql.encode(), {**params, "k": k}).fetchall())


def _dedupe(rows: list[Any], limit: int) -> list[Any]:
    """The first row of each carried-forward family (``origin_root``), up to ``limit``."""
    out: list[Any] = []
    seen: set[int] = set()
    for row in rows:
        if row[6] in seen:
            continue
        seen.add(row[6])
        out.append(row)
        if len(out) >= limit:
            break
    return out


def _hit(row: Any, parsed: ParsedQuery) -> SearchHit:
    mid, sid, role, active, compacted, created_at, _root, body, score = row
    return SearchHit(
        message_id=mid,
        session_id=sid,
        role=role,
        snippet=snippet(body, parsed.terms),
        score=score,
        active=active,
        compacted=compacted,
        created_at=created_at,
    )
