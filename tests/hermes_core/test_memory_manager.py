"""Tests for hermes_core.memory.MemoryManager: isolation, ordering, redaction, selection."""

from __future__ import annotations

import functools
import logging
import random
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest

import hermes_plugin_memory_builtin
import hermes_plugin_redaction
from hermes_core import Hermes
from hermes_core.config import MemorySettings, settings_from
from hermes_core.memory import MemoryManager, tool_schema_problem, turn_record_from_messages
from hermes_core.memory.workers import DaemonPool, PoolClosed, SessionQueues
from hermes_core.redaction import Redactor
from hermes_hookspecs import (
    Layer,
    MemoryProvider,
    MemorySession,
    Message,
    RegistrationError,
    ToolCall,
    ToolFunction,
    TurnRecord,
    UnknownNameError,
    hookimpl,
    specs,
)
from hermes_hookspecs.markers import PROJECT_NAME
from hermes_plugin_memory_builtin import BuiltinMemoryProvider
from hermes_plugin_redaction import default_rules

OPENAI_KEY = "sk-proj-Zt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO"
GITHUB_TOKEN = "ghp_4rT9wQ2zX7cV1bN8mK3jH6gF5dS0aP2oI9uY"


# ---------------------------------------------------------------------------
# real providers with real behaviour (threads, events, sleeps)
# ---------------------------------------------------------------------------


class EchoProvider(MemoryProvider):
    """Answers every call, records what it was handed."""

    def __init__(self, name: str = "echo", recall: str = "echo recall") -> None:
        self.name = name
        self.recall = recall
        self.seen: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def _see(self, method: str, value: Any) -> None:
        with self.lock:
            self.seen.append((method, value))

    def initialize(self, session: MemorySession) -> None:
        self._see("initialize", session.session_id)

    def system_prompt_block(self, session_id: str) -> str | None:
        return f"{self.name} block for {session_id}"

    def prefetch(self, query: str, session_id: str) -> str | None:
        self._see("prefetch", query)
        return self.recall

    def sync_turn(self, turn: TurnRecord) -> None:
        self._see("sync_turn", turn)

    def on_pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
        self._see("on_pre_compress", messages)
        return [f"{self.name} insight"]

    def on_session_switch(self, old_session_id: str, new_session_id: str, reason: str) -> None:
        self._see("on_session_switch", (old_session_id, new_session_id, reason))

    def on_session_end(self, session_id: str, reason: str) -> None:
        self._see("on_session_end", (session_id, reason))

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": f"{self.name}_search",
                    "description": "search",
                    "parameters": {
                        "type": "object",
                        "properties": {"query": {"type": "string"}},
                        "required": ["query"],
                    },
                },
            }
        ]

    def handle_tool_call(self, name: str, arguments: dict[str, Any], session_id: str) -> str:
        self._see("handle_tool_call", (name, arguments))
        return f"{name} found {arguments.get('query')}"

    def shutdown(self) -> None:
        self._see("shutdown", None)


class HangingPrefetch(EchoProvider):
    """``prefetch`` blocks until released (a real hang on a real thread)."""

    def __init__(self) -> None:
        super().__init__("hanger", recall="LATE RESULT")
        self.release = threading.Event()
        self.entered = threading.Event()

    def prefetch(self, query: str, session_id: str) -> str | None:
        self.entered.set()
        self.release.wait()
        return super().prefetch(query, session_id)


class SleepyProvider(EchoProvider):
    """Every method sleeps ``delay`` seconds first."""

    def __init__(self, delay: float) -> None:
        super().__init__("sleepy")
        self.delay = delay

    def _see(self, method: str, value: Any) -> None:
        time.sleep(self.delay)
        super()._see(method, value)


class ExplodingProvider(EchoProvider):
    """Every method raises."""

    def __init__(self) -> None:
        super().__init__("exploder")

    def _see(self, method: str, value: Any) -> None:
        raise RuntimeError(f"boom in {method}")

    def system_prompt_block(self, session_id: str) -> str | None:
        raise RuntimeError("boom in system_prompt_block")

    def tool_schemas(self) -> list[dict[str, Any]]:
        raise RuntimeError("boom in tool_schemas")


@pytest.fixture
def settings(tmp_path: Path) -> MemorySettings:
    return MemorySettings(home=str(tmp_path / "home"), prefetch_timeout=0.3, call_timeout=1.0)


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(default_rules())


