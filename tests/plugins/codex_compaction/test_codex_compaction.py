"""Codex app-server thread compaction, against the real ``codex`` binary and a loopback fake.

The real-binary tests need ``codex`` (``HERMES_CODEX_BIN``, else
``.codex-bin/node_modules/.bin/codex`` under the repo root, else ``PATH``) and
are skipped with a clear reason only when it cannot be found. Codex's model
provider is pointed at :class:`FakeOpenAIServer`, which validates every
request Codex sends against the ``openai`` package's types.

The fault tests (malformed lines, crash mid-turn, timeouts, server requests)
run a small stand-in ``codex`` script and need no binary.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_core.host import Hermes
from hermes_core.testing.fake_openai import ErrorReply, FakeOpenAIServer, RecordedRequest, Reply
from hermes_hookspecs import (
    CompactionBackendError,
    CompressionRequest,
    CompressionResult,
    ConfigError,
    ContextEngine,
    Message,
    NewMessage,
    ProviderCompactionRequest,
    SessionRecord,
    StoredMessage,
    hookimpl,
)
from hermes_hookspecs.compaction import render_for_summary
from hermes_plugin_codex_compaction import (
    CodexAppServer,
    CodexBackendSettings,
    CodexBinaryNotFoundError,
    CodexCompactionBackend,
    CodexCompactionFailed,
    CodexLaunchSettings,
    CodexProcessExitedError,
    CodexProcessFields,
    CodexProvider,
    CodexRuntimeConfig,
    CodexThreadNotFoundError,
    CodexTimeoutError,
    codex_thread_id,
    find_codex_binary,
    register_compaction_backends,
)
from hermes_plugin_codex_compaction.binary import BINARY_ENV_VAR

#: Request keys Codex 0.171 sends that the openai package's TypedDicts do not declare.
CODEX_EXTRA_REQUEST_KEYS = frozenset({"client_metadata", "input.id", "tools.search_content_types"})
API_KEY = "sk-hermes-codex-test"
SUMMARY = "SUMMARY-7f3a: the user greeted; nothing else pending."
FIRST_ANSWER = "FIRST-ANSWER-91c2"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    try:
        found: Path = find_codex_binary()
    except CodexBinaryNotFoundError as err:
        if os.environ.get(BINARY_ENV_VAR):
            raise  # an explicit but wrong HERMES_CODEX_BIN is an error, not a skip
        pytest.skip(f"codex binary not available: {err}")
    return found


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(
        api_key=API_KEY, allowed_unknown_request_keys=CODEX_EXTRA_REQUEST_KEYS
    ) as server:
        yield server


def launch_settings(root: Path, binary: Path, **kw: Any) -> CodexLaunchSettings:
    # the defaults, as a user gets them: the first start waits start_timeout_s (120 s; a cold
    # start of the real binary on a loaded 2-core machine once took over 30 s), every later
    # request request_timeout_s (30 s); a test that wants a short wait says so
    return CodexLaunchSettings(
        binary=binary,
        codex_home=root / "codex-home",
        home=root / "home",
        cwd=root,
        env={"HERMES_CODEX_API_KEY": API_KEY},
        **kw,
    )


def runtime_for(fake: FakeOpenAIServer) -> CodexRuntimeConfig:
    return CodexRuntimeConfig(model="gpt-5.5", provider=CodexProvider(base_url=fake.base_url))


@pytest.fixture
def app(codex_bin: Path, fake: FakeOpenAIServer, tmp_path: Path) -> Iterator[CodexAppServer]:
    client = CodexAppServer(launch_settings(tmp_path, codex_bin), runtime=runtime_for(fake))
    client.start()
    try:
        yield client
    finally:
        client.close()


def all_input_text(req: RecordedRequest) -> list[tuple[str, str]]:
    """(role, text) of every message item in a Responses request's input."""
    out = []
    for item in req.body["input"]:
        if item.get("type", "message") != "message":
            continue
        content = item["content"]
        texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
        out += [(item["role"], t) for t in texts]
    return out


def session(routing: dict[str, Any]) -> SessionRecord:
    now = time.time()
    return SessionRecord(id="s-1", routing=routing, created_at=now, updated_at=now)


