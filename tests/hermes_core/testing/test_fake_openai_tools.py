"""The fake answers with tool calls, reports chosen usage, follows rules, runs standalone."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from openai import OpenAI
from openai.types.chat import ChatCompletionFunctionToolParam

from hermes_core.testing.fake_openai import FakeOpenAIServer, Reply, Rules, ToolCallReply

TOOLS: list[ChatCompletionFunctionToolParam] = [
    {
        "type": "function",
        "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}},
    }
]
CALLS = [
    ToolCallReply(name="bash", arguments={"cmd": "ls"}, id="call_a"),
    ToolCallReply(name="bash", arguments={"cmd": "pwd"}, id="call_b"),
]


def test_chat_reply_with_parallel_tool_calls_through_the_sdk() -> None:
    with FakeOpenAIServer() as fake:
        fake.script(
            "chat.completions", Reply(text="", tool_calls=CALLS, usage={"prompt_tokens": 9})
        )
        client = OpenAI(base_url=fake.base_url, api_key="k")
        done = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], tools=TOOLS
        )
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
        ("call_a", "bash", {"cmd": "ls"}),
        ("call_b", "bash", {"cmd": "pwd"}),
    ]
    assert done.usage is not None and done.usage.prompt_tokens == 9


def test_streamed_tool_calls_reassemble_in_the_sdk() -> None:
    with FakeOpenAIServer() as fake:
        fake.script("chat.completions", Reply(text="", tool_calls=CALLS))
        client = OpenAI(base_url=fake.base_url, api_key="k")
        with client.chat.completions.stream(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], tools=TOOLS
        ) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [c.function.arguments for c in calls] == ['{"cmd": "ls"}', '{"cmd": "pwd"}']


def test_responses_reply_with_function_calls() -> None:
    with FakeOpenAIServer() as fake:
        fake.script("responses", Reply(text="", tool_calls=CALLS))
        client = OpenAI(base_url=fake.base_url, api_key="k")
        done = client.responses.create(model="gpt-5.5", input="go")
    calls = [item for item in done.output if item.type == "function_call"]
    assert [(c.call_id, c.name) for c in calls] == [("call_a", "bash"), ("call_b", "bash")]


def test_rules_answer_by_the_last_message() -> None:
    rules = (
        Rules(default=Reply(text="default"))
        .when(Reply(text="", tool_calls=CALLS[:1]), last_role="user", last_contains="list")
        .when(Reply(text="after the tool"), last_role="tool")
    )
    with FakeOpenAIServer() as fake:
        fake.set_default("chat.completions", rules)
        client = OpenAI(base_url=fake.base_url, api_key="k")
        first = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "list files"}], tools=TOOLS
        )
        call = (first.choices[0].message.tool_calls or [])[0]
        second = client.chat.completions.create(
            model="gpt-4o-mini",
            tools=TOOLS,
            messages=[
                {"role": "user", "content": "list files"},
                first.choices[0].message.model_dump(exclude_none=True, exclude={"annotations"}),  # type: ignore[list-item]  # a message param as a dict
                {"role": "tool", "tool_call_id": call.id, "content": "a.txt"},
            ],
        )
        other = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]
        )
    assert second.choices[0].message.content == "after the tool"
    assert other.choices[0].message.content == "default"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_runs_standalone_with_a_port_and_a_script(tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    script.write_text(
        json.dumps(
            {
                "chat.completions": {
                    "queue": [{"kind": "reply", "text": "", "tool_calls": [{"name": "bash"}]}],
                    "rules": [{"last_role": "tool", "reply": {"kind": "reply", "text": "done"}}],
                    "default": {"kind": "reply", "text": "hi"},
                }
            }
        ),
        encoding="utf-8",
    )
    port = _free_port()
    command = [sys.executable, "-m", "hermes_core.testing.fake_openai", "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--script", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"listening on http://127.0.0.1:{port}/v1"
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
        messages: list[dict[str, object]] = [{"role": "user", "content": "go"}]
        first = client.chat.completions.create(model="m", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        call = (first.choices[0].message.tool_calls or [])[0]
        messages += [
            first.choices[0].message.model_dump(exclude_none=True, exclude={"annotations"}),
            {"role": "tool", "tool_call_id": call.id, "content": "ok"},
        ]
        second = client.chat.completions.create(model="m", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        assert second.choices[0].message.content == "done"
        third = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
        assert third.choices[0].message.content == "hi"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def test_standalone_reports_a_request_the_sdk_would_not_send(tmp_path: Path) -> None:
    import httpx

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_core.testing.fake_openai", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}], "bogus": 1},
            timeout=10,
        )
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 1 and "bogus" in err


def test_chars_per_token_scales_the_reported_usage() -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x" * 400}]}
    reported = []
    for ratio in (4.0, 1.0):
        with FakeOpenAIServer(chars_per_token=ratio) as fake:
            client = OpenAI(base_url=fake.base_url, api_key="k")
            done = client.chat.completions.create(**body)  # type: ignore[call-overload]
            assert done.usage is not None
            reported.append(done.usage.prompt_tokens)
    assert abs(reported[1] - 4 * reported[0]) <= 4  # the same characters, a quarter the ratio
