"""hermes-core's pytest plugin (entry point ``pytest11``): fixtures for plugin authors.

Installed with hermes-core, so a plugin project's tests can use, without
imports:

* ``hermes_settings``: validated :class:`~hermes_core.config.Settings` with the
  session store in a temporary SQLite file and memory under a temporary home
  (``hermes_factory`` leaves the file's ``session.path`` out of a host built
  without the ``sqlite_store`` plugin, since a key no loaded plugin declares
  is a configuration error);
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


def _loads_sqlite(*groups: list[object] | tuple[object, ...]) -> bool:
    """Whether the ``sqlite_store`` entry point's module is among the plugins."""
    from importlib import metadata

    from hermes_hookspecs import ENTRY_POINT_GROUP

    found = [
        ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == "sqlite_store"
    ]
    module = found[0].module if found else None
    return any(getattr(plugin, "__name__", None) == module for group in groups for plugin in group)


def _without_sqlite_path(settings: Any) -> Any:
    """``hermes_settings`` minus its ``session.path``, for a host without the sqlite store
    (a key no loaded plugin declares is a configuration error)."""
    copy = settings.model_copy(deep=True)
    copy._plugin_data.get("session", {}).pop("path", None)
    return copy


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
        chosen = settings
        if chosen is None:
            chosen = hermes_settings
            if not _loads_sqlite([plugin for _, plugin in extra], plugins):
                chosen = _without_sqlite_path(chosen)
        host = Hermes(
            chosen,
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
