"""The runtime's lifecycle events reach the hooks and the memory providers through one path."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from hermes_core.host import Hermes
from hermes_core.runtime import RECALL_HEADER
from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    ContextEngine,
    MemoryProvider,
    MemorySession,
    NewMessage,
    TurnRecord,
    hookimpl,
)
from tests.hosts import HostFactory


class KeepLast(ContextEngine):
    name = "keep-last-events"

    def compress(self, request: CompressionRequest) -> CompressionResult:
        rows = request.messages
        start = max(i for i, r in enumerate(rows) if r.message.role == "user")
        kept = [NewMessage(message=r.message, origin_id=r.id) for r in rows[start:]]
        return CompressionResult(status="compressed", engine=self.name, messages=kept)


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def add(self, line: str) -> None:
        with self.lock:
            self.lines.append(line)


class Listener:
    """Hook implementations of every lifecycle event the runtime emits."""

    def __init__(self, log: Log) -> None:
        self.log = log

    @hookimpl
    def register_context_engines(self, register: Any) -> None:
        register(KeepLast())

    @hookimpl
    def register_memory_providers(self, register: Any) -> None:
        register(Provider(self.log))

    @hookimpl
    def on_session_start(self, session: Any, resumed: bool) -> None:
        self.log.add(f"hook start resumed={resumed}")

    @hookimpl
    def on_session_switch(self, old_session_id: str, new_session_id: str, reason: str) -> None:
        self.log.add(f"hook switch {reason}")

    @hookimpl
    def on_session_end(self, session: Any, reason: str) -> None:
        self.log.add(f"hook end {reason}")

    @hookimpl
    def pre_llm_call(self, session: Any, messages: Any, user_message: Any) -> str:
        self.log.add("hook pre_llm_call")
        return "from the hook"

    @hookimpl
    def on_turn_committed(self, session: Any, turn_id: str, messages: Any) -> None:
        self.log.add("hook committed")

    @hookimpl
    def on_pre_compress(self, session_id: str, messages: Any) -> list[str]:
        self.log.add("hook pre_compress")
        return ["hook insight"]

    @hookimpl
    def on_compressed(self, session_id: str, result: Any) -> None:
        self.log.add("hook compressed")


class Provider(MemoryProvider):
    """An external memory provider logging every call into the same log."""

    name = "events-memory"

    def __init__(self, log: Log) -> None:
        self.log = log
        self.synced: list[TurnRecord] = []

    def initialize(self, session: MemorySession) -> None:
        self.log.add("memory initialize")

    def on_session_switch(self, old_session_id: str, new_session_id: str, reason: str) -> None:
        self.log.add(f"memory switch {reason}")

    def prefetch(self, query: str, session_id: str) -> str | None:
        self.log.add("memory prefetch")
        return "from memory"

    def sync_turn(self, turn: TurnRecord) -> None:
        self.synced.append(turn)
        self.log.add("memory sync")

    def on_pre_compress(self, session_id: str, messages: Any) -> list[str]:
        self.log.add("memory pre_compress")
        return ["memory insight"]

    def on_session_end(self, session_id: str, reason: str) -> None:
        self.log.add(f"memory end {reason}")


EVENTS_SECTIONS: dict[str, Any] = {
    "plugins": {"block": ["memory_builtin"]},
    "memory": {"provider": "events-memory"},
    "compression": {"engine": "keep-last-events"},
}


def test_each_event_reaches_the_hooks_then_memory_once(make_host: HostFactory) -> None:
    log = Log()
    with make_host(Listener(log), **EVENTS_SECTIONS) as host:
        session = host.new_session()
        assert log.lines == ["memory initialize", "hook start resumed=False", "memory switch new"]
        log.lines.clear()
        with session.turn() as turn:
            request = turn.prepare("hello")
            turn.record_response({"role": "assistant", "content": "hi"})
            turn.commit()
        memory = host.memory()
        assert memory is not None and memory.flush(5)
        assert log.lines == [
            "hook pre_llm_call",
            "memory prefetch",
            "hook committed",
            "memory sync",
        ]
        # the per-turn context: the hook's text first, then memory's recall
        user = request.messages[-1]["content"]
        assert user.endswith(f"{RECALL_HEADER}\nfrom the hook\n\nfrom memory")
        log.lines.clear()
        session.compress()
        assert log.lines[:2] == ["hook pre_compress", "memory pre_compress"]
        assert log.lines[-3:] == [
            "hook switch compression",
            "memory switch compression",
            "hook compressed",
        ]
        log.lines.clear()
        host.open_session(session.id)
        assert log.lines == ["memory initialize", "hook start resumed=True", "memory switch resume"]
        log.lines.clear()
        session.end("user")
        assert memory.flush(5)
        assert log.lines == ["hook end user", "memory end user"]
        provider = memory.external
        assert isinstance(provider, Provider)
        assert [(t.user_text, t.assistant_text) for t in provider.synced] == [("hello", "hi")]


def test_two_hosts_on_one_plugin_manager_keep_their_memory_apart(
    tmp_path: Path, make_host: HostFactory
) -> None:
    """Each host's memory hears only its own sessions (memory is not a shared plugin)."""
    log = Log()
    with make_host(Listener(log), **EVENTS_SECTIONS) as first:
        (tmp_path / "b").mkdir()
        settings = make_host.settings(tmp_path / "b", **EVENTS_SECTIONS)
        with Hermes(settings, pm=first.pm) as second:
            # both managers exist (each with its own provider, both logging to ``log``)
            assert second.memory() is not None and second.memory() is not first.memory()
            log.lines.clear()
            first.new_session()
            assert [line for line in log.lines if line.startswith("memory")] == [
                "memory initialize",
                "memory switch new",
            ]
