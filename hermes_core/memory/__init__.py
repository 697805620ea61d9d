"""Memory: the manager that calls the builtin and the external memory provider, isolated.

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
  session on a queue (:class:`~hermes_core.memory.workers.SessionQueues`).
  Syncs still queued at shutdown, or submitted after it, are dropped and
  their count is logged at shutdown (:attr:`MemoryManager.dropped_syncs`).
  :meth:`MemoryManager.on_session_end` is queued behind that session's pending
  syncs. :meth:`MemoryManager.flush` waits for the queues to drain.
* Everything handed to a provider (queries, turns, messages, tool arguments)
  passes through the :class:`~hermes_core.redaction.Redactor` first.

The package, by concern: :mod:`~hermes_core.memory.manager` (the manager's
API), :mod:`~hermes_core.memory.isolation` (pools, deadlines, the breaker),
:mod:`~hermes_core.memory.hygiene` (output checks),
:mod:`~hermes_core.memory.selection` (the providers, from the host's registry)
and :mod:`~hermes_core.memory.workers` (daemon pools, per-session queues).

The host builds the manager (:meth:`hermes_core.host.Hermes.memory`) and the
runtime reaches it only through :class:`hermes_core.events.RuntimeEvents`,
which calls the matching hook and the manager in one call per event::

    manager = hermes.memory()                     # builtin + memory.provider
    manager.initialize(MemorySession(session_id=sid, cwd=cwd, model=model))
    blocks = manager.prompt_blocks(sid)          # when the prompt is (re)built
    recall = manager.prefetch(user_text, sid)     # per turn → user message API content
    manager.sync_turn(turn_record_from_messages(sid, turn_id, turn_messages))
    insights = manager.on_pre_compress(sid, active_messages)   # before compaction
    manager.on_session_switch(sid, new_sid, "compression")      # after compaction
    manager.shutdown()
"""

from .hygiene import clean_text, provider_name, tool_schema_problem
from .isolation import (
    BREAKER_FAILURES,
    BREAKER_SECONDS,
    BREAKER_TIMEOUTS,
    WORKERS_PER_PROVIDER,
    IsolatedCalls,
)
from .manager import (
    BUILTIN_NAME,
    PROMPT_BLOCK_ORDER,
    SYNC_WORKERS,
    MemoryManager,
    turn_record_from_messages,
)
from .selection import NullProvider, manager_from_registry

__all__ = [
    "BREAKER_FAILURES",
    "BREAKER_SECONDS",
    "BREAKER_TIMEOUTS",
    "BUILTIN_NAME",
    "PROMPT_BLOCK_ORDER",
    "SYNC_WORKERS",
    "WORKERS_PER_PROVIDER",
    "IsolatedCalls",
    "MemoryManager",
    "NullProvider",
    "clean_text",
    "manager_from_registry",
    "provider_name",
    "tool_schema_problem",
    "turn_record_from_messages",
]
