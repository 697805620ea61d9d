"""Full-text search over the word and trigram FTS5 indexes.

* The user's query is split on whitespace into terms; each term is passed to
  FTS5 as a double-quoted string (inner quotes doubled), so FTS5 syntax in a
  query (``AND``, ``NEAR``, ``*``, ``:``, parentheses, quotes) is plain text.
* The word index (unicode61, diacritics folded) needs every term that has a
  letter or digit; ranking is bm25.
* The trigram index (``detail=none``: which rows hold a trigram, not where)
  finds the candidate rows holding every trigram of each term of three or
  more characters (at most :data:`TRIGRAMS_PER_TERM` spread over a long
  term); each candidate's text is then checked to contain every term of the
  query as a substring, case-insensitively. That matches substrings and CJK
  text, which unicode61 does not split into words.
* A query made only of terms shorter than three characters also scans for
  substrings, within the session when ``session_id`` is given, otherwise in
  the newest :data:`SHORT_SCAN_ROWS` messages.
* Word matches rank first, by bm25 (``score = 1 + -bm25``, so >= 1);
  substring-only matches follow (``score`` in ``[0, 1)``, by how often the
  terms occur, damped by length). The trigram index is only asked when the
  word index found fewer than ``limit`` rows, and is read newest first: for a
  substring that matches very many rows, the candidates are the newest
  ``3 * limit + 10`` (more if deduplication needs them).
* A row carried forward by compaction and its origin (``origin_root``) are
  reported once: the best-scoring copy, preferring the active one.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

from hermes_hookspecs.records import SearchHit

from .rows import search_text

SHORT_SCAN_ROWS = 50_000
TRIGRAMS_PER_TERM = 12
SNIPPET_RADIUS = 60
_MAX_CANDIDATES = 20_000
_WORDISH = re.compile(r"\w", re.UNICODE)
_SPACES = re.compile(r"\s+")


def quote(term: str) -> str:
    """An FTS5 string literal matching ``term`` as text."""
    return '"' + term.replace('"', '""') + '"'


@dataclass(frozen=True)
class ParsedQuery:
    """A user query split into what each index is asked."""

    terms: tuple[str, ...]
    word_match: str | None
    tri_match: str | None
    short_terms: tuple[str, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.terms


def trigrams(term: str) -> list[str]:
    """The trigrams of ``term`` the index is asked for (all, or an even spread of a long one)."""
    grams = [term[i : i + 3] for i in range(len(term) - 2)]
    if len(grams) > TRIGRAMS_PER_TERM:
        step = (len(grams) - 1) / (TRIGRAMS_PER_TERM - 1)
        grams = [grams[round(i * step)] for i in range(TRIGRAMS_PER_TERM)]
    return list(dict.fromkeys(grams))


def parse(query: str) -> ParsedQuery:
    """Split and escape a user query (see module docstring)."""
    seen: dict[str, None] = {}
    for term in query.replace("\x00", " ").split():
        seen.setdefault(term, None)
    terms = tuple(seen)
    word_terms = [t for t in terms if _WORDISH.search(t)]
    tri_terms = [t for t in terms if len(t) >= 3]
    short = tuple(t for t in terms if len(t) < 3)
    return ParsedQuery(
        terms=terms,
        word_match=" ".join(quote(t) for t in word_terms) if word_terms else None,
        tri_match=" ".join(quote(g) for t in tri_terms for g in trigrams(t)) if tri_terms else None,
        short_terms=short,
    )


def _fts_candidates(
    conn: sqlite3.Connection,
    table: str,
    match: str,
    session_id: str | None,
    active_only: bool,
    id_range: tuple[int, int] | None,
    k: int,
    *,
    newest_first: bool = False,
) -> list[tuple[int, float]]:
    where = [f"{table} MATCH ?"]
    params: list[object] = [match]
    if id_range is not None:
        where.append(f"{table}.rowid BETWEEN ? AND ?")
        params.extend(id_range)
    join = ""
    if session_id is not None or active_only:
        join = f" CROSS JOIN messages m ON m.id = {table}.rowid"
        if session_id is not None:
            where.append("m.session_id = ?")
            params.append(session_id)
        if active_only:
            where.append("m.active = 1")
    params.append(k)
    if newest_first:  # streams in rowid order and stops after k rows
        score, order = "0.0", f"{table}.rowid DESC"
    else:
        score, order = f"bm25({table})", "s"
    sql = (
        f"SELECT {table}.rowid, {score} AS s FROM {table}{join} "
        f"WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
    )
    return [(int(rowid), -float(score)) for rowid, score in conn.execute(sql, params).fetchall()]


def _short_scan(
    conn: sqlite3.Connection,
    terms: tuple[str, ...],
    session_id: str | None,
    active_only: bool,
    k: int,
) -> list[tuple[int, float]]:
    where: list[str] = []
    params: list[object] = []
    if session_id is not None:
        where.append("session_id = ?")
        params.append(session_id)
    else:
        top = conn.execute("SELECT max(id) FROM messages").fetchall()[0][0] or 0
        where.append("id > ?")
        params.append(top - SHORT_SCAN_ROWS)
    if active_only:
        where.append("active = 1")
    for term in terms:
        escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where.append("content LIKE ? ESCAPE '\\'")
        params.append(f"%{escaped}%")
    params.append(k)
    sql = f"SELECT id FROM messages WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?"
    return [(int(row[0]), 0.01) for row in conn.execute(sql, params).fetchall()]


def substring_score(lowered: str, terms: tuple[str, ...]) -> float:
    """A score in ``[0, 1)`` for a substring-only match: term frequency, damped by length."""
    found = sum(lowered.count(term.lower()) for term in terms)
    weight = found / (1.0 + len(lowered) / 1000.0)
    return weight / (1.0 + weight)


def snippet(text: str, terms: tuple[str, ...]) -> str:
    """About ``2 * SNIPPET_RADIUS`` characters of ``text`` around the first term found."""
    lowered = text.lower()
    hits = [i for i in (lowered.find(t.lower()) for t in terms) if i >= 0]
    at = min(hits) if hits else 0
    start = max(0, at - SNIPPET_RADIUS)
    end = min(len(text), at + SNIPPET_RADIUS)
    piece = _SPACES.sub(" ", text[start:end]).strip()
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


def search(
    conn: sqlite3.Connection,
    query: str,
    *,
    session_id: str | None,
    include_compacted: bool,
    limit: int,
) -> list[SearchHit]:
    """Run a search inside the caller's read transaction."""
    parsed = parse(query)
    if parsed.empty or limit <= 0:
        return []
    active_only = not include_compacted
    id_range: tuple[int, int] | None = None
    if session_id is not None:
        lo, hi = conn.execute(
            "SELECT min(id), max(id) FROM messages WHERE session_id = ?", (session_id,)
        ).fetchall()[0]
        if lo is None:
            return []
        id_range = (int(lo), int(hi))
    k = max(limit * 3 + 10, 30)
    while True:
        scores: dict[int, float] = {}
        by_word: set[int] = set()
        full = False
        if parsed.word_match is not None:
            found = _fts_candidates(
                conn, "messages_fts_word", parsed.word_match, session_id, active_only, id_range, k
            )
            full = len(found) >= k
            for rowid, score in found:
                scores[rowid] = 1.0 + max(score, 0.0)
                by_word.add(rowid)
            hits = _rank(conn, scores, by_word, parsed, limit)
            if len(hits) >= limit:
                return hits  # substring-only matches would all rank below these
        if parsed.tri_match is not None:
            found = _fts_candidates(
                conn,
                "messages_fts_tri",
                parsed.tri_match,
                session_id,
                active_only,
                id_range,
                k,
                newest_first=True,
            )
            full |= len(found) >= k
            for rowid, _ in found:
                scores.setdefault(rowid, -1.0)  # scored from the text in _rank
        elif parsed.short_terms:
            found = _short_scan(conn, parsed.short_terms, session_id, active_only, k)
            full |= len(found) >= k
            for rowid, score in found:
                scores.setdefault(rowid, score)
        hits = _rank(conn, scores, by_word, parsed, limit)
        if len(hits) >= limit or not full or k >= _MAX_CANDIDATES:
            return hits
        k *= 4