def stored(session_id: str, texts: list[tuple[str, str]]) -> list[StoredMessage]:
    return [
        StoredMessage(
            id=i + 1,
            session_id=session_id,
            position=i,
            message=Message.model_validate({"role": role, "content": text}),
            created_at=time.time(),
        )
        for i, (role, text) in enumerate(texts)
    ]


# --------------------------------------------------------------------------- real binary


@pytest.mark.codex
def test_compaction_summary_replaces_turn_items_in_next_request(
    app: CodexAppServer, fake: FakeOpenAIServer, tmp_path: Path
) -> None:
    thread = app.start_thread(cwd=str(tmp_path))
    assert thread.model_provider == "hermes" and thread.model == "gpt-5.5"

    fake.script("responses", Reply(text=FIRST_ANSWER))
    turn = app.run_turn(thread.id, "hello there")
    assert turn.status == "completed" and turn.text == FIRST_ANSWER

    fake.script("responses", Reply(text=SUMMARY))
    outcome = app.compact_thread(thread.id, timeout=60)
    assert outcome.status == "completed" and outcome.ok, outcome
    assert len(outcome.item_ids) == 1 and outcome.turn_id != turn.turn_id

    compaction_req = fake.requests_to("responses")[-1]
    assert compaction_req.header("authorization") == f"Bearer {API_KEY}"
    meta = json.loads(compaction_req.header("x-codex-turn-metadata") or "{}")
    assert meta["request_kind"] == "compaction"
    role, instruction = all_input_text(compaction_req)[-1]
    assert role == "user" and "CONTEXT CHECKPOINT COMPACTION" in instruction
    assert ("assistant", FIRST_ANSWER) in all_input_text(compaction_req)

    fake.script("responses", Reply(text="after compaction"))
    after = app.run_turn(thread.id, "what next?")
    assert after.status == "completed" and after.text == "after compaction"

    texts = all_input_text(fake.requests_to("responses")[-1])
    assert any(SUMMARY in text for _, text in texts), texts
    assert not any(FIRST_ANSWER in text for _, text in texts)
    assert not any("CONTEXT CHECKPOINT COMPACTION" in text for _, text in texts)
    assert texts[-1] == ("user", "what next?")

    rollout = Path(thread.path or "")
    records = [json.loads(line) for line in rollout.read_text().splitlines()]
    compacted = [r["payload"] for r in records if r.get("type") == "compacted"]
    assert len(compacted) == 1 and SUMMARY in compacted[0]["message"]


@pytest.mark.codex
@pytest.mark.parametrize("status", [500, 401])
def test_failed_compaction_reports_error_and_thread_stays_usable(
    app: CodexAppServer, fake: FakeOpenAIServer, tmp_path: Path, status: int
) -> None:
    thread = app.start_thread(cwd=str(tmp_path))
    fake.script("responses", Reply(text=FIRST_ANSWER))
    assert app.run_turn(thread.id, "hello").status == "completed"

    fake.script("responses", ErrorReply(status=status, message=f"fake says no ({status})"))
    outcome = app.compact_thread(thread.id, timeout=60)
    assert outcome.status == "failed" and not outcome.ok
    assert outcome.item_ids == []
    assert outcome.error is not None and outcome.error_message
    assert outcome.errors and outcome.errors[-1].will_retry is False
    if status == 401:  # Codex passes the provider's message through for 4xx
        assert "fake says no (401)" in outcome.error_message
        assert outcome.error.codex_error_info == {"httpConnectionFailed": {"httpStatusCode": 401}}
    else:  # and replaces it with its own text for 5xx
        assert outcome.error.codex_error_info == "internalServerError"

    fake.script("responses", Reply(text="still here"))
    later = app.run_turn(thread.id, "are you there?")
    assert later.status == "completed" and later.text == "still here"
    texts = all_input_text(fake.requests_to("responses")[-1])
    assert ("assistant", FIRST_ANSWER) in texts  # history untouched by the failed compaction


