"""Both built-in session stores against the conformance suite (hermes_core.testing.store_suite).

The PostgreSQL half needs a server: ``HERMES_CORE_POSTGRES_DSN``, or the local
one that ``.ci/start-postgres.sh`` starts. Without one it skips (and says how
to start one); under CI (``CI=true``) it fails instead.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hermes_plugin_postgres_store.testing import find_dsn, in_ci, scratch_schema

from hermes_core.testing.store_suite import SessionStoreSuite


@pytest.fixture(scope="module")
def pg_dsn() -> str:
    dsn, reason = find_dsn()
    if dsn is None:
        if in_ci():
            pytest.fail(f"PostgreSQL tests must run in CI: {reason}")
        pytest.skip(reason)
    return dsn


def _sqlite_class() -> Any:
    try:
        from hermes_plugin_sqlite_store import SqliteSessionStore
    except ImportError as exc:
        if in_ci():
            pytest.fail(f"the SQLite store cannot be imported: {exc}")
        pytest.skip(f"the SQLite store is not available yet: {exc}")
    return SqliteSessionStore


class TestSqliteStoreConformance(SessionStoreSuite):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Any:
        return functools.partial(_sqlite_class(), tmp_path / "sessions.db")


@pytest.mark.postgres
class TestPostgresStoreConformance(SessionStoreSuite):
    @pytest.fixture
    def store_factory(self, pg_dsn: str) -> Iterator[Any]:
        from hermes_plugin_postgres_store import PostgresSessionStore

        with scratch_schema(pg_dsn) as schema:
            yield functools.partial(
                PostgresSessionStore, pg_dsn, schema=schema, min_size=1, max_size=4
            )
