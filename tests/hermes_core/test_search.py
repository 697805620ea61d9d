"""hermes_core.search: search_with_context on both stores, and the probe query/text rules.

The recall probes' reference scorer (``transcripts/probes/recall.py``) is the
authority for ``content_words`` and the text of a message; the tests check our
implementation agrees with it on every probe question and every message of the
bundled probe sessions, read by our importers.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hermes_core.replay import pick_importer
from hermes_core.search import (
    REPLIES,
    REPLY_REACH,
    STOPWORDS,
    SearchResult,
    by_turn,
    content_words,
    message_text,
    search_with_context,
)
from hermes_hookspecs import (
    Message,
    NewMessage,
    NewSession,
    SessionStore,
    ToolCall,
    ToolFunction,
    ValidationError,
)
from hermes_plugin_importers import builtin_importers
from hermes_plugin_postgres_store.testing import find_dsn, in_ci, scratch_schema

PROBES = Path(__file__).resolve().parents[2] / "transcripts" / "probes"


def _reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("probe_recall_reference", PROBES / "recall.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("probe_recall_reference", module)
    spec.loader.exec_module(module)
    return module


def _probe_files() -> list[Path]:
    return sorted(PROBES.glob("*.json"))


# -- the probe rules ------------------------------------------------------------------------
def test_content_words_agrees_with_the_reference() -> None:
    ref = _reference()
    assert frozenset(ref.STOPWORDS) == STOPWORDS
    questions = [p["question"] for f in _probe_files() for p in json.loads(f.read_text("utf-8"))]
    assert len(questions) == 60
    questions += [
        "",
        "What did the user's `go.mod` bump to, after v1.2.3?",
        "Don't use ../../x/y.go or a_b-c.d e f gh ijk LMNOP qrstu vwxyz twelve words here ok",
        "é中文 ünïcode ΑΒΓ ЖЖЖ",
    ]
    for question in questions:
        assert content_words(question) == ref.content_words(question), question
        assert content_words(question, 3) == ref.content_words(question, 3)


def test_message_text_agrees_with_the_reference_on_real_sessions() -> None:
    ref = _reference()
    importers = builtin_importers()
    checked = 0
    for probe_file in _probe_files():
        (transcript,) = sorted(PROBES.parent.glob(f"*/{probe_file.stem}.jsonl*"))
        conversation = pick_importer(importers, transcript).load(transcript)[0]
        for message in conversation.messages:
            assert message_text(message) == ref.message_text(message.to_api())
            checked += 1
    assert checked > 2000
    odd = Message(
        role="assistant",
        content=[{"type": "text", "text": "parts"}, {"type": "text", "text": "joined"}],
        tool_calls=[
            ToolCall(id="a", function=ToolFunction(name="sh", arguments='{"c": "x\\"y\\nz"}')),
            ToolCall(id="b", function=ToolFunction(name="raw", arguments='"a bare string"')),
            ToolCall(
                id="c", function=ToolFunction(name="n", arguments='{"k": [1, {"s": "deep"}]}')
            ),
        ],
    )
    assert message_text(odd) == ref.message_text(odd.to_api())
    assert 'x"y\nz' in message_text(odd) and "deep" in message_text(odd)


# -- search_with_context on both stores --------------------------------------------------------
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "sqlite":
        from hermes_plugin_sqlite_store import SqliteSessionStore

        opened: SessionStore = SqliteSessionStore(tmp_path / "s.db")
        try:
            yield opened
        finally:
            opened.close()
        return
    dsn, reason = find_dsn()
    if dsn is None:
        if in_ci():
            pytest.fail(f"PostgreSQL tests must run in CI: {reason}")
        pytest.skip(reason)
    from hermes_plugin_postgres_store import PostgresSessionStore

    with scratch_schema(dsn) as schema:
        pg = PostgresSessionStore(dsn, schema=schema, min_size=1, max_size=2)
        try:
            yield pg
        finally:
            pg.close()


def user(text: str) -> NewMessage:
    return NewMessage(message=Message(role="user", content=text))


def ids(results: list[SearchResult]) -> list[list[int]]:
    return [[row.id for row in result.window] for result in results]


def test_window_is_write_order_within_the_session(store: SessionStore) -> None:
    a = store.create_session(NewSession()).id
    b = store.create_session(NewSession()).id
    rows_a, rows_b = [], []
    for i in range(6):  # interleaved writes: ids of a and b alternate
        rows_a += store.append_messages(a, [user(f"a{i} " + ("heron" if i == 3 else "filler"))])
        rows_b += store.append_messages(b, [user(f"b{i} " + ("heron" if i == 1 else "filler"))])
    (result,) = search_with_context(store, "heron", session_ids=[a], neighbours=2, slight_chars=0)
    assert result.hit.message_id == rows_a[3].id and result.message.id == rows_a[3].id
    assert [r.id for r in result.before] == [rows_a[1].id, rows_a[2].id]
    assert [r.id for r in result.after] == [rows_a[4].id, rows_a[5].id]
    assert "heron" in result.text() and "b1" not in result.text()
    assert [h.message_id for h in result.hits] == [rows_a[3].id]
    both = search_with_context(store, "heron", session_ids=[a, b], neighbours=1, slight_chars=0)
    assert {r.hit.session_id for r in both} == {a, b}
    for r in both:
        assert {row.session_id for row in r.window} == {r.hit.session_id}
    (first,) = [r for r in both if r.hit.session_id == b]
    assert [row.id for row in first.window] == [rows_b[0].id, rows_b[1].id, rows_b[2].id]


def test_overlapping_windows_are_one_place(store: SessionStore) -> None:
    sid = store.create_session(NewSession()).id
    texts = ["x"] * 30
    for at in (5, 6, 7, 15, 22, 27):  # 5-7 overlap; 15, 22 and 27 stand alone
        texts[at] = f"ptarmigan sighting {at}"
    rows = store.append_messages(sid, [user(f"{i} {t}") for i, t in enumerate(texts)])
    results = search_with_context(
        store, "ptarmigan", session_ids=[sid], limit=3, neighbours=1, slight_chars=0
    )
    assert len(results) == 3
    windows = [set(w) for w in ids(results)]
    assert all(not (x & y) for i, x in enumerate(windows) for y in windows[i + 1 :])
    all_places = search_with_context(
        store, "ptarmigan", session_ids=[sid], limit=10, slight_chars=0
    )
    assert len(all_places) == 4
    (merged,) = [r for r in all_places if len(r.hits) > 1]
    assert sorted(h.message_id for h in merged.hits) == [rows[5].id, rows[6].id, rows[7].id]
    assert [row.id for row in merged.window] == [rows[i].id for i in range(4, 9)]
    assert merged.hit == merged.hits[0]
    assert merged.before and merged.after
    assert all(row.id < merged.message.id for row in merged.before)
    assert all(row.id > merged.message.id for row in merged.after)
    alone = [r for r in all_places if len(r.hits) == 1]
    assert sorted(r.message.id for r in alone) == [rows[15].id, rows[22].id, rows[27].id]
    assert all(len(r.window) == 3 for r in alone)


def test_limit_counts_places_not_hits(store: SessionStore) -> None:
    sid = store.create_session(NewSession()).id
    texts = [f"{i} " + ("godwit" if i < 12 else "other") for i in range(40)]
    for at in (20, 30, 38):
        texts[at] = f"{at} godwit"
    store.append_messages(sid, [user(t) for t in texts])
    results = search_with_context(
        store, "godwit", session_ids=[sid], limit=4, neighbours=1, slight_chars=0
    )
    assert len(results) == 4  # the run of 12 adjacent hits is one place, the other three follow
    windows = [set(w) for w in ids(results)]
    assert all(not (x & y) for i, x in enumerate(windows) for y in windows[i + 1 :])
    (run,) = [r for r in results if len(r.hits) > 1]
    assert {row.id for row in run.window} >= {h.message_id for h in run.hits}
    assert sorted(len(r.window) for r in results) == [3, 3, 3, len(run.hits) + 2]


def test_scope_compacted_and_bad_input(store: SessionStore) -> None:
    sid = store.create_session(NewSession()).id
    other = store.create_session(NewSession()).id
    store.append_messages(other, [user("plover elsewhere")])
    rows = store.append_messages(sid, [user("one"), user("plover here"), user("three")])
    store.archive_and_compact(
        sid, [NewMessage(message=Message(role="user", content="summary"))], watermark=rows[-1].id
    )
    live = store.append_messages(sid, [user("plover again"), user("tail")])
    everything = search_with_context(store, "plover", session_ids=[sid], slight_chars=0)
    assert {r.hit.session_id for r in everything} == {sid}
    assert {r.message.id for r in everything} == {rows[1].id, live[0].id}
    active = search_with_context(
        store, "plover", session_ids=[sid], include_compacted=False, slight_chars=0
    )
    assert [r.message.id for r in active] == [live[0].id]
    assert all(row.active for row in active[0].window)
    assert search_with_context(store, "plover", session_ids=[], slight_chars=0) == []
    assert search_with_context(store, "", session_ids=[sid], slight_chars=0) == []
    assert search_with_context(store, "plover", session_ids=[sid], limit=0, slight_chars=0) == []
    assert len(search_with_context(store, "plover", session_ids=None, slight_chars=0)) == 3
    huge = "plover " + " ".join(f"t{i}" for i in range(3000))
    assert {
        r.hit.session_id
        for r in search_with_context(store, huge, session_ids=[sid], slight_chars=0)
    } == {sid}
    bad: list[dict[str, Any]] = [{"limit": -1}, {"neighbours": -1}, {"limit": "5"}]
    for kwargs in bad:
        with pytest.raises(ValidationError):
            search_with_context(store, "plover", session_ids=[sid], **kwargs, slight_chars=0)
    with pytest.raises(ValidationError):
        search_with_context(store, "plover", session_ids=sid, slight_chars=0)
    with pytest.raises(ValidationError):
        search_with_context(store, "plover", session_ids=iter([sid]), slight_chars=0)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        search_with_context(store, 42, session_ids=[sid], slight_chars=0)  # type: ignore[arg-type]


def test_harness_rows_come_after_the_others(tmp_path: Path) -> None:
    from hermes_core.search import search_with_context
    from hermes_hookspecs import NewMessage, NewSession
    from hermes_plugin_sqlite_store.store import SqliteSessionStore

    store = SqliteSessionStore(str(tmp_path / "h.db"))
    try:
        sid = store.create_session(NewSession()).id
        reminder = "deploy deploy deploy failed failed: the deploy failed again " * 5
        store.append_messages(
            sid,
            [
                NewMessage.model_validate(
                    {"message": {"role": "user", "content": reminder, "harness": "x.reminder"}}
                ),
                *(
                    NewMessage.model_validate({"message": {"role": "user", "content": f"n{i}"}})
                    for i in range(4)
                ),
                NewMessage.model_validate(
                    {"message": {"role": "user", "content": "the deploy failed: E4711"}}
                ),
            ],
        )
        places = search_with_context(
            store, "deploy failed", session_ids=[sid], limit=2, slight_chars=0
        )
        assert [p.message.message.text() for p in places] == [
            "the deploy failed: E4711",
            reminder,
        ]
    finally:
        store.close()


ORIGINAL = "the deploy failed: E4711 " + " ".join(f"log{i}" for i in range(200))


def test_compaction_summaries_come_after_the_messages_they_restate(tmp_path: Path) -> None:
    from hermes_core.search import search_with_context
    from hermes_hookspecs import NewMessage, NewSession
    from hermes_plugin_sqlite_store.store import SqliteSessionStore

    store = SqliteSessionStore(str(tmp_path / "s.db"))
    try:
        sid = store.create_session(NewSession()).id
        # the summary is short and dense, so the index alone ranks it above the original
        summary = "- #6 deploy failed: E4711 (deploy failed)"

        def summary_row(n: int) -> NewMessage:
            return NewMessage.model_validate(
                {
                    "message": {
                        "role": "user",
                        "content": f"{summary} (summary {n})",
                        "kind": "summary",
                        "summary": {"progress": summary},
                    }
                }
            )

        store.append_messages(
            sid,
            [
                summary_row(1),
                *(
                    NewMessage.model_validate({"message": {"role": "user", "content": f"n{i}"}})
                    for i in range(4)
                ),
                NewMessage.model_validate({"message": {"role": "user", "content": ORIGINAL}}),
                *(
                    NewMessage.model_validate({"message": {"role": "user", "content": f"m{i}"}})
                    for i in range(4)
                ),
                summary_row(2),
            ],
        )
        places = search_with_context(
            store, "deploy failed", session_ids=[sid], limit=3, slight_chars=0
        )
        kinds = [p.message.message.kind for p in places]
        assert places[0].message.message.text() == ORIGINAL
        assert kinds == ["message", "summary", "summary"]
    finally:
        store.close()


def summary_message(text: str) -> NewMessage:
    return NewMessage.model_validate(
        {"message": {"role": "user", "content": text, "kind": "summary", "summary": {}}}
    )


def test_a_summary_hit_opens_the_originals_its_matching_lines_cite(store: SessionStore) -> None:
    sid = store.create_session(NewSession()).id
    other = store.create_session(NewSession()).id
    (elsewhere,) = store.append_messages(other, [user("test server push error: E-OTHER")])
    query = "push error once test server stopped collapsing reports"
    rows = store.append_messages(
        sid,
        [
            user("go test ./internal/syncer -run TestPush"),
            user("--- FAIL: tag sync failed: unpack error: empty packfile"),  # the answer
            *(user(f"filler {i}") for i in range(3)),
            # covers more of the query's words than the answer, so it ranks above it
            user("the test server reports push error details once"),
            *(user(f"more filler {i}") for i in range(3)),
        ],
    )
    answer, decoy = rows[1], rows[5]
    before = search_with_context(store, query, session_ids=[sid], limit=1, slight_chars=0)
    assert [p.message.id for p in before] == [decoy.id]
    lines = [
        f"- #{answer.id} error: unpack error: empty packfile (from go test, once the test "
        "server stopped collapsing reports into a push error)",
        f"- #{elsewhere.id} error: push error once the test server stopped collapsing reports",
        "- #99999 error: push error once the test server stopped collapsing reports",
        f"- #{rows[2].id} agent: filler",
    ]
    (summary,) = store.append_messages(sid, [summary_message("\n".join(lines))])
    places = search_with_context(store, query, session_ids=[sid], limit=3, slight_chars=0)
    # the original the summary's best line cites stands where the summary ranked; the
    # other session's row and a citation of no stored row are not opened; the summary
    # itself comes after the messages
    assert [p.message.id for p in places] == [answer.id, decoy.id, summary.id]
    assert places[0].hit.session_id == sid and "empty packfile" in places[0].text()
    assert all(r.session_id == sid for p in places for r in p.window)
    # active rows only: nothing is opened through a summary (its citations are history)
    active = search_with_context(
        store, query, session_ids=[sid], limit=1, include_compacted=False, slight_chars=0
    )
    assert [p.message.id for p in active] == [decoy.id]


def test_a_summary_line_holding_what_the_query_asks_for_is_cited_first(
    store: SessionStore,
) -> None:
    """Lines covering as many of the query's words: the one holding the kind of text
    the query asks for ("how long": a duration) opens its original first."""
    sid = store.create_session(NewSession()).id
    rows = store.append_messages(
        sid,
        [
            user("checked the setup step"),
            *(user(f"filler {i}") for i in range(3)),
            user("checked the fixtures"),
            *(user(f"more filler {i}") for i in range(3)),
            user("ok  github.com/acme/cli/internal/e2e  71.643s"),  # the answer
            *(user(f"last filler {i}") for i in range(3)),
        ],
    )
    rows = [rows[0], rows[4], rows[8]]
    lines = [  # each line covers "integration" and "test"; only the last holds a duration
        f"- #{rows[0].id} ran: integration test setup -> done",
        f"- #{rows[1].id} ran: integration test fixtures -> done",
        f"- #{rows[2].id} ran: go test -tags=integration ./... -> ok e2e 71.643s",
    ]
    (summary,) = store.append_messages(sid, [summary_message("\n".join(lines))])
    places = search_with_context(
        store, "long integration test take", session_ids=[sid], limit=3, slight_chars=0
    )
    assert [p.message.id for p in places] == [rows[2].id, rows[0].id, summary.id]
    assert "71.643s" in places[0].text()
    # a query asking for no kind: the three lines tie, so all three open (CITED_TIED),
    # earliest first, and the summary itself follows
    plain = search_with_context(
        store, "integration test", session_ids=[sid], limit=4, slight_chars=0
    )
    assert [p.message.id for p in plain] == [rows[0].id, rows[1].id, rows[2].id, summary.id]


def test_a_line_of_the_users_own_sections_holds_what_they_asked_for(
    store: SessionStore,
) -> None:
    """A query asking for the user's words ("what constraint did the user set"): among
    lines covering as many of its words, one under the handoff's Goal or Constraints
    heading (the user's words, whatever the summarizer's line format) opens first."""
    sid = store.create_session(NewSession()).id
    rows = store.append_messages(
        sid,
        [
            user("mirror it with no local clone"),  # the answer (not the query's words)
            *(user(f"filler {i}") for i in range(3)),
            user("checked the list"),
            *(user(f"more filler {i}") for i in range(3)),
        ],
    )
    answer, other = rows[0], rows[4]
    text = "\n".join(
        [
            "## Progress",
            f"- #{other.id} ran: git remote -v between both remotes -> origin",
            "## Constraints",
            f"- #{answer.id} rule: mirror between remotes with no local clone",
        ]
    )
    store.append_messages(sid, [summary_message(text)])
    query = "constraint user set between remotes"
    places = search_with_context(store, query, session_ids=[sid], limit=3, slight_chars=0)
    assert [p.message.id for p in places][:2] == [answer.id, other.id]
    # a query that asks for no kind: the earlier line first, as before
    plain = search_with_context(
        store, "between remotes", session_ids=[sid], limit=3, slight_chars=0
    )
    assert [p.message.id for p in plain][:2] == [other.id, answer.id]


def test_a_long_summary_ranks_among_the_any_term_matches(store: SessionStore) -> None:
    """A summary covering most of a query's words is a candidate of the any-term pass
    although many shorter rows match one word each better by bm25 / ts_rank (length
    normalised): it ranks first, and the original its matching line cites is a place."""
    sid = store.create_session(NewSession()).id
    (answer,) = store.append_messages(sid, [user("mirror it with no clone")])  # no query word
    words = ("sync", "between", "remotes", "plain", "primitives")
    padding = " ".join(f"w{j}" for j in range(20))
    store.append_messages(  # each word in 30 rows, apart (two rows of noise after each)
        sid,
        [
            user(text)
            for i in range(30)
            for word in words
            for text in (f"{word} {padding} {i}", f"noise {i}", f"more noise {i}")
        ],
    )
    notes = "\n".join(f"- #{answer.id} agent: unrelated note number {i}" for i in range(30))
    text = (
        f"## Constraints\n- #{answer.id} rule: sync between remotes by plain git "
        f"primitives only\n## Progress\n{notes}"
    )
    (summary,) = store.append_messages(sid, [summary_message(text)])
    query = "sync data between remotes plain primitives move"
    assert store.search(query, session_id=sid, limit=15)[0].message_id == summary.id
    places = search_with_context(store, query, session_ids=[sid], limit=5, slight_chars=0)
    assert places[0].message.id == answer.id


def test_a_cited_line_covering_little_of_a_long_query_opens_nothing(
    store: SessionStore,
) -> None:
    """A line must weigh a third of the query's terms (``CITED_SHARE``; at least
    ``CITED_MIN_TERMS``) to stand where its summary ranked: two words of an eight-word
    question are no evidence, three are (and so are two holding what it asks for)."""
    from hermes_core.search import CITED_SHARE

    sid = store.create_session(NewSession()).id
    rows = store.append_messages(
        sid, [user("first note"), *(user(f"filler {i}") for i in range(3)), user("second")]
    )
    weak, strong = rows[0], rows[4]
    text = "\n".join(
        [f"- #{weak.id} agent: alpha bravo", f"- #{strong.id} agent: charlie delta echo"]
    )
    (summary,) = store.append_messages(sid, [summary_message(text)])
    query = "alpha bravo charlie delta echo foxtrot golf hotel"
    assert 2 < 8 * CITED_SHARE <= 3
    places = search_with_context(store, query, session_ids=[sid], limit=3, slight_chars=0)
    # the summary itself joins the strong line's place (it is written next to it)
    assert [p.message.id for p in places] == [strong.id]
    assert summary.id in {h.message_id for h in places[0].hits}


def test_a_summary_opens_a_third_original_only_for_a_line_tied_with_the_best(
    store: SessionStore,
) -> None:
    """Two originals a summary hit (``CITED_PER_SUMMARY``); a third (``CITED_TIED``) when
    its line weighs as much as the best one: equally good evidence is all shown."""
    from hermes_core.search import CITED_PER_SUMMARY, CITED_TIED

    assert (CITED_PER_SUMMARY, CITED_TIED) == (2, 3)

    def opened(lines: list[str]) -> list[int]:
        """The originals (by their line) a summary with ``lines`` opens."""
        sid = store.create_session(NewSession()).id
        rows = store.append_messages(
            sid, [user(t) for i in range(4) for t in (f"note {i}", f"gap {i}", f"gap {i}b")]
        )
        cited = [rows[0], rows[3], rows[6], rows[9]]
        text = "\n".join(f"- #{c.id} agent: {line}" for c, line in zip(cited, lines, strict=True))
        store.append_messages(sid, [summary_message(text)])
        found = search_with_context(
            store, "alpha bravo charlie", session_ids=[sid], limit=5, slight_chars=0
        )
        number = {c.id: i for i, c in enumerate(cited)}
        return [number[p.message.id] for p in found if p.message.id in number]

    tied = "alpha bravo charlie"
    assert opened([tied, tied + " again", tied + " too", tied + " once more"]) == [0, 1, 2]
    assert opened([tied, tied + " again", "alpha bravo", tied + " once more"]) == [0, 1, 3]
    assert opened([tied, tied + " again", "alpha bravo", "bravo charlie"]) == [0, 1]


def test_a_fact_lines_label_is_not_a_query_word(store: SessionStore) -> None:
    """``- #N error: ...`` covers the query word "error" by its format alone: the label
    does not count, so the line that covers the query's own words is cited first."""
    sid = store.create_session(NewSession()).id
    rows = store.append_messages(
        sid,
        [
            user("loaded"),
            *(user(f"filler {i}") for i in range(3)),
            user("the tests turned flaky after the fixture change"),  # the answer
            *(user(f"more filler {i}") for i in range(3)),
        ],
    )
    lines = [
        f"- #{rows[0].id} error: fixtures loaded: 12 rows",
        f"- #{rows[4].id} agent: the fixtures turned flaky",
    ]
    (summary,) = store.append_messages(sid, [summary_message("\n".join(lines))])
    places = search_with_context(
        store, "error fixtures flaky", session_ids=[sid], limit=2, slight_chars=0
    )
    assert [p.message.id for p in places] == [rows[4].id, summary.id]


