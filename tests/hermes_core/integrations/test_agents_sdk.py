"""The OpenAI Agents SDK session on the store, driven by the SDK's real ``Runner``.

The model is the SDK's ``OpenAIChatCompletionsModel`` with the official
``AsyncOpenAI`` client pointed at the loopback fake (which validates every
request with the ``openai`` package's own types). Tracing is disabled.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "agents", reason="needs the 'agents' extra (pip install -e '.[agents]'): openai-agents"
)

from agents import Runner, set_tracing_disabled
from agents.memory import Session as SdkSession

from hermes_core.host import Hermes
from hermes_core.integrations.agents_items import rows_to_items, to_messages
from hermes_core.integrations.agents_sdk import HermesSession
from hermes_core.testing.fake_openai import FakeOpenAIServer, Reply
from hermes_hookspecs import LeaseBusy, ValidationError
from tests.hermes_core.integrations.agents_sdk_worker import make_agent
from tests.hosts import HostFactory

WORKER = Path(__file__).with_name("agents_sdk_worker.py")

set_tracing_disabled(True)


def settings_data(tmp_path: Path, **sections: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "plugins": {"autoload": True, "block": ["memory_builtin"]},
        "session": {"path": str(tmp_path / "s.db"), "lease_wait": 5.0},
        "memory": {"home": str(tmp_path / "mem")},
        "compression": {"cooldown_seconds": 0},
    }
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return data


def tool_reply(text: str, *calls: tuple[str, str]) -> Reply:
    return Reply(
        text=text,
        tool_calls=[  # the dict form; Reply validates it
            {"id": cid, "name": "lookup", "arguments": json.dumps({"city": city})}  # type: ignore[misc]
            for cid, city in calls
        ],
    )


def run_worker(config: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(WORKER), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"worker printed nothing; stderr: {proc.stderr[-2000:]}"
    out: dict[str, Any] = json.loads(lines[-1])
    out["returncode"] = proc.returncode
    return out


def tool_pairs_intact(messages: list[dict[str, Any]]) -> None:
    """Every chat tool message answers a call of the assistant message right before its run."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            open_calls = {call["id"] for call in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, message
        else:
            open_calls = set()


# --------------------------------------------------------------------------- mapping


SDK_ITEMS: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be terse."},
    {"role": "user", "content": [{"type": "input_text", "text": "weather in Paris and Rome?"}]},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "two lookups"}],
        "encrypted_content": "gAAAAB==",
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Checking both.", "annotations": []}],
    },
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "lookup",
     "arguments": '{"city": "Paris"}'},
    {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "lookup",
     "arguments": "{not json"},
    {"type": "custom_tool_call", "id": "ct_1", "call_id": "c3", "name": "patch", "input": "*** x"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "q"}},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    {"type": "function_call_output", "call_id": "c2",
     "output": [{"type": "input_text", "text": "rainy"}]},
    {"type": "custom_tool_call_output", "call_id": "c3", "output": "applied"},
    {"role": "assistant", "content": "Paris sunny, Rome rainy."},
]  # fmt: skip


def test_items_round_trip_without_loss_and_group_one_response_per_row() -> None:
    messages = to_messages(SDK_ITEMS)
    assert [m.role for m in messages] == [
        "system", "user", "assistant", "tool", "tool", "tool", "assistant"
    ]  # fmt: skip
    response = messages[2]  # reasoning + text + three calls + hosted call: one row
    assert response.content == "Checking both."
    assert [c.id for c in response.tool_calls or []] == ["c1", "c2", "c3"]
    assert json.loads(response.tool_calls[1].function.arguments) == "{not json"  # type: ignore[index]
    assert rows_to_items(messages) == SDK_ITEMS
    # stored rows hold each text once (slots), not twice
    stored = json.dumps(messages[0].provider_item)
    assert "Be terse" not in stored


def test_a_compacted_row_shows_the_compacted_text_to_the_sdk() -> None:
    messages = to_messages(SDK_ITEMS)
    pruned = messages[3].model_copy(update={"content": "[tool result compacted]"})
    items = rows_to_items([messages[2], pruned])
    assert items[-1] == {"type": "function_call_output", "call_id": "c1",
                         "output": "[tool result compacted]"}  # fmt: skip


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ("hello", "expected a dict, got str"),
        ({"content": "x"}, "a message needs 'role'"),
        ({"role": "robot", "content": "x"}, "'robot'"),
        ({"role": "user", "content": 3}, "'content' must be a string or a list"),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "non-empty string 'call_id'"),
        ({"type": "function_call", "call_id": "c", "arguments": "{}"}, "string 'name'"),
        ({"type": "function_call_output", "call_id": "c"}, "needs 'output'"),
        ({"role": "user", "content": [{"text": "no type"}]}, "content part 0"),
        ({"role": "user", "content": "bad \ud800"}, "lone surrogate"),
    ],
)
def test_malformed_items_are_named_errors(item: Any, needle: str) -> None:
    with pytest.raises(ValidationError, match="invalid Agents SDK item 1") as info:
        to_messages([{"role": "user", "content": "ok"}, item])
    assert needle in str(info.value)