@pytest.fixture
def make_manager(
    settings: MemorySettings, redactor: Redactor
) -> Iterator[Callable[..., MemoryManager]]:
    made: list[MemoryManager] = []

    def factory(
        external: MemoryProvider | None = None,
        builtin: MemoryProvider | None = None,
        **overrides: Any,
    ) -> MemoryManager:
        manager = MemoryManager(
            builtin or EchoProvider("builtin", recall="builtin recall"),
            external,
            settings.model_copy(update=overrides),
            redactor,
        )
        made.append(manager)
        return manager

    yield factory
    for manager in made:
        manager.shutdown(timeout=5.0)


def turn(session_id: str, n: int, text: str = "hello") -> TurnRecord:
    return TurnRecord(
        session_id=session_id, turn_id=f"t{n}", user_text=f"{text} {n}", assistant_text="ok"
    )


# ---------------------------------------------------------------------------
# prefetch timeouts
# ---------------------------------------------------------------------------


def test_hanging_prefetch_is_cut_off_and_the_late_result_discarded(
    make_manager: Callable[..., MemoryManager], caplog: pytest.LogCaptureFixture
) -> None:
    hanger = HangingPrefetch()
    manager = make_manager(hanger)
    try:
        started = time.monotonic()
        recall = manager.prefetch("what do you remember?", "s1")
        elapsed = time.monotonic() - started
        assert recall == "builtin recall"
        assert 0.25 <= elapsed < 1.5, elapsed
        assert "'hanger': prefetch exceeded" in caplog.text
        hanger.release.set()  # the late result arrives now...
        time.sleep(0.1)
        hanger.release.clear()
        recall = manager.prefetch("again", "s1")  # ...and never shows up later
        assert recall == "builtin recall"
    finally:
        hanger.release.set()


def test_slow_but_in_time_prefetch_is_used_and_runs_in_parallel(
    make_manager: Callable[..., MemoryManager],
) -> None:
    builtin = SleepyProvider(0.3)
    builtin.name = "builtin"
    external = SleepyProvider(0.3)
    manager = make_manager(external, builtin=builtin, prefetch_timeout=2.0)
    started = time.monotonic()
    recall = manager.prefetch("q", "s")
    elapsed = time.monotonic() - started
    assert recall == "echo recall\n\necho recall"
    assert elapsed < 0.55, f"providers ran one after the other ({elapsed:.2f}s)"


def test_a_provider_hanging_on_every_call_does_not_pile_up_threads(
    make_manager: Callable[..., MemoryManager],
) -> None:
    hanger = HangingPrefetch()
    manager = make_manager(hanger, prefetch_timeout=0.05)
    before = threading.active_count()
    try:
        for _ in range(20):
            assert manager.prefetch("q", "s") == "builtin recall"
        assert threading.active_count() - before <= 5  # bounded pool, not one thread per call
    finally:
        hanger.release.set()


def test_the_manager_survives_a_provider_hanging_everywhere(
    make_manager: Callable[..., MemoryManager],
) -> None:
    class HangsEverywhere(EchoProvider):
        def __init__(self) -> None:
            super().__init__("stuck")
            self.release = threading.Event()

        def _see(self, method: str, value: Any) -> None:
            self.release.wait()

        def system_prompt_block(self, session_id: str) -> str | None:
            self.release.wait()
            return "late block"

        def tool_schemas(self) -> list[dict[str, Any]]:
            self.release.wait()
            return super().tool_schemas()

    stuck = HangsEverywhere()
    manager = make_manager(stuck, call_timeout=0.2, prefetch_timeout=0.2)
    try:
        started = time.monotonic()
        manager.initialize(MemorySession(session_id="s"))
        blocks = manager.prompt_blocks("s")
        assert [b.key for b in blocks] == ["memory:builtin"]
        assert manager.prefetch("q", "s") == "builtin recall"
        assert manager.on_pre_compress("s", []) == ["builtin insight"]
        manager.on_session_switch("s", "s", "compression")
        assert [t["function"]["name"] for t in manager.tool_schemas()] == ["builtin_search"]
        manager.sync_turn(turn("s", 1))
        assert time.monotonic() - started < 3.0
        assert manager.flush(5.0)  # the stuck sync_turn was abandoned after call_timeout
    finally:
        stuck.release.set()


# ---------------------------------------------------------------------------
# exception isolation
# ---------------------------------------------------------------------------