def _said(role: str, text: str | None, **extra: Any) -> NewMessage:
    return NewMessage.model_validate({"message": {"role": role, "content": text, **extra}})


def _bash_call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}


def test_a_place_shows_the_users_next_messages(store: SessionStore) -> None:
    sid = store.create_session(NewSession()).id
    other = store.create_session(NewSession()).id
    said, bash_call = _said, _bash_call
    rows = store.append_messages(
        sid,
        [
            said("user", "make the build pass"),
            said("assistant", "running make", tool_calls=[bash_call("t1")]),
            said("tool", "linker failed: undefined symbol kestrel_init", tool_call_id="t1"),
            said("assistant", "added the missing object file"),
            said("user", "<system-reminder>stay focused</system-reminder>", harness="x.reminder"),
            said("user", "- #3 error: linker failed", kind="summary", summary={}),
            said("user", "what's next?"),  # the first reply: a prompt to go on
            said("assistant", "either pin the compiler or vendor the object file"),
            said("user", "pin the compiler, one commit each"),  # the second: the decision
            said("assistant", "pinned"),
            said("user", "thanks"),  # a third is not shown
        ],
    )
    store.append_messages(other, [said("user", "unrelated kestrel notes")])
    (place,) = search_with_context(store, "kestrel", session_ids=[sid], slight_chars=0)
    assert [r.id for r in place.window] == [rows[1].id, rows[2].id, rows[3].id]
    assert [r.id for r in place.replies] == [rows[6].id, rows[8].id] and REPLIES == 2
    assert [r.id for r in place.rows] == [r.id for r in (*rows[1:4], rows[6], rows[8])]
    assert "one commit each" in place.text() and "thanks" not in place.text()
    # the user's next message inside the window already: the replies come after the window
    (wide,) = search_with_context(store, "kestrel", session_ids=[sid], neighbours=4, slight_chars=0)
    assert rows[6].id in [r.id for r in wide.window]
    assert [r.id for r in wide.replies] == [rows[8].id, rows[10].id]
    # farther than REPLY_REACH stored messages: none; the second counts from the first
    far = store.create_session(NewSession()).id
    later = store.append_messages(
        far,
        [
            said("assistant", None, tool_calls=[bash_call("t2")]),
            said("tool", "kestrel timeout", tool_call_id="t2"),
            said("assistant", "retrying"),
            said("user", "raise the timeout"),
            *(said("assistant", f"step {i}") for i in range(REPLY_REACH)),
            said("user", "too late to be shown"),
        ],
    )
    (alone,) = search_with_context(store, "kestrel", session_ids=[far], slight_chars=0)
    assert [r.id for r in alone.replies] == [later[3].id]
    gone = store.create_session(NewSession()).id
    store.append_messages(
        gone,
        [
            said("assistant", None, tool_calls=[bash_call("t3")]),
            said("tool", "kestrel lost", tool_call_id="t3"),
            *(said("assistant", f"step {i}") for i in range(REPLY_REACH + 1)),
            said("user", "too late to be shown"),
        ],
    )
    (none,) = search_with_context(store, "kestrel", session_ids=[gone], slight_chars=0)
    assert none.replies == []