# --------------------------------------------------------------------------- the session


def test_runner_run_persists_and_a_second_process_resumes(
    tmp_path: Path, make_host: HostFactory
) -> None:
    data = settings_data(tmp_path)
    with FakeOpenAIServer() as server:
        server.script(
            "chat.completions",
            tool_reply("Checking.", ("call_1", "Paris"), ("call_2", "Rome")),
            Reply(text="Sunny in both."),
            Reply(text="Still sunny in Paris."),
        )
        hermes = make_host(**data)
        session = HermesSession("conv-1", hermes)
        first = asyncio.run(run_under_lease(session, server.base_url, "Weather in Paris and Rome?"))
        assert first == "Sunny in both."
        hermes.close()
        out = run_worker(
            {
                "settings": data,
                "session_id": "conv-1",
                "base_url": server.base_url,
                "input": "And Paris tomorrow?",
            }
        )
        assert out["returncode"] == 0, out
        assert out["final"] == "Still sunny in Paris."
        # the child's model request carried the parent's history, tool pairs intact
        last = server.requests_to("chat.completions")[-1].body
        messages = [m for m in last["messages"] if m["role"] != "system"]
        assert [m["role"] for m in messages] == [
            "user", "assistant", "tool", "tool", "assistant", "user"
        ]  # fmt: skip
        assert messages[0]["content"] == "Weather in Paris and Rome?"
        assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_1", "call_2"]
        assert messages[3]["content"] == "sunny in Rome"
        tool_pairs_intact(messages)
    # both processes' items are in the store, each run under its own lease
    hermes = make_host(**data)
    items = asyncio.run(HermesSession("conv-1", hermes).get_items())
    assert items == out["items"]
    assert items[-1]["content"][0]["text"] == "Still sunny in Paris."
    rows = hermes.store().active_messages("conv-1")
    assert len({row.turn_id for row in rows}) == 2
    assert rows[0].message.role == "user" and rows[1].message.tool_calls


async def run_under_lease(
    session: HermesSession, base_url: str, text: str, tools: tuple[Any, ...] = ()
) -> Any:
    agent, client = make_agent(base_url, tools)
    try:
        async with session.lease():
            result = await Runner.run(agent, text, session=session)
        return result.final_output
    finally:
        await client.close()


def test_compaction_during_runs_keeps_tool_pairs_and_history_searchable(
    tmp_path: Path, make_host: HostFactory
) -> None:
    data = settings_data(
        tmp_path,
        compression={"threshold_tokens": 1200, "protect_first_n": 1, "prune_min_chars": 100},
        model={"context_length": 8000},
    )
    hermes = make_host(**data)
    session = HermesSession("long", hermes)
    with FakeOpenAIServer() as server:
        for i in range(8):
            server.script(
                "chat.completions",
                tool_reply(f"Looking up city{i}.", (f"call_{i}a", f"city{i}"),
                           (f"call_{i}b", f"town{i}")),
                Reply(text=f"Answer {i}: " + "detail " * 40),
            )  # fmt: skip
        for i in range(8):
            asyncio.run(run_under_lease(session, server.base_url, f"Question {i} about zebra{i}?"))
        record = hermes.store().get_session(session.hermes_session_id)
        assert record.compression_count >= 1
        for request in server.requests_to("chat.completions"):
            tool_pairs_intact([m for m in request.body["messages"] if m["role"] != "system"])
        items = asyncio.run(session.get_items())
        assert "CONTEXT SUMMARY" in json.dumps(items)  # the summary the next run sees
        assert not any(i.get("content") == "Question 0 about zebra0?" for i in items)
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        assert set(outputs) <= set(calls)
        hits = asyncio.run(session.search("zebra0"))
        assert hits and hits[0].compacted
        # the recall tools let the model read what the compaction dropped
        server.script(
            "chat.completions",
            Reply(
                text="",
                tool_calls=[
                    {"id": "r1", "name": "session_search", "arguments": '{"query": "zebra0"}'}  # type: ignore[list-item]  # the dict form; Reply validates it
                ],
            ),
            Reply(text="Found it."),
        )
        tools = tuple(session.recall_tools())
        assert {tool.name for tool in tools} == {"session_search", "session_open"}
        final = asyncio.run(run_under_lease(session, server.base_url, "What was first?", tools))
        assert final == "Found it."
        last = server.requests_to("chat.completions")[-1].body["messages"]
        recalled = next(m for m in last if m.get("tool_call_id") == "r1")
        assert "Question 0 about zebra0?" in recalled["content"]


