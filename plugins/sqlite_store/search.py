"""Search over the word and trigram FTS5 indexes, ranked by the shared rules.

What a query means and how hits rank is decided once, in
:mod:`hermes_core.searchkit` (both stores use it); this module finds the
candidate rows with SQLite's own indexes:

* Terms go to FTS5 as double-quoted strings (inner quotes doubled), so FTS5
  syntax in a query (``AND``, ``OR``, ``NEAR``, ``*``, ``^``, ``:``, column
  filters, parentheses, quotes) is plain text; a term with several words
  (``session.go``) is a phrase.
* **Every term as words:** the word index (unicode61, diacritics folded)
  asked for all terms at once, best bm25 first.
* **Every term as substrings:** when that found fewer than ``limit`` rows,
  the trigram index (``detail=none``: which rows hold a trigram, not where)
  gives the rows holding every trigram of each term of three or more
  characters (at most :data:`TRIGRAMS_PER_TERM` spread over a long term),
  newest first; the ranking then keeps those whose text really covers the
  terms. A query made only of terms shorter than three characters scans for
  substrings instead, within the sessions asked, otherwise in the newest
  :data:`SHORT_SCAN_ROWS` messages.
* **Some of the terms:** when still short of ``limit``, the word index asked
  for any term (``"a" OR "b" ...``), best bm25 first, plus the trigram index
  for any term as a substring (``(t1 trigrams) OR (t2 trigrams) ...``),
  newest first.
* Sessions are searched one by one within their id range (``rowid
  BETWEEN``), so the cost follows the sessions asked, not the database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from hermes_core.searchkit import Candidate, has_word, query_terms, rank
from hermes_hookspecs.records import SearchHit

from .rows import search_text

SHORT_SCAN_ROWS = 50_000
TRIGRAMS_PER_TERM = 12
_MAX_CANDIDATES = 20_000
WORD = "messages_fts_word"
TRIGRAM = "messages_fts_tri"


def quote(term: str) -> str:
    """An FTS5 string literal matching ``term`` as text."""
    return '"' + term.replace('"', '""') + '"'


def trigrams(term: str) -> list[str]:
    """The trigrams of ``term`` the index is asked for (all, or an even spread of a long one)."""
    grams = [term[i : i + 3] for i in range(len(term) - 2)]
    if len(grams) > TRIGRAMS_PER_TERM:
        step = (len(grams) - 1) / (TRIGRAMS_PER_TERM - 1)
        grams = [grams[round(i * step)] for i in range(TRIGRAMS_PER_TERM)]
    return list(dict.fromkeys(grams))


def trigram_match(term: str) -> str:
    """An FTS5 trigram query for rows holding every trigram of ``term``."""
    return " ".join(quote(gram) for gram in trigrams(term))


@dataclass(frozen=True)
class Scope:
    """Where to look: one session's id range, or (``session_id`` None) everywhere."""

    session_id: str | None = None
    low: int = 0
    high: int = 0


def scopes(conn: sqlite3.Connection, session_ids: Sequence[str] | None) -> list[Scope]:
    """One scope per stored session asked for (none when none of them exists)."""
    if session_ids is None:
        return [Scope()]
    out = []
    for sid in dict.fromkeys(session_ids):
        lo, hi = conn.execute(
            "SELECT min(id), max(id) FROM messages WHERE session_id = ?", (sid,)
        ).fetchall()[0]
        if lo is not None:
            out.append(Scope(sid, int(lo), int(hi)))
    return out


def _fts(
    conn: sqlite3.Connection,
    table: str,
    match: str,
    scope: Scope,
    active_only: bool,
    k: int,
    *,
    newest_first: bool = False,
) -> list[tuple[int, float]]:
    """``(rowid, relevance)`` of up to ``k`` rows of ``table`` matching ``match`` in ``scope``."""
    where = [f"{table} MATCH ?"]
    params: list[object] = [match]
    join = ""
    if scope.session_id is not None:
        where.append(f"{table}.rowid BETWEEN ? AND ?")
        params.extend((scope.low, scope.high))
    if scope.session_id is not None or active_only:
        join = f" CROSS JOIN messages m ON m.id = {table}.rowid"
        if scope.session_id is not None:
            where.append("m.session_id = ?")
            params.append(scope.session_id)
        if active_only:
            where.append("m.active = 1")
    params.append(k)
    if newest_first:  # streams in rowid order and stops after k rows
        relevance, order = "0.0", f"{table}.rowid DESC"
    else:
        relevance, order = f"bm25({table})", "s"
    sql = (
        f"SELECT {table}.rowid, {relevance} AS s FROM {table}{join} "
        f"WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
    )
    return [(int(rowid), -float(s)) for rowid, s in conn.execute(sql, params).fetchall()]


def _short_scan(
    conn: sqlite3.Connection,
    terms: tuple[str, ...],
    scope: Scope,
    active_only: bool,
    k: int,
) -> list[int]:
    where: list[str] = []
    params: list[object] = []
    if scope.session_id is not None:
        where.append("session_id = ?")
        params.append(scope.session_id)
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
    return [int(row[0]) for row in conn.execute(sql, params).fetchall()]


