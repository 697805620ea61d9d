"""The contract and the core: plugin loading, blocking, registration, docs, layering."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from hermes_core.config import settings_from
from hermes_core.docsgen import hook_names, hook_signature
from hermes_core.docsgen import main as docsgen_main
from hermes_core.host import Hermes
from hermes_core.plugins import PluginLoadWarning, get_plugin_manager, load_entrypoint_plugins
from hermes_core.registry import Registry
from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    ContextEngine,
    Message,
    PluginError,
    RegistrationError,
    SelectRequest,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    UnknownNameError,
    hookimpl,
    specs,
)
from tests.plugin_site import PluginSite

ROOT = Path(__file__).resolve().parents[2]


def test_every_hookspec_is_documented_with_its_exact_signature() -> None:
    text = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    names = hook_names()
    assert len(names) >= 20
    for name in names:
        assert f"### `{name}`" in text, f"{name} missing from docs/hooks.md"
        assert hook_signature(name) in text, f"signature of {name} differs in docs/hooks.md"


def test_generated_docs_are_fresh() -> None:
    assert docsgen_main(["--check"]) == 0


def test_every_hookspec_has_a_docstring_and_types() -> None:
    for name in hook_names():
        fn = getattr(specs, name)
        assert fn.__doc__ and len(fn.__doc__.strip()) > 20, name
        sig = inspect.signature(fn)
        assert sig.return_annotation is not inspect.Signature.empty, name
        for param in sig.parameters.values():
            assert param.annotation is not inspect.Parameter.empty, (name, param.name)


class Echo(Summarizer):
    name = "echo"

    def summarize(self, request: SummaryRequest) -> SummaryResult:  # pragma: no cover
        raise NotImplementedError


class RegistersEcho:
    @hookimpl
    def register_summarizers(self, register):  # type: ignore[no-untyped-def]
        register(Echo())


class AlsoRegistersEcho:
    @hookimpl
    def register_summarizers(self, register):  # type: ignore[no-untyped-def]
        register(Echo())


def test_duplicate_registration_names_both_plugins() -> None:
    pm = get_plugin_manager(
        settings_from({}),
        load_entrypoints=False,
        plugins=[("first", RegistersEcho()), ("second", AlsoRegistersEcho())],
    )
    with pytest.raises(RegistrationError) as info:
        Registry(pm, settings_from({}))
    message = str(info.value)
    assert "'echo'" in message and "'first'" in message and "'second'" in message


def test_registering_a_wrong_object_is_an_error() -> None:
    class Bad:
        @hookimpl
        def register_summarizers(self, register):  # type: ignore[no-untyped-def]
            register(object())

    pm = get_plugin_manager(settings_from({}), load_entrypoints=False, plugins=[("bad", Bad())])
    with pytest.raises(RegistrationError, match="bad"):
        Registry(pm, settings_from({}))


def test_unknown_name_lists_registered_names() -> None:
    host = Hermes(
        settings_from({"compression": {"summarizer": "nope"}}),
        load_entrypoints=False,
        plugins=[RegistersEcho()],
    )
    with pytest.raises(UnknownNameError) as info:
        host.summarizer()
    assert "nope" in str(info.value) and "echo" in str(info.value)


def test_misspelt_hook_is_rejected() -> None:
    class Typo:
        @hookimpl
        def pre_llm_cal(self):  # type: ignore[no-untyped-def]
            return None

    with pytest.raises(PluginError, match="unknown hook"):
        get_plugin_manager(settings_from({}), load_entrypoints=False, plugins=[Typo()])


def test_a_broken_third_party_plugin_does_not_stop_the_others(plugin_site: PluginSite) -> None:
    plugin_site.add("broken_plugin", "raise RuntimeError('boom at import')\n")
    plugin_site.add(
        "good_plugin",
        """
        from hermes_hookspecs import hookimpl

        @hookimpl
        def pre_llm_call():
            return "good"
        """,
    )
    plugin_site.activate()
    eps = metadata.entry_points(group="hermes_core")
    ours = [ep for ep in eps if ep.name in ("broken_plugin", "good_plugin")]
    assert len(ours) == 2
    pm = get_plugin_manager(settings_from({}), load_entrypoints=False)
    with pytest.warns(PluginLoadWarning) as record:
        load_entrypoint_plugins(pm, settings_from({}), entry_points=ours)
    message = str(record[0].message)
    assert "broken_plugin" in message and "1.2.3" in message and "boom at import" in message
    assert pm.get_plugin("good_plugin") is not None
    assert pm.get_plugin("broken_plugin") is None
    strict = settings_from({"plugins": {"strict": True}})
    pm2 = get_plugin_manager(strict, load_entrypoints=False)
    with pytest.raises(PluginError, match="broken_plugin"):
        load_entrypoint_plugins(pm2, strict, entry_points=ours)


def test_blocking_a_default_plugin_removes_its_registrations() -> None:
    loaded = Hermes(settings_from({}), load_entrypoints=True)
    assert "tiktoken" in loaded.registry.names("tokens")
    blocked = Hermes(
        settings_from({"plugins": {"block": ["tiktoken_counter"]}}), load_entrypoints=True
    )
    assert "tiktoken" not in blocked.registry.names("tokens")
    assert blocked.pm.is_blocked("tiktoken_counter")
    # the estimator takes over, flagged as inexact
    assert blocked.tokens().exact is False


def test_allowlist_loads_only_named_plugins() -> None:
    host = Hermes(settings_from({"plugins": {"load": ["tiktoken_counter"]}}), load_entrypoints=True)
    names = {name for name, plugin in host.pm.list_name_plugin() if plugin is not None}
    assert "tiktoken_counter" in names
    assert "prompt_defaults" not in names
    assert host.pm.is_blocked("prompt_defaults")


def test_the_core_imports_no_plugin() -> None:
    for path in (ROOT / "hermes_core").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: inside hermes_core (``.plugins`` is the core's own)
                    continue
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert not name.startswith("hermes_plugin_"), f"{path} imports {name}"
                # the source tree's plugins/ folder, were it importable from a checkout
                assert name != "plugins" and not name.startswith("plugins."), (
                    f"{path} imports {name}"
                )
    code = (
        "import sys, pkgutil, importlib, hermes_core\n"
        "for m in pkgutil.walk_packages(hermes_core.__path__, 'hermes_core.'):\n"
        "    if not m.name.endswith(('pytest_plugin', '__main__')):\n"
        "        try:\n"
        "            importlib.import_module(m.name)\n"
        "        except ImportError as exc:  # an optional extra's module names its extra\n"
        '            if "hermes-session-core[" not in str(exc):\n'
        "                raise\n"
        "bad = [m for m in sys.modules if m.startswith('hermes_plugin_')]\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_trace_prints_hook_calls(capfd: pytest.CaptureFixture[str]) -> None:
    class Plugin:
        @hookimpl
        def pre_llm_call(self):  # type: ignore[no-untyped-def]
            return "x"

    pm = get_plugin_manager(
        settings_from({"plugins": {"trace": True}}), load_entrypoints=False, plugins=[Plugin()]
    )
    pm.hook.pre_llm_call(session=None, messages=[], user_message=None)
    assert "pre_llm_call" in capfd.readouterr().err


# -- issue #17: one way to replace compression; hosts sharing a plugin manager -----------
class _NamedEngine(ContextEngine):
    def __init__(self, name: str) -> None:
        self.name = name

    def compress(self, request: CompressionRequest) -> CompressionResult:
        return CompressionResult(status="aborted", engine=self.name, reason=f"{self.name} ran")

    def select_context(self, request: SelectRequest) -> list[Message] | None:
        self.selected = request.session_id
        return None


class TwoEngines:
    def __init__(self) -> None:
        self.first, self.second = _NamedEngine("first"), _NamedEngine("second")

    @hookimpl
    def register_context_engines(self, register):  # type: ignore[no-untyped-def]
        register(self.first)
        register(self.second)


def test_two_hosts_on_one_plugin_manager_compress_with_their_own_engine(tmp_path: Path) -> None:
    from hermes_plugin_sqlite_store import plugin as sqlite_plugin

    engines = TwoEngines()

    def settings(name: str) -> Any:
        return settings_from(
            {
                "plugins": {"autoload": False},
                "session": {"path": str(tmp_path / f"{name}.db")},
                "compression": {"engine": name},
            }
        )

    pm = get_plugin_manager(
        settings("first"),
        load_entrypoints=False,
        plugins=[("sqlite_store", sqlite_plugin), engines],
    )
    hosts = [Hermes(settings(name), pm=pm) for name in ("first", "second")]
    try:
        ids = []
        for host, name in zip(hosts, ("first", "second"), strict=True):
            session = host.new_session(cwd=str(tmp_path))
            ids.append(session.id)
            with session.turn() as turn:
                turn.prepare("hello")  # select_context: the host's engine answers
                turn.record_response({"role": "assistant", "content": "hi"})
                turn.commit()
            assert session.compress().reason == f"{name} ran"
        assert (engines.first.selected, engines.second.selected) == tuple(ids)
    finally:
        for host in hosts:
            host.close()


def test_the_core_plugin_keeps_no_host() -> None:
    from hermes_core.host import CorePlugin

    assert vars(CorePlugin()) == {}


def test_per_plugin_calls_follow_registration_changes() -> None:
    """call_each keeps its per-plugin callers only while the implementations stay the same."""
    from hermes_core.plugins import call_each

    def schemas(name: str) -> object:
        class Plugin:
            @hookimpl
            def tool_schemas(self):  # type: ignore[no-untyped-def]
                return [{"type": "function", "function": {"name": name}}]

        return Plugin()

    pm = get_plugin_manager(
        settings_from({}), load_entrypoints=False, plugins=[("a", schemas("a"))]
    )
    assert [owner for owner, _ in call_each(pm, "tool_schemas", context=None, settings=None)] == [
        "a"
    ]
    pm.register(schemas("b"), name="b")
    owners = [owner for owner, _ in call_each(pm, "tool_schemas", context=None, settings=None)]
    assert sorted(owners) == ["a", "b"]
    pm.unregister(name="a")
    assert [owner for owner, _ in call_each(pm, "tool_schemas", context=None, settings=None)] == [
        "b"
    ]


class AnswersCompress:
    @hookimpl
    def compress(self, request, engine):  # type: ignore[no-untyped-def]
        return CompressionResult(status="aborted", engine="plugin", reason="plugin answered")


def test_a_compress_hook_answers_even_when_no_engine_of_the_name_is_registered(
    tmp_path: Path,
) -> None:
    from hermes_plugin_sqlite_store import plugin as sqlite_plugin

    def session_of(*plugins: object) -> Any:
        settings = settings_from(
            {
                "plugins": {"autoload": False},
                "session": {"path": str(tmp_path / f"{len(plugins)}.db")},
                "compression": {"engine": "nowhere"},
            }
        )
        hermes = Hermes(settings, plugins=[("sqlite_store", sqlite_plugin), *plugins])
        session = hermes.new_session(cwd=str(tmp_path))
        with session.turn() as turn:
            turn.prepare("hello")
            turn.record_response({"role": "assistant", "content": "hi"})
            turn.commit()
        return hermes, session

    hermes, session = session_of(AnswersCompress())
    try:
        assert session.compress().reason == "plugin answered"
    finally:
        hermes.close()
    hermes, session = session_of()
    try:
        with pytest.raises(UnknownNameError, match="nowhere"):
            session.compress()
    finally:
        hermes.close()
