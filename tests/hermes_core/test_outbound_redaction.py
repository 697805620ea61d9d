"""Secrets stay out of every auxiliary service and of the logs (issue #16).

A canary of 26 credential formats is planted in a real session (SQLite store
on disk); the session is compressed with the ``openai`` summarizer against the
loopback fake server, and the memory tool and an external memory provider are
used. None of the secrets may reach the fake's recorded request bodies, a
memory provider, ``MEMORY.md``, or a hermes-core log record.
"""

from __future__ import annotations

import json
import logging
import weakref
from pathlib import Path
from typing import Any

import pytest

from hermes_core.config import settings_from
from hermes_core.host import Hermes
from hermes_core.redaction import RedactingLogFilter, Redactor, redact_summary_request
from hermes_core.testing.canary import CANARIES, canary_text, leaked
from hermes_core.testing.fake_openai import FakeOpenAIServer
from hermes_hookspecs import (
    HandoffFact,
    HandoffSummary,
    MemoryProvider,
    Message,
    RedactionRule,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    SummarySection,
    TurnRecord,
    hookimpl,
)
from hermes_plugin_redaction import redaction_rules
from tests.hosts import HostFactory


class Recorder(MemoryProvider):
    """An external memory provider that keeps everything it is handed."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def prefetch(self, query: str, session_id: str) -> str | None:
        self.seen.append(query)
        return None

    def sync_turn(self, turn: TurnRecord) -> None:
        self.seen.append(turn.model_dump_json())

    def on_pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
        self.seen.extend(message.model_dump_json() for message in messages)
        return []


class RecorderPlugin:
    def __init__(self, provider: Recorder) -> None:
        self.provider = provider

    @hookimpl
    def register_memory_providers(self, register: Any, settings: Any) -> None:
        register(self.provider)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _host(
    tmp_path: Path, fake: FakeOpenAIServer, recorder: Recorder, make_host: HostFactory
) -> Hermes:
    settings = settings_from(
        {
            "session": {"path": str(tmp_path / "s.db")},
            "memory": {"home": str(tmp_path / "mem"), "provider": "recorder"},
            "model": {"name": "gpt-4o-mini", "context_length": 20_000},
            "compression": {"tail": "legacy"},
            "summarizer": {"openai": {"base_url": fake.base_url, "model": "aux-model"}},
        }
    )
    return make_host.like(settings, RecorderPlugin(recorder))


def test_canary_reaches_no_summarizer_memory_provider_or_memory_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make_host: HostFactory
) -> None:
    recorder = Recorder()
    with FakeOpenAIServer() as fake:
        hermes = _host(tmp_path, fake, recorder, make_host)
        assert hermes.summarizer_name() == "openai"
        session = hermes.new_session(cwd=str(tmp_path))
        planted = canary_text()
        for i in range(10):
            with session.turn() as turn:
                turn.prepare(f"question {i}: here is my config\n{planted}\n" + "more " * 150)
                turn.record_response(
                    {"role": "assistant", "content": f"answer {i}: I saw {planted}"}
                )
                turn.commit()
        memory = hermes.memory()
        assert memory is not None
        for canary in CANARIES:
            memory.handle_tool_call(
                "memory",
                {"action": "add", "target": "memory", "content": f"note: {canary.text}"},
                session.id,
            )
        with caplog.at_level(logging.DEBUG):
            outcome = session.compress()
        assert outcome.status == "compressed", outcome.reason
        memory.flush(10)
        bodies = [r.body for r in fake.requests_to("chat.completions")]
        assert bodies, "the openai summarizer was not called"
        sent = "\n".join(s for body in bodies for s in _strings(body))
        assert "[REDACTED:" in sent  # the planted text did go out, scrubbed
        assert leaked(sent) == []
        raw = "\n".join(r.raw.decode("utf-8", "replace") for r in fake.requests)
        assert leaked(raw) == []
        assert recorder.seen and leaked("\n".join(recorder.seen)) == []
        memory_file = (tmp_path / "mem" / "MEMORY.md").read_text(encoding="utf-8")
        assert "[REDACTED:" in memory_file and leaked(memory_file) == []
        assert leaked("\n".join(r.getMessage() for r in caplog.records)) == []


class EchoSummarizer(Summarizer):
    """A third-party summarizer that copies its whole input into the summary."""

    name = "echo"
    context_length = 50_000

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        return SummaryResult(
            summary=HandoffSummary(goal=request.model_dump_json()), summarizer=self.name
        )


def test_every_summarizer_the_host_hands_out_gets_redacted_input(
    tmp_path: Path, make_host: HostFactory
) -> None:
    echo = EchoSummarizer()

    class EchoPlugin:
        @hookimpl
        def register_summarizers(self, register: Any, settings: Any) -> None:
            register(echo)

    settings = settings_from(
        {"session": {"path": str(tmp_path / "s.db")}, "memory": {"home": str(tmp_path / "m")}}
    )
    with make_host.like(settings, EchoPlugin()) as hermes:
        wrapped = hermes.summarizer("echo")
        assert wrapped.name == "echo" and wrapped.context_length == 50_000
        assert hermes.summarizer("deterministic").name == "deterministic"
        planted = canary_text()
        request = SummaryRequest(
            session_id="s",
            messages=[Message(role="user", content=planted)],
            previous_summary=HandoffSummary(
                critical_context=planted,
                facts=[HandoffFact(kind="error", text=planted, message_id=9)],
                extra=[SummarySection(title="Notes", body=planted)],
            ),
            insights=[planted],
            focus=planted,
            prefix_messages=[Message(role="user", content=planted)],
            prefix_tools=[{"type": "function", "function": {"name": "x", "description": planted}}],
            facts=[HandoffFact(kind="request", text=planted, message_id=3)],
        )
        result = wrapped.summarize(request)
        assert leaked(echo.requests[0].model_dump_json()) == []
        assert leaked(result.summary.goal) == []
        assert request.messages[0].content == planted  # the caller's request is not modified
        assert echo.requests[0].facts is not None
        assert echo.requests[0].facts[0].message_id == 3 and echo.requests[0].session_id == "s"
        previous = echo.requests[0].previous_summary
        assert previous is not None and previous.facts[0].message_id == 9


def test_a_field_added_to_summary_requests_later_is_redacted_by_default() -> None:
    class LaterRequest(SummaryRequest):
        notes: str = ""  # a text field a future version might add

    redactor = Redactor(redaction_rules())
    planted = canary_text()
    out = redact_summary_request(redactor, LaterRequest(session_id="s", messages=[], notes=planted))
    assert isinstance(out, LaterRequest) and leaked(out.notes) == []


def test_a_request_redacts_each_distinct_text_once_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    redactor = Redactor(redaction_rules())
    planted = canary_text()
    facts = [
        HandoffFact(kind="command", text=f"cat .env → {planted}", message_id=i) for i in range(5)
    ]
    request = SummaryRequest(
        session_id="s", messages=[Message(role="user", content=planted)] * 3, facts=facts
    )
    expected = redact_summary_request(redactor, request)
    seen: list[str] = []
    plain = Redactor.redact

    def counting(self: Redactor, text: str) -> str:
        seen.append(text)
        return plain(self, text)

    monkeypatch.setattr(Redactor, "redact", counting)
    out = redact_summary_request(redactor, request)
    assert out == expected and leaked(out.model_dump_json()) == []
    assert len(seen) == len(set(seen))  # the planted text, the fact text, "command": once each

    class Stricter(Redactor):  # redacts more than its rules: asked for every text as it is
        def redact(self, text: str) -> str:
            return plain(self, text).replace("cat .env", "[a command]")

    stricter = redact_summary_request(Stricter(redaction_rules()), request)
    assert stricter.facts is not None and stricter.facts[0].text.startswith("[a command] → ")


def test_log_records_of_hermes_loggers_are_redacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make_host: HostFactory
) -> None:
    settings = settings_from(
        {"session": {"path": str(tmp_path / "s.db")}, "memory": {"home": str(tmp_path / "m")}}
    )
    planted = canary_text()
    with make_host.like(settings), caplog.at_level(logging.INFO):
        names = ("hermes_core.memory", "hermes_core.runtime", "hermes_plugin_sqlite_store")
        # a logger made after the host (a module imported later) is covered too
        for name in (*names, "hermes_core.made_after_the_host"):
            logging.getLogger(name).warning("provider said %s", planted)
        try:
            raise ValueError(planted)
        except ValueError:
            logging.getLogger("hermes_core.compression").exception("failed")
    assert len(caplog.records) == 5
    assert leaked(caplog.text) == []
    assert "Traceback" in caplog.text and "[REDACTED:" in caplog.text


class TenantRule:
    """A plugin contributing one host's own rule (a tenant's internal token format)."""

    @hookimpl
    def redaction_rules(self) -> list[RedactionRule]:
        return [RedactionRule(name="tenant_token", pattern=r"tnt-[0-9a-f]{8}")]


def test_each_live_hosts_rules_redact_the_shared_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make_host: HostFactory
) -> None:
    """Two hosts in one process (a gateway serving two tenants): the loggers are the
    process's, so every live host's rules apply to them; a host closed takes its
    rules along. The second host used to replace the first one's rules."""
    tenant = make_host(("tenant", TenantRule()), folder=tmp_path / "a")
    other = make_host(folder=tmp_path / "b")
    log = logging.getLogger("hermes_core.runtime")
    with caplog.at_level(logging.INFO):
        log.warning("tenant token tnt-0badc0de in a provider error")
        log.warning("and a key sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6", stack_info=True)
    assert "tnt-0badc0de" not in caplog.text and "[REDACTED]" in caplog.text
    assert "sk-proj-A1b2" not in caplog.text
    tenant.close()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        log.warning("after close: tnt-0badc0de")
    assert "tnt-0badc0de" in caplog.text  # that host's rule went with it
    other.close()


