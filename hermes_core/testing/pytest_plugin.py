"""hermes-core's pytest plugin (entry point ``pytest11``): fixtures for plugin authors.

Installed with hermes-core, so a plugin project's tests can use, without
imports:

* ``hermes_settings``: validated :class:`~hermes_core.config.Settings` with the
  session store in a temporary SQLite file and memory under a temporary home;
* ``fake_openai``: a running :class:`~hermes_core.testing.fake_openai.FakeOpenAIServer`;
* ``hermes_factory``: build a :class:`~hermes_core.Hermes` with entry-point
  autoload OFF and exactly the plugins a test names (closed after the test).

The conformance suites live in :mod:`hermes_core.testing.store_suite`,
:mod:`hermes_core.testing.engine_suite` and
:mod:`hermes_core.testing.memory_suite`; subclass them in your own tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def hermes_settings(tmp_path: Path) -> Any:
    from hermes_core.config import settings_from

    return settings_from(
        {
            "plugins": {"autoload": False},
            "session": {"path": str(tmp_path / "sessions.db")},
            "memory": {"home": str(tmp_path / "memory")},
        }
    )


@pytest.fixture
def hermes_factory(hermes_settings: Any) -> Iterator[Callable[..., Any]]:
    from hermes_core.host import Hermes

    made: list[Any] = []

    def make(*plugins: object, settings: Any = None, **kwargs: Any) -> Any:
        host = Hermes(
            settings or hermes_settings, plugins=plugins, load_entrypoints=False, **kwargs
        )
        made.append(host)
        return host

    yield make
    for host in made:
        host.close()


@pytest.fixture
def fake_openai() -> Iterator[Any]:
    """A loopback OpenAI-compatible server (validated against the ``openai`` types)."""
    from hermes_core.testing.fake_openai import fake_openai_fixture

    yield from fake_openai_fixture()
