"""Worker threads for the memory manager: a bounded daemon pool and per-session FIFO queues.

Why not :class:`concurrent.futures.ThreadPoolExecutor`: its workers are
joined at interpreter exit, so one provider call that never returns would
keep the host process from exiting. These workers are daemon threads; a
hung call is abandoned by its caller (after its timeout) and dies with the
process. The pool is bounded, so a provider that hangs on every call ties up
at most ``max_workers`` threads; later calls wait in the queue and are
cancelled by their callers' timeouts.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger("hermes_core.memory")

_Job = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]


class PoolClosed(RuntimeError):
    """The pool was shut down; no new work is accepted."""


class DaemonPool:
    """A bounded pool of daemon worker threads, started on demand.

    :param name: thread-name prefix (shown in thread dumps).
    :param max_workers: upper bound on live worker threads.
    """

    def __init__(self, name: str, max_workers: int) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers={max_workers!r}: expected at least 1")
        self._name = name
        self._max_workers = max_workers
        self._queue: SimpleQueue[_Job | None] = SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on a worker; raises :class:`PoolClosed` after :meth:`shutdown`."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise PoolClosed(f"worker pool {self._name!r} is shut down")
            self._queue.put((future, fn, args))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max_workers:
                thread = threading.Thread(
                    target=self._work,
                    name=f"{self._name}-{len(self._threads)}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            future, fn, args = job
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:  # handed to the caller through the future
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del job, future, fn, args
            self._idle.release()

    def shutdown(self) -> None:
        """Stop accepting work; idle workers exit, busy ones after their current call."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for _thread in self._threads:
                self._queue.put(None)


class SessionQueues:
    """Run jobs one at a time per key (session id), in submission order.

    Keys are independent: each key with pending jobs has one drain task on
    ``pool``, so a slow session does not hold up the others (up to the pool's
    size). A job that raises is logged and the queue goes on.
    """

    def __init__(self, pool: DaemonPool) -> None:
        self._pool = pool
        self._cond = threading.Condition()
        self._pending: dict[str, deque[Callable[[], object]]] = {}
        self._draining: set[str] = set()

    def submit(self, key: str, job: Callable[[], object]) -> None:
        """Queue ``job`` behind the earlier jobs of ``key``."""
        with self._cond:
            self._pending.setdefault(key, deque()).append(job)
            if key in self._draining:
                return
            self._draining.add(key)
            try:
                self._pool.submit(self._drain, key)
            except PoolClosed:
                self._draining.discard(key)
                self._pending.pop(key, None)
                self._cond.notify_all()
                raise

    def _drain(self, key: str) -> None:
        while True:
            with self._cond:
                queue = self._pending.get(key)
                if not queue:
                    self._pending.pop(key, None)
                    self._draining.discard(key)
                    self._cond.notify_all()
                    return
                job = queue.popleft()
            try:
                job()
            except KeyboardInterrupt:
                raise
            except BaseException:  # SystemExit too: the queue must go on
                logger.exception("memory: a queued job for session %r failed", key)

    def pending(self) -> int:
        """Jobs queued or running, over all keys (a running job counts as its key's one)."""
        with self._cond:
            return sum(len(q) for q in self._pending.values()) + len(self._draining)

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until every queue is empty and no job runs; False when ``timeout`` ran out."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._draining, timeout)
