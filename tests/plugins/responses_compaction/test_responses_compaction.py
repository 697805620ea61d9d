"""The ``responses`` compaction backend against the loopback fake OpenAI server.

Every request the backend sends is validated by the fake against the official
``openai`` request types (``responses.compact`` parameters, ``responses.create``
parameters for the follow-up request), every answer the fake sends against the
SDK's ``CompactedResponse`` / ``Response`` models, and the stored compaction
item is checked here against ``ResponseCompactionItem`` (as received) and
``ResponseCompactionItemParam`` (as resent). The fixture raises at teardown on
any validation issue.
"""

from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai.types.responses import ResponseCompactionItem, ResponseInputItemParam
from openai.types.responses.response_compact_params import ResponseCompactParams
from openai.types.responses.response_compaction_item_param_param import (
    ResponseCompactionItemParamParam,
)
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter

from hermes_core.host import Hermes
from hermes_core.requests import PreparedRequest, message_to_response_items
from hermes_core.testing.fake_openai import (
    Compact,
    Drop,
    ErrorReply,
    FakeOpenAIServer,
    Malformed,
    Reply,
    fake_openai_fixture,
)
from hermes_hookspecs import (
    CompactionBackendError,
    CompressionRequest,
    CompressionResult,
    ConfigError,
    ContextEngine,
    HermesError,
    Message,
    NewMessage,
    ProviderCompactionRequest,
    SessionRecord,
    StoredMessage,
    ToolCall,
    ToolFunction,
    hookimpl,
)
from hermes_hookspecs.compaction import render_for_summary
from hermes_plugin_responses_compaction import (
    ResponsesCompactionBackend,
    ResponsesCompactionError,
    compaction_message,
    compaction_messages,
    input_items,
    parse_settings,
)
from tests.hosts import HostFactory

MODEL = "gpt-5.5"
SYSTEM = "You are a careful software agent."