class _Found:
    """Candidate ids gathered so far: relevance by id, and which matched every term."""

    def __init__(self) -> None:
        self.relevance: dict[int, float | None] = {}
        self.all_words: set[int] = set()
        self.full = False
        self.rows: dict[int, Candidate] = {}  # fetched rows, by id

    def add(self, rows: list[tuple[int, float]], k: int, *, scored: bool, every: bool) -> None:
        self.full |= len(rows) >= k
        for rowid, relevance in rows:
            held = self.relevance.get(rowid)
            if scored and (held is None or held < relevance):
                self.relevance[rowid] = max(relevance, 0.0)
            else:
                self.relevance.setdefault(rowid, None)
            if every:
                self.all_words.add(rowid)


def search(
    conn: sqlite3.Connection,
    query: str,
    *,
    session_ids: Sequence[str] | None,
    include_compacted: bool,
    limit: int,
) -> list[SearchHit]:
    """Run a search inside the caller's read transaction."""
    terms = query_terms(query)
    if not terms or limit <= 0:
        return []
    where = scopes(conn, session_ids)
    if not where:
        return []
    active_only = not include_compacted
    word_terms = [t for t in terms if has_word(t)]
    tri_terms = [t for t in terms if len(t) >= 3]
    short = tuple(t for t in terms if len(t) < 3)
    every_word = len(word_terms) == len(terms)
    k = max(limit * 3 + 10, 30)
    while True:
        found = _Found()
        if word_terms:  # every term as words
            match = " ".join(quote(t) for t in word_terms)
            for scope in where:
                rows = _fts(conn, WORD, match, scope, active_only, k)
                found.add(rows, k, scored=True, every=every_word)
            hits = _rank(conn, found, terms, limit, session_ids)
            if len(hits) >= limit:
                return hits
        if tri_terms:  # every term as substrings
            match = " ".join(trigram_match(t) for t in tri_terms)
            for scope in where:
                rows = _fts(conn, TRIGRAM, match, scope, active_only, k, newest_first=True)
                found.add(rows, k, scored=False, every=False)
        elif short:
            for scope in where:
                ids = _short_scan(conn, short, scope, active_only, k)
                found.add([(i, 0.0) for i in ids], k, scored=False, every=False)
        if len(terms) > 1 and len(_rank(conn, found, terms, limit, session_ids)) < limit:
            _any_term(conn, found, where, active_only, word_terms, tri_terms, k)
        hits = _rank(conn, found, terms, limit, session_ids)
        if len(hits) >= limit or not found.full or k >= _MAX_CANDIDATES:
            return hits
        k *= 4


def _any_term(
    conn: sqlite3.Connection,
    found: _Found,
    where: list[Scope],
    active_only: bool,
    word_terms: list[str],
    tri_terms: list[str],
    k: int,
) -> None:
    """Add the rows matching some of the terms: bm25-best as words, newest as substrings."""
    if word_terms:
        match = " OR ".join(quote(t) for t in word_terms)
        for scope in where:
            found.add(_fts(conn, WORD, match, scope, active_only, k), k, scored=True, every=False)
    if tri_terms:
        match = " OR ".join(f"({trigram_match(t)})" for t in tri_terms)
        for scope in where:
            rows = _fts(conn, TRIGRAM, match, scope, active_only, k, newest_first=True)
            found.add(rows, k, scored=False, every=False)


def _rank(
    conn: sqlite3.Connection,
    found: _Found,
    terms: tuple[str, ...],
    limit: int,
    session_ids: Sequence[str] | None,
) -> list[SearchHit]:
    missing = [i for i in found.relevance if i not in found.rows]
    allowed = None if session_ids is None else set(session_ids)
    for first in range(0, len(missing), 500):
        chunk = missing[first : first + 500]
        for (
            mid,
            sid,
            role,
            content,
            calls,
            active,
            compacted,
            created_at,
            root,
            cap,
        ) in conn.execute(
            "SELECT id, session_id, role, content, tool_calls, active, compacted, created_at, "
            "coalesce(origin_root, id), fts_cap FROM messages "
            f"WHERE id IN ({','.join('?' * len(chunk))})",
            chunk,
        ).fetchall():
            if allowed is not None and sid not in allowed:
                continue  # never a row of another session
            found.rows[int(mid)] = Candidate(
                message_id=int(mid),
                session_id=sid,
                role=role,
                active=bool(active),
                compacted=bool(compacted),
                created_at=created_at,
                root=int(root),
                text=search_text(content, calls)[: int(cap)],  # what the indexes hold
            )
    candidates = []
    for mid, relevance in found.relevance.items():
        cand = found.rows.get(mid)
        if cand is not None:
            cand.relevance = relevance
            cand.all_words = mid in found.all_words
            candidates.append(cand)
    return rank(candidates, terms, limit)
