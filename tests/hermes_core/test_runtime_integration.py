"""The runtime driven the way docs/runtime.md shows, against a loopback OpenAI server.

The official ``openai`` client talks to the fake server (which validates
every request with the SDK's own types); the frozen prompt survives a
MEMORY.md edit until the next compaction boundary rebuilds it.
"""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from hermes_core.testing.fake_openai import FakeOpenAIServer, Reply
from tests.hosts import HostFactory


@pytest.fixture
def host_for(make_host: HostFactory) -> HostFactory:
    """Hosts with every default plugin (the builtin memory too) and a 1M-token gpt-4o-mini."""
    return make_host.with_sections(
        plugins={"block": []}, model={"name": "gpt-4o-mini", "context_length": 1_000_000}
    )


def test_official_client_tool_loop_with_usage_and_cached_tokens(
    tmp_path: Path, host_for: HostFactory
) -> None:
    with FakeOpenAIServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        server.script(
            "chat.completions",
            Reply(text="Let me look at it."),
            Reply(text="The login test fails because the fixture is stale."),
        )
        hermes = host_for()
        session = hermes.new_session(
            cwd=str(tmp_path),
            tools=[
                {
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "description": "Run a command",
                        "parameters": {
                            "type": "object",
                            "properties": {"cmd": {"type": "string"}},
                        },
                    },
                }
            ],
        )
        with session.turn() as turn:
            request = turn.prepare("Why does test_login fail?")
            completion = client.chat.completions.create(**request.chat_body())
            turn.record_response(
                completion.choices[0].message.model_dump(exclude_none=True),
                completion.usage.model_dump() if completion.usage else None,
            )
            turn.commit()
        with session.turn() as turn:
            request2 = turn.prepare("And how do I fix it?")
            completion = client.chat.completions.create(**request2.chat_body())
            turn.record_response(completion.choices[0].message.model_dump(exclude_none=True))
            turn.commit()
        sent = [r.body for r in server.requests_to("chat.completions")]
        assert sent[0]["messages"][0]["role"] == "system"
        # the second request starts with the first request, byte for byte
        first = json.dumps(sent[0]["messages"], sort_keys=True)[:-1]
        assert json.dumps(sent[1]["messages"], sort_keys=True).startswith(first)
        assert sent[0]["tools"] == sent[1]["tools"]
        usage = hermes.store().usage(session.id)
        assert usage and usage[0].usage.input_tokens > 0
        ledger = hermes.store().prefix_entries(session.id)
        assert [e.break_reason for e in ledger] == ["first", None]


def test_memory_edited_mid_session_waits_for_the_compaction_boundary(
    tmp_path: Path, host_for: HostFactory
) -> None:
    hermes = host_for(compression={"tail": "legacy"}, model={"context_length": 20_000})
    memory_home = tmp_path / "mem"
    memory_home.mkdir(parents=True, exist_ok=True)
    (memory_home / "MEMORY.md").write_text("The staging host is blue.\n", encoding="utf-8")
    session = hermes.new_session(cwd=str(tmp_path))
    assert "staging host is blue" in session.prompt.text
    before = session.prompt.prompt_hash
    for i in range(12):
        with session.turn() as turn:
            turn.prepare(f"question {i}: " + "details " * 200)
            turn.record_response({"role": "assistant", "content": f"answer {i} " + "words " * 200})
            turn.commit()
    (memory_home / "MEMORY.md").write_text("The staging host is green.\n", encoding="utf-8")
    with session.turn() as turn:
        request = turn.prepare("next question")
        assert "staging host is blue" in request.messages[0]["content"]
        assert session.prompt.prompt_hash == before
        turn.abort()
    outcome = session.compress()
    assert outcome.status == "compressed", outcome.reason
    assert outcome.prompt_changed
    assert "staging host is green" in session.prompt.text
    assert hermes.store().get_session(session.id).system_prompt_hash != before
