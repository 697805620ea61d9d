"""Messages: append order, exact round trip, tool pairing, reads by id and context."""

from __future__ import annotations

import json

import pytest

from hermes_hookspecs import (
    LeaseBusy,
    LeaseHolder,
    Message,
    NewMessage,
    NewSession,
    NotFoundError,
    SessionStore,
    ToolCall,
    ToolFunction,
    ValidationError,
)

from .base import SuiteBase
from .helpers import (
    StoreFactory,
    assistant,
    carry,
    snapshot,
    summary,
    texts,
    tool,
    user,
)


class MessageChecks(SuiteBase):
    """Messages: append order, exact round trip, tool pairing, reads by id and context."""

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

    @pytest.mark.parametrize("in_place", [True, False])
    def test_turn_requests_name_the_user_message_that_opened_each_turn(
        self, store: SessionStore, in_place: bool
    ) -> None:
        sid = store.create_session(NewSession(title="T")).id
        other = store.create_session(NewSession()).id
        reminder = NewMessage(
            message=Message(
                role="user", content="<system-reminder>x</system-reminder>", harness="cc.reminder"
            )
        )
        early = store.append_messages(sid, [assistant("before any request")])
        first = store.append_messages(
            sid,
            [
                user("please fix the parser"),
                assistant(None, [("c1", "bash", '{"cmd": "make"}')]),
                tool("c1", "ok"),
            ],
        )
        store.append_messages(other, [user("another session's request")])  # interleaved
        second = store.append_messages(
            sid, [user("now the docs"), reminder, assistant("done"), summary("handoff")]
        )
        asked = [r.id for r in early + first + second]
        commit = store.archive_and_compact(
            sid,
            [summary("the middle"), carry(first[1]), carry(first[2]), carry(second[2])],
            watermark=second[-1].id,
            in_place=in_place,
            child=None if in_place else NewSession(title="T (continued)"),
        )
        view = store.active_messages(commit.child_session_id or sid)
        # a copy stands where its original stood (its session may be the rotated parent)
        asked += [view[1].id, view[3].id, 10**12]
        want = {
            first[0].id: first[0].id,  # a message the user wrote is its own request
            first[1].id: first[0].id,
            first[2].id: first[0].id,
            second[0].id: second[0].id,
            second[1].id: second[0].id,  # text a harness injected is no request
            second[2].id: second[0].id,
            second[3].id: second[0].id,  # nor is a summary
            view[1].id: first[0].id,
            view[3].id: second[0].id,
        }  # nothing before the first request, nor for an id that does not exist
        found = store.turn_requests(asked)
        assert {k: v.id for k, v in found.items()} == want
        assert found[view[3].id] == store.get_messages([second[0].id])[0]
        # the contract's own walk over get_messages / message_context agrees
        walked = SessionStore.turn_requests(store, asked)
        assert {k: v.id for k, v in walked.items()} == want
        assert store.turn_requests([]) == {}
        with pytest.raises(ValidationError, match="message id"):
            store.turn_requests(["7"])  # type: ignore[list-item]

    # -- rules decided once for every store (issue 17) ---------------------------
    def test_empty_append_still_checks_the_session(
        self, store: SessionStore, session_id: str
    ) -> None:
        with pytest.raises(NotFoundError):
            store.append_messages("no-such-session", [])
        before = store.get_session(session_id)
        grant = store.acquire_lease(session_id, LeaseHolder(name="a"), 30)
        with pytest.raises(LeaseBusy):  # a write without the lease is refused, empty or not
            store.append_messages(session_id, [])
        assert store.append_messages(session_id, [], lease=grant) == []
        assert store.get_session(session_id) == before  # and nothing was written

    def test_lease_argument_must_be_a_grant(self, store: SessionStore, session_id: str) -> None:
        before = snapshot(store, session_id)
        with pytest.raises(ValidationError, match="lease"):
            store.append_messages(session_id, [user("x")], lease="token 1")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="lease"):
            store.archive_and_compact(
                session_id,
                [summary("s")],
                watermark=0,
                lease={"token": 1},  # type: ignore[arg-type]
            )
        assert snapshot(store, session_id) == before

    def test_turn_id_with_nul_refused(self, store: SessionStore, session_id: str) -> None:
        with pytest.raises(ValidationError, match="turn_id"):
            store.append_messages(session_id, [user("ok"), user("x", turn_id="t\x001")])
        assert store.active_messages(session_id) == []

    def test_message_reads_refuse_bad_arguments(self, store: SessionStore, session_id: str) -> None:
        (row,) = store.append_messages(session_id, [user("only")])
        for bad in ({"before": -1}, {"after": -2}, {"before": "2"}, {"after": 1.5}):
            with pytest.raises(ValidationError, match=r"before|after"):
                store.message_context(row.id, **bad)
        with pytest.raises(ValidationError, match="message id"):
            store.message_context(str(row.id))  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="message id"):
            store.get_messages([row.id, "7"])  # type: ignore[list-item]
        with pytest.raises(NotFoundError, match=str(row.id + 1000)):
            store.get_messages([row.id, row.id + 1000])
