"""The loopback fake OpenAI server, exercised with the official ``openai`` client and httpx."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseOutputMessage, ResponseOutputRefusal

from hermes_core.testing.fake_openai import (
    Compact,
    Drop,
    ErrorReply,
    Failed,
    FakeOpenAIServer,
    FakeOpenAIValidationError,
    Malformed,
    RecordedRequest,
    Reply,
    fake_openai_fixture,
)

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    yield from fake_openai_fixture()


@pytest.fixture
def client(fake: FakeOpenAIServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


# --------------------------------------------------------------------------- chat completions


def test_chat_completion_reply_and_recorded_request(
    fake: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    fake.script("chat.completions", Reply(text="hello there"))
    out = client.chat.completions.create(model="gpt-5.5", messages=USER)
    assert out.choices[0].message.content == "hello there"
    assert out.choices[0].finish_reason == "stop"
    assert out.usage is not None and out.usage.total_tokens > 0
    (req,) = fake.requests_to("chat.completions")
    assert req.method == "POST" and req.path == "/v1/chat/completions"
    assert req.header("Authorization") == "Bearer sk-test"
    assert req.body == {"model": "gpt-5.5", "messages": USER}


def test_chat_stream_chunks_and_usage(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("chat.completions", Reply(text="streamed words here", chunk_chars=5))
    stream = client.chat.completions.create(
        model="gpt-5.5",
        messages=USER,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed words here"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.object == "chat.completion.chunk" for c in chunks)


def test_chat_tool_calls_plain_and_streamed(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    calls = [
        {"id": "call_a", "name": "lookup", "arguments": '{"city": "Paris"}'},
        {"id": "call_b", "name": "lookup", "arguments": '{"city": "Rome"}'},
    ]
    fake.script("chat.completions", Reply(text="Checking.", tool_calls=calls))  # type: ignore[arg-type]  # the dict form; Reply validates it
    fake.script("chat.completions", Reply(text="", tool_calls=calls[:1]))  # type: ignore[arg-type]  # the dict form; Reply validates it
    out = client.chat.completions.create(model="gpt-5.5", messages=USER)
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Checking."
    got = [
        (c.id, c.function.name, c.function.arguments)  # type: ignore[union-attr]  # function calls
        for c in choice.message.tool_calls or []
    ]
    assert got == [(c["id"], c["name"], c["arguments"]) for c in calls]
    stream = client.chat.completions.create(model="gpt-5.5", messages=USER, stream=True)
    deltas = [chunk.choices[0] for chunk in stream if chunk.choices]
    streamed = [d.delta.tool_calls[0] for d in deltas if d.delta.tool_calls]
    assert [(c.index, c.id, c.function.arguments) for c in streamed] == [  # type: ignore[union-attr]
        (0, "call_a", '{"city": "Paris"}')
    ]
    assert deltas[-1].finish_reason == "tool_calls"


def test_chat_stream_wire_ends_with_done(fake: FakeOpenAIServer) -> None:
    body = {"model": "gpt-5.5", "messages": USER, "stream": True}
    with httpx.Client() as h:
        r = h.post(f"{fake.base_url}/chat/completions", json=body)
    assert r.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in r.text.split("\n\n") if f]
    assert frames[-1] == "data: [DONE]"
    assert json.loads(frames[0].removeprefix("data: "))["object"] == "chat.completion.chunk"


@pytest.mark.parametrize("stream", [False, True])
def test_chat_truncated_refusal_empty(
    fake: FakeOpenAIServer, client: openai.OpenAI, stream: bool
) -> None:
    fake.script(
        "chat.completions",
        Reply(text="cut", finish_reason="length"),
        Reply(refusal="I can't help with that."),
        Reply(text=""),
    )
    results = []
    for _ in range(3):
        if stream:
            chunks = list(
                client.chat.completions.create(
                    model="gpt-5.5",
                    messages=USER,
                    stream=True,
                )
            )
            content = "".join(c.choices[0].delta.content or "" for c in chunks)
            refusal = "".join(c.choices[0].delta.refusal or "" for c in chunks)
            finish = chunks[-1].choices[0].finish_reason
        else:
            out = client.chat.completions.create(model="gpt-5.5", messages=USER)
            content = out.choices[0].message.content or ""
            refusal = out.choices[0].message.refusal or ""
            finish = out.choices[0].finish_reason
        results.append((content, refusal, finish))
    assert results == [
        ("cut", "", "length"),
        ("", "I can't help with that.", "stop"),
        ("", "", "stop"),
    ]


# --------------------------------------------------------------------------- responses


def test_responses_reply(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("responses", Reply(text="a response"))
    out = client.responses.create(model="gpt-5.5", input="hi", instructions="be brief")
    assert out.output_text == "a response"
    assert out.status == "completed" and out.instructions == "be brief"
    assert fake.requests_to("responses")[0].body == {
        "model": "gpt-5.5",
        "input": "hi",
        "instructions": "be brief",
    }


def test_responses_stream_event_sequence(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("responses", Reply(text="streamed response text"))
    with client.responses.stream(model="gpt-5.5", input="hi") as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_text == "streamed response text"
    for needed in (
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_item.done",
        "response.completed",
    ):
        assert needed in types
    assert types[0] == "response.created" and types[-1] == "response.completed"


def test_responses_stream_wire_has_event_lines_and_sequence_numbers(fake: FakeOpenAIServer) -> None:
    body = {"model": "gpt-5.5", "input": "hi", "stream": True}
    with httpx.Client() as h:
        r = h.post(f"{fake.base_url}/responses", json=body)
    frames = [f for f in r.text.split("\n\n") if f]
    seqs = []
    for frame in frames:
        event_line, data_line = frame.split("\n")
        data = json.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {data['type']}"
        seqs.append(data["sequence_number"])
    assert seqs == list(range(len(frames)))


def test_responses_truncated_and_refusal(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script(
        "responses",
        Reply(text="partial", finish_reason="length"),
        Reply(refusal="no"),
        Reply(text="partial", finish_reason="length"),
    )
    cut = client.responses.create(model="gpt-5.5", input="hi")
    assert cut.status == "incomplete"
    assert cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"
    refused = client.responses.create(model="gpt-5.5", input="hi")
    message = refused.output[0]
    assert isinstance(message, ResponseOutputMessage)
    part = message.content[0]
    assert isinstance(part, ResponseOutputRefusal) and part.refusal == "no"
    with client.responses.stream(model="gpt-5.5", input="hi") as stream:
        types = [event.type for event in stream]
    assert types[-1] == "response.incomplete"


def test_responses_failed(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("responses", Failed(message="model broke"), Failed(message="model broke"))
    out = client.responses.create(model="gpt-5.5", input="hi")
    assert out.status == "failed" and out.error is not None
    assert out.error.message == "model broke"
    with client.responses.stream(model="gpt-5.5", input="hi") as stream:
        types = [event.type for event in stream]
    assert types[-1] == "response.failed"


def test_responses_custom_output_items(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    item = {"id": "cmp_1", "type": "compaction", "encrypted_content": "opaque"}
    fake.script("responses", Reply(output_items=[item]))
    out = client.responses.create(model="gpt-5.5", input="hi")
    assert out.output[0].type == "compaction"


# --------------------------------------------------------------------------- compact


def test_compact_returns_kept_user_messages_and_one_compaction_item(
    fake: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    out = client.responses.compact(
        model="gpt-5.5",
        input=[
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "an answer"},
            {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
        ],
    )
    assert out.object == "response.compaction"
    kinds = [(item.type, getattr(item, "role", None)) for item in out.output]
    assert kinds == [("message", "user"), ("message", "user"), ("compaction", None)]
    last = out.output[-1]
    assert last.type == "compaction" and last.encrypted_content.startswith("enc_")
    assert out.usage.total_tokens > 0


def test_compact_scripted_items_and_previous_response_id(
    fake: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    fake.script("responses.compact", Compact(kept=[], encrypted_content="ENC-1"))
    out = client.responses.compact(model="gpt-5.5", previous_response_id="resp_abc")
    assert [i.type for i in out.output] == ["compaction"]
    assert out.output[0].encrypted_content == "ENC-1"  # type: ignore[union-attr]
    assert fake.requests_to("responses.compact")[0].body == {
        "model": "gpt-5.5",
        "previous_response_id": "resp_abc",
    }


def test_compact_with_bad_scripted_item_is_caught(fake: FakeOpenAIServer) -> None:
    fake.script("responses.compact", Compact(kept=[{"type": "message", "role": "assistant"}]))
    with httpx.Client() as h:
        h.post(f"{fake.base_url}/responses/compact", json={"model": "gpt-5.5", "input": "x"})
    issues = fake.take_issues()
    assert issues and issues[0].type_name == "CompactedResponse"
    assert "output.0" in issues[0].detail


# --------------------------------------------------------------------------- models, errors


def test_models_list(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["gpt-5.5", "gpt-4o-mini"]


@pytest.mark.parametrize(
    ("status", "exc", "etype"),
    [
        (401, openai.AuthenticationError, "invalid_request_error"),
        (429, openai.RateLimitError, "rate_limit_error"),
        (500, openai.InternalServerError, "server_error"),
    ],
)
def test_http_errors(
    fake: FakeOpenAIServer,
    client: openai.OpenAI,
    status: int,
    exc: type[openai.APIStatusError],
    etype: str,
) -> None:
    fake.script(
        "responses",
        ErrorReply(status=status, message=f"boom {status}", type=etype, code="c", retry_after_s=7),
    )
    with pytest.raises(exc) as info:
        client.responses.create(model="gpt-5.5", input="hi")
    assert info.value.status_code == status
    assert info.value.body == {
        "message": f"boom {status}",
        "type": etype,
        "param": None,
        "code": "c",
    }
    assert info.value.response.headers["retry-after"] == "7"


def test_api_key_enforced() -> None:
    with (
        FakeOpenAIServer(api_key="sk-right") as fake,
        openai.OpenAI(base_url=fake.base_url, api_key="sk-wrong", max_retries=0) as bad,
    ):
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        with openai.OpenAI(base_url=fake.base_url, api_key="sk-right", max_retries=0) as good:
            assert good.models.list().data


def test_delay_causes_client_timeout_and_stop_is_prompt(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Reply(text="late", delay_s=30))
    with (
        openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0, timeout=0.3) as c,
        pytest.raises(openai.APITimeoutError),
    ):
        c.chat.completions.create(model="gpt-5.5", messages=USER)
    started = time.monotonic()
    fake.stop()
    assert time.monotonic() - started < 5


def test_short_delay_still_answers(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("responses", Reply(text="slow", delay_s=0.3))
    started = time.monotonic()
    assert client.responses.create(model="gpt-5.5", input="hi").output_text == "slow"
    assert time.monotonic() - started >= 0.3


def test_malformed_json_body(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("chat.completions", Malformed(), Malformed(body="not json at all"))
    with httpx.Client() as h:
        r = h.post(f"{fake.base_url}/chat/completions", json={"model": "m", "messages": USER})
    assert r.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        r.json()
    with pytest.raises((openai.APIResponseValidationError, json.JSONDecodeError)):
        client.chat.completions.create(model="gpt-5.5", messages=USER)


def test_malformed_sse_line(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("responses", Malformed())
    with (
        pytest.raises(json.JSONDecodeError),
        client.responses.stream(model="gpt-5.5", input="hi") as stream,
    ):
        list(stream)


def test_connection_drop(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("chat.completions", Drop())
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="gpt-5.5", messages=USER)


def test_connection_drop_mid_stream(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("responses", Drop(after_events=3))
    seen: list[str] = []
    with (
        pytest.raises((openai.APIConnectionError, httpx.RemoteProtocolError)),
        client.responses.stream(model="gpt-5.5", input="hi") as stream,
    ):
        seen.extend(event.type for event in stream)
    assert seen[:1] == ["response.created"] and "response.completed" not in seen


def test_callable_behaviour_sees_the_request(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    def echo(req: RecordedRequest) -> Reply:
        return Reply(text=f"you said {req.body['input']}")

    fake.set_default("responses", echo)
    assert client.responses.create(model="gpt-5.5", input="ping").output_text == "you said ping"
    assert client.responses.create(model="gpt-5.5", input="pong").output_text == "you said pong"


def test_queue_is_fifo_then_default(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    fake.script("responses", Reply(text="one"), Reply(text="two"))
    assert fake.pending("responses") == 2
    got = [client.responses.create(model="gpt-5.5", input="x").output_text for _ in range(3)]
    assert got == ["one", "two", "ok"]


# --------------------------------------------------------------------------- validation


def test_invalid_request_body_is_reported_by_check() -> None:
    fake = FakeOpenAIServer(check_on_exit=False).start()
    try:
        with httpx.Client() as h:
            h.post(
                f"{fake.base_url}/responses",
                json={"model": "gpt-5.5", "input": [{"type": "message", "role": "user"}]},
            )
        with pytest.raises(FakeOpenAIValidationError) as info:
            fake.check()
    finally:
        fake.stop()
    (issue,) = info.value.issues
    assert issue.direction == "request" and issue.endpoint == "responses"
    assert issue.type_name == "ResponseCreateParamsNonStreaming"
    assert "content" in issue.detail and len(issue.detail) < 2000


def test_unknown_request_keys_reported_unless_allowed() -> None:
    body = {"model": "gpt-5.5", "input": "x", "client_metadata": {"a": "b"}}
    with FakeOpenAIServer(check_on_exit=False) as fake, httpx.Client() as h:
        h.post(f"{fake.base_url}/responses", json=body)
        (issue,) = fake.take_issues()
        assert "client_metadata" in issue.detail
    allowed = frozenset({"client_metadata"})
    with FakeOpenAIServer(allowed_unknown_request_keys=allowed) as fake, httpx.Client() as h:
        h.post(f"{fake.base_url}/responses", json=body)
        assert fake.issues == []


def test_exit_raises_on_recorded_issue() -> None:
    status: list[int] = []
    with (
        pytest.raises(FakeOpenAIValidationError, match="not JSON"),
        FakeOpenAIServer() as fake,
        httpx.Client() as h,
    ):
        status.append(h.post(f"{fake.base_url}/chat/completions", content=b"{oops").status_code)
    assert status == [400]


def test_bad_scripted_output_item_fails_response_validation(fake: FakeOpenAIServer) -> None:
    fake.script("responses", Reply(output_items=[{"type": "message", "role": "assistant"}]))
    with httpx.Client() as h:
        h.post(f"{fake.base_url}/responses", json={"model": "gpt-5.5", "input": "x"})
    issues = fake.take_issues()
    assert [i.type_name for i in issues] == ["Response"]
    assert "output.0" in issues[0].detail


def test_unknown_route_and_wrong_behaviour_are_reported(fake: FakeOpenAIServer) -> None:
    fake.script("chat.completions", Compact())
    with httpx.Client() as h:
        assert h.get(f"{fake.base_url}/files").status_code == 404
        r = h.post(f"{fake.base_url}/chat/completions", json={"model": "m", "messages": USER})
        assert r.status_code == 500
    assert [i.direction for i in fake.take_issues()] == ["route", "script"]


def test_callable_returning_garbage_is_reported(fake: FakeOpenAIServer) -> None:
    fake.script("responses", lambda req: "not a behaviour")  # type: ignore[arg-type,return-value]
    with httpx.Client() as h:
        r = h.post(f"{fake.base_url}/responses", json={"model": "gpt-5.5", "input": "x"})
    assert r.status_code == 500
    assert [i.direction for i in fake.take_issues()] == ["script"]


def test_wait_for_requests(fake: FakeOpenAIServer, client: openai.OpenAI) -> None:
    with pytest.raises(TimeoutError, match="expected 1"):
        fake.wait_for_requests(1, endpoint="models", timeout=0.1)
    client.models.list()
    assert len(fake.wait_for_requests(1, endpoint="models", timeout=1)) == 1


def test_unknown_endpoint_name_is_rejected(fake: FakeOpenAIServer) -> None:
    with pytest.raises(ValueError, match="unknown endpoint 'embeddings'"):
        fake.script("embeddings", Reply())  # type: ignore[arg-type]
