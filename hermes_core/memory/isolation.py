"""Isolated calls into memory providers: worker pools, deadlines, one breaker, clean output.

Every provider call runs on a worker thread of a small pool (one pool per
provider, so a hung provider cannot starve the other) and is abandoned at
its deadline; an abandoned call's late result is discarded. Any exception a
provider raises (``BaseException`` included; only ``KeyboardInterrupt``
passes) and any timeout count as a failure on one breaker: after
:data:`BREAKER_FAILURES` failures in a row the provider is suspended for
:data:`BREAKER_SECONDS` (its calls are skipped at once), then tried again.
The log gets one line per change of state, not one per call. Outputs of the
wrong type are reported once per provider and method; text with a lone
surrogate has it replaced by U+FFFD (:func:`~hermes_core.memory.hygiene.clean_text`).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as wait_futures
from typing import Any

from hermes_hookspecs import MemoryProvider

from .hygiene import clean_text, provider_name
from .workers import DaemonPool, PoolClosed

logger = logging.getLogger("hermes_core.memory")

#: worker threads per provider (bounds the threads a hanging provider can hold)
WORKERS_PER_PROVIDER = 4
#: consecutive failures (timeouts or exceptions) after which a provider is suspended
BREAKER_FAILURES = 3
#: the former name, when only timeouts counted
BREAKER_TIMEOUTS = BREAKER_FAILURES
#: how long a suspended provider is skipped before it is tried again
BREAKER_SECONDS = 60.0


class Missing:
    """Marks a call that produced no usable result (timeout, exception, closed)."""


MISSING = Missing()


class IsolatedCalls:
    """The pools, the breaker and the output checks shared by a manager's providers."""

    def __init__(self) -> None:
        #: set by the manager's shutdown: every later call returns :data:`MISSING`
        self.closed = False
        # breaker: provider id -> consecutive failures, and suspended-until (monotonic)
        self._failures: dict[int, int] = {}
        self._suspended: dict[int, float] = {}
        self._breaker_lock = threading.Lock()
        # (provider, method) pairs whose bad output was logged already
        self._warned: set[tuple[str, str]] = set()
        self._pools: dict[int, DaemonPool] = {}

    def add(self, provider: MemoryProvider) -> None:
        """Give ``provider`` its own worker pool."""
        self._pools[id(provider)] = DaemonPool(
            f"hermes-memory-{provider_name(provider)}", WORKERS_PER_PROVIDER
        )

    def remove(self, provider: MemoryProvider) -> None:
        """Stop ``provider``'s pool (it is not used)."""
        self._pools.pop(id(provider)).shutdown()

    def shutdown(self) -> None:
        for pool in self._pools.values():
            pool.shutdown()

    def submit(self, provider: MemoryProvider, method: str, args: tuple[Any, ...]) -> Future[Any]:
        with self._breaker_lock:
            until = self._suspended.get(id(provider))
            if until is not None:
                if time.monotonic() < until:
                    raise PoolClosed(f"memory provider {provider_name(provider)!r} is suspended")
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
                provider_name(provider),
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
                provider_name(provider),
                method,
                what,
                exc_info=exc if isinstance(exc, BaseException) else None,
            )
        if suspend:
            logger.warning(
                "memory provider %r failed %d times in a row (last: %s %s); suspended for "
                "%.0fs (its calls are skipped without waiting)",
                provider_name(provider),
                count,
                method,
                what,
                BREAKER_SECONDS,
            )

    def call(
        self, provider: MemoryProvider, method: str, args: tuple[Any, ...], timeout: float
    ) -> Any:
        """One isolated call: its result, or ``MISSING`` after a timeout or an exception."""
        if self.closed:
            return MISSING
        try:
            future = self.submit(provider, method, args)
        except PoolClosed:
            return MISSING
        return self.collect(provider, method, future, timeout)

    def fan_out(
        self,
        providers: list[MemoryProvider],
        method: str,
        args: tuple[Any, ...],
        timeout: float,
    ) -> list[tuple[MemoryProvider, Any]]:
        """Call ``method`` on every active provider in parallel, one shared deadline."""
        if self.closed:
            return [(provider, MISSING) for provider in providers]
        started: list[tuple[MemoryProvider, Future[Any] | None]] = []
        for provider in providers:
            try:
                started.append((provider, self.submit(provider, method, args)))
            except PoolClosed:
                started.append((provider, None))
        deadline = time.monotonic() + timeout
        wait_futures([f for _p, f in started if f is not None], timeout=timeout)
        out: list[tuple[MemoryProvider, Any]] = []
        for provider, future in started:
            if future is None:
                out.append((provider, MISSING))
                continue
            remaining = max(0.0, deadline - time.monotonic())
            out.append((provider, self.collect(provider, method, future, remaining, timeout)))
        return out

    def collect(
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
        return MISSING

    # -- output hygiene ----------------------------------------------------------------------
    def warn_once(self, provider: MemoryProvider, method: str, message: str, *args: Any) -> None:
        key = (provider_name(provider), method)
        with self._breaker_lock:
            if key in self._warned:
                return
            self._warned.add(key)
        logger.error(message + " (logged once per provider and method)", *args)

    def bad_result(
        self, provider: MemoryProvider, method: str, result: object, expected: str
    ) -> None:
        shown = repr(result)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        self.warn_once(
            provider,
            method,
            "memory provider %r: %s returned %s; expected %s; ignored",
            provider_name(provider),
            method,
            shown,
            expected,
        )

    def clean(self, provider: MemoryProvider, method: str, text: str) -> str:
        """``text`` with lone surrogates replaced by U+FFFD (logged once per provider/method)."""
        cleaned = clean_text(text)
        if cleaned is not text:
            self.warn_once(
                provider,
                method,
                "memory provider %r: %s returned text with a lone surrogate (not valid "
                "Unicode); replaced by U+FFFD",
                provider_name(provider),
                method,
            )
        return cleaned

    def clean_value(self, provider: MemoryProvider, method: str, value: Any) -> Any:
        if isinstance(value, str):
            return self.clean(provider, method, value)
        if isinstance(value, dict):
            return {
                self.clean_value(provider, method, key): self.clean_value(provider, method, item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self.clean_value(provider, method, item) for item in value]
        return value