def test_a_slight_neighbour_does_not_count(store: SessionStore) -> None:
    """A bare tool call or an empty output beside a hit shows little: the window reaches
    one row past it on that side (the test run the call started, what came before)."""
    sid = store.create_session(NewSession()).id
    said, bash_call = _said, _bash_call
    output = "--- FAIL: TestPrune\n    push target refs: status code: 500\n" + "trace line\n" * 60
    rows = store.append_messages(
        sid,
        [
            said("user", "why does prune fail? " + "context " * 80),
            said("assistant", None, tool_calls=[bash_call("t1"), bash_call("t2")]),
            said("tool", output, tool_call_id="t1"),  # the answer, two rows before the hit
            said("assistant", None, tool_calls=[bash_call("t3"), bash_call("t4")]),  # slight
            said("tool", "sed of osprey_server.go\n" + "code line\n" * 80, tool_call_id="t3"),
            said("tool", "", tool_call_id="t4"),  # an empty output: slight
            said("assistant", "the test harness collapses reports into 500 " + "x" * 500),
            said("assistant", "not shown: a substantial row came before it"),
        ],
    )
    (place,) = search_with_context(store, "osprey server", session_ids=[sid])
    assert place.hit.message_id == rows[4].id
    assert [r.id for r in place.window] == [r.id for r in rows[2:7]]
    assert "status code: 500" in place.text()
    # at most 2 * neighbours rows a side, however slight they are
    (tight,) = search_with_context(store, "osprey server", session_ids=[sid], slight_chars=10**6)
    assert [r.id for r in tight.window] == [r.id for r in rows[2:7]]
    # 0: exactly the neighbours
    (exact,) = search_with_context(store, "osprey server", session_ids=[sid], slight_chars=0)
    assert [r.id for r in exact.window] == [r.id for r in rows[3:6]]
    with pytest.raises(ValidationError):
        search_with_context(store, "osprey", session_ids=[sid], slight_chars=-1)


