"""Fixtures of the PostgreSQL store's tests (``pg_dsn`` is in the root conftest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hermes_plugin_postgres_store.testing import scratch_schema


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    """A scratch schema, dropped afterwards."""
    with scratch_schema(pg_dsn) as name:
        yield name
