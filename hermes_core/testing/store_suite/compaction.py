"""Compaction: in place and by rotation, rows after the watermark, the continuation
update, the rotated parent closed.
"""

from __future__ import annotations

import hashlib

import pytest

from hermes_hookspecs import (
    CompactionEvent,
    ContinuationUpdate,
    LeaseHolder,
    Message,
    NewMessage,
    NewSession,
    NotFoundError,
    SessionRotated,
    SessionStore,
    ValidationError,
)

from .base import SuiteBase
from .helpers import (
    assistant,
    carry,
    snapshot,
    summary,
    texts,
    tool,
    user,
)


class CompactionChecks(SuiteBase):
    """Compaction checks."""

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

    # -- rules decided once for every store (issue 17) ---------------------------
    def test_rotation_child_inherits_the_fields_it_leaves_empty(self, store: SessionStore) -> None:
        parent = store.create_session(
            NewSession(title="P", cwd="/w", goal="G", routing={"r": 1}, model="m", provider="prov")
        ).id
        prompt = store.put_blob("system_prompt", "the parent's prompt")
        store.update_session(parent, system_prompt_hash=prompt)
        old = store.append_messages(parent, [user("u1"), assistant("a1")])
        commit = store.archive_and_compact(
            parent,
            [summary("s")],
            watermark=old[-1].id,
            in_place=False,
            child=NewSession(title="P (continued)", model="m2"),  # the rest left empty
        )
        assert commit.child_session_id
        child = store.get_session(commit.child_session_id)
        assert (child.title, child.model) == ("P (continued)", "m2")  # set: kept
        assert (child.cwd, child.goal, child.routing, child.provider) == (
            "/w",
            "G",
            {"r": 1},
            "prov",
        )  # empty: the parent's
        assert child.parent_id == parent and child.system_prompt_hash == prompt
        assert child.compression_count == store.get_session(parent).compression_count + 1
        bare = store.create_session(NewSession(title="B", cwd="/b", routing={"k": "v"})).id
        rows = store.append_messages(bare, [user("u")])
        again = store.archive_and_compact(
            bare, [summary("s")], watermark=rows[-1].id, in_place=False
        )
        assert again.child_session_id
        got = store.get_session(again.child_session_id)
        assert (got.title, got.cwd, got.routing, got.parent_id) == ("B", "/b", {"k": "v"}, bare)

    def test_rotation_lists_the_child_before_its_parent(self, store: SessionStore) -> None:
        # the child is the live continuation: the most recently updated of the two
        parent = store.create_session(NewSession(title="P")).id
        old = store.append_messages(parent, [user("u1"), assistant("a1")])
        commit = store.archive_and_compact(
            parent, [summary("s")], watermark=old[-1].id, in_place=False
        )
        listed = [s.id for s in store.list_sessions(limit=2)]
        assert listed == [commit.child_session_id, parent]

    def test_rotation_refuses_a_foreign_parent_id(self, store: SessionStore) -> None:
        parent = store.create_session(NewSession(title="P")).id
        other = store.create_session(NewSession(title="someone else")).id
        old = store.append_messages(parent, [user("u1"), assistant("a1")])
        before = snapshot(store, parent)
        listed = [s.id for s in store.list_sessions()]
        with pytest.raises(ValidationError, match="parent_id"):
            store.archive_and_compact(
                parent,
                [summary("s")],
                watermark=old[-1].id,
                in_place=False,
                child=NewSession(title="P (continued)", parent_id=other),
            )
        assert snapshot(store, parent) == before
        assert [s.id for s in store.list_sessions()] == listed
        commit = store.archive_and_compact(  # naming the parent itself is fine
            parent,
            [summary("s")],
            watermark=old[-1].id,
            in_place=False,
            child=NewSession(title="P (continued)", parent_id=parent),
        )
        assert commit.child_session_id
        assert store.get_session(commit.child_session_id).parent_id == parent

    def test_child_only_with_rotation(self, store: SessionStore, session_id: str) -> None:
        rows = store.append_messages(session_id, [user("u1"), assistant("a1")])
        before = snapshot(store, session_id)
        with pytest.raises(ValidationError, match="child"):
            store.archive_and_compact(
                session_id, [summary("s")], watermark=rows[-1].id, child=NewSession(title="C")
            )
        assert snapshot(store, session_id) == before

    def test_rotation_into_a_taken_id_refused(self, store: SessionStore) -> None:
        parent = store.create_session(NewSession(title="P")).id
        store.create_session(NewSession(id="taken-child", title="already here"))
        old = store.append_messages(parent, [user("u1"), assistant("a1")])
        before = snapshot(store, parent)
        with pytest.raises(ValidationError, match="'taken-child' already exists"):
            store.archive_and_compact(
                parent,
                [summary("s")],
                watermark=old[-1].id,
                in_place=False,
                child=NewSession(id="taken-child"),
            )
        assert snapshot(store, parent) == before
        assert store.get_session("taken-child").title == "already here"
        assert store.active_messages("taken-child") == []