def _force(value: Any) -> Any:
    """Materialise pydantic's lazy iterables so every nested item is validated."""
    if isinstance(value, dict):
        return {k: _force(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_force(v) for v in value]
    if isinstance(value, (str, bytes)) or value is None:
        return value
    if hasattr(value, "__iter__") and not isinstance(value, (int, float)):
        return [_force(v) for v in value]
    return value


COMPACT_PARAMS = TypeAdapter(ResponseCompactParams)
CREATE_PARAMS = TypeAdapter(ResponseCreateParamsNonStreaming)
INPUT_ITEM = TypeAdapter(ResponseInputItemParam)
COMPACTION_PARAM = TypeAdapter(ResponseCompactionItemParamParam)


def check_compact_body(body: dict[str, Any]) -> None:
    validated = _force(COMPACT_PARAMS.validate_python(body))
    assert set(validated) == set(body), f"keys the SDK does not know: {set(body) - set(validated)}"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    yield from fake_openai_fixture()


def config(fake: FakeOpenAIServer | None = None, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "base_url": fake.base_url if fake is not None else "http://127.0.0.1:9/v1",
        "models": [MODEL],
        "api_key_env": "",
        "timeout": 5.0,
    }
    data.update(extra)
    return data


def record(**extra: Any) -> SessionRecord:
    now = time.time()
    data: dict[str, Any] = {
        "id": "s-1",
        "model": MODEL,
        "provider": "openai",
        "created_at": now,
        "updated_at": now,
    }
    data.update(extra)
    return SessionRecord(**data)


def stored(rows: list[tuple[Message, Any]]) -> list[StoredMessage]:
    now = time.time()
    return [
        StoredMessage(
            id=100 + i,
            session_id="s-1",
            position=i,
            message=message,
            api_content=api_content,
            token_count=10 + i,
            turn_id=f"t{i // 2}",
            annotations={"test": {"row": i}},
            created_at=now,
        )
        for i, (message, api_content) in enumerate(rows)
    ]


def conversation() -> list[StoredMessage]:
    call = ToolCall(id="call_1", function=ToolFunction(name="bash", arguments='{"cmd": "pytest"}'))
    return stored(
        [
            (
                Message(role="user", content="Fix the failing test in parser.py"),
                "Fix the failing test in parser.py\n\n[Recalled context] parser owner: Ada",
            ),
            (Message(role="assistant", content=None, tool_calls=[call]), None),
            (
                Message(role="tool", tool_call_id="call_1", content="1 failed: test_parse_dates"),
                None,
            ),
            (Message(role="assistant", content="The date parser ignores time zones."), None),
            (Message(role="user", content="Please also add a regression test."), None),
            (Message(role="assistant", content="Added tests/test_tz.py; all green."), None),
        ]
    )


def compact(
    rows: list[StoredMessage], settings: dict[str, Any], session: SessionRecord | None = None
) -> Any:
    backend = ResponsesCompactionBackend(local_trigger=lambda model: 100_000)
    return backend.compact(
        ProviderCompactionRequest(
            session=session or record(), messages=rows, model=MODEL, settings=settings
        )
    )


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- settings


def test_settings_defaults_and_every_bad_key_is_named() -> None:
    cfg = parse_settings({})
    assert (cfg.route, cfg.source, cfg.provider, cfg.models) == (
        "standalone",
        "input",
        "openai",
        [],
    )
    assert (
        parse_settings({"base_url": "http://h:1/v1/"}).compact_url()
        == "http://h:1/v1/responses/compact"
    )
    with pytest.raises(ConfigError) as info:
        parse_settings({"bse_url": "x", "timeout": -1, "route": "sideways"})
    text = str(info.value)
    assert "unknown key compaction.responses.bse_url" in text
    assert "compaction.responses.timeout = -1" in text
    assert "compaction.responses.route = 'sideways'" in text
    with pytest.raises(ConfigError, match=r"base_url = 'ftp://x': .*http\(s\) URL"):
        parse_settings({"base_url": "ftp://x"})
    with pytest.raises(ConfigError, match=r"models\[1\] is blank"):
        parse_settings({"models": ["gpt-5.5", " "]})


def test_default_inline_threshold_is_the_local_trigger_minus_the_margin() -> None:
    cfg = parse_settings({})
    assert cfg.threshold_for(100_000) == 100_000 - 5_000  # 5 % beats the 4,096 floor
    assert cfg.threshold_for(50_000) == 50_000 - 4_096  # the floor beats 2,500
    assert cfg.threshold_for(3_000) == 1_500  # margin swallows the trigger: half of it
    assert parse_settings({"compact_threshold": 12_345}).threshold_for(100_000) == 12_345
    assert (
        parse_settings({"safety_margin_tokens": 0, "safety_margin_ratio": 0}).threshold_for(80_000)
        == 80_000
    )


# --------------------------------------------------------------------------- eligibility


@pytest.mark.parametrize(
    ("settings", "session", "model"),
    [
        ({"models": [MODEL]}, {}, MODEL),  # no base_url
        ({"base_url": "http://127.0.0.1:9/v1"}, {}, MODEL),  # no models
        (config(), {}, "gpt-4o-mini"),  # model not allowed
        (config(), {"provider": ""}, MODEL),  # provider not declared
        (config(), {"provider": "openrouter"}, MODEL),  # another provider
    ],
)
def test_ineligible_sessions_are_refused(
    settings: dict[str, Any], session: dict[str, Any], model: str
) -> None:
    backend = ResponsesCompactionBackend(local_trigger=lambda m: 100_000)
    assert backend.eligible(record(**session), model, settings) is False
    assert backend.request_options(record(**session), model, {**settings, "route": "inline"}) == {}


def test_eligible_by_pattern_and_provider_case() -> None:
    backend = ResponsesCompactionBackend(local_trigger=lambda m: 100_000)
    settings = config(models=["gpt-5.*"])
    assert backend.eligible(record(provider="OpenAI"), "gpt-5.5-2026-04-23", settings) is True
    assert backend.eligible(record(), "gpt-4.1", settings) is False
    with pytest.raises(ConfigError, match=r"unknown key compaction\.responses\.modles"):
        backend.eligible(record(), MODEL, {"modles": [MODEL]})


def test_ineligible_compact_call_raises_without_a_request(fake: FakeOpenAIServer) -> None:
    with pytest.raises(ResponsesCompactionError, match="not eligible: model 'gpt-4o-mini'") as info:
        ResponsesCompactionBackend().compact(
            ProviderCompactionRequest(
                session=record(),
                messages=conversation(),
                model="gpt-4o-mini",
                settings=config(fake),
            )
        )
    assert info.value.kind == "config"
    assert fake.requests == []


# --------------------------------------------------------------------------- standalone route


def test_standalone_happy_path_keeps_items_and_stores_the_opaque_item(
    fake: FakeOpenAIServer,
) -> None:
    rows = conversation()
    result = compact(rows, config(fake))

    (req,) = fake.requests_to("responses.compact")
    check_compact_body(req.body)
    assert req.body["model"] == MODEL and "previous_response_id" not in req.body
    assert req.body["input"] == input_items(rows)
    kinds = [(i["type"], i.get("role")) for i in req.body["input"]]
    assert kinds == [
        ("message", "user"),
        ("function_call", None),
        ("function_call_output", None),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]
    # the exact bytes once sent (api_content sidecar) are what the provider compacts
    assert "parser owner: Ada" in json.dumps(req.body["input"][0])

    assert result.backend == "responses"
    kept, opaque = result.messages[:-1], result.messages[-1]
    assert [m.origin_id for m in kept] == [rows[0].id, rows[4].id]
    assert kept[0].api_content == rows[0].api_content  # resent byte for byte later
    assert kept[0].token_count == rows[0].token_count
    # carried rows keep every stored fact (they used to lose turn id and annotations)
    assert [(m.turn_id, m.annotations) for m in kept] == [
        (rows[0].turn_id, rows[0].annotations),
        (rows[4].turn_id, rows[4].annotations),
    ]
    assert opaque.message.kind == "compaction" and opaque.message.content is None
    item = opaque.message.provider_item
    assert item is not None
    ResponseCompactionItem.model_validate(item)  # as the SDK reads compact output
    assert COMPACTION_PARAM.validate_python(item) == item  # resendable, no unknown keys
    assert INPUT_ITEM.validate_python(item) == item  # and a valid Responses input item
    assert item["encrypted_content"].startswith("enc_") and item["id"].startswith("cmp_")
    assert result.routing["responses_compaction"]["id"].startswith("resp_")
    assert "previous_response_id" not in result.routing
    assert result.detail["carried_rows"] == 2 and result.detail["kept_items"] == 2
    assert result.tokens_before == sum(r.token_count or 0 for r in rows)
    # summarizers never see the opaque item as text
    assert render_for_summary([m.message for m in result.messages]) == [m.message for m in kept]


def test_compaction_item_is_sent_verbatim_in_the_next_compact_and_responses_requests(
    fake: FakeOpenAIServer,
) -> None:
    rows = conversation()
    first = compact(rows, config(fake))
    item = first.messages[-1].message.provider_item
    # the new view, as the store would return it, plus one more exchange
    later = stored(
        [(m.message, m.api_content) for m in first.messages]
        + [
            (Message(role="user", content="And the changelog?"), None),
            (Message(role="assistant", content="Updated CHANGES.md."), None),
        ]
    )
    second = compact(later, config(fake))
    _, req = fake.requests_to("responses.compact")
    check_compact_body(req.body)
    assert req.body["input"][2] == item  # verbatim, same dict
    assert second.messages[-1].message.provider_item != item  # a fresh compaction item

    # the core renders a wire dict carrying the provider item verbatim in a Responses request
    wire = {"role": "assistant", "content": None, "provider_item": item}
    assert message_to_response_items(wire) == [item]
    body = PreparedRequest(
        session_id="s-1",
        turn_id="t",
        request_index=1,
        model=MODEL,
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Please also add a regression test."},
            wire,
            {"role": "user", "content": "next"},
        ],
        prompt_tokens=1,
    ).responses_body()
    assert body["input"][1] == item
    _force(CREATE_PARAMS.validate_python(body))
    with httpx.Client() as client:
        answer = client.post(f"{fake.base_url}/responses", json=body)
    assert answer.status_code == 200
    assert fake.requests_to("responses")[0].body["input"][1] == item


