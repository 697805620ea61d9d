"""Fixtures shared by every test, built on the ones hermes-core ships to plugin authors.

hermes-core's pytest plugin (:mod:`hermes_core.testing.pytest_plugin`, entry point
``pytest11``) gives ``hermes_settings``, ``hermes_factory`` (hosts with entry-point
autoload OFF, closed after the test) and ``fake_openai``. On top of them:

* ``make_host``: a :class:`~tests.hosts.HostFactory`, ``make_host(*plugins, **sections)``,
  for a host holding the named plugins and our own default plugins (autoload still off);
  files under ``tmp_path``; closed after the test;
* ``plugin_site``: a :class:`~tests.plugin_site.PluginSite` for installing real third-party
  plugin distributions in ``tmp_path`` (on ``sys.path`` only when activated, undone after).

Tests about loading entry points themselves build their plugin manager or host explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hosts import HostFactory
from tests.plugin_site import PluginSite


@pytest.fixture
def make_host(hermes_factory: Callable[..., Any], tmp_path: Path) -> HostFactory:
    return HostFactory(hermes_factory, tmp_path)


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PluginSite]:
    site = PluginSite(tmp_path / "site", monkeypatch)
    yield site
    site.forget()


@pytest.fixture(scope="module")
def pg_dsn() -> str:
    """The test PostgreSQL server's DSN; skipped without one, a failure in CI."""
    from hermes_plugin_postgres_store.testing import find_dsn, in_ci

    dsn, reason = find_dsn()
    if dsn is None:
        if in_ci():
            pytest.fail(f"PostgreSQL tests must run in CI: {reason}")
        pytest.skip(reason)
    return dsn
