"""The memory manager: calls the builtin and the external memory provider, isolated.

The ``builtin`` provider is always active; ``memory.provider`` selects at most
one external provider among those registered through
``register_memory_providers``. The manager owns the isolation the contract
promises (see :mod:`hermes_hookspecs.memory`):

* Every provider call runs on a worker thread of a small pool owned by the
  manager (one pool per provider, so a hung provider cannot starve the other).
  ``prefetch`` is abandoned after ``memory.prefetch_timeout`` seconds, every
  other call after ``memory.call_timeout``; an abandoned call's late result is
  discarded. Any exception a provider raises (``BaseException`` included:
  ``SystemExit``, ``GeneratorExit``...; only ``KeyboardInterrupt`` passes) and
  any timeout count as a failure: the caller gets the neutral result
  (``None``, ``[]``...), so the turn goes on. One breaker counts both: after
  :data:`BREAKER_FAILURES` failures in a row the provider is suspended for
  :data:`BREAKER_SECONDS` (its calls are skipped at once, so a dead vendor
  service costs nothing per call), then tried again. The log (logger
  ``hermes_core.memory``) gets one line per change of state, not one per
  turn: the first failure of a streak (with its traceback), the suspension,
  the recovery.
* Outputs are validated and sanitized: a result of the wrong type is dropped;
  text with a lone surrogate (which no UTF-8 store or JSON request body can
  carry) has it replaced by U+FFFD. Each is logged once per provider and
  method.
* :meth:`MemoryManager.sync_turn` returns at once; the work runs in order per
  session on a queue (:class:`~hermes_core.memory_workers.SessionQueues`).
  Syncs still queued at shutdown, or submitted after it, are dropped and
  their count is logged at shutdown (:attr:`MemoryManager.dropped_syncs`).
  :meth:`MemoryManager.on_session_end` is queued behind that session's pending
  syncs. :meth:`MemoryManager.flush` waits for the queues to drain.
* Everything handed to a provider (queries, turns, messages, tool arguments)
  passes through the :class:`~hermes_core.redaction.Redactor` first.

Typical wiring (the turn runtime)::

    manager = MemoryManager.from_plugins(plugin_manager.hook, settings)
    manager.initialize(MemorySession(session_id=sid, cwd=cwd, model=model))
    blocks = manager.prompt_blocks(sid)          # when the prompt is (re)built
    recall = manager.prefetch(user_text, sid)     # per turn → user message API content
    manager.sync_turn(turn_record_from_messages(sid, turn_id, turn_messages))
    insights = manager.on_pre_compress(sid, active_messages)   # before compaction
    manager.on_session_switch(sid, new_sid, "compression")      # after compaction
    manager.shutdown()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as wait_futures
from typing import Any, TypeVar

from hermes_hookspecs import (
    Layer,
    MemoryProvider,
    MemorySession,
    Message,
    PromptBlock,
    RegistrationError,
    TurnRecord,
    UnknownNameError,
)

from .config import MemorySettings, Settings
from .memory_workers import DaemonPool, PoolClosed, SessionQueues
from .redaction import Redactor

T = TypeVar("T")

logger = logging.getLogger("hermes_core.memory")

BUILTIN_NAME = "builtin"
#: position of the memory blocks inside the volatile layer
PROMPT_BLOCK_ORDER = 700
#: worker threads per provider (bounds the threads a hanging provider can hold)
WORKERS_PER_PROVIDER = 4
#: consecutive failures (timeouts or exceptions) after which a provider is suspended
BREAKER_FAILURES = 3
#: the former name, when only timeouts counted
BREAKER_TIMEOUTS = BREAKER_FAILURES
#: how long a suspended provider is skipped before it is tried again
BREAKER_SECONDS = 60.0
#: threads draining the per-session ``sync_turn`` queues
SYNC_WORKERS = 4


class _Missing:
    """Marks a call that produced no usable result (timeout, exception, closed)."""


_MISSING = _Missing()


class MemoryManager:
    """Calls the builtin provider and at most one external provider, isolated and redacted.

    :param builtin: the always-active provider (normally ``builtin``).
    :param external: the provider selected by ``memory.provider``, or None.
        When its :meth:`~hermes_hookspecs.MemoryProvider.is_available` returns
        False (or raises, or times out) that is logged and it is not used.
    :param settings: the ``[memory]`` settings (timeouts).
    :param redactor: applied to everything handed to a provider.
    """

    def __init__(
        self,
        builtin: MemoryProvider,
        external: MemoryProvider | None,
        settings: MemorySettings,
        redactor: Redactor,
    ) -> None:
        self._settings = settings
        self._redactor = redactor
        self._closed = False
        # breaker: provider id -> consecutive failures, and suspended-until (monotonic)
        self._failures: dict[int, int] = {}
        self._suspended: dict[int, float] = {}
        self._breaker_lock = threading.Lock()
        # (provider, method) pairs whose bad output was logged already
        self._warned: set[tuple[str, str]] = set()
        # sync_turn jobs queued and not yet started; dropped ones (counted at shutdown)
        self._sync_lock = threading.Lock()
        self._syncs_queued = 0
        self._dropped_syncs = 0
        self._close_lock = threading.Lock()
        self._pools: dict[int, DaemonPool] = {}
        self._builtin = builtin
        self._pools[id(builtin)] = DaemonPool(
            f"hermes-memory-{_name(builtin)}", WORKERS_PER_PROVIDER
        )
        self._sync_pool = DaemonPool("hermes-memory-sync", SYNC_WORKERS)
        self._queues = SessionQueues(self._sync_pool)
        self._tools: dict[str, MemoryProvider] = {}
        self._tools_lock = threading.Lock()
        self._external: MemoryProvider | None = None
        if external is not None and external is not builtin:
            self._pools[id(external)] = DaemonPool(
                f"hermes-memory-{_name(external)}", WORKERS_PER_PROVIDER
            )
            available = self._call(external, "is_available", (), settings.call_timeout)
            if available is True:
                self._external = external
            else:
                if available is False:
                    logger.warning(
                        "memory provider %r is not available; continuing with %r only",
                        _name(external),
                        _name(builtin),
                    )
                self._pools.pop(id(external)).shutdown()

    # -- construction from plugins -------------------------------------------
    @classmethod
    def from_plugins(
        cls, hook: Any, settings: Settings, redactor: Redactor | None = None
    ) -> MemoryManager:
        """Build the manager from a pluggy hook relay (``plugin_manager.hook``, or the manager).

        Calls ``register_memory_providers`` (and ``redaction_rules`` unless a
        ``redactor`` is given), then picks ``builtin`` and the provider named by
        ``memory.provider``. An unknown name is an
        :class:`~hermes_hookspecs.UnknownNameError` listing the registered
        ones; a duplicate or nameless provider is a
        :class:`~hermes_hookspecs.RegistrationError`. When no ``builtin`` is
        registered (the plugin was blocked) a no-op provider stands in and
        that is logged.
        """
        hook = getattr(hook, "hook", hook)  # a PluginManager or its relay
        providers = collect_providers(hook, settings)
        builtin = providers.get(BUILTIN_NAME)
        if builtin is None:
            logger.warning("no %r memory provider is registered; builtin memory is off", "builtin")
            builtin = _NullProvider()
        external = select_external(providers, settings.memory.provider)
        return cls(
            builtin,
            external,
            settings.memory,
            redactor if redactor is not None else Redactor.from_hook(hook),
        )

    # -- introspection ---------------------------------------------------------
    @property
    def providers(self) -> list[MemoryProvider]:
        """The active providers: builtin first, then the external one if any."""
        if self._external is None:
            return [self._builtin]
        return [self._builtin, self._external]

    @property
    def external(self) -> MemoryProvider | None:
        """The external provider in use (None when none is configured or available)."""
        return self._external

    @property
    def redactor(self) -> Redactor:
        return self._redactor

    # -- session lifecycle -------------------------------------------------------
    def initialize(self, session: MemorySession) -> None:
        """Initialise every provider for ``session`` (in parallel, ``call_timeout`` each)."""
        self._fan_out("initialize", (session,), self._settings.call_timeout)
        with self._tools_lock:
            self._tools.clear()

    def prompt_blocks(self, session_id: str) -> list[PromptBlock]:
        """Volatile-layer blocks from ``system_prompt_block``; keys ``memory:<provider name>``.

        Call only when the prompt is built or rebuilt. Empty or non-text
        results are skipped (a non-text result is logged).
        """
        results = self._fan_out("system_prompt_block", (session_id,), self._settings.call_timeout)
        blocks: list[PromptBlock] = []
        for provider, result in results:
            if result is None or isinstance(result, _Missing):
                continue
            if not isinstance(result, str):
                self._bad_result(provider, "system_prompt_block", result, "str or None")
                continue
            result = self._clean(provider, "system_prompt_block", result)
            if result.strip():
                blocks.append(
                    PromptBlock(
                        layer=Layer.VOLATILE,
                        key=f"memory:{_name(provider)}",
                        text=result,
                        order=PROMPT_BLOCK_ORDER,
                    )
                )
        return blocks

    def on_session_switch(self, old_session_id: str, new_session_id: str, reason: str) -> None:
        """Tell every provider the active session changed (waits up to ``call_timeout``)."""
        self._fan_out(
            "on_session_switch",
            (old_session_id, new_session_id, reason),
            self._settings.call_timeout,
        )

    def on_session_end(self, session_id: str, reason: str) -> None:
        """Queue ``on_session_end`` behind the session's pending ``sync_turn`` work."""
        self._enqueue(
            session_id,
            lambda: self._fan_out(
                "on_session_end", (session_id, reason), self._settings.call_timeout
            ),
        )

    # -- per turn ------------------------------------------------------------------
    def prefetch(self, query: str, session_id: str) -> str | None:
        """Recall for the current turn: the providers' texts joined by blank lines.

        Each provider gets at most ``memory.prefetch_timeout`` seconds (all run
        in parallel); a provider past the deadline is skipped for this turn and
        its late result discarded. Returns None when nothing was recalled.
        """
        redacted = self._redactor.redact(query)
        results = self._fan_out("prefetch", (redacted, session_id), self._settings.prefetch_timeout)
        texts: list[str] = []
        for provider, result in results:
            if result is None or isinstance(result, _Missing):
                continue
            if not isinstance(result, str):
                self._bad_result(provider, "prefetch", result, "str or None")
                continue
            result = self._clean(provider, "prefetch", result)
            if result.strip():
                texts.append(result.strip())
        return "\n\n".join(texts) if texts else None

    def sync_turn(self, turn: TurnRecord) -> None:
        """Hand a committed turn to every provider, off the request path.

        Returns at once. The turn is redacted now and delivered in order per
        session; each provider call is bounded by ``call_timeout`` (a call past
        it is abandoned and logged, and the queue goes on).
        """
        redacted = self._redactor.redact_turn(turn)
        with self._sync_lock:
            closed = self._closed
            if closed:
                self._dropped_syncs += 1
            else:
                self._syncs_queued += 1
        if closed:
            logger.warning("memory: manager is shut down; sync of turn %r dropped", turn.turn_id)
            return

        def deliver() -> None:
            with self._sync_lock:
                if self._closed:  # counted as dropped by shutdown()
                    return
                self._syncs_queued -= 1
            self._fan_out("sync_turn", (redacted,), self._settings.call_timeout)

        if not self._enqueue(turn.session_id, deliver):
            with self._sync_lock:
                if not self._closed:  # once closed, shutdown() counted it already
                    self._syncs_queued -= 1
                    self._dropped_syncs += 1

    def on_pre_compress(self, session_id: str, messages: Sequence[Message]) -> list[str]:
        """Insights the summary must keep: builtin's, then the external provider's."""
        redacted = self._redactor.redact_messages(messages)
        results = self._fan_out(
            "on_pre_compress", (session_id, redacted), self._settings.call_timeout
        )
        insights: list[str] = []
        for provider, result in results:
            if result is None or isinstance(result, _Missing):
                continue
            if not isinstance(result, list) or not all(isinstance(i, str) for i in result):
                self._bad_result(provider, "on_pre_compress", result, "list[str]")
                continue
            cleaned = [self._clean(provider, "on_pre_compress", item) for item in result]
            insights.extend(item for item in cleaned if item.strip())
        return insights

    # -- tools -------------------------------------------------------------------------
    def tool_schemas(self) -> list[dict[str, Any]]:
        """Every provider's tool schemas (invalid ones and duplicate names are logged, dropped).

        Also records which provider declared each tool, for
        :meth:`handle_tool_call`.
        """
        results = self._fan_out("tool_schemas", (), self._settings.call_timeout)
        schemas: list[dict[str, Any]] = []
        routes: dict[str, MemoryProvider] = {}
        for provider, result in results:
            if result is None or isinstance(result, _Missing):
                continue
            if not isinstance(result, list):
                self._bad_result(provider, "tool_schemas", result, "list of tool schemas")
                continue
            for schema in result:
                schema = self._clean_value(provider, "tool_schemas", schema)
                problem = tool_schema_problem(schema)
                if problem:
                    logger.error(
                        "memory provider %r: invalid tool schema dropped: %s",
                        _name(provider),
                        problem,
                    )
                    continue
                tool = schema["function"]["name"]
                if tool in routes:
                    logger.error(
                        "memory provider %r: tool %r is already declared by %r; dropped",
                        _name(provider),
                        tool,
                        _name(routes[tool]),
                    )
                    continue
                routes[tool] = provider
                schemas.append(schema)
        with self._tools_lock:
            self._tools = routes
        return schemas

    def handle_tool_call(self, name: str, arguments: dict[str, Any], session_id: str) -> str | None:
        """Run a memory tool; None when no provider declared ``name``.

        Arguments are redacted first. A call that fails or passes
        ``call_timeout`` returns an ``Error: ...`` text for the model (and is
        logged), so the turn goes on.
        """
        with self._tools_lock:
            known = bool(self._tools)
            provider = self._tools.get(name)
        if not known:
            self.tool_schemas()
            with self._tools_lock:
                provider = self._tools.get(name)
        if provider is None:
            return None
        redacted = self._redactor.redact_value(arguments)
        result = self._call(
            provider, "handle_tool_call", (name, redacted, session_id), self._settings.call_timeout
        )
        if isinstance(result, _Missing):
            return f"Error: memory tool {name!r} of provider {_name(provider)!r} failed; see logs."
        if not isinstance(result, str):
            self._bad_result(provider, "handle_tool_call", result, "str")
            return f"Error: memory tool {name!r} returned no text."
        return self._clean(provider, "handle_tool_call", result)

    # -- teardown ------------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> bool:
        """Wait for queued ``sync_turn`` / ``on_session_end`` work; False if ``timeout`` ran out."""
        return self._queues.wait_idle(timeout)

    def shutdown(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``, default ``call_timeout``), shut providers down, stop workers.

        Idempotent. Later calls return neutral results; ``sync_turn`` is dropped
        (logged).
        """
        with self._close_lock:
            if self._closed:
                return
            wait = self._settings.call_timeout if timeout is None else timeout
            if not self.flush(wait):
                logger.warning("memory: sync queue not drained after %.1fs at shutdown", wait)
            self._fan_out("shutdown", (), self._settings.call_timeout)
            with self._sync_lock:
                self._closed = True
                self._dropped_syncs += self._syncs_queued
                self._syncs_queued = 0
                dropped = self._dropped_syncs
            if dropped:
                logger.warning(
                    "memory: %d sync_turn call(s) dropped (still queued at shutdown or "
                    "submitted after it); those turns did not reach the memory providers",
                    dropped,
                )
            self._sync_pool.shutdown()
            for pool in self._pools.values():
                pool.shutdown()

    @property
    def dropped_syncs(self) -> int:
        """Turns whose ``sync_turn`` never ran: queued at shutdown, or submitted after it."""
        with self._sync_lock:
            return self._dropped_syncs

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # -- isolation ---------------------------------------------------------------------------
    def _submit(self, provider: MemoryProvider, method: str, args: tuple[Any, ...]) -> Future[Any]:
        with self._breaker_lock:
            until = self._suspended.get(id(provider))
            if until is not None:
                if time.monotonic() < until:
                    raise PoolClosed(f"memory provider {_name(provider)!r} is suspended")
                self._suspended.pop(id(provider), None)
                # half-open: one more failure suspends it again
                self._failures[id(provider)] = BREAKER_FAILURES - 1
        pool = self._pools[id(provider)]
        return pool.submit(getattr(provider, method), *args)

    def _note_success(self, provider: MemoryProvider) -> None:
        with self._breaker_lock:
            failures = self._failures.pop(id(provider), 0)
        if failures:
            logger.info(
                "memory provider %r answers again (after %d failure(s) in a row)",
                _name(provider),
                failures,
            )

    def _note_failure(self, provider: MemoryProvider, method: str, what: str, exc: object) -> None:
        """Count a failure (timeout or exception) on the one breaker; log state changes only.

        The first failure of a streak is logged (with the traceback of an
        exception); later ones are not, until :data:`BREAKER_FAILURES` in a row
        suspend the provider for :data:`BREAKER_SECONDS`, which is logged once.
        """
        with self._breaker_lock:
            count = self._failures.get(id(provider), 0) + 1
            self._failures[id(provider)] = count
            suspend = count >= BREAKER_FAILURES and id(provider) not in self._suspended
            if suspend:
                self._suspended[id(provider)] = time.monotonic() + BREAKER_SECONDS
        if count == 1:
            logger.error(
                "memory provider %r: %s %s (the turn goes on; further failures are not "
                "logged until the provider is suspended or recovers)",
                _name(provider),
                method,
                what,
                exc_info=exc if isinstance(exc, BaseException) else None,
            )
        if suspend:
            logger.warning(
                "memory provider %r failed %d times in a row (last: %s %s); suspended for "
                "%.0fs (its calls are skipped without waiting)",
                _name(provider),
                count,
                method,
                what,
                BREAKER_SECONDS,
            )

    def _call(
        self, provider: MemoryProvider, method: str, args: tuple[Any, ...], timeout: float
    ) -> Any:
        """One isolated call: its result, or ``_MISSING`` after a timeout or an exception."""
        if self._closed:
            return _MISSING
        try:
            future = self._submit(provider, method, args)
        except PoolClosed:
            return _MISSING
        return self._collect(provider, method, future, timeout)

    def _fan_out(
        self, method: str, args: tuple[Any, ...], timeout: float
    ) -> list[tuple[MemoryProvider, Any]]:
        """Call ``method`` on every active provider in parallel, one shared deadline."""
        if self._closed:
            return [(provider, _MISSING) for provider in self.providers]
        started: list[tuple[MemoryProvider, Future[Any] | None]] = []
        for provider in self.providers:
            try:
                started.append((provider, self._submit(provider, method, args)))
            except PoolClosed:
                started.append((provider, None))
        deadline = time.monotonic() + timeout
        wait_futures([f for _p, f in started if f is not None], timeout=timeout)
        out: list[tuple[MemoryProvider, Any]] = []
        for provider, future in started:
            if future is None:
                out.append((provider, _MISSING))
                continue
            remaining = max(0.0, deadline - time.monotonic())
            out.append((provider, self._collect(provider, method, future, remaining, timeout)))
        return out

    def _collect(
        self,
        provider: MemoryProvider,
        method: str,
        future: Future[Any],
        timeout: float,
        limit: float | None = None,
    ) -> Any:
        try:
            result = future.result(timeout=timeout)
        except FutureTimeout:
            future.cancel()  # still queued: never runs; running: result discarded
            seconds = timeout if limit is None else limit
            self._note_failure(provider, method, f"exceeded {seconds:.2f}s", None)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit from a provider must not end the turn
            self._note_failure(provider, method, f"raised {type(exc).__name__}: {exc}", exc)
        else:
            self._note_success(provider)
            return result
        return _MISSING

    def _enqueue(self, session_id: str, job: Callable[[], object]) -> bool:
        if self._closed:
            logger.warning("memory: manager is shut down; work for session %r dropped", session_id)
            return False
        try:
            self._queues.submit(session_id, job)
        except PoolClosed:
            logger.warning("memory: manager is shut down; work for session %r dropped", session_id)
            return False
        return True

    # -- output hygiene ----------------------------------------------------------------------
    def _warn_once(self, provider: MemoryProvider, method: str, message: str, *args: Any) -> None:
        key = (_name(provider), method)
        with self._breaker_lock:
            if key in self._warned:
                return
            self._warned.add(key)
        logger.error(message + " (logged once per provider and method)", *args)

    def _bad_result(
        self, provider: MemoryProvider, method: str, result: object, expected: str
    ) -> None:
        shown = repr(result)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        self._warn_once(
            provider,
            method,
            "memory provider %r: %s returned %s; expected %s; ignored",
            _name(provider),
            method,
            shown,
            expected,
        )

    def _clean(self, provider: MemoryProvider, method: str, text: str) -> str:
        """``text`` with lone surrogates replaced by U+FFFD (logged once per provider/method)."""
        cleaned = clean_text(text)
        if cleaned is not text:
            self._warn_once(
                provider,
                method,
                "memory provider %r: %s returned text with a lone surrogate (not valid "
                "Unicode); replaced by U+FFFD",
                _name(provider),
                method,
            )
        return cleaned

    def _clean_value(self, provider: MemoryProvider, method: str, value: Any) -> Any:
        if isinstance(value, str):
            return self._clean(provider, method, value)
        if isinstance(value, dict):
            return {
                self._clean_value(provider, method, key): self._clean_value(provider, method, item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self._clean_value(provider, method, item) for item in value]
        return value


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


class _NullProvider(MemoryProvider):
    """Stands in for ``builtin`` when the builtin plugin is blocked."""

    name = BUILTIN_NAME


def _name(provider: MemoryProvider) -> str:
    return provider.name or type(provider).__name__


def clean_text(text: str) -> str:
    """``text`` itself when it is valid Unicode, else a copy with lone surrogates as U+FFFD.

    A well-formed surrogate pair (as a ``surrogateescape`` decoder leaves
    none, but a JSON ``\\ud83d\\ude00`` escape does) becomes the character it
    encodes.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def collect_providers(hook: Any, settings: Settings) -> dict[str, MemoryProvider]:
    """Providers contributed through ``register_memory_providers``, by name."""
    providers: dict[str, MemoryProvider] = {}

    def register(provider: MemoryProvider) -> None:
        if not isinstance(provider, MemoryProvider):
            raise RegistrationError(
                f"register_memory_providers: {provider!r:.80} is not a MemoryProvider"
            )
        if not provider.name:
            raise RegistrationError(
                f"register_memory_providers: {type(provider).__name__} has an empty 'name'"
            )
        if provider.name in providers:
            raise RegistrationError(
                f"memory provider name {provider.name!r} is registered twice "
                f"({type(providers[provider.name]).__name__} and {type(provider).__name__})"
            )
        providers[provider.name] = provider

    hook.register_memory_providers(register=register, settings=settings)
    return providers


