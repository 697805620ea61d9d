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

from hermes_core.testing.store_suite import SessionStoreSuite
from hermes_hookspecs import NewSession
from hermes_plugin_postgres_store.testing import in_ci, scratch_schema


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


# ---------------------------------------------------------------------------
# the suite itself: it must fail on stores that break a rule
# ---------------------------------------------------------------------------


def _broken_stores() -> dict[str, type]:
    base = _sqlite_class()

    class ReversedView(base):  # type: ignore[misc, valid-type]
        def active_messages(self, session_id: str) -> Any:
            return super().active_messages(session_id)[::-1]

    class InterpretsOr(base):  # type: ignore[misc, valid-type]
        def search(self, query: str, **kwargs: Any) -> Any:
            hits: dict[int, Any] = {}
            for part in query.split(" OR "):
                for hit in super().search(part, **kwargs):
                    hits[hit.message_id] = hit
            return list(hits.values())

    class IgnoresLeases(base):  # type: ignore[misc, valid-type]
        def acquire_lease(self, session_id: str, holder: Any, ttl: float, **kwargs: Any) -> Any:
            current = self.current_lease(session_id)
            if current is not None:
                self.release_lease(current)
            return super().acquire_lease(session_id, holder, ttl, **kwargs)

    class HalfCompaction(base):  # type: ignore[misc, valid-type]
        def archive_and_compact(self, session_id: str, new_active: Any, **kwargs: Any) -> Any:
            self.append_messages(session_id, list(new_active[:1]))  # not in the same transaction
            return super().archive_and_compact(session_id, new_active, **kwargs)

    class CountsCopiesTwice(base):  # type: ignore[misc, valid-type]
        def search(self, query: str, **kwargs: Any) -> Any:
            hits = super().search(query, **kwargs)
            extra = []
            for hit in hits:
                (row,) = self.get_messages([hit.message_id])
                if row.origin_id is not None:
                    extra.append(hit.model_copy(update={"message_id": row.origin_id}))
            return hits + extra

    class AdoptsForeignChild(base):  # type: ignore[misc, valid-type]
        # the SQLite store before issue 17: a child's parent_id was overwritten, not checked
        def archive_and_compact(self, session_id: str, new_active: Any, **kwargs: Any) -> Any:
            child = kwargs.get("child")
            if child is not None:
                kwargs["child"] = child.model_copy(update={"parent_id": session_id})
            return super().archive_and_compact(session_id, new_active, **kwargs)

    return {
        cls.__name__: cls
        for cls in (
            ReversedView,
            InterpretsOr,
            IgnoresLeases,
            HalfCompaction,
            CountsCopiesTwice,
            AdoptsForeignChild,
        )
    }


@pytest.mark.parametrize(
    ("broken", "rule", "extra"),
    [
        ("ReversedView", "test_append_orders_ids_and_positions", {}),
        ("InterpretsOr", "test_search_syntax_is_text", {"query": "foo OR qux"}),
        ("IgnoresLeases", "test_acquire_try_once_then_busy", {}),
        ("IgnoresLeases", "test_dead_pid_on_other_host_not_taken_over", {}),
        ("HalfCompaction", "test_compaction_bad_input_changes_nothing", {}),
        ("CountsCopiesTwice", "test_search_counts_carried_forward_rows_once", {}),
        ("AdoptsForeignChild", "test_rotation_refuses_a_foreign_parent_id", {}),
    ],
)
def test_suite_fails_a_store_that_breaks_the_rule(
    tmp_path: Path, broken: str, rule: str, extra: dict[str, Any]
) -> None:
    import inspect

    store = _broken_stores()[broken](tmp_path / "broken.db")
    try:
        available = {
            "store": store,
            "session_id": store.create_session(NewSession(title="suite")).id,
            "store_factory": functools.partial(_broken_stores()[broken], tmp_path / "broken.db"),
            **extra,
        }
        method = getattr(SessionStoreSuite(), rule)
        wanted = {name: available[name] for name in inspect.signature(method).parameters}
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            method(**wanted)
    finally:
        store.close()