@pytest.mark.codex
def test_unknown_thread_ids_are_clear_errors(app: CodexAppServer) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(CodexThreadNotFoundError) as info:
        app.compact_thread(missing, timeout=10)
    assert info.value.thread_id == missing and missing in str(info.value)
    with pytest.raises(CodexThreadNotFoundError, match="no rollout found"):
        app.resume_thread(missing)
    with pytest.raises(CodexThreadNotFoundError, match="invalid thread id"):
        app.compact_thread("not-a-uuid", timeout=10)
    assert app.alive


@pytest.mark.codex
def test_backend_resumes_thread_in_its_own_process_and_compacts(
    codex_bin: Path, fake: FakeOpenAIServer, tmp_path: Path
) -> None:
    settings = launch_settings(tmp_path, codex_bin)
    with CodexAppServer(settings, runtime=runtime_for(fake)) as first:
        thread = first.start_thread(cwd=str(tmp_path))
        fake.script("responses", Reply(text=FIRST_ANSWER))
        first.run_turn(thread.id, "remember the number 42")

    backend = CodexCompactionBackend()
    backend_settings = {
        "codex_home": str(settings.codex_home),
        "home": str(settings.home),
        "cwd": str(tmp_path),
        "binary": str(codex_bin),
        "env": {"HERMES_CODEX_API_KEY": API_KEY},
        "timeout_s": 60,
    }
    sess = session({"runtime": "codex", "codex_thread_id": thread.id, "codex_compactions": 2})
    long_question = "remember the number 42, " * 40
    msgs = stored(sess.id, [("user", long_question), ("assistant", FIRST_ANSWER)])
    assert backend.eligible(sess, "gpt-5.5", backend_settings)
    try:
        fake.script("responses", Reply(text=SUMMARY))
        result = backend.compact(
            ProviderCompactionRequest(
                session=sess, messages=msgs, model="gpt-5.5", settings=backend_settings
            )
        )
        (marker,) = result.messages
        assert marker.message.kind == "compaction" and marker.message.provider_item is not None
        assert marker.message.provider_item["thread_id"] == thread.id
        assert marker.message.provider_item["item_ids"] == result.detail["item_ids"]
        assert render_for_summary([marker.message]) == []
        assert result.backend == "codex"
        assert result.routing["codex_thread_id"] == thread.id
        assert result.routing["codex_compactions"] == 3
        assert marker.token_count is not None
        assert result.tokens_before > result.tokens_after == marker.token_count > 0

        fake.script("responses", ErrorReply(status=500))
        with pytest.raises(CodexCompactionFailed) as info:
            backend.compact(
                ProviderCompactionRequest(session=sess, messages=msgs, settings=backend_settings)
            )
        assert isinstance(info.value, CompactionBackendError)
        assert info.value.outcome is not None and info.value.outcome.status == "failed"
        assert thread.id in str(info.value)

        ghost = session({"codex_thread_id": str(uuid.uuid4())})
        with pytest.raises(CodexCompactionFailed, match="unknown to the app-server"):
            backend.compact(
                ProviderCompactionRequest(session=ghost, messages=[], settings=backend_settings)
            )
    finally:
        backend.close()

    with CodexAppServer(settings) as again:
        again.resume_thread(thread.id)
        fake.script("responses", Reply(text="resumed"))
        assert again.run_turn(thread.id, "and now?").text == "resumed"
    texts = all_input_text(fake.requests_to("responses")[-1])
    assert any(SUMMARY in t for _, t in texts) and not any(FIRST_ANSWER in t for _, t in texts)


