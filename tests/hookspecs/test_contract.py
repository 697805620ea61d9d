"""The versioned contract, deprecations, block/load list checks and the exported errors."""

from __future__ import annotations

import types
import warnings
from importlib import metadata
from pathlib import Path

import pluggy
import pytest

import hermes_core
import hermes_hookspecs
from hermes_core.config import settings_from
from hermes_core.plugin_checks import PluginListWarning, check_contract
from hermes_core.plugins import PluginLoadWarning, get_plugin_manager, load_entrypoint_plugins
from hermes_hookspecs import (
    CONTRACT_VERSION,
    HermesDeprecationWarning,
    PluginError,
    deprecated,
    hookimpl,
    hookspec,
    specs,
)
from tests.plugin_site import PluginSite


def test_the_contract_carries_its_version() -> None:
    assert hermes_hookspecs.__version__ == CONTRACT_VERSION
    major = int(CONTRACT_VERSION.split(".")[0])
    assert major >= 1
    assert hermes_hookspecs.DISTRIBUTION == "hermes-session-core"
    assert metadata.distribution("hermes-session-core").version == hermes_core.__version__


def _plugin(contract: str | None) -> types.ModuleType:
    module = types.ModuleType("contract_plugin")
    if contract is not None:
        module.hermes_contract = contract  # type: ignore[attr-defined]

    @hookimpl
    def pre_llm_call() -> str:
        return "x"

    module.pre_llm_call = pre_llm_call  # type: ignore[attr-defined]
    return module


def test_a_plugin_inside_its_declared_range_registers() -> None:
    major = CONTRACT_VERSION.split(".")[0]
    for declared in (None, f">={major},<{int(major) + 1}", f"=={major}.*"):
        pm = get_plugin_manager(
            settings_from({}), load_entrypoints=False, plugins=[("p", _plugin(declared))]
        )
        assert pm.get_plugin("p") is not None


def test_a_plugin_outside_its_declared_range_is_refused_with_both_versions() -> None:
    with pytest.raises(PluginError) as info:
        get_plugin_manager(
            settings_from({}), load_entrypoints=False, plugins=[("future", _plugin(">=99"))]
        )
    message = str(info.value)
    assert "'future'" in message and "'>=99'" in message and CONTRACT_VERSION in message
    with pytest.raises(PluginError, match="not a version range"):
        check_contract("typo", _plugin("version one"))


def test_an_incompatible_entry_point_plugin_is_listed_as_failed(plugin_site: PluginSite) -> None:
    plugin_site.add(
        "old_contract_plugin",
        """
        from hermes_hookspecs import hookimpl

        hermes_contract = "<1"

        @hookimpl
        def pre_llm_call():
            return "old"
        """,
    )
    plugin_site.activate()
    eps = [
        ep for ep in metadata.entry_points(group="hermes_core") if ep.name == "old_contract_plugin"
    ]
    pm = get_plugin_manager(settings_from({}), load_entrypoints=False)
    with pytest.warns(PluginLoadWarning, match="supports hermes contract '<1'"):
        load_entrypoint_plugins(pm, settings_from({}), entry_points=eps)
    assert pm.get_plugin("old_contract_plugin") is None
    origin = pm.hermes_origins.origins["old_contract_plugin"]  # type: ignore[attr-defined]
    assert "contract" in origin.error and CONTRACT_VERSION in origin.error
    strict = settings_from({"plugins": {"strict": True}})
    with pytest.raises(PluginError, match="old_contract_plugin"):
        load_entrypoint_plugins(
            get_plugin_manager(strict, load_entrypoints=False), strict, entry_points=eps
        )


class DeprecatingSpecs:
    """A future minor contract: one hook and one argument deprecated the documented way."""

    @hookspec(
        warn_on_impl=deprecated(
            "hook on_old_event", since="1.1", removal="2.0", use="on_session_start"
        )
    )
    def on_old_event(self, session: object) -> None:
        """An event hook on its way out."""

    @hookspec(
        warn_on_impl_args={
            "messages": deprecated(
                "argument messages of on_turn", since="1.1", removal="2.0", use="turn"
            )
        }
    )
    def on_turn(self, turn: object, messages: object) -> None:
        """A hook with an argument on its way out."""


def test_deprecated_hooks_and_arguments_warn_when_implemented() -> None:
    pm = pluggy.PluginManager("hermes_core")
    pm.add_hookspecs(specs)
    pm.add_hookspecs(DeprecatingSpecs)

    class Old:
        @hookimpl
        def on_old_event(self, session: object) -> None:
            return None

    class UsesOldArgument:
        @hookimpl
        def on_turn(self, messages: object) -> None:
            return None

    class UsesNewArgument:
        @hookimpl
        def on_turn(self, turn: object) -> None:
            return None

    with pytest.warns(HermesDeprecationWarning) as record:
        pm.register(Old())
    message = str(record[0].message)
    assert "on_old_event" in message and "1.1" in message and "2.0" in message
    assert "on_session_start" in message
    with pytest.warns(HermesDeprecationWarning, match="argument messages of on_turn"):
        pm.register(UsesOldArgument())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pm.register(UsesNewArgument())  # the replacement does not warn


