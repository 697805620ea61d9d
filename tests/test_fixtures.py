"""The shared fixtures of tests/conftest.py keep their promise: hosts hold what autoload would
register from our own distribution, in its order, and nothing else that is installed."""

from __future__ import annotations

from hermes_core.host import Hermes
from tests.hosts import DEFAULT_PLUGINS, HostFactory
from tests.plugin_site import PluginSite

STRAY = """
from hermes_hookspecs import hookimpl

@hookimpl
def pre_llm_call():
    return "stray"
"""


def registered(host: Hermes) -> list[str]:
    return [name for name, plugin in host.pm.list_name_plugin() if plugin is not None]


def test_make_host_is_autoload_without_what_else_is_installed(
    make_host: HostFactory, plugin_site: PluginSite
) -> None:
    plugin_site.add("stray_plugin", STRAY)
    plugin_site.activate()
    settings = make_host.settings()
    assert settings.plugins.autoload is False
    autoload = settings.model_copy(
        update={"plugins": settings.plugins.model_copy(update={"autoload": True})}
    )
    with Hermes(autoload) as loaded:
        everything = registered(loaded)
    assert "stray_plugin" in everything  # installed, so autoload takes it
    ours = registered(make_host())
    assert "stray_plugin" not in ours
    assert ours == [name for name in everything if name != "stray_plugin"]
    assert "memory_builtin" not in ours and "sqlite_store" in ours


def test_block_and_load_lists_and_defaults_choose_the_default_plugins(
    make_host: HostFactory,
) -> None:
    assert "memory_builtin" in DEFAULT_PLUGINS
    with_memory = registered(make_host(plugins={"block": []}))
    assert "memory_builtin" in with_memory
    only = registered(make_host(plugins={"load": ["sqlite_store", "tiktoken_counter"]}))
    assert [n for n in only if n in DEFAULT_PLUGINS] == ["sqlite_store", "tiktoken_counter"]
    assert [n for n in registered(make_host(defaults=())) if n in DEFAULT_PLUGINS] == []
