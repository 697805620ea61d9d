"""hermes-core's pytest plugin (entry point ``pytest11``): fixtures for plugin authors.

Installed with hermes-core, so a plugin project's tests can use, without
imports:

* ``hermes_settings``: validated :class:`~hermes_core.config.Settings` with the
  session store in a temporary SQLite file and memory under a temporary home;
* ``fake_openai``: a running :class:`~hermes_core.testing.fake_openai.FakeOpenAIServer`;
* ``hermes_factory``: build a :class:`~hermes_core.Hermes` with entry-point
  autoload OFF and the plugins a test names, plus the two defaults every host
  needs, :data:`FACTORY_DEFAULTS` (the ``sqlite_store`` session store and the
  ``tiktoken_counter`` token counter, loaded through their entry points), so
  ``hermes_factory(my_plugin)`` is a working host. Pass ``defaults=()`` for
  exactly the named plugins (closed after the test).

The conformance suites live in :mod:`hermes_core.testing.store_suite`,
:mod:`hermes_core.testing.engine_suite` and
:mod:`hermes_core.testing.memory_suite`; subclass them in your own tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

#: default plugins (entry-point names) ``hermes_factory`` adds unless told otherwise
FACTORY_DEFAULTS = ("sqlite_store", "tiktoken_counter")


def default_plugins(names: tuple[str, ...], given: tuple[object, ...]) -> list[tuple[str, object]]:
    """The entry points ``names``, loaded, minus any object already in ``given``."""
    from importlib import metadata

    from hermes_hookspecs import DISTRIBUTION, ENTRY_POINT_GROUP, PluginError

    found = {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    out: list[tuple[str, object]] = []
    for name in names:
        if name not in found:
            raise PluginError(
                f"hermes_factory: default plugin {name!r} is not installed (it ships with "
                f"{DISTRIBUTION}); pass defaults=() to build a host without it"
            )
        plugin = found[name].load()
        if not any(plugin is item for item in given):
            out.append((name, plugin))
    return out


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

    def make(
        *plugins: object,
        settings: Any = None,
        defaults: tuple[str, ...] = FACTORY_DEFAULTS,
        **kwargs: Any,
    ) -> Any:
        extra = default_plugins(tuple(defaults), plugins)
        host = Hermes(
            settings or hermes_settings,
            plugins=[*extra, *plugins],
            load_entrypoints=False,
            **kwargs,
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