@pytest.mark.codex
def test_provider_named_openai_uses_remote_compaction_items(
    codex_bin: Path, tmp_path: Path
) -> None:
    """A provider named exactly ``OpenAI`` sends ``compaction_trigger`` and resends the item."""
    allowed = CODEX_EXTRA_REQUEST_KEYS | {"input.internal_chat_message_metadata_passthrough"}
    with FakeOpenAIServer(api_key=API_KEY, allowed_unknown_request_keys=allowed) as fake:
        runtime = CodexRuntimeConfig(provider=CodexProvider(name="OpenAI", base_url=fake.base_url))
        with CodexAppServer(launch_settings(tmp_path, codex_bin), runtime=runtime) as app:
            thread = app.start_thread(cwd=str(tmp_path))
            fake.script("responses", Reply(text=FIRST_ANSWER))
            app.run_turn(thread.id, "hello")

            fake.script("responses", Reply(text="a summary, but no compaction item"))
            bad = app.compact_thread(thread.id, timeout=60)
            assert bad.status == "failed" and bad.error_message is not None
            assert "expected exactly one compaction output item" in bad.error_message

            item = {"id": "cmp_1", "type": "compaction", "encrypted_content": "ENC-OPAQUE-1"}
            fake.script("responses", Reply(output_items=[item]))
            good = app.compact_thread(thread.id, timeout=60)
            assert good.ok, good
            trigger = fake.requests_to("responses")[-1].body["input"][-1]
            assert trigger == {"type": "compaction_trigger"}

            fake.script("responses", Reply(text="after"))
            assert app.run_turn(thread.id, "again").text == "after"
        inputs = fake.requests_to("responses")[-1].body["input"]
        assert item in inputs
        assert not any(FIRST_ANSWER in json.dumps(i) for i in inputs)


class KeepLastUserTurn(ContextEngine):
    """A stand-in local engine for the fallback path: keeps the last user turn."""

    name = "keep-last-user-turn"

    def compress(self, request: CompressionRequest) -> CompressionResult:
        rows = request.messages
        start = max(i for i, r in enumerate(rows) if r.message.role == "user")
        kept = [NewMessage(message=r.message, origin_id=r.id) for r in rows[start:]]
        return CompressionResult(status="compressed", engine=self.name, messages=kept)


class LocalEnginePlugin:
    @hookimpl
    def register_context_engines(self, register: Any) -> None:
        register(KeepLastUserTurn())


@pytest.mark.codex
def test_host_compacts_through_codex_and_falls_back_to_local(
    codex_bin: Path, fake: FakeOpenAIServer, tmp_path: Path, hermes_factory: Callable[..., Hermes]
) -> None:
    import hermes_plugin_codex_compaction
    import hermes_plugin_sqlite_store.plugin
    import hermes_plugin_tiktoken_counter
    from hermes_core.config import settings_from

    launch = launch_settings(tmp_path, codex_bin)
    with CodexAppServer(launch, runtime=runtime_for(fake)) as app:
        thread = app.start_thread(cwd=str(tmp_path))
        fake.script("responses", Reply(text=FIRST_ANSWER))
        app.run_turn(thread.id, "hello there")
    codex_settings = {
        "codex_home": str(launch.codex_home),
        "home": str(launch.home),
        "binary": str(codex_bin),
        "env": {"HERMES_CODEX_API_KEY": API_KEY},
        "timeout_s": 60,
    }
    settings = settings_from(
        {
            "plugins": {"autoload": False},
            "session": {"path": str(tmp_path / "sessions.db")},
            "memory": {"home": str(tmp_path / "memory")},
            "compression": {"engine": KeepLastUserTurn.name},
            "compaction": {"backend": "codex", "codex": codex_settings},
        }
    )
    plugins = (
        hermes_plugin_sqlite_store.plugin,
        hermes_plugin_tiktoken_counter,
        hermes_plugin_codex_compaction,
        LocalEnginePlugin(),
    )
    host = hermes_factory(*plugins, settings=settings, defaults=())
    sess = host.new_session(routing={"runtime": "codex", "codex_thread_id": thread.id})
    with sess.turn() as turn:
        turn.prepare("hello there")
        turn.record_response({"role": "assistant", "content": FIRST_ANSWER})
        turn.commit()

    fake.script("responses", Reply(text=SUMMARY))
    done = sess.compress()
    assert (done.status, done.backend, done.engine) == ("compressed", "codex", "codex")
    (marker,) = sess.active_messages()
    assert marker.message.kind == "compaction"
    assert sess.record.routing["codex_thread_id"] == thread.id
    assert sess.record.routing["codex_compactions"] == 1
    (event,) = host.store().compaction_events(sess.id)
    assert event.backend == "codex"
    (hit,) = sess.search(FIRST_ANSWER)
    assert hit.compacted and not hit.active

    with sess.turn() as turn:
        turn.prepare("more")
        turn.record_response({"role": "assistant", "content": "second answer"})
        turn.commit()
    fake.script("responses", ErrorReply(status=500))
    fallback = sess.compress()
    assert (fallback.backend, fallback.engine) == ("local", KeepLastUserTurn.name)
    assert any("compaction backend 'codex' failed" in note for note in fallback.notes)
    assert thread.id in " ".join(fallback.notes)
    assert sess.record.routing["codex_compactions"] == 1