def test_stored_compaction_record_renders_verbatim_through_to_api(fake: FakeOpenAIServer) -> None:
    item = {"id": "cmp_1", "type": "compaction", "encrypted_content": "enc_abc"}
    (row,) = stored([(compaction_message(item), None)])
    assert message_to_response_items(row.to_api()) == [item]


def test_previous_response_id_source_sends_the_id_and_clears_it(fake: FakeOpenAIServer) -> None:
    fake.script("responses.compact", Compact(kept=[], encrypted_content="ENC-PREV"))
    session = record(routing={"previous_response_id": "resp_prev_1"})
    result = compact(conversation(), config(fake, source="auto"), session)
    (req,) = fake.requests_to("responses.compact")
    check_compact_body(req.body)
    assert req.body == {"model": MODEL, "previous_response_id": "resp_prev_1"}
    assert [m.message.kind for m in result.messages] == ["compaction"]
    item = result.messages[0].message.provider_item
    assert item is not None and item["encrypted_content"] == "ENC-PREV"
    assert result.routing["previous_response_id"] is None
    assert result.detail["source"] == "previous_response_id"
    # "auto" without an id falls back to input items; "previous_response_id" refuses
    compact(conversation(), config(fake, source="auto"))
    assert "input" in fake.requests_to("responses.compact")[1].body
    with pytest.raises(
        ResponsesCompactionError, match="has no routing\\['previous_response_id'\\]"
    ):
        compact(conversation(), config(fake, source="previous_response_id"))


