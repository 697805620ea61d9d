"""A conformance suite for memory providers, to subclass in a vendor's own tests.

Usage (in the provider project's ``tests/test_conformance.py``)::

    import pytest
from pydantic import BaseModel
    from hermes_core.testing.memory_suite import MemoryProviderSuite
    from acme_memory import AcmeProvider

    class TestAcmeConformance(MemoryProviderSuite):
        @pytest.fixture
        def provider(self, tmp_path):
            provider = AcmeProvider(path=tmp_path / "facts.json")
            yield provider
            provider.shutdown()

The suite checks the contract of :class:`hermes_hookspecs.MemoryProvider`
(types returned by every method, ``prefetch`` inside its time budget,
``sync_turn`` accepting ordinary turns, valid OpenAI function-tool schemas
and a text result for every tool, ``on_pre_compress`` returning ``list[str]``)
and, through the real :class:`hermes_core.memory.MemoryManager`, that the
manager survives a provider that hangs or raises and that the provider never
sees text the default redaction rules scrub.

Knobs (class attributes or fixtures to override):

* ``prefetch_budget`` (seconds, default 3.0): the ``prefetch`` time limit.
* ``tool_arguments(name, schema)``: arguments used to call each tool
  (default: synthesised from the schema's required properties).
* ``memory_settings`` fixture: the ``[memory]`` settings the manager uses.

Wrappers used by the suite are public for vendors' own tests:
:class:`RecordingProvider`, :class:`HangingProvider`, :class:`RaisingProvider`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from hermes_core.config import MemorySettings
from hermes_core.memory import MemoryManager, tool_schema_problem
from hermes_core.redaction import Redactor
from hermes_core.testing.canary import canary_text, leaked
from hermes_hookspecs import (
    MemoryProvider,
    MemorySession,
    Message,
    ToolCall,
    ToolFunction,
    TurnRecord,
)

SWITCH_REASONS = ("compression", "new", "resume", "branch")

#: secrets the default rules must scrub before a provider sees them
SAMPLE_SECRETS = (
    "sk-proj-Zt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eU",
    "ghp_4rT9wQ2zX7cV1bN8mK3jH6gF5dS0aP2oI9uY",
    "AKIAQ3EGRT7PX5LMHN2K",
)


def ordinary_turns(session_id: str) -> list[TurnRecord]:
    """A few ordinary committed turns: plain chat, a tool round trip, list content."""
    call = ToolCall(
        id="call_1", function=ToolFunction(name="read_file", arguments='{"path": "setup.cfg"}')
    )
    return [
        TurnRecord(
            session_id=session_id,
            turn_id="t1",
            user_text="Remember that I prefer tabs over spaces in Makefiles.",
            assistant_text="Noted: tabs in Makefiles.",
            messages=[
                Message(role="user", content="Remember that I prefer tabs over spaces."),
                Message(role="assistant", content="Noted: tabs in Makefiles."),
            ],
        ),
        TurnRecord(
            session_id=session_id,
            turn_id="t2",
            user_text="What does setup.cfg configure?",
            assistant_text="It configures flake8 with a line length of 100.",
            messages=[
                Message(role="user", content="What does setup.cfg configure?"),
                Message(role="assistant", content=None, tool_calls=[call]),
                Message(role="tool", tool_call_id="call_1", content="[flake8]\nmax-line=100"),
                Message(role="assistant", content="It configures flake8 (line length 100)."),
            ],
        ),
        TurnRecord(
            session_id=session_id,
            turn_id="t3",
            user_text="",
            assistant_text="",
            messages=[
                Message(role="user", content=[{"type": "text", "text": "Thanks!"}]),
                Message(role="assistant", content=""),
            ],
        ),
    ]


# ---------------------------------------------------------------------------
# wrappers
# ---------------------------------------------------------------------------


class RecordingProvider(MemoryProvider):
    """Delegates to ``inner`` and records every argument it was handed (thread-safe)."""

    def __init__(self, inner: MemoryProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self._lock = threading.Lock()

    def _record(self, method: str, *args: Any) -> None:
        with self._lock:
            self.calls.append((method, args))

    def seen_text(self) -> str:
        """Everything recorded, rendered as one string (for substring checks)."""
        with self._lock:
            return "\n".join(f"{method}: {_dump(args)}" for method, args in self.calls)

    def is_available(self) -> bool:
        self._record("is_available")
        return self.inner.is_available()

    def initialize(self, session: MemorySession) -> None:
        self._record("initialize", session)
        self.inner.initialize(session)

    def system_prompt_block(self, session_id: str) -> str | None:
        self._record("system_prompt_block", session_id)
        return self.inner.system_prompt_block(session_id)

    def prefetch(self, query: str, session_id: str) -> str | None:
        self._record("prefetch", query, session_id)
        return self.inner.prefetch(query, session_id)

    def sync_turn(self, turn: TurnRecord) -> None:
        self._record("sync_turn", turn)
        self.inner.sync_turn(turn)

    def on_pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
        self._record("on_pre_compress", session_id, messages)
        return self.inner.on_pre_compress(session_id, messages)

    def on_session_switch(self, old_session_id: str, new_session_id: str, reason: str) -> None:
        self._record("on_session_switch", old_session_id, new_session_id, reason)
        self.inner.on_session_switch(old_session_id, new_session_id, reason)

    def on_session_end(self, session_id: str, reason: str) -> None:
        self._record("on_session_end", session_id, reason)
        self.inner.on_session_end(session_id, reason)

    def tool_schemas(self) -> list[dict[str, Any]]:
        self._record("tool_schemas")
        return self.inner.tool_schemas()

    def handle_tool_call(self, name: str, arguments: dict[str, Any], session_id: str) -> str:
        self._record("handle_tool_call", name, arguments, session_id)
        return self.inner.handle_tool_call(name, arguments, session_id)

    def shutdown(self) -> None:
        self._record("shutdown")
        self.inner.shutdown()


class HangingProvider(RecordingProvider):
    """Like :class:`RecordingProvider`, but every call blocks until :attr:`release` is set.

    ``is_available`` answers at once (so the manager takes the provider on).
    Always set ``release`` in teardown so the blocked worker threads finish.
    """

    def __init__(self, inner: MemoryProvider) -> None:
        super().__init__(inner)
        self.release = threading.Event()

    def _record(self, method: str, *args: Any) -> None:
        super()._record(method, *args)
        if method != "is_available":
            self.release.wait()


class RaisingProvider(RecordingProvider):
    """Like :class:`RecordingProvider`, but every call except ``is_available`` raises."""

    def _record(self, method: str, *args: Any) -> None:
        super()._record(method, *args)
        if method != "is_available":
            raise RuntimeError(f"conformance suite: {method} fails on purpose")


class _MarkerProvider(MemoryProvider):
    """A well-behaved stand-in for ``builtin`` whose answers the suite can recognise."""

    name = "suite-builtin"
    RECALL = "suite-builtin recall"
    INSIGHT = "suite-builtin insight"

    def prefetch(self, query: str, session_id: str) -> str | None:
        return self.RECALL

    def on_pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
        return [self.INSIGHT]

    def system_prompt_block(self, session_id: str) -> str | None:
        return "suite-builtin block"


def _returned(method: Callable[..., object], *args: Any) -> object:
    """What ``method(*args)`` returned (for checking methods documented to return None)."""
    return method(*args)


def _dump(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, list | tuple):
        return " ".join(_dump(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a tool built from its schema: every required property gets a sample."""
    parameters = schema.get("function", {}).get("parameters", {}) or {}
    properties = parameters.get("properties", {}) or {}
    return {
        name: _sample(properties.get(name, {}), name) for name in parameters.get("required", [])
    }