def test_exceptions_are_logged_with_the_provider_name_and_the_turn_goes_on(
    make_manager: Callable[..., MemoryManager], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_core.memory")
    manager = make_manager(ExplodingProvider())
    manager.initialize(MemorySession(session_id="s"))
    assert [b.key for b in manager.prompt_blocks("s")] == ["memory:builtin"]
    assert manager.prefetch("q", "s") == "builtin recall"
    manager.sync_turn(turn("s", 1))
    assert manager.flush(5.0)
    assert manager.on_pre_compress("s", []) == ["builtin insight"]
    manager.on_session_switch("a", "b", "new")
    manager.on_session_end("s", "user")
    assert manager.flush(5.0)
    assert [t["function"]["name"] for t in manager.tool_schemas()] == ["builtin_search"]
    mine = [r for r in caplog.records if "'exploder'" in r.getMessage()]
    # one line per breaker state change: the first failure (with its traceback), the suspension
    assert len(mine) == 2, [r.getMessage() for r in mine]
    assert "'exploder': initialize raised RuntimeError: boom in initialize" in mine[0].getMessage()
    assert mine[0].exc_info is not None
    assert "failed 3 times in a row" in mine[1].getMessage()
    assert "suspended for" in mine[1].getMessage()


def test_a_failing_tool_call_answers_an_error_text(
    make_manager: Callable[..., MemoryManager], caplog: pytest.LogCaptureFixture
) -> None:
    class BadTool(EchoProvider):
        def handle_tool_call(self, name: str, arguments: dict[str, Any], session_id: str) -> str:
            raise ValueError("index corrupted")

    manager = make_manager(BadTool("bad"))
    manager.tool_schemas()
    answer = manager.handle_tool_call("bad_search", {"query": "x"}, "s")
    assert answer == "Error: memory tool 'bad_search' of provider 'bad' failed; see logs."
    assert "index corrupted" in caplog.text


def test_wrong_result_types_are_ignored_and_logged(
    make_manager: Callable[..., MemoryManager], caplog: pytest.LogCaptureFixture
) -> None:
    class WrongTypes(EchoProvider):
        def prefetch(self, query: str, session_id: str) -> Any:
            return {"not": "text"}

        def on_pre_compress(self, session_id: str, messages: list[Message]) -> Any:
            return "a string, not a list"

        def system_prompt_block(self, session_id: str) -> Any:
            return 42

        def tool_schemas(self) -> list[dict[str, Any]]:
            return [{"type": "function", "function": {"name": "has space"}}, {"type": "x"}]

    manager = make_manager(WrongTypes("wrong"))
    assert manager.prefetch("q", "s") == "builtin recall"
    assert manager.on_pre_compress("s", []) == ["builtin insight"]
    assert [b.key for b in manager.prompt_blocks("s")] == ["memory:builtin"]
    assert len(manager.tool_schemas()) == 1
    assert "'wrong': prefetch returned {'not': 'text'}; expected str or None" in caplog.text
    assert "invalid tool schema dropped" in caplog.text


# ---------------------------------------------------------------------------
# sync_turn: off the request path, FIFO per session
# ---------------------------------------------------------------------------


def test_sync_turn_returns_at_once_and_keeps_order_per_session(
    make_manager: Callable[..., MemoryManager],
) -> None:
    class Jittery(EchoProvider):
        def sync_turn(self, turn: TurnRecord) -> None:
            time.sleep(random.uniform(0, 0.004))
            super().sync_turn(turn)

    external = Jittery("jitter")
    manager = make_manager(external)
    sessions = ["a", "b", "c"]
    expected: dict[str, list[str]] = {s: [] for s in sessions}
    started = time.monotonic()
    for n in range(60):
        session = sessions[n % 3]
        manager.sync_turn(turn(session, n))
        expected[session].append(f"t{n}")
    assert time.monotonic() - started < 0.2, "sync_turn waited for the provider"
    manager.on_session_end("a", "user")
    assert manager.flush(10.0)
    synced = [value for method, value in external.seen if method in ("sync_turn", "on_session_end")]
    for session in sessions:
        got = [t.turn_id for t in synced if isinstance(t, TurnRecord) and t.session_id == session]
        assert got == expected[session]
    # on_session_end ran after every pending sync of its session
    end_at = synced.index(("a", "user"))
    assert all(t.session_id != "a" for t in synced[end_at + 1 :] if isinstance(t, TurnRecord))


def test_a_slow_session_does_not_block_another(
    make_manager: Callable[..., MemoryManager],
) -> None:
    class Gate(EchoProvider):
        def __init__(self) -> None:
            super().__init__("gate")
            self.release = threading.Event()

        def sync_turn(self, turn: TurnRecord) -> None:
            if turn.session_id == "slow":
                self.release.wait()
            super().sync_turn(turn)

    gate = Gate()
    manager = make_manager(gate, call_timeout=5.0)
    try:
        manager.sync_turn(turn("slow", 1))
        manager.sync_turn(turn("slow", 2))
        manager.sync_turn(turn("fast", 3))
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            with gate.lock:
                if any(m == "sync_turn" and v.session_id == "fast" for m, v in gate.seen):
                    break
            time.sleep(0.01)
        else:
            pytest.fail("the fast session waited for the slow one")
        assert not manager.flush(0.05)  # the slow session is still pending
    finally:
        gate.release.set()
    assert manager.flush(5.0)
    slow = [v.turn_id for m, v in gate.seen if m == "sync_turn" and v.session_id == "slow"]
    assert slow == ["t1", "t2"]


def test_session_queues_order_and_error_isolation(caplog: pytest.LogCaptureFixture) -> None:
    pool = DaemonPool("test-queues", 2)
    queues = SessionQueues(pool)
    seen: list[int] = []

    def job(n: int) -> None:
        if n == 3:
            raise RuntimeError("job 3 fails")
        seen.append(n)

    for n in range(8):
        queues.submit("k", functools.partial(job, n))
    assert queues.wait_idle(5.0)
    assert seen == [0, 1, 2, 4, 5, 6, 7]
    assert "job 3 fails" in caplog.text
    pool.shutdown()
    with pytest.raises(PoolClosed):
        queues.submit("k", lambda: None)
    assert queues.pending() == 0


# ---------------------------------------------------------------------------
# redaction
# ---------------------------------------------------------------------------


def test_everything_handed_to_providers_is_redacted(
    make_manager: Callable[..., MemoryManager],
) -> None:
    external = EchoProvider("recorder")
    builtin = EchoProvider("builtin")
    manager = make_manager(external, builtin=builtin)
    secret_text = f"my key is {OPENAI_KEY} and password=hunter2"
    manager.prefetch(secret_text, "s")
    call = ToolCall(
        id="c1", function=ToolFunction(name="gh", arguments=f'{{"token": "{GITHUB_TOKEN}"}}')
    )
    messages = [
        Message(role="user", content=secret_text),
        Message(role="assistant", tool_calls=[call]),
        Message(role="tool", tool_call_id="c1", content=f"Authorization: token {GITHUB_TOKEN}"),
    ]
    manager.sync_turn(turn_record_from_messages("s", "t1", messages))
    assert manager.flush(5.0)
    manager.on_pre_compress("s", messages)
    manager.tool_schemas()
    assert manager.handle_tool_call("recorder_search", {"query": secret_text}, "s") == (
        "recorder_search found my key is [REDACTED:openai_api_key] and password=[REDACTED:password]"
    )
    for provider in (external, builtin):
        dumped = repr(
            [v.model_dump() if isinstance(v, TurnRecord) else v for _m, v in provider.seen]
        )
        methods = {m for m, _v in provider.seen}
        assert {"prefetch", "sync_turn", "on_pre_compress"} <= methods
        assert OPENAI_KEY not in dumped and GITHUB_TOKEN not in dumped and "hunter2" not in dumped
        assert "[REDACTED:openai_api_key]" in dumped and "[REDACTED:authorization]" in dumped
    # the caller's objects are untouched
    assert OPENAI_KEY in messages[0].text()


def test_builtin_memory_tool_never_stores_a_secret(
    settings: MemorySettings, redactor: Redactor
) -> None:
    builtin = BuiltinMemoryProvider(settings)
    with MemoryManager(builtin, None, settings, redactor) as manager:
        manager.tool_schemas()
        answer = manager.handle_tool_call(
            "memory",
            {"action": "add", "target": "user", "content": f"GitHub token: {GITHUB_TOKEN}"},
            "s",
        )
        assert answer is not None and answer.startswith("Added to USER.md")
    stored = builtin.path("user").read_text(encoding="utf-8")
    assert GITHUB_TOKEN not in stored and "[REDACTED:github_token]" in stored


# ---------------------------------------------------------------------------
# prompt blocks, tools, lifecycle
# ---------------------------------------------------------------------------


def test_prompt_blocks_are_volatile_with_deterministic_keys(
    make_manager: Callable[..., MemoryManager],
) -> None:
    manager = make_manager(EchoProvider("acme-memory"))
    blocks = manager.prompt_blocks("s9")
    assert [(b.layer, b.key, b.text) for b in blocks] == [
        (Layer.VOLATILE, "memory:builtin", "builtin block for s9"),
        (Layer.VOLATILE, "memory:acme-memory", "acme-memory block for s9"),
    ]
    assert blocks == manager.prompt_blocks("s9")


def test_tool_calls_route_to_the_declaring_provider(
    make_manager: Callable[..., MemoryManager], caplog: pytest.LogCaptureFixture
) -> None:
    external = EchoProvider("ext")
    manager = make_manager(external)
    # no tool_schemas() call first: the manager discovers the routes itself
    assert manager.handle_tool_call("ext_search", {"query": "x"}, "s") == "ext_search found x"
    assert manager.handle_tool_call("builtin_search", {"query": "y"}, "s") == (
        "builtin_search found y"
    )
    assert manager.handle_tool_call("unknown_tool", {}, "s") is None
    assert [m for m, _v in external.seen].count("handle_tool_call") == 1

    clash = EchoProvider("builtin")  # declares builtin_search as well
    clash.name = "clash"
    clash.tool_schemas = EchoProvider("builtin").tool_schemas  # type: ignore[method-assign]
    second = make_manager(clash)
    assert [t["function"]["name"] for t in second.tool_schemas()] == ["builtin_search"]
    assert "tool 'builtin_search' is already declared by 'builtin'" in caplog.text


def test_switch_initialize_and_shutdown_reach_every_provider(
    make_manager: Callable[..., MemoryManager],
) -> None:
    external = EchoProvider("ext")
    builtin = EchoProvider("builtin")
    manager = make_manager(external, builtin=builtin)
    manager.initialize(MemorySession(session_id="s"))
    manager.on_session_switch("s", "s2", "compression")
    manager.sync_turn(turn("s2", 1))
    manager.shutdown()
    manager.shutdown()  # idempotent
    for provider in (external, builtin):
        methods = [m for m, _v in provider.seen]
        assert methods == ["initialize", "on_session_switch", "sync_turn", "shutdown"]
        assert ("on_session_switch", ("s", "s2", "compression")) in provider.seen
    # after shutdown: neutral answers, nothing reaches providers
    assert manager.prefetch("q", "s") is None
    assert manager.prompt_blocks("s") == []
    manager.sync_turn(turn("s", 2))
    assert [m for m, _v in external.seen].count("sync_turn") == 1


def test_unavailable_external_provider_is_logged_and_not_used(
    make_manager: Callable[..., MemoryManager], caplog: pytest.LogCaptureFixture
) -> None:
    class Offline(EchoProvider):
        def is_available(self) -> bool:
            return False

    offline = Offline("offline")
    manager = make_manager(offline)
    assert manager.external is None
    assert [p.name for p in manager.providers] == ["builtin"]
    assert manager.prefetch("q", "s") == "builtin recall"
    assert offline.seen == []
    assert "memory provider 'offline' is not available" in caplog.text

    class Raises(EchoProvider):
        def is_available(self) -> bool:
            raise ConnectionError("no route to host")

    assert make_manager(Raises("flaky")).external is None
    assert "'flaky': is_available raised ConnectionError" in caplog.text


def test_turn_record_from_messages() -> None:
    messages = [
        Message(role="user", content="fix the bug"),
        Message(
            role="assistant",
            tool_calls=[ToolCall(id="c", function=ToolFunction(name="x", arguments="{}"))],
        ),
        Message(role="tool", tool_call_id="c", content="done"),
        Message(role="assistant", content="Fixed."),
    ]
    record = turn_record_from_messages("s", "t", messages)
    assert (record.user_text, record.assistant_text, len(record.messages)) == (
        "fix the bug",
        "Fixed.",
        4,
    )


def test_tool_schema_problem_names_what_is_wrong() -> None:
    ok = {"type": "function", "function": {"name": "a_b-c", "parameters": {"type": "object"}}}
    assert tool_schema_problem(ok) is None
    assert "expected 'function'" in (tool_schema_problem({"type": "tool"}) or "")
    assert "names undeclared ['q']" in (
        tool_schema_problem(
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "parameters": {"type": "object", "properties": {}, "required": ["q"]},
                },
            }
        )
        or ""
    )