def test_a_host_dropped_without_close_takes_its_rules_from_the_logs(tmp_path: Path) -> None:
    import gc

    from hermes_core.redaction import live_redactors

    host = Hermes(
        settings_from(
            {"session": {"path": str(tmp_path / "s.db")}, "memory": {"home": str(tmp_path / "m")}}
        )
    )
    rules = weakref.ref(host.redactor())
    assert any(r is rules() for r in live_redactors())
    del host
    gc.collect()
    assert rules() is None  # nothing but the host held its rules: the filter holds them weakly
    assert all(r is not None for r in live_redactors())


def test_a_factory_wrapped_after_the_first_host_is_not_chained_twice(
    tmp_path: Path, make_host: HostFactory
) -> None:
    """A library that wraps the log-record factory after a host must not become the
    factory ours calls: it calls ours, and every record would recurse."""
    first = make_host(folder=tmp_path / "a")
    inner = logging.getLogRecordFactory()

    def wrapper(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return inner(*args, **kwargs)

    logging.setLogRecordFactory(wrapper)
    try:
        second = make_host(folder=tmp_path / "b")
        logging.getLogger("hermes_core.runtime").warning("still logs")
        second.close()
    finally:
        logging.setLogRecordFactory(inner)
        first.close()


def test_log_filter_is_one_shared_filter_and_keeps_records() -> None:
    redactor = Redactor(redaction_rules())
    record = logging.LogRecord("hermes_core.x", logging.INFO, __file__, 1, "k=%s", ("x",), None)
    record.args = (json.dumps({"password": "hunter2"}),)
    assert RedactingLogFilter(redactor).filter(record) is True
    assert "hunter2" not in record.getMessage() and "[REDACTED:password]" in record.getMessage()


def test_an_in_process_summarizer_is_handed_out_as_it_is(
    tmp_path: Path, make_host: HostFactory
) -> None:
    from hermes_core.redaction import RedactingSummarizer
    from hermes_plugin_summarizer_deterministic import DeterministicSummarizer

    settings = settings_from(
        {"session": {"path": str(tmp_path / "s.db")}, "memory": {"home": str(tmp_path / "m")}}
    )
    with make_host.like(settings) as hermes:
        offline = hermes.summarizer("deterministic")
        assert isinstance(offline, DeterministicSummarizer) and offline.in_process
        assert isinstance(hermes.summarizer("openai"), RedactingSummarizer)