def _rank(
    conn: sqlite3.Connection,
    scores: dict[int, float],
    by_word: set[int],
    parsed: ParsedQuery,
    limit: int,
) -> list[SearchHit]:
    if not scores:
        return []
    ids = list(scores)
    rows = conn.execute(
        "SELECT id, session_id, role, content, tool_calls, active, compacted, created_at, "
        "coalesce(origin_root, id) FROM messages WHERE id IN "
        f"({','.join('?' * len(ids))})",
        ids,
    ).fetchall()
    best: dict[int, tuple[tuple[float, int, int], SearchHit]] = {}
    for mid, sid, role, content, calls, active, compacted, created_at, root in rows:
        text = search_text(content, calls)
        lowered = text.lower()
        # a row the word index did not find must contain every term as a substring
        # (the trigram index only said it holds their trigrams somewhere)
        if mid not in by_word and not all(t.lower() in lowered for t in parsed.terms):
            continue
        score = scores[mid]
        if score < 0:
            score = substring_score(lowered, parsed.terms)
        key = (score, int(active), int(mid))
        if root in best and best[root][0] >= key:
            continue
        best[root] = (
            key,
            SearchHit(
                message_id=mid,
                session_id=sid,
                role=role,
                snippet=snippet(text, parsed.terms),
                score=score,
                active=bool(active),
                compacted=bool(compacted),
                created_at=created_at,
            ),
        )
    ordered = sorted(best.values(), key=lambda item: item[0], reverse=True)
    return [hit for _, hit in ordered[:limit]]