# ---------------------------------------------------------------------------
# selection through the registration hook
# ---------------------------------------------------------------------------


class AcmePlugin:
    def __init__(self, provider: MemoryProvider) -> None:
        self.provider = provider

    @hookimpl
    def register_memory_providers(self, register: Callable[[MemoryProvider], None]) -> None:
        register(self.provider)


def plugin_manager(*plugins: object) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(specs)
    for plugin in plugins:
        pm.register(plugin)
    return pm


def memory_of(pm: pluggy.PluginManager, settings: Any) -> tuple[Hermes, MemoryManager]:
    """The host's memory manager: providers from its registry (the one registration path)."""
    host = Hermes(settings, pm=pm)
    manager = host.memory()
    assert manager is not None
    return host, manager


def test_the_registry_selects_builtin_and_the_configured_provider(tmp_path: Path) -> None:
    acme = EchoProvider("acme")
    pm = plugin_manager(hermes_plugin_memory_builtin, hermes_plugin_redaction, AcmePlugin(acme))
    settings = settings_from({"memory": {"home": str(tmp_path / "m"), "provider": "acme"}})
    host, manager = memory_of(pm, settings)
    with host:
        assert isinstance(manager.providers[0], BuiltinMemoryProvider)
        assert manager.external is acme
        assert "openai_api_key" in [r.name for r in manager.redactor.rules]
    none = settings_from({"memory": {"home": str(tmp_path / "m")}})
    pm = plugin_manager(hermes_plugin_memory_builtin, hermes_plugin_redaction, AcmePlugin(acme))
    host, manager = memory_of(pm, none)
    with host:
        assert manager.external is None


