"""Search over the word and trigram FTS5 indexes, ranked by the shared rules.

What a query means and how hits rank is decided once, in
:mod:`hermes_core.searchkit` (both stores use it); this module finds the
candidate rows with SQLite's own indexes:

* Terms go to FTS5 as double-quoted strings (inner quotes doubled), so FTS5
  syntax in a query (``AND``, ``OR``, ``NEAR``, ``*``, ``^``, ``:``, column
  filters, parentheses, quotes) is plain text; a term with several words
  (``session.go``) is a phrase.
* **Every term as words:** the word index (unicode61, diacritics folded)
  asked for all terms at once, best bm25 first; when that gives fewer than
  ``limit`` hits, **some of the terms as words**: the word index asked for any
  term (``"a" OR "b" ...``), best bm25 first, and the compaction summaries
  matching any term (:func:`_summary_rows`). The ranking
  (:mod:`hermes_core.searchkit`) sees which terms each row covers, also as
  substrings, so a row covering every term ranks first however it was found.
* **As substrings:** when still short of ``limit``, the trigram index
  (``detail=none``: which rows hold a trigram, not where) gives the rows
  holding every trigram of each term of three or more characters (at most
  :data:`TRIGRAMS_PER_TERM` spread over a long term), newest first, then the
  rows holding those of any term; the ranking keeps those whose text really
  covers a term. A query made only of terms shorter than three characters
  scans for substrings instead, within the sessions asked, otherwise in the
  newest :data:`SHORT_SCAN_ROWS` messages. A session of at most
  :data:`SESSION_SCAN_ROWS` rows is read whole instead (``instr`` drops the
  rows holding no term, the shared coverage check decides): exact, and
  cheaper than intersecting a big database's trigram lists. So a row that
  covers every term only as substrings is looked for when the word index
  gives fewer than ``limit`` hits.
* Sessions are searched one by one within their id range (``rowid
  BETWEEN``), so the cost follows the sessions asked, not the database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from hermes_core.searchkit import Candidate, TermMatcher, has_word, query_terms, rank
from hermes_hookspecs.records import SearchHit

from .rows import search_text

SHORT_SCAN_ROWS = 50_000
#: a session of at most this many rows is read whole for substrings, not through the trigram index
SESSION_SCAN_ROWS = 5_000
TRIGRAMS_PER_TERM = 12
#: the any-term pass also ranks this many of the newest compaction summaries asked for
SUMMARY_CANDIDATES = 4
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
    rows: int = 0


def scopes(conn: sqlite3.Connection, session_ids: Sequence[str] | None) -> list[Scope]:
    """One scope per stored session asked for (none when none of them exists)."""
    if session_ids is None:
        return [Scope()]
    out = []
    for sid in dict.fromkeys(session_ids):
        lo, hi, count = conn.execute(
            "SELECT min(id), max(id), count(*) FROM messages WHERE session_id = ?", (sid,)
        ).fetchall()[0]
        if lo is not None:
            out.append(Scope(sid, int(lo), int(hi), int(count)))
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
    contains: tuple[str, list[str]] | None = None,
) -> list[tuple[int, float]]:
    """``(rowid, relevance)`` of up to ``k`` rows of ``table`` matching ``match`` in ``scope``.

    ``contains`` (``("AND" | "OR", terms)``) keeps only rows whose content
    holds all (or any) of the terms, ignoring ASCII case, or that have tool
    calls (checked later, on the full text): it drops the trigram index's
    coincidences (every trigram present, not together) before they are read.
    """
    where = [f"{table} MATCH ?"]
    params: list[object] = [match]
    join = ""
    if scope.session_id is not None:
        where.append(f"{table}.rowid BETWEEN ? AND ?")
        params.extend((scope.low, scope.high))
    if scope.session_id is not None or active_only or contains is not None:
        join = f" CROSS JOIN messages m ON m.id = {table}.rowid"
        if scope.session_id is not None:
            where.append("m.session_id = ?")
            params.append(scope.session_id)
        if active_only:
            where.append("m.active = 1")
        if contains is not None:
            glue, terms = contains
            tests = " OR " if glue == "OR" else " AND "
            where.append(
                "(m.tool_calls IS NOT NULL OR "
                + tests.join("instr(lower(m.content), ?) > 0" for _ in terms)
                + ")"
            )
            params.extend(t.lower() for t in terms)
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


def _summary_rows(
    conn: sqlite3.Connection, match: str, session_ids: Sequence[str] | None, active_only: bool
) -> list[tuple[int, float]]:
    """``(rowid, relevance)`` of the newest :data:`SUMMARY_CANDIDATES` compaction
    summaries of ``session_ids`` (None: any session) matching ``match``, best bm25
    first (the same in every round of a search: asked for once).

    bm25 divides by a row's length, and a summary is long by design: it restates
    the facts of a whole compacted stretch. A query of many words matches it
    better than any one message (it covers more of them), yet the best ``k``
    by bm25 never hold it. So the any-term pass also offers the newest summaries
    (found through a partial index; each carries the goal, the constraints and
    the facts of the ones before) and the shared ranking weighs the terms each
    covers; a search then shows the originals their matching lines cite
    (:func:`hermes_core.search.search_with_context`).
    """
    where = ["kind = 'summary'"]
    params: list[object] = []
    if session_ids is not None:
        where.append(f"session_id IN ({','.join('?' * len(session_ids))})")
        params.extend(session_ids)
    if active_only:
        where.append("active = 1")
    ids = [
        int(row[0])
        for row in conn.execute(
            # the partial index, also without a session (a scan of messages would read
            # every row of a database that holds no summary)
            f"SELECT id FROM messages INDEXED BY messages_summaries WHERE {' AND '.join(where)} "
            "ORDER BY id DESC LIMIT ?",
            [*params, SUMMARY_CANDIDATES],
        )
    ]
    if not ids:
        return []
    sql = (
        f"SELECT rowid, bm25({WORD}) AS s FROM {WORD} WHERE {WORD} MATCH ? "
        f"AND rowid IN ({','.join('?' * len(ids))}) ORDER BY s"
    )
    return [(int(r), -float(s)) for r, s in conn.execute(sql, [match, *ids]).fetchall()]


def _contains(glue: str, terms: list[str]) -> tuple[str, list[str]] | None:
    """The content prefilter for a trigram pass, or None when it could drop a real match.

    SQLite's ``lower`` folds ASCII only, so a term with other letters is not
    prefiltered (with ``OR`` then nothing is: any row might match that term).
    """
    plain = [t for t in terms if t.isascii()]
    if not plain or (glue == "OR" and len(plain) < len(terms)):
        return None
    return glue, plain


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

    def __init__(self, rows: dict[int, Candidate]) -> None:
        self.relevance: dict[int, float | None] = {}
        self.all_words: set[int] = set()
        self.full = False
        self.rows = rows  # rows read so far, by id

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
    fetched: dict[int, Candidate] = {}  # rows read so far, kept across rounds
    summaries: list[tuple[int, float]] | None = None  # the any-term pass's, once a search
    while True:
        found = _Found(fetched)

        def ranked(found: _Found = found) -> list[SearchHit]:
            return _rank(conn, found, terms, limit, session_ids)

        if word_terms:  # every term as words
            match = " ".join(quote(t) for t in word_terms)
            for scope in where:
                rows = _fts(conn, WORD, match, scope, active_only, k)
                found.add(rows, k, scored=True, every=every_word)
            if len(hits := ranked()) >= limit:
                return hits
            if len(word_terms) > 1:  # some of the terms as words
                match = " OR ".join(quote(t) for t in word_terms)
                for scope in where:
                    rows = _fts(conn, WORD, match, scope, active_only, k)
                    found.add(rows, k, scored=True, every=False)
                if summaries is None:
                    summaries = _summary_rows(conn, match, session_ids, active_only)
                found.add(summaries, k, scored=True, every=False)
                if len(hits := ranked()) >= limit:
                    return hits
        small = [sc for sc in where if sc.session_id is not None and sc.rows <= SESSION_SCAN_ROWS]
        large = [sc for sc in where if sc not in small]
        if small:  # as substrings, exactly: read the small sessions' rows
            for scope in small:
                _scan(conn, found, scope, active_only, terms, k, some=len(terms) > 1)
        if large and tri_terms:  # every term as substrings, then some of them
            passes = [("AND", " ".join(trigram_match(t) for t in tri_terms))]
            if len(tri_terms) > 1:
                passes.append(("OR", " OR ".join(f"({trigram_match(t)})" for t in tri_terms)))
            for operator, match in passes:
                if operator == "OR" and len(ranked()) >= limit:
                    break
                contains = _contains(operator, tri_terms)
                for scope in large:
                    rows = _fts(
                        conn,
                        TRIGRAM,
                        match,
                        scope,
                        active_only,
                        k,
                        newest_first=True,
                        contains=contains,
                    )
                    found.add(rows, k, scored=False, every=False)
        elif large and short:
            for scope in large:
                ids = _short_scan(conn, short, scope, active_only, k)
                found.add([(i, 0.0) for i in ids], k, scored=False, every=False)
        hits = ranked()
        if len(hits) >= limit or not found.full or k >= _MAX_CANDIDATES:
            return hits
        k *= 4


def _scan(
    conn: sqlite3.Connection,
    found: _Found,
    scope: Scope,
    active_only: bool,
    terms: tuple[str, ...],
    k: int,
    *,
    some: bool,
) -> None:
    """Add the newest ``k`` rows of a small session covering every term (and, with
    ``some``, the newest ``k`` covering any), checked on their text."""
    matcher = TermMatcher(terms)
    every: list[tuple[int, float]] = []
    any_: list[tuple[int, float]] = []
    where = ["session_id = ?"]
    params: list[object] = [scope.session_id]
    if active_only:
        where.append("active = 1")
    # SQL drops the rows holding none of the terms (ASCII case folded; a term with
    # other letters, quotes or backslashes, which the stored JSON may spell otherwise,
    # leaves every row to the exact check below)
    if all(t.isascii() and '"' not in t and "\\" not in t for t in terms):
        text = "lower(coalesce(content, '') || char(10) || coalesce(tool_calls, ''))"
        where.append("(" + " OR ".join(f"instr({text}, ?) > 0" for _ in terms) + ")")
        params.extend(t.lower() for t in terms)
    sql = (
        "SELECT id, session_id, role, content, tool_calls, active, compacted, created_at, "
        f"coalesce(origin_root, id), fts_cap FROM messages WHERE {' AND '.join(where)} "
        "ORDER BY id DESC"
    )
    for mid, sid, role, content, calls, active, compacted, created_at, root, cap in conn.execute(
        sql, params
    ):
        cand = found.rows.get(int(mid))
        if cand is None:
            cand = Candidate(
                message_id=int(mid),
                session_id=sid,
                role=role,
                active=bool(active),
                compacted=bool(compacted),
                created_at=created_at,
                root=int(root),
                text=search_text(content, calls, int(cap)),
            )
        if cand.covered is None:
            cand.covered = matcher.count(cand.text)
        if not cand.covered:
            continue
        found.rows[cand.message_id] = cand
        if cand.covered >= len(terms) and len(every) < k:
            every.append((cand.message_id, 0.0))
        elif some and len(any_) < k:
            any_.append((cand.message_id, 0.0))
        if len(every) >= k and (not some or len(any_) >= k):
            break
    found.add(every, k, scored=False, every=False)
    found.add(any_, k, scored=False, every=False)


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
                text=search_text(content, calls, int(cap)),  # what the indexes hold
            )
    candidates = []
    for mid, relevance in found.relevance.items():
        cand = found.rows.get(mid)
        if cand is not None:
            cand.relevance = relevance
            cand.all_words = mid in found.all_words
            candidates.append(cand)
    return rank(candidates, terms, limit)
