"""The default session store: one SQLite file (WAL, FTS5, turn leases).

Registered under the name ``sqlite``; see :class:`SqliteSessionStore`.
"""

from __future__ import annotations

from .health import HealthReport
from .leases import LeaseKeeper
from .store import DEFAULT_BUSY_BUDGET, DEFAULT_FTS_INDEX_CAP, SqliteSessionStore

__all__ = [
    "DEFAULT_BUSY_BUDGET",
    "DEFAULT_FTS_INDEX_CAP",
    "HealthReport",
    "LeaseKeeper",
    "SqliteSessionStore",
]