def test_a_second_process_waits_for_the_runs_lease(tmp_path: Path, make_host: HostFactory) -> None:
    data = settings_data(tmp_path)
    hermes = make_host(**data)
    session = HermesSession("busy", hermes)
    with FakeOpenAIServer() as server:

        async def hold() -> dict[str, Any]:
            async with session.lease():
                return await asyncio.to_thread(
                    run_worker,
                    {
                        "settings": data,
                        "session_id": "busy",
                        "base_url": server.base_url,
                        "input": "hi",
                        "lease_wait": 0.3,
                    },
                )

        out = asyncio.run(hold())
    assert out["returncode"] == 3
    assert out["error"].startswith("LeaseBusy")
    assert hermes.store().active_messages("busy") == []


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_host(
    request: pytest.FixtureRequest, tmp_path: Path, make_host: HostFactory
) -> Iterator[Hermes]:
    """A host on the SQLite store, or on PostgreSQL in a scratch schema."""
    if request.param == "sqlite":
        yield make_host(**settings_data(tmp_path))
        return
    from hermes_plugin_postgres_store import PostgresSessionStore
    from hermes_plugin_postgres_store.testing import find_dsn, in_ci, scratch_schema

    dsn, reason = find_dsn()
    if dsn is None:
        if in_ci():
            pytest.fail(f"PostgreSQL tests must run in CI: {reason}")
        pytest.skip(reason)
    with scratch_schema(dsn) as schema:
        store = PostgresSessionStore(dsn, schema=schema, max_size=4)
        hermes = make_host(**settings_data(tmp_path), store=store)
        try:
            yield hermes
        finally:
            hermes.close()  # before the store it does not own
            store.close()


def test_bad_batches_store_nothing_and_pop_clear_keep_history_searchable(
    store_host: Hermes,
) -> None:
    hermes = store_host
    session = HermesSession("edit", hermes)
    assert isinstance(session, SdkSession)  # the SDK's runtime-checkable protocol
    good = SDK_ITEMS[1:4]
    asyncio.run(session.add_items(list(good)))
    before = hermes.store().all_messages("edit")
    # a malformed item anywhere: nothing of the batch is written
    with pytest.raises(ValidationError, match="item 1"):
        asyncio.run(session.add_items([{"role": "user", "content": "x"}, {"type": 5}]))
    # a tool output answering no call: the store refuses the whole batch
    with pytest.raises(ValidationError):
        asyncio.run(
            session.add_items(
                [
                    {"role": "user", "content": "y"},
                    {"type": "function_call_output", "call_id": "nope", "output": "z"},
                ]
            )
        )
    assert hermes.store().all_messages("edit") == before
    assert asyncio.run(session.get_items()) == good
    # pop splits the response row: the text item goes, the reasoning stays
    popped = asyncio.run(session.pop_item())
    assert popped == good[-1]
    assert asyncio.run(session.get_items()) == good[:-1]
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    assert asyncio.run(session.pop_item()) is None
    assert [hit.compacted for hit in asyncio.run(session.search("Paris"))] == [True]


def test_a_busy_lease_fails_a_write_outside_a_run_lease(
    tmp_path: Path, make_host: HostFactory
) -> None:
    data = settings_data(tmp_path, session={"lease_wait": 0.2})
    hermes = make_host(**data)
    other = make_host(**data)
    session = HermesSession("two", hermes)
    rival = HermesSession("two", other)
    entered = threading.Event()

    async def main() -> None:
        async with session.lease():
            entered.set()
            with pytest.raises(LeaseBusy):
                await rival.add_items([{"role": "user", "content": "late"}])

    asyncio.run(main())
    assert entered.is_set()
    assert asyncio.run(rival.get_items()) == []


def test_a_rotated_session_is_followed_to_its_child(tmp_path: Path, make_host: HostFactory) -> None:
    data = settings_data(
        tmp_path,
        compression={"threshold_tokens": 900, "protect_first_n": 1, "in_place": False},
    )
    hermes = make_host(**data)
    session = HermesSession("rot", hermes)
    for i in range(6):
        asyncio.run(
            session.add_items(
                [
                    {"role": "user", "content": f"question {i} " + "words " * 40},
                    {"role": "assistant", "content": f"answer {i} " + "more " * 40},
                ]
            )
        )
    child = session.hermes_session_id
    assert child != "rot" and hermes.store().get_session("rot").end_reason == "compression"
    items = asyncio.run(session.get_items())
    hermes.close()
    again = make_host(**data)
    reopened = HermesSession("rot", again)
    assert reopened.hermes_session_id == child
    assert asyncio.run(reopened.get_items()) == items
    # search reaches the parent's rows through the lineage
    assert any(hit.session_id == "rot" for hit in asyncio.run(reopened.search("question")))