def test_kept_items_the_view_did_not_hold_become_new_messages(fake: FakeOpenAIServer) -> None:
    kept = [
        {
            "id": "msg_new",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [
                {"type": "input_text", "text": "Summary request one."},
                {"type": "input_text", "text": "Summary request two."},
            ],
        }
    ]
    fake.script("responses.compact", Compact(kept=kept))
    result = compact(conversation(), config(fake))
    new = result.messages[0]
    assert new.origin_id is None
    assert new.message.role == "user"
    assert new.message.content == "Summary request one.\nSummary request two."
    assert result.detail["carried_rows"] == 0


def test_a_foreign_provider_item_is_not_sent(fake: FakeOpenAIServer) -> None:
    marker = Message(
        role="assistant",
        kind="compaction",
        provider_item={"type": "codex.context_compaction", "thread_id": "t-1"},
    )
    rows = stored([(marker, None), (Message(role="user", content="hi"), None)])
    with pytest.raises(ResponsesCompactionError, match=r"'codex\.context_compaction'") as info:
        compact(rows, config(fake))
    assert info.value.kind == "unsupported"
    assert fake.requests == []


# --------------------------------------------------------------------------- failures


def _envelope(output: list[Any]) -> str:
    return json.dumps(
        {
            "id": "resp_x",
            "object": "response.compaction",
            "created_at": 1,
            "output": output,
            "usage": {},
        }
    )


GOOD_USER = {
    "id": "msg_1",
    "type": "message",
    "role": "user",
    "status": "completed",
    "content": [{"type": "input_text", "text": "hi"}],
}


