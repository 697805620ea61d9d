"""Search: natural-query semantics, substrings and CJK, syntax as text, scope,
carried-forward rows once.
"""

from __future__ import annotations

import json

import pytest

from hermes_hookspecs import (
    Message,
    NewMessage,
    NewSession,
    SessionStore,
    ValidationError,
)

from .base import SuiteBase
from .helpers import (
    SYNTAX_QUERIES,
    assistant,
    carry,
    covers,
    summary,
    texts,
    tool,
    user,
)


class SearchChecks(SuiteBase):
    """Search checks."""

    def test_search_word_match_and_hit_fields(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(
            session_id,
            [
                user("Please fix the Django formset permission bug"),
                assistant("Looking at the migration now"),
            ],
        )
        hits = store.search("formset")
        assert [h.message_id for h in hits] == [rows[0].id]
        hit = hits[0]
        assert (hit.session_id, hit.role, hit.active, hit.compacted) == (
            session_id,
            "user",
            True,
            False,
        )
        assert "formset" in hit.snippet.lower()
        assert isinstance(hit.score, float) and hit.created_at == pytest.approx(rows[0].created_at)
        assert [h.message_id for h in store.search("FORMSET permission")] == [rows[0].id]

    def test_search_substring(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(
            session_id, [user("the FormsetFactory builder"), user("other")]
        )
        assert [h.message_id for h in store.search("msetfac")] == [rows[0].id]
        assert [h.message_id for h in store.search("formset")] == [rows[0].id]

    def test_search_substring_must_be_contiguous(
        self, store: SessionStore, session_id: str
    ) -> None:
        # every trigram of "overflow" (ove ver erf rfl flo low) is in the first row, apart
        rows = store.append_messages(
            session_id,
            [user("over erflow"), user("a StackOverflowError"), user("long_identifier_x9")],
        )
        assert [h.message_id for h in store.search("overflow")] == [rows[1].id]
        long_term = "long_identifier_x9"[1:]  # longer than the trigrams asked of the index
        assert [h.message_id for h in store.search(long_term)] == [rows[2].id]
        assert store.search("ong_identifier_x8") == []

    def test_search_cjk_substring(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(session_id, [user("我们的数据库很大"), user("天气很好")])
        hits = store.search("数据库")
        assert [h.message_id for h in hits] == [rows[0].id]
        assert "数据库" in hits[0].snippet

    @pytest.mark.parametrize("query", SYNTAX_QUERIES)
    def test_search_syntax_is_text(self, store: SessionStore, session_id: str, query: str) -> None:
        rows = store.append_messages(
            session_id,
            [user("foo baz"), user("qux only"), user("foobar zed"), user("or else"), user("none")],
        )
        by_id = {r.id: r.message.text() for r in rows}
        hits = store.search(query)
        assert isinstance(hits, list)
        # exactly the rows covering some term as written: an interpreted operator
        # (OR, NOT, prefix*, -x, column:) would add or drop rows
        terms = query.split()
        expected = {rid for rid, text in by_id.items() if any(covers(text, t) for t in terms)}
        assert {h.message_id for h in hits} == expected, (query, hits)
        assert len(store.all_messages(session_id)) == 5  # and nothing was injected

    def test_search_every_term_before_some_terms(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(
            session_id,
            [
                user("walrus walrus walrus walrus walrus"),
                user("a note on the walrus and the narwhal and the beluga"),
                user("narwhal"),
                user("nothing relevant at all"),
            ],
        )
        hits = store.search("walrus narwhal beluga")
        assert [h.message_id for h in hits][:1] == [rows[1].id]
        assert {h.message_id for h in hits} == {rows[0].id, rows[1].id, rows[2].id}
        assert hits[0].score >= 1.0 > max(h.score for h in hits[1:])
        assert [h.message_id for h in store.search("walrus narwhal beluga", limit=1)] == [
            rows[1].id
        ]
        assert store.search("walrus manatee", limit=1)[0].message_id in (rows[0].id, rows[1].id)

    def test_search_ranks_some_terms_by_coverage(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(
            session_id,
            [
                user("the build failed once"),
                user("the build failed on the mirror"),
                user("build build build build build build"),
                user("the build failed on the mirror at dawn"),
                *(user(f"unrelated filler text {i}") for i in range(6)),
            ],
        )
        hits = store.search("build failed mirror dawn")
        ids = [h.message_id for h in hits]
        # every term first; then three terms, two, one (the repeated term does not win)
        assert ids == [rows[3].id, rows[1].id, rows[0].id, rows[2].id], hits
        assert hits[0].score >= 1.0 > hits[1].score > hits[2].score > hits[3].score

    def test_search_identifiers_and_fragments(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(
            session_id,
            [
                user("edited plugins/sqlite_store/search.py and its tests"),
                assistant(
                    "checked it",
                    [("c1", "shell", json.dumps({"cmd": "git show 3f2a9c1e7b5d --stat"}))],
                ),
                user("psql: error: connection refused (ECONNREFUSED 127.0.0.1:5432)"),
                user("CheckpointSummary.CheckpointsCount = 0, want 1"),
                user("a plain sentence about search in sqlite"),
            ],
        )

        def first(query: str) -> int:
            hits = store.search(query)
            assert hits, query
            return hits[0].message_id

        assert first("sqlite_store/search.py") == rows[0].id
        assert first("store/sea") == rows[0].id
        assert first("a9c1e7b") == rows[1].id
        assert first("3f2a9c1e7b5d") == rows[1].id
        assert first("NREFUSED") == rows[2].id
        assert first("127.0.0.1:5432") == rows[2].id
        assert first("checkpoints count") == rows[3].id
        assert first("CheckpointsCount want") == rows[3].id

    def test_search_cjk_with_other_terms(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(
            session_id,
            [user("数据库 migration 失败了"), user("我们的数据库很大"), user("migration done")],
        )
        hits = store.search("数据库 migration")
        assert [h.message_id for h in hits][:1] == [rows[0].id]
        assert {h.message_id for h in hits} == {r.id for r in rows}
        assert [h.message_id for h in store.search("库很")] == [rows[1].id]

    def test_search_like_wildcards_are_literal(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(
            session_id, [user("100 percent"), user("abc"), user("a_c literal")]
        )
        assert store.search("10%") == []
        assert [h.message_id for h in store.search("a_c")] == [rows[2].id]
        assert [h.message_id for h in store.search("%")] == []

    def test_search_include_compacted(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(session_id, [user("archived gamma detail"), assistant("ok")])
        store.archive_and_compact(session_id, [summary("nothing specific")], watermark=rows[-1].id)
        hits = store.search("gamma")
        assert [h.message_id for h in hits] == [rows[0].id]
        assert hits[0].compacted and not hits[0].active
        assert store.search("gamma", include_compacted=False) == []

    def test_search_counts_carried_forward_rows_once(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(session_id, [user("keep the xyzzy token"), assistant("noted")])
        commit = store.archive_and_compact(
            session_id, [summary("s"), carry(rows[0])], watermark=rows[-1].id
        )
        copy_id = commit.active_ids[1]
        hits = store.search("xyzzy")
        assert len(hits) == 1 and hits[0].message_id in (rows[0].id, copy_id)
        live = store.search("xyzzy", include_compacted=False)
        assert [h.message_id for h in live] == [copy_id] and live[0].active
        copy = store.get_messages([copy_id])[0]  # carried forward again: still one hit
        again = store.archive_and_compact(
            session_id, [summary("s2"), carry(copy)], watermark=copy_id
        )
        assert len(store.search("xyzzy")) == 1
        assert [h.message_id for h in store.search("xyzzy", include_compacted=False)] == [
            again.active_ids[1]
        ]

    def test_search_hit_is_a_recovery_pointer(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(
            session_id,
            [
                user("step one"),
                assistant("step two"),
                user("the quokka incident"),
                assistant("step four"),
            ],
        )
        store.archive_and_compact(session_id, [summary("s")], watermark=rows[-1].id)
        (hit,) = store.search("quokka")
        (row,) = store.get_messages([hit.message_id])
        assert "quokka" in row.message.text()
        around = store.message_context(hit.message_id, before=1, after=1)
        assert texts(around) == ["step two", "the quokka incident", "step four"]

    def test_search_session_filter_and_limit(self, store: SessionStore) -> None:
        a = store.create_session(NewSession()).id
        b = store.create_session(NewSession()).id
        store.append_messages(a, [user(f"walrus {i}") for i in range(5)])
        store.append_messages(b, [user("walrus in b")])
        assert {h.session_id for h in store.search("walrus", session_id=b)} == {b}
        assert len(store.search("walrus", session_id=a)) == 5
        assert len(store.search("walrus", limit=3)) == 3
        assert len(store.search("walrus")) == 6

    def test_search_ranks_best_first(self, store: SessionStore, session_id: str) -> None:
        filler = " ".join(f"filler{i}" for i in range(150))
        rows = store.append_messages(
            session_id,
            [
                user(f"needle mentioned once among {filler}"),
                user("needle needle needle needle: all about the needle"),
                user("no match here"),
            ],
        )
        assert [h.message_id for h in store.search("needle")] == [rows[1].id, rows[0].id]

    def test_search_prefers_a_duration_when_asked_how_long(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(
            session_id,
            [
                assistant("the review is in; the integration package is next"),
                assistant(calls=[("c1", "shell", '{"cmd": "go vet ./..."}')]),
                tool("c1", "ok  \tcli integration package\t71.643s"),
                *(user(f"unrelated filler text {i}") for i in range(6)),
            ],
        )
        # "long" asks for a duration: the row printing one wins over a row that
        # covers more of the words (answer typing, hermes_core.answer_kinds)
        query = "long integration package review"
        assert [h.message_id for h in store.search(query)][:2] == [rows[2].id, rows[0].id]
        # without a cue word the words alone decide
        assert [h.message_id for h in store.search("integration package review")][:2] == [
            rows[0].id,
            rows[2].id,
        ]

    def test_search_prefers_an_error_line_when_asked_for_an_error(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(
            session_id,
            [
                assistant("the push to the mirror refs needs a retry later"),
                assistant(calls=[("c1", "shell", '{"cmd": "git fetch"}')]),
                tool("c1", "error: push rejected (fetch first)"),
                assistant("code that handles error values before the push"),
                *(user(f"unrelated filler text {i}") for i in range(6)),
            ],
        )
        # an error line beats prose covering more words, and code that merely says "error"
        hits = store.search("error push mirror refs")
        assert [h.message_id for h in hits][:1] == [rows[2].id], hits
        assert [h.message_id for h in store.search("push mirror refs")][:1] == [rows[0].id]

    def test_search_prefers_an_http_status_when_asked_for_one(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(
            session_id,
            [
                assistant("the upload endpoint of the target came back fine after the retry"),
                assistant(calls=[("c1", "shell", '{"cmd": "go test ./upload"}')]),
                tool("c1", "POST to the upload endpoint: status code: 502"),
                *(user(f"unrelated filler text {i}") for i in range(6)),
            ],
        )
        # "HTTP status" (both words) asks for a status code: the row printing one wins
        # over prose covering more of the words; "status" alone ("git status") does not
        query = "HTTP status came back upload endpoint"
        assert [h.message_id for h in store.search(query)][:1] == [rows[2].id]
        assert [h.message_id for h in store.search("status came back upload endpoint")][:1] == [
            rows[0].id
        ]

    def test_search_does_not_take_a_message_template_for_an_error(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(
            session_id,
            [
                assistant(calls=[("c1", "shell", '{"cmd": "cat upload.go"}')]),
                tool("c1", "upload error: %v"),
                assistant(calls=[("c2", "shell", '{"cmd": "go test ./upload"}')]),
                tool("c2", "uploading the fixture failed with upload error: connection reset"),
                *(user(f"unrelated filler text {i}") for i in range(6)),
            ],
        )
        # the shorter row would rank first on the words alone, but a template is code that
        # would report an error (``%v``), not an error that happened: the printed one wins
        hits = store.search("upload error")
        assert [h.message_id for h in hits][:2] == [rows[3].id, rows[1].id], hits

    def test_search_prefers_the_users_words_when_asked_for_a_constraint(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(
            session_id,
            [
                assistant("sync data: sync the data, then sync more data"),
                user("please sync the data without any local clone of either repository"),
                *(user(f"unrelated filler text {i}") for i in range(6)),
            ],
        )
        # a constraint is something the user set: their message wins over the agent's
        assert [h.message_id for h in store.search("constraint sync data")][:2] == [
            rows[1].id,
            rows[0].id,
        ]
        assert [h.message_id for h in store.search("sync data")][:1] == [rows[0].id]

    def test_search_empty_query(self, store: SessionStore, session_id: str) -> None:
        store.append_messages(session_id, [user("anything")])
        assert store.search("") == []
        assert store.search("   ") == []
        assert store.search("\x00") == []
        assert store.search("anything", session_ids=[]) == []

    def test_search_session_ids_scope(self, store: SessionStore) -> None:
        a, b, c = (store.create_session(NewSession()).id for _ in range(3))
        for sid in (a, b, c):
            store.append_messages(
                sid,
                [user(f"walrus tusk in {sid}"), user("walrus only"), user(f"id-{sid}-narwhalish")],
            )
        for query in ("walrus", "walrus tusk beluga", "narwhal", "tusk zebra", "wal"):
            hits = store.search(query, session_ids=[a, b])
            assert hits, query
            assert {h.session_id for h in hits} <= {a, b}, query
        assert {h.session_id for h in store.search("walrus", session_ids=[b, a])} == {a, b}
        assert {h.session_id for h in store.search("walrus", session_ids=(c,))} == {c}
        assert {h.session_id for h in store.search("walrus", session_id=c)} == {c}
        assert store.search("walrus", session_ids=["no-such-session"]) == []
        assert len(store.search("walrus", session_ids=[a, b, c, a])) == 6
        with pytest.raises(ValidationError):
            store.search("walrus", session_id=a, session_ids=[b])
        with pytest.raises(ValidationError):
            store.search("walrus", session_ids=a)  # a str is not a list of ids
        with pytest.raises(ValidationError):
            store.search("walrus", session_ids=[a, 7])  # type: ignore[list-item]

    def test_search_huge_query(self, store: SessionStore, session_id: str) -> None:
        other = store.create_session(NewSession()).id
        store.append_messages(other, [user("kestrel in the other session")])
        rows = store.append_messages(session_id, [user("kestrel sighted"), user("nothing")])
        words = " ".join(f"w{i}x" for i in range(2500))
        for query in (
            "kestrel " + words,  # 10 KB of terms
            "kestrel " + "k" * 10_000,  # one 10 KB term
            ('"' + "(kestrel OR NEAR:* " * 600)[:10_240],  # 10 KB of syntax
        ):
            assert len(query) >= 10_000
            hits = store.search(query, session_ids=[session_id])
            assert isinstance(hits, list)
            assert {h.session_id for h in hits} <= {session_id}
        assert [h.message_id for h in store.search("kestrel " + words, session_id=session_id)] == [
            rows[0].id
        ]

    # -- the searchable text and the snippet window: one rule (hermes_core.searchkit) ----
    def test_search_text_and_snippet_window_are_the_shared_rule(
        self, store: SessionStore, session_id: str
    ) -> None:
        from hermes_core.searchkit import query_terms, searchable_text, snippet

        filler = " ".join(f"f{i}" for i in range(120))
        args = '{"command": "grep -n quokka pkg/wire.go"}'
        result = NewMessage(
            message=Message(
                role="tool", tool_call_id="c1", name="Bash", content="wire.go:7: quokka"
            )
        )
        rows = store.append_messages(
            session_id,
            [
                user(f"{filler} the quokka sits mid-text {filler}"),
                assistant(None, [("c1", "Bash", args)]),
                result,
            ],
        )
        texts = {
            rows[0].id: searchable_text(f"{filler} the quokka sits mid-text {filler}", [], 10**6),
            rows[1].id: searchable_text("", [("Bash", args)], 10**6),
            rows[2].id: searchable_text("wire.go:7: quokka", [], 10**6),
        }
        hits = store.search("quokka", session_id=session_id, limit=10)
        assert {h.message_id for h in hits} == set(texts)
        for hit in hits:  # the same window of the same text in every store
            assert hit.snippet == snippet(texts[hit.message_id], query_terms("quokka"))
        # a tool result's name is not searched: only the call that names the tool is found
        assert [h.message_id for h in store.search("Bash", session_id=session_id)] == [rows[1].id]

    def test_search_arguments_are_checked_alike(self, store: SessionStore, session_id: str) -> None:
        # one rule and one wording in every store (storekit.check_search): the SQLite store
        # took ``limit=True`` as 1 and the two stores named a non-string query differently
        for query in (None, 42, b"bytes", ["walrus"]):
            with pytest.raises(ValidationError, match="search query must be a string"):
                store.search(query)  # type: ignore[arg-type]
        for limit in (-1, True, 2.5, "3"):
            with pytest.raises(ValidationError, match="search limit must be an integer >= 0"):
                store.search("walrus", limit=limit)  # type: ignore[arg-type]
        assert store.search("walrus", session_id=session_id, limit=0) == []
