"""End to end: the docs/runtime.md loop, the official ``openai`` client, the loopback fake.

Each test is named after a promise of docs/runtime.md or docs/concepts.md. The
long run (62 turns with parallel tool calls, the builtin memory tool and
compression triggered by the provider's reported usage) is shared by the
tests that read it; the others set up their own session.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from openai import OpenAI

from hermes_core.runtime import UNANSWERED_RESULT
from hermes_hookspecs import ValidationError, hookimpl
from tests.e2e.e2e_support import (
    agent_rules,
    ask,
    child_env,
    docs_block,
    docs_loop,
    fake_server,
    finish,
    host,
    settings_data,
    start_child,
    tool_pairs_ok,
    user_text,
    write_config,
)

TURNS = 62
FAKE_COMMAND = [sys.executable, "-m", "hermes_core.testing.fake_openai"]


def chat_bodies(fake: Any) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests_to("chat.completions")]


def originals(store: Any, session_id: str) -> list[Any]:
    """Every message written for the session chain, carried copies left out."""
    chain: list[str] = []
    current: str | None = session_id
    while current and current not in chain:
        chain.append(current)
        current = store.get_session(current).parent_id
    return [m for sid in reversed(chain) for m in store.all_messages(sid) if m.origin_id is None]


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    tmp = tmp_path_factory.mktemp("long-run")
    data = settings_data(tmp)
    with fake_server() as fake:
        hermes = host(data)
        loop = docs_loop(OpenAI(base_url=fake.base_url, api_key="test-key"))
        session = hermes.new_session(
            cwd=str(tmp), caller_message="You maintain this repository.", tools=loop["TOOLS"]
        )
        first_id = session.id
        started = time.monotonic()
        replies = [loop["agent_turn"](session, user_text(i)) for i in range(TURNS)]
        yield SimpleNamespace(
            tmp=tmp,
            fake=fake,
            hermes=hermes,
            session=session,
            first_id=first_id,
            replies=replies,
            seconds=time.monotonic() - started,
        )
        hermes.close()


# -- the long run -----------------------------------------------------------------------------
def test_sixty_turns_with_parallel_tool_calls_run_through_the_official_client(
    long_run: SimpleNamespace,
) -> None:
    assert len(long_run.replies) == TURNS
    bodies = chat_bodies(long_run.fake)
    parallel = [
        m
        for body in bodies
        for m in body["messages"]
        if m["role"] == "assistant" and len(m.get("tool_calls") or []) == 2
    ]
    assert parallel, "no request carried an assistant message with two parallel calls"
    assert len(bodies) >= TURNS + TURNS // 3
    long_run.fake.check()  # every request matched the openai package's types


def test_every_request_answers_each_tool_call_right_after_it(long_run: SimpleNamespace) -> None:
    for body in chat_bodies(long_run.fake):
        tool_pairs_ok(body["messages"])


def test_the_builtin_memory_tool_is_answered_by_the_framework(long_run: SimpleNamespace) -> None:
    memory_file = long_run.tmp / "memory" / "MEMORY.md"
    assert "The CI runs on two cores." in memory_file.read_text(encoding="utf-8")
    store = long_run.hermes.store()
    rows = originals(store, long_run.session.id)
    calls = {
        call.id
        for row in rows
        for call in row.message.tool_calls or []
        if call.function.name == "memory"
    }
    results = [r for r in rows if r.message.role == "tool" and r.message.tool_call_id in calls]
    assert calls and len(results) == len(calls)
    assert all("MEMORY.md" in r.message.text() for r in results)


def test_compression_is_triggered_by_the_reported_usage(long_run: SimpleNamespace) -> None:
    store = long_run.hermes.store()
    session = long_run.session
    events = store.compaction_events(session.id)
    threshold = long_run.hermes.threshold(session.model).threshold_tokens
    assert len(events) >= 2
    # the runtime's own estimate never reached the trigger: the provider's count did
    assert all(event.tokens_before < threshold for event in events), [
        (e.tokens_before, threshold) for e in events
    ]
    reported = max(u.usage.input_tokens for u in store.usage(session.id))
    assert reported >= threshold


def test_the_prefix_breaks_only_at_compaction_boundaries(long_run: SimpleNamespace) -> None:
    entries = long_run.hermes.store().prefix_entries(long_run.session.id)
    reasons = [entry.break_reason for entry in entries]
    # never a rewritten message nor changed tool bytes; the system prompt changes only when
    # a compaction rebuilds it (the memory tool edited MEMORY.md)
    assert set(reasons) <= {"first", None, "compaction", "system_prompt"}, set(reasons)
    assert "compaction" in reasons and reasons.count("system_prompt") <= 1
    # and on the wire: between compactions each request starts with the previous one
    bodies = chat_bodies(long_run.fake)
    grown = 0
    for before, after in itertools.pairwise(bodies):
        old, new = before["messages"], after["messages"]
        if new[: len(old)] == old:
            grown += 1
    assert grown >= len(bodies) * 0.8


def test_nothing_is_ever_deleted_by_compaction(long_run: SimpleNamespace) -> None:
    rows = originals(long_run.hermes.store(), long_run.session.id)
    users = [r for r in rows if r.message.role == "user" and r.message.kind == "message"]
    assert [r.message.text() for r in users] == [user_text(i) for i in range(TURNS)]


def test_the_long_run_stays_fast(long_run: SimpleNamespace) -> None:
    assert long_run.seconds < 60, f"{TURNS} turns took {long_run.seconds:.1f}s"


# -- resume ------------------------------------------------------------------------------------
def test_resume_in_a_new_process_sends_the_byte_identical_request(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    config = write_config(tmp_path, data)
    with fake_server() as fake:
        hermes = host(data)
        client = OpenAI(base_url=fake.base_url, api_key="test-key")
        loop = docs_loop(client)
        session = hermes.new_session(cwd=".", tools=loop["TOOLS"])
        for i in range(20):
            loop["agent_turn"](session, user_text(i))
        assert hermes.store().compaction_events(session.id)
        question = user_text(21)

        def interrupted(call: Any) -> str:
            raise KeyboardInterrupt  # this process stops after sending the request

        with pytest.raises(KeyboardInterrupt):
            docs_loop(client, run_tool=interrupted)["agent_turn"](session, question)
        ours = fake.requests_to("chat.completions")[-1].raw
        child = start_child(config, fake)
        try:
            assert ask(child, f"open {session.id}") == session.id
            ask(child, f"turn {question}")
            theirs = fake.requests_to("chat.completions")
            assert theirs[-3].raw == ours  # the resumed process's first request of that turn
            for i in range(22, 30):  # it goes on, compressing too
                ask(child, f"turn {user_text(i)}")
        finally:
            finish(child)
        tools = {json.dumps(r.body["tools"]) for r in fake.requests_to("chat.completions")}
        assert len(tools) == 1  # one tool byte string in both processes, before and after
        entries = hermes.store().prefix_entries(hermes.open_session(session.id).id)
        assert "tools" not in {e.break_reason for e in entries}
        hermes.close()


# -- abort ---------------------------------------------------------------------------------------
def test_an_aborted_turn_stores_nothing_and_the_retry_stores_it_once(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    with fake_server() as fake:
        hermes = host(data)
        client = OpenAI(base_url=fake.base_url, api_key="test-key")
        loop = docs_loop(client)
        session = hermes.new_session(cwd=".", tools=loop["TOOLS"])
        for i in range(14):
            loop["agent_turn"](session, user_text(i))
        store = hermes.store()
        before = [m.model_dump() for m in store.all_messages(session.id)]
        crashed = docs_loop(client, run_tool=lambda call: 1 / 0)
        question = user_text(15)  # asks for parallel tools
        with pytest.raises(ZeroDivisionError):
            crashed["agent_turn"](session, question)
        assert [m.model_dump() for m in store.all_messages(session.id)] == before
        loop["agent_turn"](session, question)
        texts = [m.message.text() for m in originals(store, session.id)]
        assert texts.count(question) == 1
        hermes.close()


def test_an_unanswered_tool_call_never_reaches_the_api(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    with fake_server() as fake:
        hermes = host(data)
        client = OpenAI(base_url=fake.base_url, api_key="test-key")
        loop = docs_loop(client)
        session = hermes.new_session(cwd=".", tools=loop["TOOLS"])
        with session.turn() as turn:  # a loop that forgets its tools
            request = turn.prepare(user_text(3))
            completion = client.chat.completions.create(**request.chat_body())
            turn.record_response(completion.choices[0].message.model_dump(exclude_none=True))
            turn.commit()
        loop["agent_turn"](session, user_text(1))
        last = fake.requests_to("chat.completions")[-1].body["messages"]
        tool_pairs_ok(last)
        assert UNANSWERED_RESULT in [m.get("content") for m in last]
        hermes.close()


def test_bad_input_raises_validation_error_and_changes_nothing(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    with fake_server() as fake:
        hermes = host(data)
        loop = docs_loop(OpenAI(base_url=fake.base_url, api_key="test-key"))
        session = hermes.new_session(cwd=".", tools=loop["TOOLS"])
        loop["agent_turn"](session, user_text(1))
        store = hermes.store()
        before = [m.model_dump() for m in store.all_messages(session.id)]
        with session.turn() as turn:
            turn.prepare("hello")
            with pytest.raises(ValidationError, match="unknown call id 'nope'"):
                turn.add_tool_result("nope", "x")
        assert [m.model_dump() for m in store.all_messages(session.id)] == before
        hermes.close()


# -- leases --------------------------------------------------------------------------------------
def test_a_killed_lease_holder_is_taken_over(tmp_path: Path) -> None:
    data = settings_data(tmp_path, session={"lease_ttl": 30.0})
    config = write_config(tmp_path, data)
    with fake_server() as fake:
        hermes = host(data)
        loop = docs_loop(OpenAI(base_url=fake.base_url, api_key="test-key"))
        session = hermes.new_session(cwd=".", tools=loop["TOOLS"])
        loop["agent_turn"](session, user_text(1))
        store = hermes.store()
        before = len(store.all_messages(session.id))
        child = start_child(config, fake)
        try:
            ask(child, f"open {session.id}")
            assert ask(child, f"hold {user_text(3)}") == "holding"  # mid-turn, lease held
            held = store.current_lease(session.id)
            assert held is not None and held.holder.pid == child.pid
            os.kill(child.pid, signal.SIGKILL)  # a real kill: no cleanup runs in the holder
            child.wait(timeout=10)
        finally:
            finish(child, kill=True)
        started = time.monotonic()
        reply = loop["agent_turn"](session, user_text(2))
        assert time.monotonic() - started < 10  # not the 30 s ttl: the dead holder is provable
        assert reply
        rows = store.all_messages(session.id)
        assert len(rows) == before + 2  # the killed turn left nothing, ours is whole
        hermes.close()


def test_a_holder_that_lost_its_lease_is_told_and_its_writes_are_rejected(tmp_path: Path) -> None:
    data = settings_data(tmp_path, session={"lease_ttl": 1.5})
    config = write_config(tmp_path, data)
    with fake_server() as fake:
        hermes = host(data)
        loop = docs_loop(OpenAI(base_url=fake.base_url, api_key="test-key"))
        session = hermes.new_session(cwd=".", tools=loop["TOOLS"])
        loop["agent_turn"](session, user_text(1))
        store = hermes.store()
        before = len(store.all_messages(session.id))
        child = start_child(config, fake)
        try:
            ask(child, f"open {session.id}")
            assert ask(child, f"pause {user_text(3)}") == "holding"
            os.kill(child.pid, signal.SIGSTOP)  # frozen: it cannot renew its lease
            loop["agent_turn"](session, user_text(2))  # waits for the expiry, takes over
            os.kill(child.pid, signal.SIGCONT)
            assert child.stdout is not None
            # each of the model's tool calls says "holding"; whether the child runs its next
            # call before its renewer notices the loss is scheduling: the turn ends LeaseLost
            answer = child.stdout.readline().strip()
            while answer == "holding":
                answer = child.stdout.readline().strip()
            assert answer == "LeaseLost"
        finally:
            finish(child, kill=True)
        assert len(store.all_messages(session.id)) == before + 2  # only our turn
        hermes.close()


class Injector:
    """A ``pre_llm_call`` plugin whose context differs on every call."""

    calls = 0

    @hookimpl
    def pre_llm_call(self, user_message: Any) -> str:
        Injector.calls += 1
        return f"On call today: engineer number {Injector.calls}."


def test_per_turn_context_goes_into_the_user_message_only_and_is_resent_as_is(
    tmp_path: Path,
) -> None:
    data = settings_data(tmp_path)
    with fake_server() as fake:
        hermes = host(data, Injector())
        loop = docs_loop(OpenAI(base_url=fake.base_url, api_key="test-key"))
        session = hermes.new_session(cwd=".", tools=loop["TOOLS"])
        for i in range(6):
            loop["agent_turn"](session, user_text(i))
        bodies = chat_bodies(fake)
        systems = {json.dumps(body["messages"][0]) for body in bodies}
        assert len(systems) == 1  # the prompt never carries it
        sent: dict[str, str] = {}
        for body in bodies:
            for message in body["messages"]:
                if message["role"] == "user":
                    first = sent.setdefault(message["content"].split("\n\n")[0], message["content"])
                    assert message["content"] == first  # resent byte for byte
        assert all("On call today: engineer number" in text for text in sent.values())
        hermes.close()


def test_two_processes_in_rotation_mode_continue_one_live_session(tmp_path: Path) -> None:
    data = settings_data(tmp_path, compression={"in_place": False})
    config = write_config(tmp_path, data)
    with fake_server() as fake:
        hermes = host(data)
        session = hermes.new_session(cwd=".", tools=docs_loop(None)["TOOLS"])
        first = session.id
        a, b = start_child(config, fake), start_child(config, fake)
        seen: list[str] = []
        try:
            for child in (a, b):
                assert ask(child, f"open {first}") == first
            for i in range(24):
                answer = ask(a if i % 2 == 0 else b, f"turn {user_text(i)}")
                seen.append(answer.split("\t", 1)[0])
        finally:
            for child in (a, b):
                finish(child)
        store = hermes.store()
        live = seen[-1]
        assert len(set(seen)) >= 2, "no rotation happened"
        record = store.get_session(live)
        assert record.end_reason is None and record.parent_id is not None
        # every turn is in the chain once, and no ended session took a write after its end
        rows = originals(store, live)
        users = [r.message.text() for r in rows if r.message.role == "user"]
        users = [t for t in users if t.startswith("Turn ")]
        assert users == [user_text(i) for i in range(24)]
        for row in rows:
            owner = store.get_session(row.session_id)
            if owner.ended_at is not None:
                assert row.created_at <= owner.ended_at
        # the stale process's next request carried the live history (not an empty one)
        for body in chat_bodies(fake):
            assert len(body["messages"]) >= 2
            tool_pairs_ok(body["messages"])
        hermes.close()


# -- the docs block, unchanged --------------------------------------------------------------------
def test_the_loop_copied_from_docs_runs_unchanged_against_the_standalone_fake(
    tmp_path: Path,
) -> None:
    script = tmp_path / "loop.py"
    script.write_text(docs_block(), encoding="utf-8")
    replies = tmp_path / "replies.json"
    rules = agent_rules()
    replies.write_text(
        json.dumps(
            {
                "chat.completions": {
                    "queue": [rules.rules[0].reply.model_dump()],
                    "rules": [rule.model_dump() for rule in rules.rules],
                    "default": rules.default.model_dump(),
                }
            }
        ),
        encoding="utf-8",
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [*FAKE_COMMAND, "--port", str(port), "--script", str(replies)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base = server.stdout.readline().split()[-1]
        config = write_config(tmp_path, settings_data(tmp_path))
        env = child_env(config, SimpleNamespace(base_url=base))  # type: ignore[arg-type]
        first = subprocess.run(
            [sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert first.returncode == 0, first.stderr
        session_id, reply = first.stdout.split(" ", 1)
        assert reply.strip() == "Both tools ran; their output is above."
        again = subprocess.run(
            [sys.executable, str(script)],
            env={**env, "SESSION_ID": session_id},
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert again.returncode == 0, again.stderr
        assert again.stdout.split(" ", 1)[0] == session_id
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=10)
    assert server.returncode == 0, errors  # no request the openai package would not send