@pytest.mark.parametrize(
    ("behaviour", "kind", "message"),
    [
        (ErrorReply(status=500), "http", "HTTP 500: server_error: The server had an error"),
        (
            ErrorReply(status=429, type="rate_limit_error", code="rate_limit_exceeded"),
            "http",
            "HTTP 429: rate_limit_error/rate_limit_exceeded",
        ),
        (
            ErrorReply(status=401, type="invalid_request_error", code="invalid_api_key"),
            "auth",
            "HTTP 401",
        ),
        (Malformed(), "malformed", "not JSON"),
        (
            Malformed(body=_envelope([GOOD_USER, {"id": "cmp_1", "type": "compaction"}])),
            "malformed",
            "has no 'encrypted_content'",
        ),
        (
            Malformed(
                body=_envelope([{"id": "cmp_1", "type": "compaction", "encrypted_content": ""}])
            ),
            "malformed",
            "encrypted_content: String should have at least 1 character",
        ),
        (
            Malformed(
                body=_envelope([{"id": "cmp_1", "type": "compaction", "encrypted_content": 7}])
            ),
            "malformed",
            "encrypted_content: Input should be a valid string",
        ),
        (
            Malformed(body=_envelope([GOOD_USER])),
            "malformed",
            "exactly one compaction item in output, found 0",
        ),
        (
            Malformed(
                body=_envelope(
                    [{"id": "c", "type": "compaction", "encrypted_content": "e"}, GOOD_USER]
                )
            ),
            "malformed",
            "must be the last output item",
        ),
        (
            Malformed(body=json.dumps({"id": "resp_x", "object": "response", "output": []})),
            "malformed",
            "not a compacted response",
        ),
        (Malformed(body="[1, 2]"), "malformed", "not a JSON object"),
        (Drop(), "network", "RemoteProtocolError"),
    ],
)
def test_provider_failures_raise_compaction_backend_errors(
    fake: FakeOpenAIServer, behaviour: Any, kind: str, message: str
) -> None:
    fake.script("responses.compact", behaviour)
    with pytest.raises(CompactionBackendError) as info:
        compact(conversation(), config(fake))
    assert isinstance(info.value, ResponsesCompactionError)
    assert info.value.kind == kind
    assert message in str(info.value)
    assert len(fake.requests_to("responses.compact")) == 1


def test_closed_port_is_a_network_error() -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(ResponsesCompactionError, match="ConnectError") as info:
        compact(conversation(), {**config(), "base_url": base})
    assert info.value.kind == "network"


def test_timeout_is_reported(fake: FakeOpenAIServer) -> None:
    fake.script("responses.compact", Compact(delay_s=3.0))
    started = time.monotonic()
    with pytest.raises(ResponsesCompactionError, match=r"timed out after 0\.3s") as info:
        compact(conversation(), config(fake, timeout=0.3))
    assert info.value.kind == "timeout"
    assert time.monotonic() - started < 2.5


def test_api_key_is_sent_and_a_wrong_or_missing_one_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeOpenAIServer(api_key="sk-right") as server:
        monkeypatch.setenv("HERMES_TEST_RESPONSES_KEY", "sk-right")
        compact(conversation(), config(server, api_key_env="HERMES_TEST_RESPONSES_KEY"))
        monkeypatch.setenv("HERMES_TEST_RESPONSES_KEY", "sk-wrong")
        with pytest.raises(ResponsesCompactionError, match=r"HTTP 401.*invalid_api_key") as info:
            compact(conversation(), config(server, api_key_env="HERMES_TEST_RESPONSES_KEY"))
        assert info.value.kind == "auth" and info.value.status == 401
        auth = [r.header("Authorization") for r in server.requests_to("responses.compact")]
        assert auth == ["Bearer sk-right", "Bearer sk-wrong"]
        monkeypatch.delenv("HERMES_TEST_RESPONSES_KEY")
        with pytest.raises(ResponsesCompactionError, match="'HERMES_TEST_RESPONSES_KEY'"):
            compact(conversation(), config(server, api_key_env="HERMES_TEST_RESPONSES_KEY"))
        assert len(server.requests_to("responses.compact")) == 2


# --------------------------------------------------------------------------- inline route