# --------------------------------------------------------------------------- binary missing


def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-codex"
    with pytest.raises(CodexBinaryNotFoundError, match="no-such-codex does not exist"):
        CodexAppServer(launch_settings(tmp_path, missing)).start()
    with pytest.raises(CodexBinaryNotFoundError, match=f"{BINARY_ENV_VAR}="):
        find_codex_binary({BINARY_ENV_VAR: str(missing), "PATH": ""})


def test_binary_that_cannot_execute_is_a_clear_error(tmp_path: Path) -> None:
    not_exec = tmp_path / "codex"
    not_exec.write_text("#!/bin/sh\n")
    with pytest.raises(CodexBinaryNotFoundError, match="is not executable"):
        CodexAppServer(launch_settings(tmp_path, not_exec)).start()


def test_backend_without_codex_home_is_a_config_error() -> None:
    sess = session({"codex_thread_id": str(uuid.uuid4())})
    backend = CodexCompactionBackend()
    with pytest.raises(ConfigError, match=r"compaction\.codex\.codex_home is required"):
        backend.compact(ProviderCompactionRequest(session=sess, messages=[], settings={}))
    with pytest.raises(ConfigError, match=r"compaction\.codex\.timeout_s"):
        backend.eligible(sess, "m", {"timeout_s": -1})


# --------------------------------------------------------------------------- stand-in codex