def test_a_stalled_run_loses_its_lease_and_stores_nothing_after(
    tmp_path: Path, make_host: HostFactory
) -> None:
    """SIGSTOP the child mid-run past its lease ttl; another holder takes over and writes."""
    data = settings_data(tmp_path)
    with FakeOpenAIServer() as server:
        server.script("chat.completions", Reply(text="late answer", delay_s=3.0))
        config = {
            "settings": data,
            "session_id": "stall",
            "base_url": server.base_url,
            "input": "slow question",
            "lease_ttl": 1.0,
        }
        child = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(config)], stdout=subprocess.PIPE, text=True
        )
        try:
            server.wait_for_requests(1, endpoint="chat.completions", timeout=60)
            os.kill(child.pid, signal.SIGSTOP)
            hermes = make_host(**data)
            try:
                time.sleep(1.5)  # past the child's ttl: its lease expires while it is stopped
                taker = HermesSession("stall", hermes)

                async def take_over() -> None:
                    async with taker.lease(wait=5):
                        await taker.add_items([{"role": "user", "content": "written meanwhile"}])

                asyncio.run(take_over())
            finally:
                os.kill(child.pid, signal.SIGCONT)
            stdout, _ = child.communicate(timeout=60)
            out = json.loads(stdout.strip().splitlines()[-1])
            assert child.returncode == 3, out
            assert out["error"].startswith("LeaseLost"), out
            stored = json.dumps(asyncio.run(taker.get_items()))
            assert "written meanwhile" in stored
            assert "late answer" not in stored
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_the_docs_example_runs(tmp_path: Path) -> None:
    """docs/agents-sdk.md's copy-paste example, against the fake through OPENAI_BASE_URL."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "agents-sdk.md").read_text(
        encoding="utf-8"
    )
    example = doc.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "example.py").write_text(example, encoding="utf-8")
    (tmp_path / "hermes.toml").write_text(
        f'[session]\npath = "{tmp_path / "s.db"}"\n[memory]\nhome = "{tmp_path / "mem"}"\n',
        encoding="utf-8",
    )
    with FakeOpenAIServer() as server:
        server.script("responses", Reply(text="Sunny, 21 degrees."))
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}
        out = subprocess.run(
            [sys.executable, "example.py"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[0] == "Sunny, 21 degrees."
    assert "Weather in Paris?" in out.stdout  # the search hit


def test_responses_model_items_match_the_sdks_own_session(
    tmp_path: Path, make_host: HostFactory
) -> None:
    """Reasoning, calls and outputs through the Responses model: stored as the SDK stores them."""
    from agents import Agent, OpenAIResponsesModel, SQLiteSession
    from openai import AsyncOpenAI

    from tests.hermes_core.integrations.agents_sdk_worker import lookup

    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Look the city up first."}],
        "encrypted_content": "gAAAAB-opaque",
    }
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_r1",
        "name": "lookup",
        "arguments": '{"city": "Oslo"}',
        "status": "completed",
    }

    def said(mid: str, text: str) -> dict[str, Any]:  # fixed ids: both runs comparable
        return {
            "type": "message",
            "id": mid,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    async def converse(session: Any, base_url: str) -> list[Any]:
        client = AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0)
        try:
            model = OpenAIResponsesModel(model="gpt-5.5", openai_client=client)
            agent = Agent(name="helper", instructions="Brief.", model=model, tools=[lookup])
            await Runner.run(agent, "Weather in Oslo?", session=session)
            await Runner.run(agent, "And tomorrow?", session=session)
            return list(await session.get_items())
        finally:
            await client.close()

    def script(server: FakeOpenAIServer) -> None:
        server.script(
            "responses",
            Reply(output_items=[reasoning, call]),
            Reply(output_items=[said("msg_1", "Sunny in Oslo.")]),
            Reply(output_items=[said("msg_2", "Snow tomorrow.")]),
        )

    with FakeOpenAIServer() as theirs:
        script(theirs)
        reference = asyncio.run(converse(SQLiteSession("ref"), theirs.base_url))
        their_inputs = [r.body["input"] for r in theirs.requests_to("responses")]
    hermes = make_host(**settings_data(tmp_path))
    with FakeOpenAIServer() as ours:
        script(ours)
        stored = asyncio.run(converse(HermesSession("resp", hermes), ours.base_url))
        our_inputs = [r.body["input"] for r in ours.requests_to("responses")]
    assert stored == reference
    assert our_inputs == their_inputs  # the model saw the same history, reasoning included
    assert any(item.get("type") == "reasoning" for item in our_inputs[-1])
    rows = hermes.store().active_messages("resp")
    assert [row.message.role for row in rows] == [
        "user", "assistant", "tool", "assistant", "user", "assistant"
    ]  # fmt: skip
    assert rows[1].message.tool_calls and rows[1].message.tool_calls[0].id == "call_r1"