def test_inline_request_options_are_valid_responses_parameters(fake: FakeOpenAIServer) -> None:
    backend = ResponsesCompactionBackend(local_trigger=lambda model: 90_000)
    options = backend.request_options(record(), MODEL, config(fake, route="inline"))
    assert options == {
        "context_management": [
            {"type": "compaction", "compact_threshold": 90_000 - math.ceil(90_000 * 0.05)}
        ]
    }
    explicit = backend.request_options(
        record(), MODEL, config(fake, route="inline", compact_threshold=20_000)
    )
    assert explicit["context_management"][0]["compact_threshold"] == 20_000
    assert backend.request_options(record(), MODEL, config(fake)) == {}  # standalone: nothing

    # a provider compacting in-line answers with a compaction output item; record it
    item = {"id": "cmp_inline", "type": "compaction", "encrypted_content": "enc_inline"}
    answer = {
        "id": "msg_a",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
    }
    fake.script("responses", Reply(output_items=[item, answer]))
    body = PreparedRequest(
        session_id="s-1",
        turn_id="t",
        request_index=0,
        model=MODEL,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "go"}],
        prompt_tokens=1,
        extra_body=options,
    ).responses_body()
    _force(CREATE_PARAMS.validate_python(body))
    with httpx.Client() as client:
        response = client.post(f"{fake.base_url}/responses", json=body).json()
    (req,) = fake.requests_to("responses")
    assert req.body["context_management"] == options["context_management"]
    (message,) = compaction_messages(response["output"])
    assert message.kind == "compaction" and message.provider_item == item
    with pytest.raises(ResponsesCompactionError, match="no 'encrypted_content'"):
        compaction_message({"type": "compaction", "id": "cmp_2"})


def test_inline_compact_prunes_before_the_newest_item_without_a_request(
    fake: FakeOpenAIServer,
) -> None:
    old = {"id": "cmp_old", "type": "compaction", "encrypted_content": "enc_old"}
    new = {"id": "cmp_new", "type": "compaction", "encrypted_content": "enc_new"}
    rows = stored(
        [
            (Message(role="user", content="one"), None),
            (compaction_message(old), None),
            (Message(role="user", content="two"), None),
            (compaction_message(new), None),
            (Message(role="assistant", content="after the compaction"), None),
        ]
    )
    result = compact(rows, config(fake, route="inline"))
    assert [m.origin_id for m in result.messages] == [rows[3].id, rows[4].id]
    assert result.messages[0].message.provider_item == new
    assert result.detail == {"route": "inline", "action": "pruned", "archived": 3, "kept": 2}
    assert fake.requests == []


def test_inline_without_a_recorded_item_uses_the_backstop_or_fails(
    fake: FakeOpenAIServer,
) -> None:
    result = compact(conversation(), config(fake, route="inline"))
    assert result.detail["action"] == "compacted"
    assert len(fake.requests_to("responses.compact")) == 1
    with pytest.raises(ResponsesCompactionError, match="inline_backstop is false"):
        compact(conversation(), config(fake, route="inline", inline_backstop=False))
    assert len(fake.requests_to("responses.compact")) == 1


# --------------------------------------------------------------------------- through Hermes


class KeepLastTurnEngine(ContextEngine):
    """A minimal local engine for these tests: keeps the last user turn."""

    name = "test-keep-last-turn"

    def compress(self, request: CompressionRequest) -> CompressionResult:
        rows = request.messages
        start = max(i for i, r in enumerate(rows) if r.message.role == "user")
        return CompressionResult(
            status="compressed",
            engine=self.name,
            messages=[
                NewMessage(message=r.message, api_content=r.api_content, origin_id=r.id)
                for r in rows[start:]
            ],
        )


class LocalEnginePlugin:
    @hookimpl
    def register_context_engines(self, register: Any) -> None:
        register(KeepLastTurnEngine())


@pytest.fixture
def responses_host(make_host: HostFactory) -> Callable[..., Hermes]:
    """``responses_host(responses, folder=None)``: a host with the ``responses`` backend."""

    def make(responses: dict[str, Any], folder: Path | None = None) -> Hermes:
        return make_host(
            LocalEnginePlugin(),
            folder=folder,
            # only the plugins this test is about: the store, the counter and this backend
            plugins={"load": ["sqlite_store", "tiktoken_counter", "responses_compaction"]},
            model={"name": MODEL},
            compression={"engine": KeepLastTurnEngine.name},
            compaction={"backend": "responses", "responses": responses},
        )

    return make


def two_turns(host: Hermes, provider: str = "openai") -> Any:
    session = host.new_session(provider=provider)
    for question, answer in [
        ("first question about the zebra parser", "first answer mentions quokka"),
        ("second question", "second answer"),
    ]:
        with session.turn() as turn:
            turn.prepare(question)
            turn.record_response({"role": "assistant", "content": answer})
            turn.commit()
    return session


