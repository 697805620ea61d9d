"""Memory-provider isolation against hostile providers (issue #16 item 8).

A provider raising ``SystemExit`` must not end the turn; a recall string or
prompt block with a lone surrogate must not make turns or ``new_session``
fail; one breaker counts timeouts and exceptions alike and logs once per
state change; syncs dropped at shutdown are counted in the log.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import hermes_core.memory.isolation as memory_module
from hermes_core.config import MemorySettings, settings_from
from hermes_core.memory import MemoryManager, clean_text
from hermes_core.redaction import Redactor
from hermes_hookspecs import MemoryProvider, MemorySession, Message, TurnRecord, hookimpl
from hermes_plugin_redaction import default_rules
from tests.hosts import HostFactory

LONE = "\ud800"


def _manager(tmp_path: Path, external: MemoryProvider, **update: Any) -> MemoryManager:
    settings = MemorySettings(home=str(tmp_path / "home"), prefetch_timeout=0.3, call_timeout=1.0)
    return MemoryManager(
        MemoryProvider(), external, settings.model_copy(update=update), Redactor(default_rules())
    )


def _turn(n: int) -> TurnRecord:
    return TurnRecord(session_id="s", turn_id=f"t{n}", user_text=f"u{n}", assistant_text="a")


class Exiting(MemoryProvider):
    """Calls ``sys.exit`` (SystemExit) from every method a turn uses."""

    name = "exiting"

    def prefetch(self, query: str, session_id: str) -> str | None:
        raise SystemExit(3)

    def system_prompt_block(self, session_id: str) -> str | None:
        raise SystemExit("bye")

    def sync_turn(self, turn: TurnRecord) -> None:
        raise SystemExit(4)

    def on_pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
        raise GeneratorExit()

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {"name": "exit_tool", "parameters": {"type": "object"}},
            }
        ]

    def handle_tool_call(self, name: str, arguments: dict[str, Any], session_id: str) -> str:
        raise SystemExit(5)


def test_system_exit_from_a_provider_does_not_end_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_module, "BREAKER_FAILURES", 100)  # reach every method
    manager = _manager(tmp_path, Exiting())
    try:
        assert manager.external is not None
        answer = manager.handle_tool_call("exit_tool", {}, "s")
        assert answer is not None and answer.startswith("Error: memory tool 'exit_tool'")
        assert manager.prefetch("q", "s") is None
        assert manager.prompt_blocks("s") == []
        manager.sync_turn(_turn(1))
        assert manager.flush(5.0)
        assert manager.on_pre_compress("s", []) == []
        manager.sync_turn(_turn(2))  # the queue still runs after a SystemExit in a job
        assert manager.flush(5.0)
    finally:
        manager.shutdown(timeout=2.0)


class Surrogates(MemoryProvider):
    """Returns text with a lone surrogate everywhere (as a broken decoder would)."""

    name = "surrogates"

    def system_prompt_block(self, session_id: str) -> str | None:
        return f"user prefers {LONE} tabs"

    def prefetch(self, query: str, session_id: str) -> str | None:
        return f"recall {LONE} here \ud83d\ude00"

    def on_pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
        return [f"insight {LONE}"]

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": "sur_tool",
                    "description": f"d{LONE}",
                    "parameters": {"type": "object"},
                },
            }
        ]

    def handle_tool_call(self, name: str, arguments: dict[str, Any], session_id: str) -> str:
        return f"found {LONE}"


def test_lone_surrogates_are_replaced_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = _manager(tmp_path, Surrogates())
    try:
        with caplog.at_level(logging.INFO, logger="hermes_core.memory"):
            for _ in range(3):
                recall = manager.prefetch("q", "s")
                assert recall == "recall \ufffd here \U0001f600"
                recall.encode("utf-8")
            (block,) = manager.prompt_blocks("s")
            assert block.text == "user prefers \ufffd tabs"
            assert manager.on_pre_compress("s", []) == ["insight \ufffd"]
            (schema,) = manager.tool_schemas()
            json.dumps(schema).encode("utf-8")
            assert manager.handle_tool_call("sur_tool", {}, "s") == "found \ufffd"
        lines = [r.getMessage() for r in caplog.records if "lone surrogate" in r.getMessage()]
        assert len([line for line in lines if ": prefetch returned" in line]) == 1  # not per turn
        assert len(lines) == 5  # prefetch, block, insights, schemas, tool result
    finally:
        manager.shutdown(timeout=2.0)


def test_clean_text_keeps_valid_text_itself() -> None:
    text = "plain text, 日本語, 🎉"
    assert clean_text(text) is text
    assert clean_text("a\udc80b") == "a\ufffdb"


class SurrogatePlugin:
    @hookimpl
    def register_memory_providers(self, register: Any, settings: Any) -> None:
        register(Surrogates())


def test_a_surrogate_prompt_block_and_recall_do_not_break_sessions(
    tmp_path: Path, make_host: HostFactory
) -> None:
    settings = settings_from(
        {
            "session": {"path": str(tmp_path / "s.db")},
            "memory": {"home": str(tmp_path / "mem"), "provider": "surrogates"},
        }
    )
    with make_host.like(settings, SurrogatePlugin()) as hermes:
        session = hermes.new_session(cwd=str(tmp_path))  # the prompt embeds the block
        assert "user prefers \ufffd tabs" in session.prompt.text
        for i in range(2):
            with session.turn() as turn:
                request = turn.prepare(f"question {i}")
                json.dumps(request.chat_body()).encode("utf-8")
                turn.record_response({"role": "assistant", "content": "ok"})
                turn.commit()
        reopened = hermes.open_session(session.id)
        assert reopened.prompt.text == session.prompt.text


class Failing(MemoryProvider):
    """Raises on prefetch until ``healthy`` is set, then answers."""

    name = "failing"

    def __init__(self) -> None:
        self.healthy = threading.Event()
        self.calls = 0

    def prefetch(self, query: str, session_id: str) -> str | None:
        self.calls += 1
        if not self.healthy.is_set():
            raise ConnectionError("vendor down")
        return "back"


def test_one_breaker_for_errors_logs_state_changes_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_module, "BREAKER_SECONDS", 0.3)
    provider = Failing()
    manager = _manager(tmp_path, provider)
    try:
        with caplog.at_level(logging.INFO, logger="hermes_core.memory"):
            for _ in range(20):  # twenty turns against a dead vendor
                assert manager.prefetch("q", "s") is None
            assert provider.calls == memory_module.BREAKER_FAILURES  # then skipped
            time.sleep(0.35)
            provider.healthy.set()
            assert manager.prefetch("q", "s") == "back"  # half-open try succeeds
            assert manager.prefetch("q", "s") == "back"
        lines = [r.getMessage() for r in caplog.records if "'failing'" in r.getMessage()]
        assert len(lines) == 3, lines
        assert "prefetch raised ConnectionError: vendor down" in lines[0]
        assert "failed 3 times in a row" in lines[1]
        assert "answers again" in lines[2]
    finally:
        manager.shutdown(timeout=2.0)


def test_timeouts_and_errors_share_the_breaker(tmp_path: Path) -> None:
    class Mixed(MemoryProvider):
        name = "mixed"

        def __init__(self) -> None:
            self.calls = 0
            self.release = threading.Event()

        def prefetch(self, query: str, session_id: str) -> str | None:
            self.calls += 1
            if self.calls % 2:
                raise RuntimeError("odd call")
            self.release.wait(5)
            return None

    mixed = Mixed()
    manager = _manager(tmp_path, mixed)
    try:
        for _ in range(6):
            manager.prefetch("q", "s")
        assert mixed.calls == 3  # error, timeout, error: suspended after three failures
    finally:
        mixed.release.set()
        manager.shutdown(timeout=2.0)


class SlowSync(MemoryProvider):
    name = "slow_sync"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.synced: list[str] = []

    def sync_turn(self, turn: TurnRecord) -> None:
        self.release.wait(5)
        self.synced.append(turn.turn_id)


def test_dropped_syncs_are_counted_in_the_log_at_shutdown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    slow = SlowSync()
    manager = _manager(tmp_path, slow, call_timeout=0.2)
    manager.initialize(MemorySession(session_id="s"))
    for n in range(5):
        manager.sync_turn(_turn(n))
    time.sleep(0.05)  # the first one is running, four are queued behind it
    with caplog.at_level(logging.WARNING, logger="hermes_core.memory"):
        manager.shutdown(timeout=0.1)
        manager.sync_turn(_turn(9))  # after shutdown: dropped too
    slow.release.set()
    assert manager.dropped_syncs == 5
    assert "4 sync_turn call(s) dropped" in caplog.text
    time.sleep(0.2)
    assert "t1" not in slow.synced  # queued work did not run after shutdown