def test_a_hit_done_for_a_request_about_the_query_ranks_first(store: SessionStore) -> None:
    """Of two rows matching alike, the one written in the turn the user asked about the
    query's subject comes first: the answer says "drop the rejection", its request named
    the replicate no-thin rejection."""
    sid = store.create_session(NewSession()).id
    rows = store.append_messages(
        sid,
        [
            user("what should replicate do about the no-thin rejection?"),
            _said("assistant", "Drop the rejection: no new flag."),
            user("tidy the logs"),
            _said("assistant", "The logs name a rejection by the replicate job."),
        ],
    )
    answer, other = rows[1].id, rows[3].id
    query = "rejection replicate no-thin"
    plain = [hit.message_id for hit in store.search(query, session_ids=[sid])]
    assert plain.index(other) < plain.index(answer)  # its words alone rank the logs first
    found = search_with_context(store, query, session_ids=[sid], neighbours=0)
    assert [place.hit.message_id for place in found] == [rows[0].id, answer, other]
    # the user's own message is not lifted by itself: it ranks by its words
    hits = store.search(query, session_ids=[sid])
    assert by_turn(store, hits, query)[0].message_id == rows[0].id
    assert by_turn(store, [], query) == []


def test_a_hit_repeating_a_places_text_is_no_new_place(tmp_path: Path) -> None:
    from hermes_core.search import search_with_context
    from hermes_hookspecs import NewMessage, NewSession
    from hermes_plugin_sqlite_store.store import SqliteSessionStore

    def msg(text: str) -> NewMessage:
        return NewMessage.model_validate({"message": {"role": "user", "content": text}})

    store = SqliteSessionStore(str(tmp_path / "d.db"))
    try:
        sid = store.create_session(NewSession()).id
        rerun = "--- FAIL: TestReplicate (0.14s) replicate failed"
        rows = store.append_messages(
            sid,
            [
                msg(rerun),
                *(msg(f"a{i}") for i in range(3)),
                msg(rerun + "  "),  # the same output again (whitespace aside)
                *(msg(f"b{i}") for i in range(3)),
                msg("the replicate run failed on push: short pkt-line 4 " + "x " * 40),
            ],
        )
        places = search_with_context(
            store, "replicate failed", session_ids=[sid], limit=2, slight_chars=0
        )
        assert [p.message.message.text() for p in places][1].startswith("the replicate run")
        assert sorted([places[0].hit.message_id, *places[0].duplicates]) == [rows[0].id, rows[4].id]
    finally:
        store.close()