def test_a_block_list_naming_no_plugin_is_reported() -> None:
    settings = settings_from({"plugins": {"block": ["user-turns", "tail_legasy"]}})
    with pytest.warns(PluginListWarning) as record:
        get_plugin_manager(settings)
    messages = [str(w.message) for w in record]
    engine = next(m for m in messages if "'user-turns'" in m)
    assert "plugins.block" in engine and "HERMES_CORE_BLOCK_PLUGINS" in engine
    assert "distribution" in engine and "engine" in engine and "compressor" in engine
    typo = next(m for m in messages if "'tail_legasy'" in m)
    assert "did you mean 'tail_legacy'" in typo
    strict = settings_from({"plugins": {"load": ["nope"], "strict": True}})
    with pytest.raises(PluginError, match=r"plugins\.load .*'nope'"):
        get_plugin_manager(strict)


def test_known_plugin_and_distribution_names_are_accepted() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        blocked = get_plugin_manager(settings_from({"plugins": {"block": ["tail_legacy"]}}))
        assert blocked.is_blocked("tail_legacy")
        # a distribution name blocks (or allows) every plugin it ships
        allowed = get_plugin_manager(settings_from({"plugins": {"load": ["hermes-session-core"]}}))
        assert allowed.get_plugin("compressor") is not None
        none = get_plugin_manager(settings_from({"plugins": {"block": ["Hermes_Session.Core"]}}))
        assert none.get_plugin("compressor") is None and none.is_blocked("compressor")


def test_errors_are_exported_from_the_package_root() -> None:
    from hermes_core import (  # noqa: F401
        ConfigError,
        HermesError,
        ImportFormatError,
        LeaseBusy,
        LeaseLost,
        NotFoundError,
        PluginError,
        StoreError,
        ValidationError,
    )

    assert issubclass(LeaseBusy, StoreError) and issubclass(StoreError, HermesError)
    assert hermes_core.LeaseLost is hermes_hookspecs.LeaseLost


def test_the_distribution_name_is_used_everywhere() -> None:
    import tomllib

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[2]
    ours = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    assert ours["project"]["name"] == hermes_hookspecs.DISTRIBUTION
    dev = [Requirement(r) for r in ours["project"]["optional-dependencies"]["dev"]]
    assert any(r.name == hermes_hookspecs.DISTRIBUTION and "test" in r.extras for r in dev)
    for project in sorted((root / "docs" / "examples").glob("*/pyproject.toml")):
        data = tomllib.loads(project.read_text(encoding="utf-8"))
        names = {Requirement(r).name for r in data["project"]["dependencies"]}
        assert hermes_hookspecs.DISTRIBUTION in names, project
        assert "hermes-core" not in names, f"{project} depends on PyPI's unrelated hermes-core"
    readme = (root / "README.md").read_text(encoding="utf-8")
    for line in (
        "pip install hermes-session-core",
        "pip install 'hermes-session-core[postgres]'",
        "pip install 'hermes-session-core[charts]'",
    ):
        assert line in readme


def test_written_by_user_excludes_harness_text_handoffs_and_provider_items() -> None:
    from hermes_hookspecs import HandoffSummary, Message

    assert Message(role="user", content="fix the build").written_by_user
    assert not Message(role="user", content="<r/>", harness="x.reminder").written_by_user
    assert not Message(role="assistant", content="done").written_by_user
    summary = Message(role="user", content="s", kind="summary", summary=HandoffSummary())
    assert not summary.written_by_user
    item = Message(role="user", content=None, kind="compaction", provider_item={"id": "c"})
    assert not item.written_by_user


def test_a_handoff_holding_a_lone_surrogate_is_refused_naming_its_place() -> None:
    """A summary record is checked for text that is not Unicode (a lone surrogate) as a
    message's content is, and the error names the field it sits in."""
    from hermes_hookspecs import HandoffFact, HandoffSummary, Message

    clean = HandoffSummary(goal="ship it", facts=[HandoffFact(kind="request", text="ship it")])
    assert Message(role="user", content="s", kind="summary", summary=clean).summary == clean
    bad = HandoffSummary(
        facts=[HandoffFact(kind="request", text="ok"), HandoffFact(kind="error", text="a\udc80")]
    )
    with pytest.raises(ValueError, match=r"summary\.facts\[1\]\.text holds a lone surrogate"):
        Message(role="user", content="s", kind="summary", summary=bad)