def _sample(prop: dict[str, Any], name: str) -> Any:
    if prop.get("enum"):
        return prop["enum"][0]
    if "default" in prop:
        return prop["default"]
    kind = prop.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    samples: dict[str, Any] = {
        "string": f"conformance sample {name}",
        "integer": 1,
        "number": 1.0,
        "boolean": True,
        "array": [],
        "object": {},
        "null": None,
    }
    return samples.get(kind, f"conformance sample {name}")


# ---------------------------------------------------------------------------
# the suite
# ---------------------------------------------------------------------------


class MemoryProviderSuite:
    """Contract checks for a memory provider; subclass as ``Test...`` and give ``provider``."""

    #: ``prefetch`` must answer within this many seconds
    prefetch_budget: ClassVar[float] = 3.0
    #: seconds the manager waits for the hanging/raising wrappers in isolation checks
    isolation_timeout: ClassVar[float] = 0.3
    session_id: ClassVar[str] = "conformance-session"

    # -- fixtures ----------------------------------------------------------
    @pytest.fixture
    def provider(self) -> MemoryProvider:
        raise NotImplementedError(
            "MemoryProviderSuite needs a 'provider' fixture returning the provider under test"
        )

    @pytest.fixture
    def memory_settings(self, tmp_path: Path) -> MemorySettings:
        return MemorySettings(
            home=str(tmp_path / "suite-memory-home"),
            prefetch_timeout=self.isolation_timeout,
            call_timeout=max(self.isolation_timeout, 2.0),
        )

    @pytest.fixture
    def session(self, tmp_path: Path) -> MemorySession:
        return MemorySession(
            session_id=self.session_id, cwd=str(tmp_path), model="gpt-4o-mini", home=str(tmp_path)
        )

    @pytest.fixture
    def redactor(self) -> Redactor:
        # the installed redaction plugins, loaded the way the host loads them
        from hermes_core.config import settings_from
        from hermes_core.plugins import get_plugin_manager

        pm = get_plugin_manager(settings_from({"plugins": {"load": ["redaction"]}}))
        return Redactor([rule for rules in pm.hook.redaction_rules() for rule in rules or []])

    @pytest.fixture
    def ready(self, provider: MemoryProvider, session: MemorySession) -> MemoryProvider:
        """The provider, initialised for :attr:`session`."""
        provider.initialize(session)
        return provider

    def tool_arguments(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """Arguments for calling tool ``name``; override for tools with stricter needs."""
        return example_arguments(schema)

    def _manager(
        self, external: MemoryProvider, settings: MemorySettings, redactor: Redactor
    ) -> MemoryManager:
        return MemoryManager(_MarkerProvider(), external, settings, redactor)

    # -- the provider on its own -----------------------------------------------
    def test_name_is_a_nonempty_str(self, provider: MemoryProvider) -> None:
        assert isinstance(provider.name, str) and provider.name.strip(), (
            f"{type(provider).__name__}.name must be a non-empty string, got {provider.name!r}"
        )

    def test_is_available_returns_bool(self, provider: MemoryProvider) -> None:
        assert isinstance(provider.is_available(), bool)

    def test_initialize_returns_none(
        self, provider: MemoryProvider, session: MemorySession
    ) -> None:
        assert _returned(provider.initialize, session) is None

    def test_system_prompt_block_is_text_or_none(self, ready: MemoryProvider) -> None:
        block = ready.system_prompt_block(self.session_id)
        assert block is None or isinstance(block, str)

    def test_prefetch_returns_text_or_none_within_budget(self, ready: MemoryProvider) -> None:
        for turn in ordinary_turns(self.session_id):
            ready.sync_turn(turn)
        for query in ("tabs or spaces in Makefiles?", "", "unrelated question about the weather"):
            started = time.monotonic()
            result = ready.prefetch(query, self.session_id)
            elapsed = time.monotonic() - started
            assert result is None or isinstance(result, str), f"prefetch returned {result!r}"
            assert elapsed < self.prefetch_budget, (
                f"prefetch({query!r}) took {elapsed:.2f}s; budget {self.prefetch_budget}s"
            )

    def test_sync_turn_accepts_ordinary_turns(self, ready: MemoryProvider) -> None:
        for turn in ordinary_turns(self.session_id):
            assert _returned(ready.sync_turn, turn) is None

    def test_on_pre_compress_returns_list_of_str(self, ready: MemoryProvider) -> None:
        messages = [m for turn in ordinary_turns(self.session_id) for m in turn.messages]
        for turn in ordinary_turns(self.session_id):
            ready.sync_turn(turn)
        insights = ready.on_pre_compress(self.session_id, messages)
        assert isinstance(insights, list), f"on_pre_compress returned {insights!r}"
        assert all(isinstance(item, str) for item in insights), insights
        assert ready.on_pre_compress(self.session_id, []) is not None

    def test_session_switch_and_end_accept_every_reason(self, ready: MemoryProvider) -> None:
        for reason in SWITCH_REASONS:
            switch = ready.on_session_switch
            assert _returned(switch, self.session_id, f"{reason}-next", reason) is None
        same = (self.session_id, self.session_id, "compression")
        assert _returned(ready.on_session_switch, *same) is None
        assert _returned(ready.on_session_end, self.session_id, "user") is None

    def test_tool_schemas_are_valid_openai_function_tools(self, provider: MemoryProvider) -> None:
        schemas = provider.tool_schemas()
        assert isinstance(schemas, list)
        names = []
        for schema in schemas:
            problem = tool_schema_problem(schema)
            assert problem is None, f"invalid tool schema: {problem}"
            names.append(schema["function"]["name"])
        assert len(names) == len(set(names)), f"duplicate tool names: {names}"

    def test_handle_tool_call_answers_text_for_each_tool(self, ready: MemoryProvider) -> None:
        for schema in ready.tool_schemas():
            name = schema["function"]["name"]
            result = ready.handle_tool_call(
                name, self.tool_arguments(name, schema), self.session_id
            )
            assert isinstance(result, str), f"tool {name!r} returned {result!r}; expected str"

    def test_shutdown_returns_none(self, provider: MemoryProvider) -> None:
        assert _returned(provider.shutdown) is None

    # -- the provider inside the manager ------------------------------------------
    def test_manager_routes_calls_to_the_provider(
        self,
        provider: MemoryProvider,
        session: MemorySession,
        memory_settings: MemorySettings,
        redactor: Redactor,
    ) -> None:
        recorder = RecordingProvider(provider)
        settings = memory_settings.model_copy(update={"prefetch_timeout": self.prefetch_budget})
        with self._manager(recorder, settings, redactor) as manager:
            assert manager.external is recorder, "the manager refused the provider (is_available?)"
            manager.initialize(session)
            blocks = manager.prompt_blocks(self.session_id)
            assert all(block.key.startswith("memory:") for block in blocks)
            for turn in ordinary_turns(self.session_id):
                manager.sync_turn(turn)
            assert manager.flush(10.0)
            recall = manager.prefetch("tabs or spaces?", self.session_id)
            assert recall is not None and _MarkerProvider.RECALL in recall
            insights = manager.on_pre_compress(self.session_id, [])
            assert _MarkerProvider.INSIGHT in insights
            for schema in manager.tool_schemas():
                name = schema["function"]["name"]
                answer = manager.handle_tool_call(
                    name, self.tool_arguments(name, schema), self.session_id
                )
                assert isinstance(answer, str)
            manager.on_session_switch(self.session_id, self.session_id, "compression")
            manager.on_session_end(self.session_id, "user")
            assert manager.flush(10.0)
        methods = [method for method, _args in recorder.calls]
        for expected in ("initialize", "prefetch", "sync_turn", "on_pre_compress", "shutdown"):
            assert expected in methods, f"the manager never called {expected}"
        assert methods.count("sync_turn") == len(ordinary_turns(self.session_id))

    def test_manager_survives_a_hanging_provider(
        self,
        provider: MemoryProvider,
        session: MemorySession,
        memory_settings: MemorySettings,
        redactor: Redactor,
    ) -> None:
        hanging = HangingProvider(provider)
        settings = memory_settings.model_copy(
            update={
                "prefetch_timeout": self.isolation_timeout,
                "call_timeout": self.isolation_timeout,
            }
        )
        manager = self._manager(hanging, settings, redactor)
        try:
            started = time.monotonic()
            manager.initialize(session)
            recall = manager.prefetch("anything to recall?", self.session_id)
            manager.sync_turn(ordinary_turns(self.session_id)[0])
            insights = manager.on_pre_compress(self.session_id, [])
            manager.on_session_switch(self.session_id, self.session_id, "compression")
            elapsed = time.monotonic() - started
            assert recall == _MarkerProvider.RECALL
            assert insights == [_MarkerProvider.INSIGHT]
            assert elapsed < 4 * self.isolation_timeout + 1.0, f"took {elapsed:.2f}s"
        finally:
            hanging.release.set()
            manager.shutdown(timeout=5.0)

    def test_manager_survives_a_raising_provider(
        self,
        provider: MemoryProvider,
        session: MemorySession,
        memory_settings: MemorySettings,
        redactor: Redactor,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        raising = RaisingProvider(provider)
        with self._manager(raising, memory_settings, redactor) as manager:
            manager.initialize(session)
            assert manager.prefetch("anything?", self.session_id) == _MarkerProvider.RECALL
            manager.sync_turn(ordinary_turns(self.session_id)[0])
            assert manager.flush(10.0)
            assert manager.on_pre_compress(self.session_id, []) == [_MarkerProvider.INSIGHT]
            manager.on_session_switch(self.session_id, "next", "new")
        assert repr(provider.name) in caplog.text, "the failure was not logged with the name"

    def test_provider_never_sees_unredacted_secrets(
        self,
        provider: MemoryProvider,
        session: MemorySession,
        memory_settings: MemorySettings,
        redactor: Redactor,
    ) -> None:
        recorder = RecordingProvider(provider)
        key, token, aws = SAMPLE_SECRETS
        text = f"Use {key} for OpenAI, {token} for GitHub and {aws} for S3.\n{canary_text()}"
        messages = [
            Message(role="user", content=text),
            Message(
                role="assistant",
                tool_calls=[
                    ToolCall(
                        id="c1",
                        function=ToolFunction(name="shell", arguments=f'{{"env": "KEY={key}"}}'),
                    )
                ],
            ),
            Message(role="tool", tool_call_id="c1", content=f"Authorization: Bearer {token}"),
        ]
        settings = memory_settings.model_copy(update={"prefetch_timeout": self.prefetch_budget})
        with self._manager(recorder, settings, redactor) as manager:
            manager.initialize(session)
            manager.prefetch(text, self.session_id)
            manager.sync_turn(
                TurnRecord(
                    session_id=self.session_id,
                    turn_id="secret-turn",
                    user_text=text,
                    assistant_text=f"Stored {key}.",
                    messages=messages,
                )
            )
            assert manager.flush(10.0)
            manager.on_pre_compress(self.session_id, messages)
            for schema in manager.tool_schemas():
                name = schema["function"]["name"]
                properties = schema["function"].get("parameters", {}).get("properties", {})
                arguments = {
                    prop: f"{value} {key}"
                    if isinstance(value, str) and "enum" not in properties.get(prop, {})
                    else value
                    for prop, value in self.tool_arguments(name, schema).items()
                }
                manager.handle_tool_call(name, arguments, self.session_id)
        seen = recorder.seen_text()
        assert "[REDACTED" in seen
        for secret in SAMPLE_SECRETS:
            assert secret not in seen, f"the provider was handed {secret!r} unredacted"
        assert leaked(seen) == [], "canary formats handed to the provider unredacted"
