"""A conformance suite for session stores, to subclass in a store author's own tests.

Usage (in the store project's ``tests/test_conformance.py``)::

    import functools
    import pytest
    from hermes_core.testing.store_suite import SessionStoreSuite
    from acme_store import AcmeSessionStore

    class TestAcmeConformance(SessionStoreSuite):
        @pytest.fixture
        def store_factory(self, tmp_path):
            # a fresh, empty database per test; every call opens a NEW handle on it
            return functools.partial(AcmeSessionStore, tmp_path / "sessions.db")

The suite checks the rules of :class:`hermes_hookspecs.SessionStore` (its
docstrings are the contract): ordering of the active view and of write order,
atomic compaction (watermark, rotation, nothing deleted), search semantics
(query syntax is text, substring and CJK matches, ``include_compacted``,
carried-forward rows reported once, recovery pointers), turn-lease and
fencing rules (try once, waiting woken promptly, stale tokens rejected,
takeover after expiry or of a dead holder on this host) and bad input that
leaves every stored thing unchanged.

Fixtures a subclass provides or overrides:

* ``store_factory`` (required): a zero-argument callable that opens a new
  handle on the test's own, initially empty database. Each call must return
  a separate handle (its own connections), as a second process would. The
  process tests send it to child processes started with ``spawn``, so it must
  be picklable (a :func:`functools.partial` of your class with plain
  arguments is); set ``multiprocess = False`` to skip those tests.
* ``store``: the handle the tests use (default: ``store_factory()``, closed
  after the test).

Knobs (class attributes): ``short_ttl`` (seconds, lease TTL in the expiry
tests), ``handover_budget`` (seconds a waiter may take to get a released
lease), ``multiprocess``.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import pytest

from hermes_core.storekit import process_state
from hermes_hookspecs import (
    CompactionEvent,
    ContinuationUpdate,
    HandoffSummary,
    HermesError,
    LeaseBusy,
    LeaseGrant,
    LeaseHolder,
    LeaseLost,
    Message,
    NewMessage,
    NewSession,
    NotFoundError,
    PrefixEntry,
    SessionRotated,
    SessionStore,
    StoredMessage,
    ToolCall,
    ToolFunction,
    Usage,
    UsageRecord,
    ValidationError,
)

StoreFactory = Callable[[], SessionStore]

#: queries full of search syntax (FTS5, tsquery, LIKE, SQL); each must be plain text
SYNTAX_QUERIES: tuple[str, ...] = (
    '"unbalanced',
    "foo AND NOT bar",
    "foo OR qux",
    "NEAR(foo bar)",
    "foo*",
    "col:foo",
    "^foo",
    "-foo",
    "(",
    ")",
    "'",
    "\\",
    "&|!",
    "foo:* & !bar",
    "<->",
    "{a b}",
    "[x]",
    "*",
    '"',
    ":",
    'a"b',
    "%",
    "_",
    "NOT",
    "AND",
    "OR",
    "foo' OR '1'='1",
    "foo; DROP TABLE messages; --",
    "\x00",
    " \t\n ",
)


# ---------------------------------------------------------------------------
# message helpers
# ---------------------------------------------------------------------------


def user(text: str, **extra: Any) -> NewMessage:
    return NewMessage(message=Message(role="user", content=text), **extra)


def assistant(
    text: str | None = None, calls: list[tuple[str, str, str]] | None = None
) -> NewMessage:
    tool_calls = (
        [
            ToolCall(id=cid, function=ToolFunction(name=name, arguments=args))
            for cid, name, args in calls
        ]
        if calls
        else None
    )
    return NewMessage(message=Message(role="assistant", content=text, tool_calls=tool_calls))


def tool(call_id: str, text: str) -> NewMessage:
    return NewMessage(message=Message(role="tool", tool_call_id=call_id, content=text))


def summary(text: str) -> NewMessage:
    handoff = HandoffSummary(goal="keep going", progress=text)
    return NewMessage(
        message=Message(
            role="user", content=handoff.render() + "\n" + text, kind="summary", summary=handoff
        )
    )


def carry(row: StoredMessage) -> NewMessage:
    """A message carried forward unchanged by a compaction (``origin_id`` set)."""
    return NewMessage.carried_from(row)


def texts(rows: list[StoredMessage]) -> list[str]:
    return [row.message.text() for row in rows]


_WORDS = re.compile(r"[^\W_]+")  # runs of letters and digits


def covers(text: str, term: str) -> bool:
    """Whether ``text`` covers a search term: as a substring, or its words as consecutive
    words, ignoring case (the store contract's rule, written out independently)."""
    low, want = text.lower(), term.lower()
    if want in low:
        return True
    words = " ".join(_WORDS.findall(want))
    return bool(words) and f" {words} " in " " + " ".join(_WORDS.findall(low)) + " "


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped (no such process now)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def zombie_process() -> subprocess.Popen[bytes]:
    """A child that has exited and is not reaped yet (state ``Z``); ``wait()`` it afterwards."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while process_state(proc.pid) != "Z":
        if time.monotonic() > deadline:
            raise AssertionError(f"child {proc.pid} did not become a zombie")
        time.sleep(0.005)
    return proc


def snapshot(store: SessionStore, session_id: str) -> dict[str, Any]:
    """Everything stored about a session, to compare before and after a refused call."""
    return {
        "session": store.get_session(session_id).model_dump(),
        "all": [m.model_dump() for m in store.all_messages(session_id)],
        "active": [m.id for m in store.active_messages(session_id)],
        "events": [e.model_dump() for e in store.compaction_events(session_id)],
        "lease": None if (lease := store.current_lease(session_id)) is None else lease.token,
    }


# ---------------------------------------------------------------------------
# child-process entry points (module level, so ``spawn`` can pickle them)
# ---------------------------------------------------------------------------


def _child_hold_lease(factory: StoreFactory, session_id: str, ttl: float, conn: Any) -> None:
    store = factory()
    grant = store.acquire_lease(session_id, LeaseHolder(name="child-holder"), ttl)
    conn.send(grant.token)
    time.sleep(3600)


def _child_wait_lease(factory: StoreFactory, session_id: str, timeout: float, conn: Any) -> None:
    store = factory()
    try:
        conn.send("ready")
        grant = store.acquire_lease(
            session_id, LeaseHolder(name="child-waiter"), 30, timeout=timeout
        )
        got = time.time()
        seen = texts(store.active_messages(session_id))
        store.release_lease(grant)
        conn.send(("granted", grant.token, got, seen))
    except Exception as exc:  # reported to the parent, which fails the test
        conn.send(("error", f"{type(exc).__name__}: {exc}", 0.0, []))
    finally:
        store.close()


class SessionStoreSuite:
    """Subclass with a ``store_factory`` fixture; every ``test_*`` checks one rule."""

    short_ttl: ClassVar[float] = 0.4
    handover_budget: ClassVar[float] = 0.5
    multiprocess: ClassVar[bool] = True

    # -- fixtures -------------------------------------------------------------
    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        pytest.fail(
            f"{type(self).__name__} must define a 'store_factory' fixture returning a "
            "zero-argument callable that opens a new handle on the test's database"
        )

    @pytest.fixture
    def store(self, store_factory: StoreFactory) -> Iterator[SessionStore]:
        handle = store_factory()
        try:
            yield handle
        finally:
            handle.close()

    @contextmanager
    def second_handle(self, store_factory: StoreFactory) -> Iterator[SessionStore]:
        handle = store_factory()
        try:
            yield handle
        finally:
            handle.close()

    @pytest.fixture
    def session_id(self, store: SessionStore) -> str:
        sid: str = store.create_session(NewSession(title="suite")).id
        return sid

    # =========================================================================
    # sessions
    # =========================================================================
    def test_is_a_session_store_with_a_name(self, store: SessionStore) -> None:
        assert isinstance(store, SessionStore)
        assert isinstance(store.name, str) and store.name

    def test_create_session_round_trips_fields(self, store: SessionStore) -> None:
        routing = {"chat_id": 42, "thread": {"id": "t-1", "tags": ["a", "b"]}, "ok": True}
        made = store.create_session(
            NewSession(
                title="Fix login",
                cwd="/srv/app",
                goal="ship it",
                routing=routing,
                model="gpt-x",
                provider="openai",
            )
        )
        got = store.get_session(made.id)
        assert got == made
        assert (got.title, got.cwd, got.goal, got.routing) == (
            "Fix login",
            "/srv/app",
            "ship it",
            routing,
        )
        assert (got.model, got.provider, got.parent_id, got.end_reason) == (
            "gpt-x",
            "openai",
            None,
            None,
        )
        assert got.compression_count == 0 and got.ended_at is None
        assert got.created_at > 0 and got.updated_at >= got.created_at

    def test_create_session_ids_are_unique_or_as_given(self, store: SessionStore) -> None:
        a = store.create_session(NewSession())
        b = store.create_session(NewSession())
        assert a.id != b.id and a.id and b.id
        named = store.create_session(NewSession(id="my-session", title="first"))
        assert named.id == "my-session"

    def test_duplicate_session_id_refused_original_unchanged(self, store: SessionStore) -> None:
        store.create_session(NewSession(id="dup", title="original"))
        before = snapshot(store, "dup")
        with pytest.raises(HermesError):
            store.create_session(NewSession(id="dup", title="impostor"))
        assert snapshot(store, "dup") == before

    def test_child_session_records_parent(self, store: SessionStore, session_id: str) -> None:
        child = store.create_session(NewSession(parent_id=session_id))
        assert store.get_session(child.id).parent_id == session_id

    def test_unknown_session_not_found(self, store: SessionStore) -> None:
        with pytest.raises(NotFoundError):
            store.get_session("no-such-session")
        with pytest.raises(NotFoundError):
            store.update_session("no-such-session", title="x")
        with pytest.raises(NotFoundError):
            store.end_session("no-such-session", "user")
        with pytest.raises(NotFoundError):
            store.active_messages("no-such-session")

    def test_list_sessions_most_recently_updated_first(self, store: SessionStore) -> None:
        ids = []
        for title in ("a", "b", "c"):
            ids.append(store.create_session(NewSession(title=title)).id)
            time.sleep(0.005)
        assert [s.id for s in store.list_sessions()][:3] == ids[::-1]
        store.append_messages(ids[0], [user("touch a")])
        listed = [s.id for s in store.list_sessions()]
        assert listed[0] == ids[0]
        assert [s.id for s in store.list_sessions(limit=1)] == [ids[0]]
        assert [s.id for s in store.list_sessions(limit=2, offset=1)] == listed[1:3]
        for bad in ({"limit": -1}, {"offset": -1}, {"limit": "5"}, {"limit": True}):
            with pytest.raises(ValidationError, match=r"limit|offset"):
                store.list_sessions(**bad)

    def test_update_session_allowed_fields(self, store: SessionStore, session_id: str) -> None:
        digest = store.put_blob("system_prompt", "You are helpful.")
        tools = store.put_blob("tools", "[]")
        updated = store.update_session(
            session_id,
            title="T",
            goal="G",
            routing={"previous_response_id": "resp_1"},
            model="m",
            provider="p",
            system_prompt_hash=digest,
            tools_hash=tools,
        )
        got = store.get_session(session_id)
        assert got == updated
        assert (got.title, got.goal, got.routing, got.model, got.provider) == (
            "T",
            "G",
            {"previous_response_id": "resp_1"},
            "m",
            "p",
        )
        assert (got.system_prompt_hash, got.tools_hash) == (digest, tools)

    @pytest.mark.parametrize("field", ["cwd", "id", "parent_id", "compression_count", "nonsense"])
    def test_update_session_other_fields_refused(
        self, store: SessionStore, session_id: str, field: str
    ) -> None:
        before = snapshot(store, session_id)
        with pytest.raises(ValidationError):
            store.update_session(session_id, **{field: "x"})
        with pytest.raises(ValidationError):  # refused whole, even beside a valid field
            store.update_session(session_id, title="changed", **{field: "x"})
        assert snapshot(store, session_id) == before

    def test_end_session(self, store: SessionStore, session_id: str) -> None:
        ended = store.end_session(session_id, "user")
        assert ended.end_reason == "user" and ended.ended_at is not None
        assert store.get_session(session_id).end_reason == "user"

    def test_first_end_wins(self, store: SessionStore, session_id: str) -> None:
        first = store.end_session(session_id, "compression")
        again = store.end_session(session_id, "user")  # a stale process ends it again
        assert again.end_reason == "compression" and again.ended_at == first.ended_at
        stored = store.get_session(session_id)
        assert (stored.end_reason, stored.ended_at) == ("compression", first.ended_at)

    # =========================================================================
    # blobs
    # =========================================================================
    @pytest.mark.parametrize(
        "text",
        ["You are a helpful agent.\n", "trailing spaces   \r\n\r\n", "ünïcödé — 数据 🚀", ""],
    )
    def test_blob_stored_once_by_sha256(self, store: SessionStore, text: str) -> None:
        digest = store.put_blob("system_prompt", text)
        assert digest == hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert store.put_blob("system_prompt", text) == digest
        assert store.get_blob(digest) == text

    def test_blob_unknown_digest_and_kind(self, store: SessionStore) -> None:
        with pytest.raises(NotFoundError):
            store.get_blob("0" * 64)
        with pytest.raises(ValidationError):
            store.put_blob("nonsense", "text")  # type: ignore[arg-type, unused-ignore]

    # =========================================================================
    # messages and ordering
    # =========================================================================
    def test_append_orders_ids_and_positions(self, store: SessionStore, session_id: str) -> None:
        first = store.append_messages(session_id, [user("one"), assistant("two")])
        second = store.append_messages(session_id, [user("three")])
        rows = first + second
        assert [r.id for r in rows] == sorted(r.id for r in rows)
        assert [r.position for r in rows] == sorted(r.position for r in rows)
        assert len({r.position for r in rows}) == 3
        assert all(r.active and not r.compacted and r.session_id == session_id for r in rows)
        active = store.active_messages(session_id)
        assert [r.id for r in active] == [r.id for r in rows]
        assert texts(active) == ["one", "two", "three"]
        assert [r.id for r in store.all_messages(session_id)] == [r.id for r in rows]

    def test_messages_round_trip_exactly(self, store: SessionStore, session_id: str) -> None:
        api_parts = [
            {"type": "text", "text": "recall: x", "zeta": 1, "alpha": [2, {"b": 1, "a": 0}]}
        ]
        batch = [
            NewMessage(message=Message(role="system", content="sys")),
            NewMessage(
                message=Message(role="user", content="hi", name="ada"),
                api_content="hi\n\n[recall] ada likes tea",
                token_count=7,
                turn_id="t1",
                annotations={
                    "lean": {"v": 1, "ids": [["path", "/srv/数据/a.py"], ["ref", "#12"]]},
                    "other": None,
                    "n": [1.5, True, "🚀"],
                },
            ),
            NewMessage(
                message=Message(
                    role="user",
                    content=[
                        {"type": "text", "text": "see"},
                        {"type": "image_url", "image_url": {"url": "data:x"}},
                    ],
                ),
                api_content=api_parts,
            ),
            NewMessage(
                message=Message(
                    role="assistant",
                    content=None,
                    tool_calls=[
                        ToolCall(
                            id="call_1",
                            function=ToolFunction(
                                name="read", arguments='{"path": "a.py", "n": [1, 2]}'
                            ),
                        ),
                        ToolCall(id="call_2", function=ToolFunction(name="ls", arguments="{}")),
                    ],
                ),
                turn_id="t1",
            ),
            NewMessage(message=Message(role="tool", tool_call_id="call_1", content="x" * 200_000)),
            NewMessage(
                message=Message(
                    role="tool",
                    tool_call_id="call_2",
                    content="NUL\x00byte, emoji 🚀, CJK 数据库, RTL עברית, \u2028sep",
                )
            ),
            summary("progress so far"),
            NewMessage(
                message=Message(
                    role="assistant",
                    kind="compaction",
                    provider_item={"type": "compaction", "encrypted_content": "gAAA=="},
                )
            ),
        ]
        stored = store.append_messages(session_id, batch)
        for rows in (
            stored,
            store.active_messages(session_id),
            store.get_messages([r.id for r in stored]),
        ):
            assert len(rows) == len(batch)
            for new, row in zip(batch, rows, strict=True):
                assert row.message == new.message
                assert row.api_content == new.api_content
                assert json.dumps(row.to_api()) == json.dumps(new.message.to_api(new.api_content))
                assert (row.token_count, row.turn_id, row.origin_id) == (
                    new.token_count,
                    new.turn_id,
                    new.origin_id,
                )
                assert row.annotations == new.annotations

    def test_compaction_event_must_name_this_session(self, store: SessionStore) -> None:
        sid = store.create_session(NewSession(title="E")).id
        other = store.create_session(NewSession(title="other")).id
        rows = store.append_messages(sid, [user("u1"), assistant("a1")])
        event = CompactionEvent(session_id=other, engine="suite", tokens_before=9, tokens_after=1)
        with pytest.raises(ValidationError, match=r"event\.session_id"):
            store.archive_and_compact(sid, [summary("s")], watermark=rows[-1].id, event=event)
        assert [m.id for m in store.active_messages(sid)] == [m.id for m in rows]
        assert store.compaction_events(sid) == [] and store.compaction_events(other) == []

    @pytest.mark.parametrize("in_place", [True, False])
    def test_compaction_updates_the_continuing_session_in_its_transaction(
        self, store: SessionStore, in_place: bool
    ) -> None:
        sid = store.create_session(NewSession(title="U", routing={"thread": "old"})).id
        old = store.append_messages(sid, [user("u1"), assistant("a1")])
        prompt = store.put_blob("system_prompt", "You are the rebuilt prompt.")
        tools = store.put_blob("tools", "[]")
        commit = store.archive_and_compact(
            sid,
            [summary("s")],
            watermark=old[-1].id,
            in_place=in_place,
            child=None if in_place else NewSession(title="U (continued)"),
            update=ContinuationUpdate(
                system_prompt_hash=prompt, tools_hash=tools, routing={"thread": "new"}
            ),
        )
        continuing = store.get_session(commit.child_session_id or sid)
        assert (continuing.system_prompt_hash, continuing.tools_hash) == (prompt, tools)
        assert continuing.routing == {"thread": "new"}
        if not in_place:
            assert store.get_session(sid).routing == {"thread": "old"}  # the parent keeps its own

    def test_compaction_update_must_name_stored_blobs(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(session_id, [user("u1"), assistant("a1")])
        before = store.get_session(session_id)
        missing = hashlib.sha256(b"never stored").hexdigest()
        tools = store.put_blob("tools", "[]")
        for bad in (
            ContinuationUpdate(system_prompt_hash=missing),
            ContinuationUpdate(system_prompt_hash=tools),  # a blob, but of the other kind
            {"routing": {"x": object()}},
            {"system_prompt_hash": 7},
        ):
            with pytest.raises(ValidationError, match="update"):
                store.archive_and_compact(
                    session_id,
                    [summary("s")],
                    watermark=rows[-1].id,
                    update=bad,  # type: ignore[arg-type]
                )
        assert store.get_session(session_id) == before
        assert [m.id for m in store.active_messages(session_id)] == [m.id for m in rows]

    @pytest.mark.parametrize("in_place", [True, False])
    def test_annotations_carried_forward_by_compaction(
        self, store: SessionStore, in_place: bool
    ) -> None:
        sid = store.create_session(NewSession(title="A")).id
        marked = {"suite": {"v": 2, "facts": ["x", {"y": [1, 2]}]}}
        old = store.append_messages(sid, [user("u1"), user("u2", annotations=marked)])
        late = store.append_messages(sid, [user("late", annotations={"suite": "late"})])
        commit = store.archive_and_compact(
            sid,
            [summary("s"), carry(old[1])],
            watermark=old[-1].id,
            in_place=in_place,
            child=None if in_place else NewSession(title="A (continued)"),
        )
        view = store.active_messages(commit.child_session_id or sid)
        assert [m.annotations for m in view] == [{}, marked, {"suite": "late"}]
        assert view[1].origin_id == old[1].id
        assert store.get_messages([late[0].id])[0].annotations == {"suite": "late"}

    @pytest.mark.parametrize("in_place", [True, False])
    def test_harness_flag_round_trips_and_is_carried(
        self, store: SessionStore, in_place: bool
    ) -> None:
        sid = store.create_session(NewSession(title="A")).id
        wrapped = NewMessage(
            message=Message(
                role="user",
                content="<system-reminder>x</system-reminder>",
                harness="claude_code.system_reminder",
            )
        )
        old = store.append_messages(sid, [wrapped, user("real words")])
        assert [m.message.harness for m in old] == ["claude_code.system_reminder", None]
        commit = store.archive_and_compact(
            sid,
            [summary("s"), carry(old[0])],
            watermark=old[-1].id,
            in_place=in_place,
            child=None if in_place else NewSession(title="A (continued)"),
        )
        view = store.active_messages(commit.child_session_id or sid)
        assert view[1].message.harness == "claude_code.system_reminder", (
            "a carried row must keep Message.harness"
        )
        assert store.get_messages([old[1].id])[0].message.harness is None

    def test_annotations_must_be_json_text(self, store: SessionStore, session_id: str) -> None:
        bad = {"message": {"role": "user", "content": "x"}, "annotations": {"k": "\ud800"}}
        with pytest.raises(ValidationError, match="annotations"):
            store.append_messages(session_id, [user("ok"), bad])  # type: ignore[list-item]
        with pytest.raises(ValidationError, match="annotations"):
            store.append_messages(
                session_id,
                [{"message": {"role": "user", "content": "x"}, "annotations": {"k": object()}}],  # type: ignore[list-item]
            )
        assert store.active_messages(session_id) == []

    def test_tool_results_answer_earlier_calls(self, store: SessionStore, session_id: str) -> None:
        store.append_messages(
            session_id,
            [user("go"), assistant(calls=[("c1", "ls", "{}")]), tool("c1", "same batch")],
        )
        store.append_messages(session_id, [assistant(calls=[("c2", "ls", "{}")])])
        store.append_messages(session_id, [tool("c2", "later batch, call in the active view")])
        assert [m.message.role for m in store.active_messages(session_id)] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
        ]

    def test_orphan_tool_result_refused_whole(self, store: SessionStore, session_id: str) -> None:
        store.append_messages(session_id, [user("start")])
        before = snapshot(store, session_id)
        with pytest.raises(ValidationError, match="nope"):
            store.append_messages(session_id, [user("valid first"), tool("nope", "orphan")])
        with pytest.raises(ValidationError):  # answered before it is called
            store.append_messages(
                session_id, [tool("c9", "early"), assistant(calls=[("c9", "ls", "{}")])]
            )
        assert snapshot(store, session_id) == before

    def test_append_to_unknown_session(self, store: SessionStore) -> None:
        with pytest.raises(NotFoundError):
            store.append_messages("no-such-session", [user("x")])

    def test_get_messages_in_order_asked(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(session_id, [user("a"), user("b"), user("c")])
        asked = [rows[2].id, rows[0].id, rows[1].id]
        assert [m.id for m in store.get_messages(asked)] == asked
        assert store.get_messages([]) == []

    def test_message_context_is_write_order_within_session(self, store: SessionStore) -> None:
        a = store.create_session(NewSession()).id
        b = store.create_session(NewSession()).id
        mine = []
        for i in range(6):
            mine += store.append_messages(a, [user(f"a{i}")])
            store.append_messages(b, [user(f"b{i}")])  # interleaved writes to another session
        around = store.message_context(mine[3].id, before=2, after=1)
        assert [m.id for m in around] == [mine[1].id, mine[2].id, mine[3].id, mine[4].id]
        edge = store.message_context(mine[0].id, before=3, after=0)
        assert [m.id for m in edge] == [mine[0].id]
        with pytest.raises(NotFoundError):
            store.message_context(10**12)

    def test_second_handle_sees_committed_writes(
        self, store: SessionStore, store_factory: StoreFactory, session_id: str
    ) -> None:
        store.append_messages(session_id, [user("written by handle one")])
        with self.second_handle(store_factory) as other:
            assert texts(other.active_messages(session_id)) == ["written by handle one"]
            other.append_messages(session_id, [user("and by handle two")])
        assert texts(store.active_messages(session_id)) == [
            "written by handle one",
            "and by handle two",
        ]

    # =========================================================================
    # compaction
    # =========================================================================
    def test_compact_in_place_replaces_active_view(self, store: SessionStore) -> None:
        sid = store.create_session(NewSession(title="T", cwd="/w", goal="G", routing={"r": 1})).id
        before_session = store.get_session(sid)
        old = store.append_messages(sid, [user("u1"), assistant("a1"), user("u2"), assistant("a2")])
        event = CompactionEvent(session_id=sid, engine="suite", tokens_before=100, tokens_after=20)
        commit = store.archive_and_compact(
            sid, [summary("the middle"), carry(old[3])], watermark=old[-1].id, event=event
        )
        active = store.active_messages(sid)
        assert (commit.session_id, commit.archived, commit.inserted) == (sid, 4, 2)
        assert commit.carried_after_watermark == 0 and commit.child_session_id is None
        assert commit.active_ids == [m.id for m in active]
        assert [m.message.kind for m in active] == ["summary", "message"]
        assert active[1].message == old[3].message and active[1].origin_id == old[3].id
        assert all(m.active and not m.compacted for m in active)
        assert not {m.id for m in active} & {m.id for m in old}
        for row in store.get_messages([m.id for m in old]):  # nothing deleted
            assert not row.active and row.compacted
        assert len(store.all_messages(sid)) == 6
        after = store.get_session(sid)
        for key in ("id", "title", "cwd", "goal", "routing", "model", "provider", "parent_id"):
            assert getattr(after, key) == getattr(before_session, key), key
        assert after.compression_count == before_session.compression_count + 1
        events = store.compaction_events(sid)
        assert len(events) == 1 and (events[0].engine, events[0].tokens_before) == ("suite", 100)

    def test_compaction_keeps_rows_after_watermark(
        self, store: SessionStore, session_id: str
    ) -> None:
        seen = store.append_messages(session_id, [user("u1"), assistant("a1")])
        watermark = seen[-1].id  # the engine's snapshot ends here ...
        late = store.append_messages(
            session_id, [user("late u"), assistant("late a")]
        )  # ... these arrive
        commit = store.archive_and_compact(session_id, [summary("s")], watermark=watermark)
        active = store.active_messages(session_id)
        assert commit.archived == 2 and commit.inserted == 1 and commit.carried_after_watermark == 2
        assert texts(active)[1:] == ["late u", "late a"]
        assert [m.id for m in active[1:]] == [m.id for m in late]  # kept, not copied
        assert active[0].message.kind == "summary"
        assert commit.active_ids == [m.id for m in active]
        nxt = store.append_messages(session_id, [user("after")])
        assert store.active_messages(session_id)[-1].id == nxt[0].id
        positions = [m.position for m in store.active_messages(session_id)]
        assert positions == sorted(positions) and len(set(positions)) == len(positions)

    def test_compaction_twice(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(session_id, [user("u1"), assistant("a1")])
        first = store.archive_and_compact(
            session_id, [summary("one"), carry(rows[1])], watermark=rows[-1].id
        )
        more = store.append_messages(session_id, [user("u2")])
        second = store.archive_and_compact(
            session_id,
            [summary("two"), carry(store.get_messages([first.active_ids[1]])[0])],
            watermark=more[-1].id,
        )
        assert store.get_session(session_id).compression_count == 2
        active = store.active_messages(session_id)
        assert [m.id for m in active] == second.active_ids
        assert len(store.all_messages(session_id)) == 2 + 2 + 1 + 2

    def test_compaction_bad_input_changes_nothing(
        self, store: SessionStore, session_id: str
    ) -> None:
        rows = store.append_messages(session_id, [user("u1"), assistant("a1")])
        before = snapshot(store, session_id)
        with pytest.raises(ValidationError):
            store.archive_and_compact(
                session_id, [summary("s"), tool("ghost", "orphan result")], watermark=rows[-1].id
            )
        assert snapshot(store, session_id) == before
        with pytest.raises(NotFoundError):
            store.archive_and_compact("no-such-session", [summary("s")], watermark=0)

    def test_compaction_rotation_creates_child(self, store: SessionStore) -> None:
        parent = store.create_session(NewSession(title="P", cwd="/w", goal="G")).id
        old = store.append_messages(parent, [user("u1"), assistant("a1")])
        late = store.append_messages(parent, [user("late")])
        commit = store.archive_and_compact(
            parent,
            [summary("rotated")],
            watermark=old[-1].id,
            in_place=False,
            child=NewSession(title="P (continued)", cwd="/w", goal="G"),
        )
        assert commit.child_session_id and commit.child_session_id != parent
        child = store.get_session(commit.child_session_id)
        assert child.parent_id == parent and child.title == "P (continued)"
        ended = store.get_session(parent)
        assert ended.end_reason == "compression" and ended.ended_at is not None
        view = store.active_messages(child.id)
        assert [m.message.kind for m in view] == ["summary", "message"]
        assert texts(view)[1:] == ["late"]
        assert commit.active_ids == [m.id for m in view]
        kept = {m.id for m in store.all_messages(parent)}
        assert {m.id for m in old + late} <= kept  # nothing deleted
        for row in store.get_messages([m.id for m in old]):
            assert not row.active and row.compacted

    def test_rotated_parent_refuses_writes_and_leases(self, store: SessionStore) -> None:
        parent = store.create_session(NewSession(title="P")).id
        old = store.append_messages(parent, [user("u1"), assistant("a1")])
        lease = store.acquire_lease(parent, LeaseHolder(name="a"), 30.0)
        commit = store.archive_and_compact(
            parent,
            [summary("rotated")],
            watermark=old[-1].id,
            lease=lease,
            in_place=False,
            child=NewSession(title="P"),
        )
        child = commit.child_session_id
        assert child
        store.release_lease(lease)
        before = snapshot(store, parent)
        with pytest.raises(SessionRotated, match="ended by compression") as caught:
            store.append_messages(parent, [user("a stale process's turn")])
        assert caught.value.session_id == parent and caught.value.successor_id == child
        assert child in str(caught.value)
        with pytest.raises(SessionRotated) as caught:
            store.acquire_lease(parent, LeaseHolder(name="b"), 30.0)
        assert caught.value.successor_id == child
        with pytest.raises(SessionRotated):
            store.acquire_lease(parent, LeaseHolder(name="b"), 30.0, timeout=0.5)
        with pytest.raises(SessionRotated):
            store.archive_and_compact(parent, [summary("again")], watermark=old[-1].id)
        assert snapshot(store, parent) == before
        assert store.end_session(parent, "user").end_reason == "compression"
        store.append_messages(child, [user("the live session takes it")])
        assert store.continued_as(parent) == child
        assert store.continued_as(child) is None

    # =========================================================================
    # search
    # =========================================================================
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

    # =========================================================================
    # usage, prefix ledger
    # =========================================================================
    def test_usage_round_trip(self, store: SessionStore, session_id: str) -> None:
        first = Usage(
            input_tokens=100,
            output_tokens=20,
            cache_read_tokens=80,
            cache_write_tokens=5,
            reasoning_tokens=3,
            model="gpt-x",
        )
        store.record_usage(UsageRecord(session_id=session_id, turn_id="t1", usage=first))
        store.record_usage(
            UsageRecord(session_id=session_id, turn_id="t2", usage=Usage(input_tokens=1))
        )
        got = store.usage(session_id)
        assert [u.turn_id for u in got] == ["t1", "t2"]
        assert got[0].usage == first and got[0].created_at is not None

    def test_prefix_ledger_round_trip(self, store: SessionStore, session_id: str) -> None:
        for i, reason in enumerate(["first", None, "compaction"]):
            store.record_prefix(
                PrefixEntry(
                    session_id=session_id,
                    request_index=i,
                    request_hash=f"h{i}",
                    request_tokens=100 + i,
                    shared_prefix_hash=f"p{i}",
                    shared_prefix_tokens=90,
                    previous_tokens=95,
                    break_reason=reason,
                    provider_cached_tokens=64 if i else None,
                )
            )
        got = store.prefix_entries(session_id)
        assert [(e.request_index, e.break_reason) for e in got] == [
            (0, "first"),
            (1, None),
            (2, "compaction"),
        ]
        assert got[1].provider_cached_tokens == 64 and got[0].provider_cached_tokens is None

    # =========================================================================
    # turn leases and fencing
    # =========================================================================
    def test_acquire_try_once_then_busy(self, store: SessionStore, session_id: str) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        assert isinstance(grant, LeaseGrant) and grant.session_id == session_id
        assert grant.holder.name == "a" and grant.expires_at > grant.acquired_at
        with pytest.raises(LeaseBusy):
            store.acquire_lease(session_id, LeaseHolder(name="b"), 30)
        current = store.current_lease(session_id)
        assert current is not None and current.token == grant.token
        assert current.holder == grant.holder

    def test_tokens_strictly_increase(self, store: SessionStore, session_id: str) -> None:
        tokens = []
        for name in ("a", "b", "a", "c"):
            grant = store.acquire_lease(session_id, LeaseHolder(name=name), 30)
            tokens.append(grant.token)
            store.release_lease(grant)
        assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)

    def test_release_frees_the_lease(self, store: SessionStore, session_id: str) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        store.release_lease(grant)
        assert store.current_lease(session_id) is None
        other = store.acquire_lease(session_id, LeaseHolder(name="b"), 30)
        store.release_lease(grant)  # stale release: no error, no effect
        current = store.current_lease(session_id)
        assert current is not None and current.token == other.token

    def test_writes_need_the_live_lease(self, store: SessionStore, session_id: str) -> None:
        store.append_messages(session_id, [user("before any lease")])
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        store.append_messages(session_id, [user("with the lease")], lease=grant)
        before = snapshot(store, session_id)
        with pytest.raises(LeaseBusy):
            store.append_messages(session_id, [user("without a lease")])
        with pytest.raises(LeaseBusy):
            store.archive_and_compact(session_id, [summary("s")], watermark=10**12)
        assert snapshot(store, session_id) == before
        store.release_lease(grant)
        store.append_messages(session_id, [user("free again")])

    def test_stale_token_rejected(self, store: SessionStore, session_id: str) -> None:
        old = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        store.release_lease(old)
        new = store.acquire_lease(session_id, LeaseHolder(name="b"), 30)
        store.append_messages(session_id, [user("by b")], lease=new)
        before = snapshot(store, session_id)
        with pytest.raises(LeaseLost):
            store.append_messages(session_id, [user("by stale a")], lease=old)
        with pytest.raises(LeaseLost):
            store.archive_and_compact(session_id, [summary("s")], watermark=10**12, lease=old)
        with pytest.raises(LeaseLost):
            store.renew_lease(old, 30)
        assert snapshot(store, session_id) == before

    def test_expired_lease_taken_over_and_old_holder_fenced(
        self, store: SessionStore, session_id: str
    ) -> None:
        old = store.acquire_lease(session_id, LeaseHolder(name="slow"), self.short_ttl)
        store.append_messages(session_id, [user("slow wrote this in time")], lease=old)
        time.sleep(self.short_ttl + 0.2)
        assert store.current_lease(session_id) is None
        with pytest.raises(LeaseLost):  # expired: its writes are refused even before a takeover
            store.append_messages(session_id, [user("too late")], lease=old)
        new = store.acquire_lease(session_id, LeaseHolder(name="fast"), 30)
        assert new.token > old.token
        store.append_messages(session_id, [user("fast proceeds")], lease=new)
        before = snapshot(store, session_id)
        with pytest.raises(LeaseLost):
            store.append_messages(session_id, [user("slow resumes")], lease=old)
        with pytest.raises(LeaseLost):
            store.renew_lease(old, 30)
        with pytest.raises(LeaseLost):
            store.archive_and_compact(session_id, [summary("s")], watermark=10**12, lease=old)
        assert snapshot(store, session_id) == before
        assert texts(store.active_messages(session_id)) == [
            "slow wrote this in time",
            "fast proceeds",
        ]

    def test_renew_extends(self, store: SessionStore, session_id: str) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), self.short_ttl)
        renewed = store.renew_lease(grant, 30)
        assert renewed.token == grant.token and renewed.expires_at > grant.expires_at
        time.sleep(self.short_ttl + 0.2)
        with pytest.raises(LeaseBusy):
            store.acquire_lease(session_id, LeaseHolder(name="b"), 30)
        store.append_messages(session_id, [user("still mine")], lease=renewed)

    def test_waiter_woken_promptly_on_release(
        self, store: SessionStore, store_factory: StoreFactory, session_id: str
    ) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="holder"), 30)
        store.append_messages(session_id, [user("the holder's turn")], lease=grant)
        result: dict[str, Any] = {}
        with self.second_handle(store_factory) as other:

            def wait() -> None:
                try:
                    result["grant"] = other.acquire_lease(
                        session_id, LeaseHolder(name="waiter"), 30, timeout=10
                    )
                    result["at"] = time.monotonic()
                    result["seen"] = texts(other.active_messages(session_id))
                except Exception as exc:  # reported below
                    result["error"] = exc

            thread = threading.Thread(target=wait)
            thread.start()
            time.sleep(0.3)  # the waiter is waiting now
            assert "grant" not in result and "error" not in result
            released = time.monotonic()
            store.release_lease(grant)
            thread.join(15)
        assert "error" not in result, result.get("error")
        latency = result["at"] - released
        assert latency < self.handover_budget, f"hand-over took {latency:.3f}s"
        assert result["grant"].token > grant.token
        assert result["seen"] == ["the holder's turn"]  # the waiter reloads the latest history

    def test_wait_times_out_with_busy(self, store: SessionStore, session_id: str) -> None:
        store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        started = time.monotonic()
        with pytest.raises(LeaseBusy):
            store.acquire_lease(session_id, LeaseHolder(name="b"), 30, timeout=0.3)
        assert 0.25 <= time.monotonic() - started < 3.0

    def test_waiter_gets_expired_lease(self, store: SessionStore, session_id: str) -> None:
        held = store.acquire_lease(
            session_id, LeaseHolder(name="crashed-elsewhere"), self.short_ttl
        )
        started = time.monotonic()
        grant = store.acquire_lease(session_id, LeaseHolder(name="b"), 30, timeout=10)
        waited = time.monotonic() - started
        assert grant.token > held.token
        assert waited < self.short_ttl + 1.5, f"waited {waited:.3f}s for a {self.short_ttl}s lease"

    def test_dead_holder_on_this_host_taken_over(
        self, store: SessionStore, session_id: str
    ) -> None:
        ghost = LeaseHolder(name="ghost", host=socket.gethostname(), pid=dead_pid())
        held = store.acquire_lease(session_id, ghost, 3600)
        grant = store.acquire_lease(session_id, LeaseHolder(name="heir"), 30)
        assert grant.token > held.token
        with pytest.raises(LeaseLost):
            store.append_messages(session_id, [user("ghost write")], lease=held)

    def test_zombie_holder_on_this_host_taken_over(
        self, store: SessionStore, session_id: str
    ) -> None:
        # a zombie (exited, not reaped) still answers os.kill(pid, 0), yet runs no code
        if process_state(os.getpid()) is None:
            pytest.skip("no /proc on this platform")
        zombie = zombie_process()
        try:
            ghost = LeaseHolder(name="zombie", host=socket.gethostname(), pid=zombie.pid)
            held = store.acquire_lease(session_id, ghost, 3600)
            started = time.monotonic()
            grant = store.acquire_lease(session_id, LeaseHolder(name="heir"), 30)
            assert time.monotonic() - started < 0.5
            assert grant.token > held.token
            with pytest.raises(LeaseLost):
                store.append_messages(session_id, [user("zombie write")], lease=held)
        finally:
            zombie.wait()

    def test_waiter_takes_over_promptly_when_the_holder_becomes_a_zombie(
        self, store: SessionStore, session_id: str
    ) -> None:
        if process_state(os.getpid()) is None:
            pytest.skip("no /proc on this platform")
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
        )
        try:
            holder = LeaseHolder(name="doomed", host=socket.gethostname(), pid=child.pid)
            held = store.acquire_lease(session_id, holder, 3600)
            got: list[tuple[float, LeaseGrant]] = []
            waiter = threading.Thread(
                target=lambda: got.append(
                    (
                        time.monotonic(),
                        store.acquire_lease(session_id, LeaseHolder(name="heir"), 30, timeout=20),
                    )
                )
            )
            waiter.start()
            time.sleep(0.3)
            assert not got  # the holder is alive: the waiter waits
            assert child.stdin is not None
            child.stdin.close()  # the child exits; nobody reaps it: a zombie
            while process_state(child.pid) != "Z":
                time.sleep(0.002)
            died = time.monotonic()
            waiter.join(20)
            assert got, "the waiter never got the lease"
            took = got[0][0] - died
            assert took < 0.5, f"take-over from a zombie holder took {took:.3f}s"
            assert got[0][1].token > held.token
        finally:
            child.wait()

    def test_dead_pid_on_other_host_not_taken_over(
        self, store: SessionStore, session_id: str
    ) -> None:
        remote = LeaseHolder(name="remote", host="another-host.invalid", pid=dead_pid())
        store.acquire_lease(session_id, remote, 3600)
        with pytest.raises(LeaseBusy):
            store.acquire_lease(session_id, LeaseHolder(name="local"), 30)

    def test_lease_bad_input(self, store: SessionStore, session_id: str) -> None:
        for ttl in (0, -1.0):
            with pytest.raises(HermesError):
                store.acquire_lease(session_id, LeaseHolder(name="a"), ttl)
        assert store.current_lease(session_id) is None
        with pytest.raises(NotFoundError):
            store.acquire_lease("no-such-session", LeaseHolder(name="a"), 30)

    # -- across processes -------------------------------------------------------
    def _spawn(self, target: Callable[..., None], *args: Any) -> tuple[Any, Any]:
        if not self.multiprocess:
            pytest.skip("multiprocess = False for this store")
        ctx = multiprocessing.get_context("spawn")
        parent_end, child_end = ctx.Pipe()
        proc = ctx.Process(target=target, args=(*args, child_end), daemon=True)
        proc.start()
        return proc, parent_end

    def test_process_waiter_woken_promptly(
        self, store: SessionStore, store_factory: StoreFactory, session_id: str
    ) -> None:
        grant = store.acquire_lease(session_id, LeaseHolder(name="parent"), 30)
        store.append_messages(session_id, [user("parent's turn")], lease=grant)
        proc, pipe = self._spawn(_child_wait_lease, store_factory, session_id, 30.0)
        try:
            assert pipe.poll(60), "child process did not start"
            assert pipe.recv() == "ready"
            time.sleep(0.5)  # the child is waiting now
            released = time.time()
            store.release_lease(grant)
            assert pipe.poll(30), "child never got the released lease"
            status, token, got, seen = pipe.recv()
        finally:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        assert status == "granted", token
        assert token > grant.token
        assert got - released < self.handover_budget, f"hand-over took {got - released:.3f}s"
        assert seen == ["parent's turn"]

    def test_killed_holder_process_taken_over(
        self, store: SessionStore, store_factory: StoreFactory, session_id: str
    ) -> None:
        proc, pipe = self._spawn(_child_hold_lease, store_factory, session_id, 3600.0)
        try:
            assert pipe.poll(60), "child process did not report its lease"
            child_token = pipe.recv()
            with pytest.raises(LeaseBusy):  # alive: its lease stands
                store.acquire_lease(session_id, LeaseHolder(name="parent"), 30)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.join(10)
        grant = store.acquire_lease(session_id, LeaseHolder(name="parent"), 30)
        assert grant.token > child_token
        store.append_messages(session_id, [user("after the takeover")], lease=grant)
