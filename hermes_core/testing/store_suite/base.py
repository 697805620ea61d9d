"""The fixtures and knobs every store check uses."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import pytest

from hermes_hookspecs import (
    NewSession,
    SessionStore,
)

from .helpers import StoreFactory


class SuiteBase:
    """Fixtures: ``store_factory`` (required), ``store``, ``session_id``; knobs below."""

    short_ttl: ClassVar[float] = 0.4
    handover_budget: ClassVar[float] = 0.5
    multiprocess: ClassVar[bool] = True

    # -- fixtures -------------------------------------------------------------
    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        pytest.fail(
            f"{type(self).__name__} must define a 'store_factory' fixture returning a "
            "zero-argument callable that opens a new handle on the test's database"
        )

    @pytest.fixture
    def store(self, store_factory: StoreFactory) -> Iterator[SessionStore]:
        handle = store_factory()
        try:
            yield handle
        finally:
            handle.close()

    @contextmanager
    def second_handle(self, store_factory: StoreFactory) -> Iterator[SessionStore]:
        handle = store_factory()
        try:
            yield handle
        finally:
            handle.close()

    @pytest.fixture
    def session_id(self, store: SessionStore) -> str:
        sid: str = store.create_session(NewSession(title="suite")).id
        return sid
