"""The store kit's pure rules, without a database (the conformance suite runs them through both
stores): compaction planning, rotation inheritance, fencing."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from hermes_core.storekit import (
    LeaseState,
    check_compaction,
    check_fence,
    plan_compaction,
    rotation_child,
)
from hermes_hookspecs import (
    CompactionEvent,
    LeaseBusy,
    LeaseGrant,
    LeaseHolder,
    LeaseLost,
    Message,
    NewMessage,
    NewSession,
    SessionRecord,
    StoredMessage,
    ValidationError,
)

PARENT = SessionRecord(
    id="p",
    title="T",
    cwd="/w",
    goal="G",
    routing={"r": 1},
    model="m",
    provider="prov",
    created_at=1.0,
    updated_at=1.0,
    system_prompt_hash="a" * 64,
    compression_count=2,
)


def new(text: str) -> NewMessage:
    return NewMessage(message=Message(role="user", content=text))


def stored(mid: int, position: int, text: str) -> StoredMessage:
    return StoredMessage(
        id=mid,
        session_id="p",
        position=position,
        message=Message(role="user", content=text),
        created_at=1.0,
    )


def request(**kwargs: object) -> object:
    args: dict[str, object] = {
        "watermark": 10,
        "in_place": True,
        "child": None,
        "event": None,
        "update": None,
    }
    args.update(kwargs)
    return check_compaction([new("summary")], **args)


def test_in_place_plan_inserts_then_renumbers_the_late_rows() -> None:
    late = [stored(11, 7, "late a"), stored(12, 8, "late b")]
    plan = plan_compaction(PARENT, 9, request(), late, first_position=0)  # type: ignore[arg-type]
    assert (plan.continuing_id, plan.first_position, plan.next_position) == ("p", 9, 12)
    assert plan.moves == [(11, 10), (12, 11)] and plan.retire == []
    assert plan.compression_count == 3 and plan.inserted == 1
    commit = plan.commit(archived=4, inserted_ids=[20])
    assert commit.active_ids == [20, 11, 12] and commit.child_session_id is None


def test_rotation_plan_copies_the_late_rows_into_the_child() -> None:
    late = [stored(11, 7, "late")]
    req = request(in_place=False, child=NewSession(id="c", title="T2"))
    plan = plan_compaction(PARENT, 9, req, late, first_position=1)  # type: ignore[arg-type]
    assert plan.child is not None and plan.continuing_id == "c"
    assert (plan.child.title, plan.child.cwd, plan.child.routing) == ("T2", "/w", {"r": 1})
    assert plan.child_system_prompt_hash == "a" * 64 and plan.compression_count == 3
    assert [m.origin_id for m in plan.inserts] == [None, 11] and plan.retire == [11]
    assert (plan.first_position, plan.next_position, plan.inserted) == (1, 3, 1)
    assert plan.commit(archived=5, inserted_ids=[30, 31]).active_ids == [30, 31]


def test_rotation_child_rule() -> None:
    assert rotation_child(PARENT, None).title == "T"
    assert rotation_child(PARENT, {"title": "kept", "parent_id": "p"}).title == "kept"
    with pytest.raises(ValidationError, match="parent_id"):
        rotation_child(PARENT, NewSession(parent_id="someone-else"))


def test_plan_refuses_before_anything_is_written() -> None:
    with pytest.raises(ValidationError, match="in_place=False"):
        request(child=NewSession())
    with pytest.raises(ValidationError, match=r"event\.session_id"):
        plan_compaction(
            PARENT,
            0,
            request(
                event=CompactionEvent(session_id="x", engine="e", tokens_before=2, tokens_after=1)
            ),  # type: ignore[arg-type]
            [],
            first_position=0,
        )


def test_fence_rule() -> None:
    me = LeaseHolder(name="me")
    grant = LeaseGrant(session_id="s", holder=me, token=3, expires_at=9.0, acquired_at=1.0)
    live = LeaseState(token=3, holder=me, released=False, remaining=5.0)
    check_fence("s", grant, live)
    with pytest.raises(LeaseBusy):
        check_fence("s", None, live)
    with pytest.raises(LeaseLost, match="superseded"):
        check_fence("s", grant, LeaseState(token=4, holder=me, released=False, remaining=5.0))
    with pytest.raises(LeaseLost, match=r"expired .*\(database clock\)"):
        check_fence(
            "s",
            grant,
            LeaseState(token=3, holder=me, released=False, remaining=-1, clock="database clock"),
        )
    with pytest.raises(ValidationError, match="lease"):
        check_fence("s", "3", live)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    ghost = LeaseHolder(name="ghost", host=socket.gethostname(), pid=proc.pid)
    check_fence("s", None, LeaseState(token=3, holder=ghost, released=False, remaining=60))