STAND_IN = r"""
import json, os, sys, time

MODE = os.environ["FAKE_CODEX_MODE"]
THREAD = "01a228b2-0000-7000-8000-000000000001"


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def garbage(text):
    if MODE == "garbage":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def turn(turn_id, status="inProgress", items=()):
    return {"id": turn_id, "items": list(items), "status": status, "error": None}


for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        if MODE == "slow_start":
            time.sleep(1.5)
        garbage("this is not json")
        garbage("[1, 2, 3]")
        garbage('{"neither": "id nor method"}')
        send({"id": mid, "result": {"userAgent": "stand-in/0"}})
    elif method == "thread/start":
        send({"id": mid, "result": {"thread": {"id": THREAD, "modelProvider": "x"}}})
    elif method == "turn/start":
        if MODE == "silent":
            continue
        send({"id": mid, "result": {"turn": turn("t1")}})
        send({"method": "turn/started", "params": {"threadId": THREAD, "turn": turn("t1")}})
        if MODE == "crash":
            sys.stderr.write("fatal: simulated crash mid-turn\n")
            sys.stderr.flush()
            os._exit(3)
        garbage("{broken json")
        reply = "hi"
        if MODE == "server_request":
            send({"id": 99, "method": "item/commandExecution/requestApproval",
                  "params": {"threadId": THREAD, "turnId": "t1"}})
            answer = json.loads(sys.stdin.readline())
            reply = "client said: " + answer["error"]["message"]
        item = {"type": "agentMessage", "id": "m1", "text": reply}
        send({"method": "item/completed",
              "params": {"threadId": THREAD, "turnId": "t1", "item": item}})
        send({"method": "turn/completed",
              "params": {"threadId": THREAD, "turn": turn("t1", "completed", [item])}})
    elif method == "thread/compact/start":
        send({"id": mid, "result": {}})
        if MODE == "crash":
            os._exit(4)
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    script = tmp_path / "codex"
    script.write_text(f"#!{sys.executable}\n{STAND_IN}")
    script.chmod(0o755)
    return script


def stand_in_client(tmp_path: Path, script: Path, mode: str, **kw: Any) -> CodexAppServer:
    settings = launch_settings(tmp_path, script, **kw)
    settings.env["FAKE_CODEX_MODE"] = mode
    return CodexAppServer(settings)


def test_malformed_lines_are_logged_and_skipped(
    tmp_path: Path, stand_in: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="hermes_plugin_codex_compaction.client"),
        stand_in_client(tmp_path, stand_in, "garbage") as client,
    ):
        thread = client.start_thread()
        outcome = client.run_turn(thread.id, "hello", timeout=10)
        assert outcome.status == "completed" and outcome.text == "hi"
        assert client.malformed_lines == [
            "this is not json",
            "[1, 2, 3]",
            '{"neither": "id nor method"}',
            "{broken json",
        ]
    logged = [r.getMessage() for r in caplog.records]
    assert any("not JSON" in m and "this is not json" in m for m in logged)
    assert any("a JSON list, not an object" in m for m in logged)
    assert any("neither 'id' nor 'method'" in m for m in logged)


def test_crash_mid_turn_is_a_clear_error(tmp_path: Path, stand_in: Path) -> None:
    with stand_in_client(tmp_path, stand_in, "crash") as client:
        thread = client.start_thread()
        with pytest.raises(CodexProcessExitedError) as info:
            client.run_turn(thread.id, "hello", timeout=10)
        assert info.value.returncode == 3
        assert "simulated crash mid-turn" in info.value.stderr_tail
        assert f"during the turn on thread {thread.id}" in str(info.value)
        assert not client.alive
        with pytest.raises(CodexProcessExitedError, match="before 'thread/start' was sent"):
            client.start_thread()


def test_crash_during_compaction_is_a_clear_error(tmp_path: Path, stand_in: Path) -> None:
    with stand_in_client(tmp_path, stand_in, "crash") as client:
        thread = client.start_thread()
        with pytest.raises(CodexProcessExitedError, match="during the compaction") as info:
            client.compact_thread(thread.id, timeout=10)
        assert info.value.returncode == 4


def test_no_reply_times_out(tmp_path: Path, stand_in: Path) -> None:
    with stand_in_client(tmp_path, stand_in, "silent", request_timeout_s=0.5) as client:
        thread = client.start_thread()
        started = time.monotonic()
        with pytest.raises(CodexTimeoutError, match=r"no reply to 'turn/start' within 0.5s"):
            client.run_turn(thread.id, "hello", timeout=0.5)
        assert time.monotonic() - started < 5
        assert client.alive


def test_a_slow_start_waits_for_start_timeout_not_request_timeout(
    tmp_path: Path, stand_in: Path
) -> None:
    # the stand-in answers initialize after 1.5 s: longer than a request may wait
    waits = {"request_timeout_s": 0.5, "start_timeout_s": 10.0}
    with stand_in_client(tmp_path, stand_in, "slow_start", **waits) as client:
        assert client.initialize_result is not None
        assert client.start_thread().id


def test_a_start_past_start_timeout_is_a_clear_error(tmp_path: Path, stand_in: Path) -> None:
    client = stand_in_client(tmp_path, stand_in, "slow_start", start_timeout_s=0.3)
    with pytest.raises(CodexTimeoutError, match=r"no reply to 'initialize' within 0.3s"):
        client.start()
    assert not client.alive  # the half-started process is closed


def test_backend_passes_start_timeout_to_the_launch() -> None:
    cfg = CodexBackendSettings.parse({"codex_home": "/tmp/x", "start_timeout_s": 7})
    assert cfg.launch().start_timeout_s == 7
    assert CodexBackendSettings.parse({"codex_home": "/tmp/x"}).launch().start_timeout_s == 120
    with pytest.raises(ConfigError, match=r"compaction\.codex\.start_timeout_s"):
        CodexBackendSettings.parse({"start_timeout_s": 0})
    launch = CodexLaunchSettings(codex_home=Path("/tmp/x"))
    assert (launch.request_timeout_s, launch.start_timeout_s) == (30, 120)


def test_server_requests_are_declined(tmp_path: Path, stand_in: Path) -> None:
    with stand_in_client(tmp_path, stand_in, "server_request") as client:
        thread = client.start_thread()
        outcome = client.run_turn(thread.id, "hello", timeout=10)
    assert outcome.text == (
        "client said: hermes-core does not handle 'item/commandExecution/requestApproval'"
    )


def test_process_that_exits_at_start_is_a_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "codex"
    script.write_text("#!/bin/sh\necho 'error: bad config' >&2\nexit 2\n")
    script.chmod(0o755)
    with pytest.raises(CodexProcessExitedError) as info:
        CodexAppServer(launch_settings(tmp_path, script)).start()
    assert info.value.returncode == 2 and "bad config" in info.value.stderr_tail


# --------------------------------------------------------------------------- backend, config


@pytest.mark.parametrize(
    ("routing", "settings", "expected"),
    [
        ({"codex_thread_id": "t-1"}, {}, True),
        ({"runtime": "codex", "codex_thread_id": "t-1"}, {}, True),
        ({"runtime": "codex", "thread_id": "t-1"}, {}, True),
        ({"codex_thread_id": "t-1"}, {"enabled": False}, False),
        ({"runtime": "openai", "codex_thread_id": "t-1"}, {}, False),
        ({"runtime": "codex"}, {}, False),
        ({"codex_thread_id": "  "}, {}, False),
        ({"codex_thread_id": 7}, {}, False),
        ({}, {}, False),
    ],
)
def test_eligibility(routing: dict[str, Any], settings: dict[str, Any], expected: bool) -> None:
    sess = session(routing)
    assert CodexCompactionBackend().eligible(sess, "gpt-5.5", settings) is expected
    assert (codex_thread_id(sess) is not None) is (expected or settings.get("enabled") is False)


def test_backend_refuses_session_without_thread() -> None:
    with pytest.raises(CodexCompactionFailed, match=r"no Codex thread id"):
        CodexCompactionBackend().compact(
            ProviderCompactionRequest(session=session({}), messages=[], settings={})
        )


def test_plugin_registers_the_codex_backend() -> None:
    registered: list[Any] = []
    register_compaction_backends(register=registered.append, settings=None)
    assert [type(b) for b in registered] == [CodexCompactionBackend]
    assert registered[0].name == "codex"


def test_runtime_config_toml() -> None:
    cfg = CodexRuntimeConfig(
        provider=CodexProvider(base_url="http://127.0.0.1:9/v1", stream_idle_timeout_ms=5000),
        extra={"model_reasoning_effort": "low"},
    )
    assert tomllib.loads(cfg.to_toml()) == {
        "model": "gpt-5.5",
        "model_provider": "hermes",
        "approval_policy": "never",
        "sandbox_mode": "read-only",
        "model_reasoning_effort": "low",
        "model_providers": {
            "hermes": {
                "name": "hermes",
                "base_url": "http://127.0.0.1:9/v1",
                "env_key": "HERMES_CODEX_API_KEY",
                "wire_api": "responses",
                "request_max_retries": 0,
                "stream_max_retries": 0,
                "stream_idle_timeout_ms": 5000,
            }
        },
        "features": {"plugins": False, "unbounded_connection_retries": False},
    }
    with pytest.raises(ValueError, match="provider id"):
        CodexProvider(id="bad id", base_url="http://x")


def test_every_launch_field_of_the_settings_reaches_the_launch() -> None:
    # [compaction.codex] and the launch share their fields' one definition
    # (CodexProcessFields): a field added there cannot be left out of launch()
    values = {
        "binary": "/opt/codex/bin/codex",
        "home": "/tmp/home",
        "cwd": "/tmp/work",
        "env": {"RUST_LOG": "warn"},
        "config_overrides": ["model_reasoning_effort=low"],
        "start_timeout_s": 9.5,
    }
    assert set(values) == set(CodexProcessFields.model_fields)
    launch = CodexBackendSettings.parse({"codex_home": "/tmp/ch", **values}).launch()
    assert launch.codex_home == Path("/tmp/ch")
    for key, value in values.items():
        got = getattr(launch, key)
        assert (str(got) if isinstance(got, Path) else got) == value, key