def test_passages_pick_the_lines_covering_most_terms() -> None:
    from hermes_core.searchkit import passages

    lines = [f"line {i} of the listing" for i in range(300)]
    lines[150] = "ok pkg/integration_test 71.643s"
    lines[40] = "integration only"
    text = "\n".join(lines)
    shown = passages(text, ["integration_test", "pkg"], 200)
    assert "ok pkg/integration_test 71.643s" in shown and len(shown) < 320
    assert "chars skipped]" in shown and "more chars]" in shown
    # no term: the head and the tail (a command's verdict is at its end)
    plain = passages(text, ["absent"], 300)
    assert plain.startswith("line 0 ") and "line 299 of the listing" in plain
    # a room smaller than one passage still shows the best one, cut
    tiny = passages("x" * 500 + "\n" + "needle " * 40, ["needle"], 50)
    assert "needle" in tiny and len(tiny) < 120
    assert passages("short", ["x"], 100) == "short"


def test_a_passage_taken_brings_the_rest_of_its_line() -> None:
    """A line longer than a passage is cut into passages; the one covering the terms
    comes with the rest of its line (up to ``LINE_PIECES`` passages) before passages
    covering fewer terms elsewhere: an agent's "I'm narrowing it to `/git-sync`" after
    the words that matched, not the patch headers after it."""
    from hermes_core.searchkit import LINE_PIECES, PASSAGE_CHARS, passages

    assert LINE_PIECES >= 2
    head = "The `.gitignore` pattern `git-sync` matches any segment, including `cmd/git-sync`."
    rest = " I'm narrowing it to `/git-sync` so it only ignores the root binary, as it says."
    patch = [f"*** Update File: /Users/me/src/repo{i}/.gitignore" for i in range(4)]
    text = "\n".join([head.ljust(PASSAGE_CHARS) + rest, *patch])
    shown = passages(text, [".gitignore", "cmd/git-sync"], PASSAGE_CHARS + 100)
    assert "narrowing it to `/git-sync`" in shown and "repo0" not in shown
    # a line ending where its passage ends brings nothing more
    assert passages("needle here\n" + "other " * 60, ["needle"], 30).startswith("needle here")