def test_hermes_standalone_compaction_replaces_the_view_and_keeps_search(
    tmp_path: Path, fake: FakeOpenAIServer, responses_host: Callable[..., Hermes]
) -> None:
    host = responses_host(config(fake))
    assert host.compaction_backend() is not None
    session = two_turns(host)
    outcome = session.compress()
    assert (outcome.status, outcome.backend) == ("compressed", "responses")
    (req,) = fake.requests_to("responses.compact")
    check_compact_body(req.body)
    assert [i["role"] for i in req.body["input"]] == ["user", "assistant", "user", "assistant"]

    store = host.store()
    active = store.active_messages(session.id)
    assert [(r.message.role, r.message.kind) for r in active] == [
        ("user", "message"),
        ("user", "message"),
        ("assistant", "compaction"),
    ]
    item = active[-1].message.provider_item
    assert item is not None
    ResponseCompactionItem.model_validate(item)
    assert COMPACTION_PARAM.validate_python(item) == item
    assert store.get_session(session.id).routing["responses_compaction"]["id"].startswith("resp_")
    # the assistant rows were archived, not deleted: search still finds them
    hits = session.search("quokka")
    assert hits and hits[0].compacted is True
    assert len(store.all_messages(session.id)) >= 4


def test_hermes_provider_failure_falls_back_to_the_local_engine(
    tmp_path: Path, fake: FakeOpenAIServer, responses_host: Callable[..., Hermes]
) -> None:
    fake.script("responses.compact", ErrorReply(status=500))
    host = responses_host(config(fake))
    session = two_turns(host)
    before = [r.message for r in host.store().active_messages(session.id)]
    outcome = session.compress()
    assert len(fake.requests_to("responses.compact")) == 1
    assert (outcome.status, outcome.backend, outcome.engine) == (
        "compressed",
        "local",
        KeepLastTurnEngine.name,
    )
    assert any("'responses' failed" in note and "HTTP 500" in note for note in outcome.notes)
    active = [r.message for r in host.store().active_messages(session.id)]
    assert active == before[2:]  # the local engine's view, no opaque item
    assert all(m.kind != "compaction" for m in active)
    assert session.search("quokka")[0].compacted is True
    with session.turn() as turn:  # the session goes on
        request = turn.prepare("third question")
        assert request.messages[-1]["content"] == "third question"
        turn.abort()


def test_hermes_closed_port_and_ineligible_sessions_use_the_local_engine(
    tmp_path: Path, fake: FakeOpenAIServer, responses_host: Callable[..., Hermes]
) -> None:
    dead = {**config(), "base_url": f"http://127.0.0.1:{closed_port()}/v1"}
    host = responses_host(dead)
    outcome = two_turns(host).compress()
    assert outcome.backend == "local"
    assert any("network" in note for note in outcome.notes)
    host.close()
    host = responses_host(config(fake), folder=tmp_path / "two")
    outcome = two_turns(host, provider="").compress()
    assert outcome.backend == "local"
    assert any("not eligible" in note for note in outcome.notes)
    assert fake.requests == []


def test_hermes_commit_writes_a_mid_turn_view_without_the_backend(
    tmp_path: Path, fake: FakeOpenAIServer, responses_host: Callable[..., Hermes]
) -> None:
    """A turn sent on the local engine's mid-turn view commits that view: a provider
    compaction at commit would replace the prefix the rest of the turn built."""
    host = responses_host(config(fake))
    session = two_turns(host)
    threshold = host.threshold(session.model).threshold_tokens
    with session.turn() as turn:
        turn.prepare("third question")
        call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        turn.record_response(
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"prompt_tokens": threshold + 100, "completion_tokens": 5, "total_tokens": threshold},
        )
        turn.add_tool_result("c1", "output")
        view = turn.prepare()
        assert view.compressed
        turn.record_response({"role": "assistant", "content": "done"})
        turn.commit()
    assert fake.requests_to("responses.compact") == []
    store = host.store()
    texts = [r.message.text() for r in store.active_messages(session.id)]
    assert texts == ["third question", "", "output", "done"]  # the view, then the rest
    assert store.get_session(session.id).compression_count == 1
    with session.turn() as turn:
        turn.prepare("fourth question")
        turn.record_response({"role": "assistant", "content": "ok"})
        turn.commit()
    assert store.prefix_entries(session.id)[-1].break_reason is None  # one break, not two


