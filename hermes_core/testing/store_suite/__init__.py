"""A conformance suite for session stores, to subclass in a store author's own tests.

Usage (in the store project's ``tests/test_conformance.py``)::

    import functools
    import pytest
    from hermes_core.testing.store_suite import SessionStoreSuite
    from acme_store import AcmeSessionStore

    class TestAcmeConformance(SessionStoreSuite):
        @pytest.fixture
        def store_factory(self, tmp_path):
            # a fresh, empty database per test; every call opens a NEW handle on it
            return functools.partial(AcmeSessionStore, tmp_path / "sessions.db")

The suite checks the rules of :class:`hermes_hookspecs.SessionStore` (its
docstrings are the contract): ordering of the active view and of write order,
atomic compaction (watermark, rotation, nothing deleted), search semantics
(query syntax is text, substring and CJK matches, ``include_compacted``,
carried-forward rows reported once, recovery pointers), turn-lease and
fencing rules (try once, waiting woken promptly, stale tokens rejected,
takeover after expiry or of a dead holder on this host) and bad input that
leaves every stored thing unchanged.

Fixtures a subclass provides or overrides:

* ``store_factory`` (required): a zero-argument callable that opens a new
  handle on the test's own, initially empty database. Each call must return
  a separate handle (its own connections), as a second process would. The
  process tests send it to child processes started with ``spawn``, so it must
  be picklable (a :func:`functools.partial` of your class with plain
  arguments is); set ``multiprocess = False`` to skip those tests.
* ``store``: the handle the tests use (default: ``store_factory()``, closed
  after the test).

Knobs (class attributes): ``short_ttl`` (seconds, lease TTL in the expiry
tests), ``handover_budget`` (seconds a waiter may take to get a released
lease), ``multiprocess``.
"""

from __future__ import annotations

from .base import SuiteBase
from .blobs import BlobChecks
from .compaction import CompactionChecks
from .helpers import (
    SYNTAX_QUERIES,
    StoreFactory,
    assistant,
    carry,
    covers,
    dead_pid,
    snapshot,
    summary,
    texts,
    tool,
    user,
    zombie_process,
)
from .leases import LeaseChecks
from .ledgers import LedgerChecks
from .messages import MessageChecks
from .search import SearchChecks
from .sessions import SessionChecks


class SessionStoreSuite(
    SessionChecks,
    BlobChecks,
    MessageChecks,
    CompactionChecks,
    SearchChecks,
    LedgerChecks,
    LeaseChecks,
):
    """Subclass with a ``store_factory`` fixture; every ``test_*`` checks one rule.

    The checks live in one module per concern (``sessions``, ``blobs``,
    ``messages``, ``compaction``, ``search``, ``ledgers``, ``leases``); a
    store may subclass just the ones it implements (each is a
    :class:`SuiteBase` with the same fixtures).
    """


__all__ = [
    "SYNTAX_QUERIES",
    "BlobChecks",
    "CompactionChecks",
    "LeaseChecks",
    "LedgerChecks",
    "MessageChecks",
    "SearchChecks",
    "SessionChecks",
    "SessionStoreSuite",
    "StoreFactory",
    "SuiteBase",
    "assistant",
    "carry",
    "covers",
    "dead_pid",
    "snapshot",
    "summary",
    "texts",
    "tool",
    "user",
    "zombie_process",
]
