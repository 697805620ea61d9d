"""The coordinator plans from values and writes nothing; the store commits the plan at once."""

from __future__ import annotations

from typing import Any

from hermes_core.compression import CompressionInputs, plan_compression
from hermes_core.view import ActiveView
from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    ContextEngine,
    LeaseHolder,
    NewMessage,
    hookimpl,
)
from tests.hosts import HostFactory


class KeepLast(ContextEngine):
    name = "plan-keep-last"

    def compress(self, request: CompressionRequest) -> CompressionResult:
        rows = request.messages
        start = max(i for i, r in enumerate(rows) if r.message.role == "user")
        kept = [NewMessage(message=r.message, origin_id=r.id) for r in rows[start:]]
        return CompressionResult(status="compressed", engine=self.name, messages=kept)


class Engines:
    @hookimpl
    def register_context_engines(self, register: object) -> None:
        register(KeepLast())  # type: ignore[operator]


PLAN_SECTIONS: dict[str, Any] = {
    "plugins": {"block": ["memory_builtin"]},
    "compression": {"engine": "plan-keep-last"},
}


def test_a_plan_writes_nothing_and_its_commit_writes_it_whole(make_host: HostFactory) -> None:
    sections = {**PLAN_SECTIONS, "compression": {"engine": "plan-keep-last", "in_place": False}}
    with make_host(Engines(), **sections) as host:
        session = host.new_session()
        for i in range(3):
            with session.turn() as turn:
                turn.prepare(f"question {i}")
                turn.record_response({"role": "assistant", "content": f"answer {i}"})
                turn.commit()
        store = host.store()
        before = [row.id for row in store.active_messages(session.id)]
        view = session.view
        inputs = CompressionInputs(
            record=session.record, model=session.model, prompt=session.prompt, view=view
        )
        plan = plan_compression(inputs, host)
        assert plan.done is None and plan.child is not None
        assert [m.message.text() for m in plan.new_messages] == ["question 2", "answer 2"]
        assert plan.watermark == before[-1]
        assert plan.continuing is not None and plan.continuing.id == plan.child.id
        # planning wrote nothing and left the values it was given as they were
        assert [row.id for row in store.active_messages(session.id)] == before
        assert store.compaction_events(session.id) == []
        assert session.view is view and [row.id for row in view.rows] == before
        lease = store.acquire_lease(session.id, LeaseHolder(name="t"), 30.0, timeout=0)
        commit = plan.commit(store, lease, session.stage_prompt(plan.continuing))
        assert commit.child_session_id == plan.child.id
        assert [m.message.text() for m in store.active_messages(plan.child.id)] == [
            "question 2",
            "answer 2",
        ]
        assert len(store.compaction_events(session.id)) == 1
        assert [row.id for row in view.rows] == before  # the old view is still the old view


def test_nothing_to_compress_is_a_plan_with_only_its_outcome(make_host: HostFactory) -> None:
    with make_host(Engines(), **PLAN_SECTIONS) as host:
        session = host.new_session()
        inputs = CompressionInputs(
            record=session.record,
            model=session.model,
            prompt=session.prompt,
            view=ActiveView(),
            reason="hygiene",
        )
        plan = plan_compression(inputs, host)
        assert plan.done is not None
        assert (plan.done.status, plan.done.reason, plan.done.trigger) == (
            "skipped",
            "no active messages",
            "hygiene",
        )
        assert plan.new_messages == [] and plan.event is None