def test_hermes_inline_route_adds_context_management_to_requests(
    tmp_path: Path, fake: FakeOpenAIServer, responses_host: Callable[..., Hermes]
) -> None:
    host = responses_host(config(fake, route="inline"))
    session = host.new_session(provider="openai")
    trigger = host.threshold(MODEL).threshold_tokens
    with session.turn() as turn:
        request = turn.prepare("first question")
        turn.abort()
    expected = trigger - max(4_096, math.ceil(trigger * 0.05))
    assert request.extra_body == {
        "context_management": [{"type": "compaction", "compact_threshold": expected}]
    }
    body = request.responses_body()
    _force(CREATE_PARAMS.validate_python(body))
    with httpx.Client() as client:
        assert client.post(f"{fake.base_url}/responses", json=body).status_code == 200


def test_hermes_rejects_bad_backend_settings_by_name(responses_host: Callable[..., Hermes]) -> None:
    # the table is declared through register_settings, so the host rejects it when it loads
    with pytest.raises(
        HermesError, match=r"unknown key 'compaction\.responses\.timeout_s'.*'responses_compaction'"
    ):
        responses_host({"base_url": "http://127.0.0.1:9/v1", "timeout_s": 3})


def test_hermes_next_request_resends_the_item_verbatim(
    tmp_path: Path, fake: FakeOpenAIServer, responses_host: Callable[..., Hermes]
) -> None:
    host = responses_host(config(fake))
    session = two_turns(host)
    session.compress()
    item = host.store().active_messages(session.id)[-1].message.provider_item
    with session.turn() as turn:
        request = turn.prepare("third question")
        turn.abort()
    body = request.responses_body()
    assert [i.get("role", i["type"]) for i in body["input"]] == [
        "user",
        "user",
        "compaction",
        "user",
    ]
    assert body["input"][2] == item  # verbatim
    assert all("provider_item" not in m for m in request.chat_body()["messages"])
    _force(CREATE_PARAMS.validate_python(body))
    with httpx.Client() as client:
        assert client.post(f"{fake.base_url}/responses", json=body).status_code == 200
    assert fake.requests_to("responses")[0].body["input"][2] == item


def test_hermes_inline_records_the_provider_item_and_prunes_on_the_local_trigger(
    tmp_path: Path, fake: FakeOpenAIServer, responses_host: Callable[..., Hermes]
) -> None:
    host = responses_host(config(fake, route="inline"))
    session = host.new_session(provider="openai")
    with session.turn() as turn:
        turn.prepare("first question about the zebra parser")
        turn.record_response({"role": "assistant", "content": "first answer mentions quokka"})
        turn.commit()
    # the provider compacted in-line: its output is [compaction item, assistant message]
    item = {"id": "cmp_inline", "type": "compaction", "encrypted_content": "enc_inline"}
    with session.turn() as turn:
        turn.prepare("second question")
        turn.record_response(compaction_message(item))
        turn.record_response({"role": "assistant", "content": "second answer"})
        turn.commit()
    outcome = session.compress()
    assert (outcome.status, outcome.backend) == ("compressed", "responses")
    assert fake.requests == []  # pruning needs no network call
    active = host.store().active_messages(session.id)
    assert [(r.message.kind, r.message.content) for r in active] == [
        ("compaction", None),
        ("message", "second answer"),
    ]
    assert active[0].message.provider_item == item
    assert session.search("quokka")[0].compacted is True
    with session.turn() as turn:  # the next request starts from the compaction item
        body = turn.prepare("third question").responses_body()
        turn.abort()
    assert body["input"][0] == item
    assert body["context_management"][0]["type"] == "compaction"
    _force(CREATE_PARAMS.validate_python(body))
    with httpx.Client() as client:
        assert client.post(f"{fake.base_url}/responses", json=body).status_code == 200
