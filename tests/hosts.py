"""The host factory of this project's tests (the ``make_host`` fixture in ``tests/conftest.py``).

Built on ``hermes_factory``, the fixture hermes-core ships to plugin authors
(:mod:`hermes_core.testing.pytest_plugin`): entry-point autoload is OFF, so a
host holds exactly the plugins a test names plus the default plugins of our
own distribution it asks for, never whatever else is installed. By default
those are all of them (:data:`DEFAULT_PLUGINS`, in the order autoload
registers them) minus what the settings' ``plugins.block`` / ``plugins.load``
lists leave out, the same set ``Hermes(settings)`` loads in this venv. Every
host is closed when the test ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from hermes_core.config import Settings, settings_from
from hermes_core.host import Hermes
from hermes_hookspecs import DISTRIBUTION, ENTRY_POINT_GROUP, SessionStore

Sections = Mapping[str, Mapping[str, Any]]


def _default_plugins() -> tuple[str, ...]:
    eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    ours = {ep.name for ep in eps if ep.dist is not None and ep.dist.name == DISTRIBUTION}
    return tuple(sorted(ours))  # sorted by name, as load_entrypoint_plugins registers them


#: every default plugin (entry-point name) of our distribution, in autoload's order
DEFAULT_PLUGINS = _default_plugins()

#: what the tests' hosts share: files under the test's folder, memory_builtin left out
BASE_SECTIONS: dict[str, dict[str, Any]] = {
    "plugins": {"block": ["memory_builtin"]},
    "session": {"lease_wait": 5.0},
}


def merge(*layers: Sections) -> dict[str, dict[str, Any]]:
    """Settings data from ``layers``; a later layer updates a section key by key."""
    data: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for key, value in layer.items():
            data.setdefault(key, {}).update(value)
    return data


def defaults_for(settings: Settings) -> tuple[str, ...]:
    """The default plugins autoload would register under ``settings`` (block / load lists)."""
    block = set(settings.plugins.block)
    load = set(settings.plugins.load) if settings.plugins.load is not None else None
    return tuple(
        name for name in DEFAULT_PLUGINS if name not in block and (load is None or name in load)
    )


def build_host(settings: Settings, *plugins: object, store: SessionStore | None = None) -> Hermes:
    """``Hermes(settings, plugins=plugins)`` with autoload off and the default plugins by name.

    For a fixture broader than one test (``make_host`` is per test); the caller closes it.
    """
    from hermes_core.testing.pytest_plugin import default_plugins

    extra = default_plugins(defaults_for(settings), plugins)
    return Hermes(settings, plugins=[*extra, *plugins], load_entrypoints=False, store=store)


class HostFactory:
    """``make_host(*plugins, folder=None, defaults=None, **sections) -> Hermes``.

    :param plugins: plugin objects or ``(name, object)`` pairs, registered after the defaults.
    :param folder: where the session database (``s.db``) and the memory home (``mem``) go;
        the test's ``tmp_path`` when omitted.
    :param defaults: default plugins by entry-point name; :func:`defaults_for` the settings
        when omitted, ``()`` for none.
    :param store: a store the host uses instead of opening its own (the caller closes it).
    :param sections: settings sections, each updating the factory's own key by key; a whole
        settings dict passes as ``**data`` (``plugins.autoload`` is forced off).
    """

    def __init__(
        self, build: Callable[..., Any], folder: Path, sections: Sections = BASE_SECTIONS
    ) -> None:
        self._build = build
        self.folder = folder
        self.sections = merge(sections)

    def with_sections(self, **sections: Any) -> HostFactory:
        """The same factory with ``sections`` added to every host it builds."""
        return HostFactory(self._build, self.folder, merge(self.sections, sections))

    def settings(
        self, folder: Path | None = None, *, store_file: bool = True, **sections: Any
    ) -> Settings:
        """The settings a host built with these arguments gets (autoload off).

        ``store_file=False`` leaves out ``session.path`` (a key of the ``sqlite_store``
        plugin, refused when that plugin is not loaded).
        """
        where = folder or self.folder
        files: dict[str, dict[str, Any]] = {"memory": {"home": str(where / "mem")}}
        if store_file:
            files["session"] = {"path": str(where / "s.db")}
        data = merge(files, self.sections, sections, {"plugins": {"autoload": False}})
        return settings_from(data)

    def like(
        self,
        settings: Settings | Mapping[str, Any],
        *plugins: object,
        store: SessionStore | None = None,
    ) -> Hermes:
        """The host ``Hermes(settings, plugins=plugins)`` builds, with autoload off.

        ``settings`` (a :class:`Settings` or its data) is used as given, without the
        factory's own sections or files; the default plugins are the ones its block and
        load lists let autoload register.
        """
        given = settings if isinstance(settings, Settings) else settings_from(dict(settings))
        off = given.model_copy(
            update={"plugins": given.plugins.model_copy(update={"autoload": False})}
        )
        host = self._build(*plugins, settings=off, defaults=defaults_for(off), store=store)
        assert isinstance(host, Hermes)
        return host

    def __call__(
        self,
        *plugins: object,
        folder: Path | None = None,
        defaults: Iterable[str] | None = None,
        store: SessionStore | None = None,
        **sections: Any,
    ) -> Hermes:
        settings = self.settings(folder, **sections)
        names = defaults_for(settings) if defaults is None else tuple(defaults)
        if "sqlite_store" not in names and "path" not in sections.get("session", {}):
            settings = self.settings(folder, store_file=False, **sections)
        host = self._build(*plugins, settings=settings, defaults=names, store=store)
        assert isinstance(host, Hermes)
        return host
