"""The memory manager: the builtin and the external memory provider behind one API.

See :mod:`hermes_core.memory` for the isolation it promises; the calls run
through :class:`~hermes_core.memory.isolation.IsolatedCalls`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from hermes_hookspecs import (
    Layer,
    MemoryProvider,
    MemorySession,
    Message,
    PromptBlock,
    TurnRecord,
)

from ..config import MemorySettings
from ..redaction import Redactor
from .hygiene import provider_name, tool_schema_problem
from .isolation import IsolatedCalls, Missing
from .workers import DaemonPool, PoolClosed, SessionQueues

logger = logging.getLogger("hermes_core.memory")

BUILTIN_NAME = "builtin"
#: position of the memory blocks inside the volatile layer
PROMPT_BLOCK_ORDER = 700
#: threads draining the per-session ``sync_turn`` queues
SYNC_WORKERS = 4


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
        self._calls = IsolatedCalls()
        # sync_turn jobs queued and not yet started; dropped ones (counted at shutdown)
        self._sync_lock = threading.Lock()
        self._syncs_queued = 0
        self._dropped_syncs = 0
        self._close_lock = threading.Lock()
        self._builtin = builtin
        self._calls.add(builtin)
        self._sync_pool = DaemonPool("hermes-memory-sync", SYNC_WORKERS)
        self._queues = SessionQueues(self._sync_pool)
        self._tools: dict[str, MemoryProvider] = {}
        self._tools_lock = threading.Lock()
        self._external: MemoryProvider | None = None
        if external is not None and external is not builtin:
            self._calls.add(external)
            available = self._calls.call(external, "is_available", (), settings.call_timeout)
            if available is True:
                self._external = external
            else:
                if available is False:
                    logger.warning(
                        "memory provider %r is not available; continuing with %r only",
                        provider_name(external),
                        provider_name(builtin),
                    )
                self._calls.remove(external)

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
            if result is None or isinstance(result, Missing):
                continue
            if not isinstance(result, str):
                self._calls.bad_result(provider, "system_prompt_block", result, "str or None")
                continue
            result = self._calls.clean(provider, "system_prompt_block", result)
            if result.strip():
                blocks.append(
                    PromptBlock(
                        layer=Layer.VOLATILE,
                        key=f"memory:{provider_name(provider)}",
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
            if result is None or isinstance(result, Missing):
                continue
            if not isinstance(result, str):
                self._calls.bad_result(provider, "prefetch", result, "str or None")
                continue
            result = self._calls.clean(provider, "prefetch", result)
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
            if result is None or isinstance(result, Missing):
                continue
            if not isinstance(result, list) or not all(isinstance(i, str) for i in result):
                self._calls.bad_result(provider, "on_pre_compress", result, "list[str]")
                continue
            cleaned = [self._calls.clean(provider, "on_pre_compress", item) for item in result]
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
            if result is None or isinstance(result, Missing):
                continue
            if not isinstance(result, list):
                self._calls.bad_result(provider, "tool_schemas", result, "list of tool schemas")
                continue
            for schema in result:
                schema = self._calls.clean_value(provider, "tool_schemas", schema)
                problem = tool_schema_problem(schema)
                if problem:
                    logger.error(
                        "memory provider %r: invalid tool schema dropped: %s",
                        provider_name(provider),
                        problem,
                    )
                    continue
                tool = schema["function"]["name"]
                if tool in routes:
                    logger.error(
                        "memory provider %r: tool %r is already declared by %r; dropped",
                        provider_name(provider),
                        tool,
                        provider_name(routes[tool]),
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
        result = self._calls.call(
            provider, "handle_tool_call", (name, redacted, session_id), self._settings.call_timeout
        )
        if isinstance(result, Missing):
            return (
                f"Error: memory tool {name!r} of provider {provider_name(provider)!r} failed; "
                "see logs."
            )
        if not isinstance(result, str):
            self._calls.bad_result(provider, "handle_tool_call", result, "str")
            return f"Error: memory tool {name!r} returned no text."
        return self._calls.clean(provider, "handle_tool_call", result)

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
                self._calls.closed = True
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
            self._calls.shutdown()

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
    @property
    def _closed(self) -> bool:
        return self._calls.closed

    def _fan_out(
        self, method: str, args: tuple[Any, ...], timeout: float
    ) -> list[tuple[MemoryProvider, Any]]:
        """Call ``method`` on every active provider in parallel, one shared deadline."""
        return self._calls.fan_out(self.providers, method, args, timeout)

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