def test_the_passage_after_a_line_is_its_next_line_with_content() -> None:
    """A line saying what follows ("The command is:") brings the next line holding text,
    past a blank line and a code fence: the command itself, not an empty line."""
    from hermes_core.searchkit import passages

    text = "\n".join(
        [
            "Built the MVP. " + "The CLI lives in cmd/tool/main.go and the engine elsewhere. " * 3,
            "",
            "The command is:",
            "",
            "```bash",
            "go run ./cmd/tool sync <source-url> <target-url>",
            "```",
            "",
            *(f"- a limit of the MVP, number {i}, stated at length" for i in range(12)),
        ]
    )
    shown = passages(text, ["usage", "command"], 120)
    assert "The command is:" in shown and "go run ./cmd/tool sync" in shown
    # going back, a blank line is the passage before (the head stays out), and room
    # taken by one is room the passage after no longer has
    shown = passages("head words\n\nneedle\n" + "tail\n" * 80, ["needle"], 14)
    assert shown == "…[11 chars skipped]…\nneedle\ntail\n…[395 more chars]"


def test_passages_weigh_a_term_by_how_few_lines_cover_it() -> None:
    """A term on every line of a long output says little about which line answers; an
    identifier named once points at its line."""
    from hermes_core.searchkit import passages

    lines = [f"- review finding {i}: see the file and the line it names" for i in range(60)]
    lines[33] = "with `containsIdentifier` at `internal/sem/dependents.go:106`"
    text = "\n".join(lines)
    shown = passages(text, ["review", "file", "line", "containsIdentifier"], 400)
    assert "internal/sem/dependents.go:106" in shown
    # among passages covering only common terms, the one covering more still comes first
    lines[33] = "- review finding 33: a review of its own"
    text = "\n".join(lines)
    assert "- review finding 0: see the file" in passages(text, ["review", "file"], 60)