def select_external(providers: dict[str, MemoryProvider], name: str) -> MemoryProvider | None:
    """The external provider named ``name`` (``memory.provider``); None for ``""``/``builtin``."""
    if not name or name == BUILTIN_NAME:
        return None
    if name not in providers:
        raise UnknownNameError("memory provider", name, list(providers))
    return providers[name]


def tool_schema_problem(schema: object) -> str | None:
    """What makes ``schema`` an invalid OpenAI function-tool schema, or None when valid."""
    if not isinstance(schema, dict):
        return f"expected a dict, got {type(schema).__name__}"
    if schema.get("type") != "function":
        return f"'type' is {schema.get('type')!r}; expected 'function'"
    function = schema.get("function")
    if not isinstance(function, dict):
        return "'function' is missing or not an object"
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return "'function.name' is missing or empty"
    if not all(ch.isalnum() or ch in "_-" for ch in name) or len(name) > 64:
        return f"'function.name' {name!r} must be 1-64 characters of a-z, A-Z, 0-9, _ or -"
    if "description" in function and not isinstance(function["description"], str):
        return f"'function.description' of {name!r} is not a string"
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        return f"'function.parameters' of {name!r} must be a JSON schema with type 'object'"
    properties = parameters.get("properties", {})
    if not isinstance(properties, dict):
        return f"'function.parameters.properties' of {name!r} is not an object"
    required = parameters.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return f"'function.parameters.required' of {name!r} is not a list of names"
    missing = [r for r in required if r not in properties]
    if missing:
        return f"'function.parameters.required' of {name!r} names undeclared {missing!r}"
    return None


def turn_record_from_messages(
    session_id: str, turn_id: str, messages: Sequence[Message]
) -> TurnRecord:
    """A :class:`TurnRecord` for a committed turn: its first user text and last assistant text."""
    user_text = next((m.text() for m in messages if m.role == "user"), "")
    assistant_text = next(
        (m.text() for m in reversed(messages) if m.role == "assistant" and m.text().strip()), ""
    )
    return TurnRecord(
        session_id=session_id,
        turn_id=turn_id,
        user_text=user_text,
        assistant_text=assistant_text,
        messages=list(messages),
    )