def test_unknown_or_duplicate_provider_names_are_errors(tmp_path: Path) -> None:
    pm = plugin_manager(hermes_plugin_memory_builtin, AcmePlugin(EchoProvider("acme")))
    wrong = settings_from({"memory": {"home": str(tmp_path), "provider": "acme-typo"}})
    with pytest.raises(UnknownNameError, match=r"'acme-typo'.*acme, builtin"):
        memory_of(pm, wrong)
    dup = plugin_manager(AcmePlugin(EchoProvider("acme")), AcmePlugin(EchoProvider("acme")))
    with pytest.raises(RegistrationError, match="'acme' is registered by both plugin"):
        memory_of(dup, wrong)


def test_blocked_builtin_is_replaced_by_a_no_op(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_core.memory")
    pm = plugin_manager(hermes_plugin_redaction)
    settings = settings_from({"memory": {"home": str(tmp_path)}})
    host, manager = memory_of(pm, settings)
    with host:
        assert manager.prompt_blocks("s") == []
        assert manager.prefetch("q", "s") is None
    assert "no 'builtin' memory provider is registered" in caplog.text


def test_a_hung_provider_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import threading
        from hermes_core.config import MemorySettings
        from hermes_core.memory import MemoryManager
        from hermes_core.redaction import Redactor
        from hermes_hookspecs import MemoryProvider

        class Forever(MemoryProvider):
            name = "forever"
            def prefetch(self, query, session_id):
                threading.Event().wait()

        settings = MemorySettings(home={str(tmp_path)!r}, prefetch_timeout=0.1, call_timeout=0.1)
        manager = MemoryManager(MemoryProvider(), Forever(), settings, Redactor([]))
        print(manager.prefetch("q", "s"))
        manager.shutdown()
        print("exiting")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "exiting"]


def test_a_provider_that_keeps_timing_out_is_suspended_without_waiting(
    make_manager: Callable[..., MemoryManager],
) -> None:
    hanger = HangingPrefetch()
    manager = make_manager(hanger, prefetch_timeout=0.3)
    try:
        for _ in range(3):  # three timeouts in a row open the breaker
            started = time.monotonic()
            assert manager.prefetch("q", "s") == "builtin recall"
            assert time.monotonic() - started >= 0.25
        started = time.monotonic()
        assert manager.prefetch("q", "s") == "builtin recall"
        assert time.monotonic() - started < 0.2  # skipped, not waited for
    finally:
        hanger.release.set()
