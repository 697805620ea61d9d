"""Sessions: create, read, list, update, end (the first end wins)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from hermes_hookspecs import (
    HermesError,
    LeaseHolder,
    NewSession,
    NotFoundError,
    SessionStore,
    ValidationError,
)

from .base import SuiteBase
from .helpers import (
    snapshot,
    user,
)


class SessionChecks(SuiteBase):
    """Sessions: create, read, list, update, end (the first end wins)."""

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

    # -- rules decided once for every store (issue 17) ---------------------------
    def test_duplicate_session_id_is_a_validation_error(self, store: SessionStore) -> None:
        store.create_session(NewSession(id="taken", title="original"))
        before = snapshot(store, "taken")
        with pytest.raises(ValidationError, match="'taken' already exists"):
            store.create_session(NewSession(id="taken", title="impostor"))
        assert snapshot(store, "taken") == before

    def test_session_text_with_nul_refused(self, store: SessionStore, session_id: str) -> None:
        before = snapshot(store, session_id)
        listed = [s.id for s in store.list_sessions()]
        for bad in (NewSession(title="a\x00b"), NewSession(goal="\x00"), NewSession(id="  ")):
            with pytest.raises(ValidationError):
                store.create_session(bad)
        with pytest.raises(ValidationError, match="title"):
            store.update_session(session_id, title="nul\x00here")
        with pytest.raises(ValidationError, match="end reason"):
            store.end_session(session_id, "user\x00")
        assert snapshot(store, session_id) == before
        assert [s.id for s in store.list_sessions()] == listed

    def test_session_routing_must_be_json(self, store: SessionStore, session_id: str) -> None:
        before = snapshot(store, session_id)
        with pytest.raises(ValidationError, match="routing"):
            store.create_session(NewSession(routing={"x": object()}))
        with pytest.raises(ValidationError, match="routing"):
            store.update_session(session_id, routing={"x": object()})
        with pytest.raises(ValidationError, match="routing"):
            store.update_session(session_id, routing={"x": "\ud800"})
        assert snapshot(store, session_id) == before

    def test_update_session_hashes_name_stored_blobs_of_their_kind(
        self, store: SessionStore, session_id: str
    ) -> None:
        prompt = store.put_blob("system_prompt", "You are the suite.")
        before = snapshot(store, session_id)
        with pytest.raises(ValidationError, match="system_prompt_hash"):
            store.update_session(session_id, system_prompt_hash="0" * 64)
        with pytest.raises(ValidationError, match="tools_hash"):  # a blob, of the other kind
            store.update_session(session_id, title="changed", tools_hash=prompt)
        assert snapshot(store, session_id) == before
        assert store.update_session(session_id, system_prompt_hash=prompt).system_prompt_hash == (
            prompt
        )

    def test_session_id_must_be_a_string(self, store: SessionStore) -> None:
        # a wrong type is bad input, not an unknown session (nor a driver error)
        calls: dict[str, Callable[[Any], object]] = {
            "get_session": lambda bad: store.get_session(bad),
            "continued_as": lambda bad: store.continued_as(bad),
            "update_session": lambda bad: store.update_session(bad, title="x"),
            "end_session": lambda bad: store.end_session(bad, "user"),
            "append_messages": lambda bad: store.append_messages(bad, [user("x")]),
            "active_messages": lambda bad: store.active_messages(bad),
            "all_messages": lambda bad: store.all_messages(bad),
            "archive_and_compact": lambda bad: store.archive_and_compact(bad, [], watermark=0),
            "usage": lambda bad: store.usage(bad),
            "prefix_entries": lambda bad: store.prefix_entries(bad),
            "compaction_events": lambda bad: store.compaction_events(bad),
            "acquire_lease": lambda bad: store.acquire_lease(bad, LeaseHolder(name="a"), 30),
            "current_lease": lambda bad: store.current_lease(bad),
        }
        for name, call in calls.items():
            for bad in (42, None, b"sid"):
                with pytest.raises(ValidationError, match="session id"):
                    call(bad)
                    pytest.fail(f"{name}({bad!r}) was accepted")
