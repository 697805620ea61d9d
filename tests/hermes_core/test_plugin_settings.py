"""Plugins own their settings: ``register_settings``, validation at load, ``config show``, docs."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import Field

from hermes_core.config import load_settings, settings_from
from hermes_core.docsgen import config_section, default_settings_models, hook_names
from hermes_core.host import Hermes
from hermes_hookspecs import (
    CompressionSettings,
    ConfigError,
    NewSession,
    RegistrationError,
    Settings,
    SettingsSection,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    hookimpl,
    specs,
)
from hermes_hookspecs.settings import CompressionConfig
from hermes_plugin_sqlite_store import SqliteSessionStore

ROOT = Path(__file__).resolve().parents[2]


class AcmeSettings(SettingsSection):
    config_section: ClassVar[str] = "acme"

    url: str = Field(default="", description="Where acme lives.")
    retries: int = Field(default=2, ge=0, description="Attempts after the first.")


class AcmeSummarizer(Summarizer):
    name = "acme"

    def __init__(self, settings: AcmeSettings) -> None:
        self.settings = settings

    def summarize(self, request: SummaryRequest) -> SummaryResult:  # pragma: no cover
        raise NotImplementedError


class Acme:
    """A third-party plugin with a table of its own, read typed in a register hook."""

    @hookimpl
    def register_settings(self, register):  # type: ignore[no-untyped-def]
        register(AcmeSettings)

    @hookimpl
    def register_summarizers(self, register, settings):  # type: ignore[no-untyped-def]
        register(AcmeSummarizer(settings.section(AcmeSettings)))


def host(settings: Settings, *plugins: object) -> Hermes:
    return Hermes(settings, load_entrypoints=False, plugins=plugins)


def test_a_third_party_plugin_reads_its_typed_section(tmp_path: Path) -> None:
    config = tmp_path / "hermes.toml"
    config.write_text('[acme]\nurl = "http://127.0.0.1:1/acme"\nretries = 1\n', encoding="utf-8")
    settings = load_settings(config, environ={"HERMES_CORE__ACME__RETRIES": "5"})
    with host(settings, ("acme_plugin", Acme())) as hermes:
        acme = hermes.registry.get("summarizers", "acme")
        assert isinstance(acme.settings, AcmeSettings)
        assert (acme.settings.url, acme.settings.retries) == ("http://127.0.0.1:1/acme", 5)
        assert hermes.settings.section(AcmeSettings) is acme.settings
        assert hermes.settings.section_owner(AcmeSettings) == "acme_plugin"


def test_unknown_key_in_a_plugin_section_names_section_key_value_and_plugin() -> None:
    settings = settings_from({"acme": {"url": "x", "retires": 3}})
    with pytest.raises(ConfigError) as info:
        host(settings, ("acme_plugin", Acme()))
    text = str(info.value)
    assert "'acme.retires'" in text and "3" in text
    assert "[acme]" in text and "'acme_plugin'" in text


def test_bad_value_in_a_plugin_section_names_key_value_expectation_and_plugin() -> None:
    settings = settings_from({"acme": {"retries": -1}})
    with pytest.raises(ConfigError) as info:
        host(settings, ("acme_plugin", Acme()))
    text = str(info.value)
    assert "acme.retries = -1" in text and "greater than or equal to 0" in text
    assert "plugin 'acme_plugin'" in text


def test_a_secret_in_a_plugin_section_is_not_echoed() -> None:
    key = "sk-proj-Zt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO"
    with pytest.raises(ConfigError) as info:
        host(settings_from({"acme": {"retries": key}}), ("acme_plugin", Acme()))
    assert key not in str(info.value) and "acme.retries" in str(info.value)


def test_the_cores_mcp_table_is_checked_when_the_host_loads() -> None:
    """``[extensions.mcp]`` is the core's typed section: a typo fails at load, not at serve."""
    from hermes_core.integrations.mcp_settings import McpSettings

    with pytest.raises(ConfigError) as info:
        host(settings_from({"extensions": {"mcp": {"sesions": ["a"]}}}))
    assert "'extensions.mcp.sesions'" in str(info.value)
    with pytest.raises(ConfigError) as bad:
        host(settings_from({"extensions": {"mcp": {"list_limit": 0}}}))
    assert "extensions.mcp.list_limit = 0" in str(bad.value)
    with host(settings_from({"extensions": {"mcp": {"sessions": ["a"], "list_limit": 3}}})) as h:
        section = h.settings.section(McpSettings)
        assert (section.sessions, section.list_limit) == (["a"], 3)
        assert h.settings.section_owner(McpSettings) == "hermes_core.core"
        one_run = McpSettings.from_settings(h.settings, sessions="all", budget_tokens=None)
        assert (one_run.sessions, one_run.list_limit, one_run.budget_tokens) == ("all", 3, 2_000)
        with pytest.raises(ConfigError, match=r"extensions\.mcp\.budget_tokens"):
            McpSettings.from_settings(h.settings, budget_tokens=5)
    # a legacy third-party [extensions.NAME] table stays untyped and accepted
    host(settings_from({"extensions": {"acme_legacy": {"anything": 1}}})).close()


def test_a_table_no_loaded_plugin_declares_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        host(settings_from({"acme": {"url": "x"}}))
    assert "'acme.url'" in str(info.value) and "a loaded plugin declares a table [acme]" in str(
        info.value
    )


class AddsEngineKey(SettingsSection):
    config_section: ClassVar[str] = "compression"

    engine: str = "mine"


class AddsBand(SettingsSection):
    config_section: ClassVar[str] = "compression"

    band: int = Field(default=7, description="A band.")


def _declaring(*models: type[SettingsSection]) -> object:
    class Plugin:
        @hookimpl
        def register_settings(self, register):  # type: ignore[no-untyped-def]
            for model in models:
                register(model)

    return Plugin()


def test_a_plugin_adds_keys_to_a_core_table() -> None:
    settings = settings_from({"compression": {"band": 9, "threshold": 0.6}})
    with host(settings, ("band_plugin", _declaring(AddsBand))) as hermes:
        assert hermes.settings.section(AddsBand).band == 9
        assert hermes.settings.compression.threshold == 0.6


def test_a_key_declared_twice_in_one_table_names_both_owners() -> None:
    with pytest.raises(RegistrationError) as core_clash:
        host(Settings(), ("engine_plugin", _declaring(AddsEngineKey)))
    assert "'compression.engine'" in str(core_clash.value)
    assert "the core" in str(core_clash.value) and "'engine_plugin'" in str(core_clash.value)
    with pytest.raises(RegistrationError) as twice:
        host(Settings(), ("first", _declaring(AddsBand)), ("second", _declaring(AddsBand)))
    assert "'first'" in str(twice.value) and "'second'" in str(twice.value)


def test_registering_something_else_than_a_settings_model_is_an_error() -> None:
    with pytest.raises(RegistrationError, match="SettingsSection"):
        host(Settings(), ("odd", _declaring(dict)))  # type: ignore[arg-type]


# -- the default plugins: existing files and environment variables keep working ------------


def test_existing_keys_of_the_default_plugins_keep_their_place(tmp_path: Path) -> None:
    from hermes_plugin_compressor import CompressorSettings
    from hermes_plugin_memory_builtin import BuiltinMemorySettings
    from hermes_plugin_sqlite_store.settings import SqliteStoreSettings
    from hermes_plugin_summarizer_openai import OpenAISummarizerSettings
    from hermes_plugin_tail_lean import LeanTailSettings

    config = tmp_path / "hermes.toml"
    config.write_text(
        "[session]\n"
        f'path = "{tmp_path / "s.db"}"\n'
        "[compression]\nlean_tail_min_tokens = 9000\nbreaker_after = 4\n"
        "[memory]\nuser_char_limit = 123\n"
        '[summarizer.openai]\nmodel = "gpt-x"\n',
        encoding="utf-8",
    )
    env = {"HERMES_CORE__SUMMARIZER__OPENAI__BASE_URL": "http://127.0.0.1:9/v1"}
    with Hermes(load_settings(config, environ=env)) as hermes:
        s = hermes.settings
        assert s.section(SqliteStoreSettings).sqlite_path() == tmp_path / "s.db"
        assert s.section(LeanTailSettings).lean_tail_min_tokens == 9000
        assert s.section(CompressorSettings).breaker_after == 4
        assert s.section(BuiltinMemorySettings).user_char_limit == 123
        openai = s.section(OpenAISummarizerSettings)
        assert (openai.model, openai.base_url) == ("gpt-x", "http://127.0.0.1:9/v1")
        assert hermes.summarizer_name() == "openai"  # configured: preferred, as before
        lean = hermes.tail_strategy("lean")
        assert lean.settings.lean_tail_min_tokens == 9000  # type: ignore[attr-defined]
        created = hermes.store().create_session(NewSession())  # opens the file configured above
        assert (tmp_path / "s.db").exists()
    with SqliteSessionStore(tmp_path / "s.db") as store:  # and the session is in that file
        assert store.get_session(created.id).id == created.id


def test_the_postgres_dsn_variable_is_ambient(tmp_path: Path) -> None:
    import hermes_plugin_postgres_store
    from hermes_plugin_postgres_store import PostgresStoreSettings

    env = {"HERMES_CORE_POSTGRES_DSN": "postgresql://127.0.0.1:1/none"}
    without = host(load_settings(environ=env))  # no store plugin declares the key: no error
    without.close()
    with host(load_settings(environ=env), hermes_plugin_postgres_store) as hermes:
        assert (
            hermes.settings.section(PostgresStoreSettings).postgres_dsn
            == env["HERMES_CORE_POSTGRES_DSN"]
        )


def test_a_section_names_the_environment_variables_that_set_its_keys(tmp_path: Path) -> None:
    # the mechanism behind HERMES_CORE_POSTGRES_DSN, open to any plugin: the core names no
    # plugin's variable (it used to map that one itself)
    class Ambient(SettingsSection):
        config_section: ClassVar[str] = "acme"
        environment: ClassVar[dict[str, str]] = {"url": "HERMES_CORE_ACME_URL"}

        url: str = Field(default="", description="Where acme lives.")

    class Plugin:
        @hookimpl
        def register_settings(self, register):  # type: ignore[no-untyped-def]
            register(Ambient)

    config = tmp_path / "hermes.toml"
    config.write_text('[acme]\nurl = "http://127.0.0.1:1/file"\n', encoding="utf-8")
    env = {"HERMES_CORE_ACME_URL": "http://127.0.0.1:2/env"}
    with host(load_settings(config, environ=env), ("ambient", Plugin())) as hermes:
        assert hermes.settings.section(Ambient).url == "http://127.0.0.1:2/env"  # over the file
    with host(load_settings(config, environ={}), ("ambient", Plugin())) as hermes:
        assert hermes.settings.section(Ambient).url == "http://127.0.0.1:1/file"
    # an unloaded plugin's variable is nobody's key: no error, nothing configured
    host(load_settings(environ=env)).close()


# -- the contract: core fields only, typed settings -----------------------------------------


def test_compression_settings_carry_only_core_fields() -> None:
    core = set(CompressionConfig.model_fields) | {"threshold_tokens", "context_length"}
    assert set(CompressionSettings.model_fields) <= core
    plugin_keys = {
        key
        for _plugin, model in default_settings_models()
        if model.config_section == "compression"
        for key in model.model_fields
    }
    # the tails' bands and the engine's cooldown and breaker are their plugins' own keys
    assert {"lean_tail_min_tokens", "tail_min_messages", "breaker_after"} <= plugin_keys
    assert not plugin_keys & set(CompressionSettings.model_fields)


def test_hooks_receive_typed_settings() -> None:
    for name in hook_names():
        parameters = inspect.signature(getattr(specs, name)).parameters
        if "settings" in parameters:
            assert parameters["settings"].annotation in ("Settings", Settings), name


# -- config show and the generated reference ----------------------------------------------


def test_every_default_plugin_key_is_in_the_generated_reference() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    declared = default_settings_models()
    assert {plugin for plugin, _ in declared} >= {
        "compressor",
        "memory_builtin",
        "postgres_store",
        "prompt_defaults",
        "sqlite_store",
        "summarizer_openai",
        "tail_lean",
        "tail_legacy",
    }
    for plugin, model in declared:
        for key in model.model_fields:
            assert f"| `{model.config_section}.{key}` |" in text, (plugin, key)
    assert config_section().strip() in text


def test_config_show_lists_every_plugin_section_with_effective_values(tmp_path: Path) -> None:
    (tmp_path / "hermes.toml").write_text(
        '[session]\npostgres_dsn = "postgres://app:pg-Pa55word@db.internal:5432/app"\n'
        '[summarizer.openai]\nmodel = "gpt-x"\n[compression]\nlean_tail_min_tokens = 9000\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_CORE")} | {
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }

    def show(*args: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "hermes_core", "config", "show", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout

    text = show()
    assert "[summarizer.openai]  # declared by summarizer_openai" in text
    assert 'model = "gpt-x"' in text and "lean_tail_min_tokens = 9000" in text
    assert "[session]  # declared by the core, postgres_store, sqlite_store" in text
    assert str(tmp_path / "data" / "hermes-core" / "sessions.db") in text  # resolved path
    assert "pg-Pa55word" not in text and 'postgres_dsn = "<hidden' in text
    data: dict[str, Any] = json.loads(show("--json"))
    assert data["summarizer"]["openai"]["model"] == "gpt-x"
    assert data["compression"]["lean_tail_min_tokens"] == 9000
    assert "pg-Pa55word" not in json.dumps(data)


def test_a_bad_plugin_value_is_one_cli_error_naming_key_and_plugin(tmp_path: Path) -> None:
    (tmp_path / "hermes.toml").write_text(
        "[compression]\nlean_tail_min_tokens = -3\n", encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_CORE")}
    out = subprocess.run(
        [sys.executable, "-m", "hermes_core", "config", "show"],
        cwd=tmp_path,
        env={**env, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and out.stderr.startswith("Error:")
    assert out.stderr.strip().count("\n") == 0
    assert "compression.lean_tail_min_tokens = -3" in out.stderr and "'tail_lean'" in out.stderr
    assert str(tmp_path / "hermes.toml") in out.stderr  # the source, as for the core's keys


def test_plugins_json_lists_the_settings_tables_each_plugin_declares(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_CORE")}
    out = subprocess.run(
        [sys.executable, "-m", "hermes_core", "plugins", "--json"],
        cwd=tmp_path,
        env={**env, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        check=True,
    )
    rows = {row["name"]: row for row in json.loads(out.stdout)}
    assert rows["summarizer_openai"]["settings"] == ["summarizer.openai"]
    assert rows["sqlite_store"]["settings"] == ["session"]
    assert rows["recall"]["settings"] == ["extensions.recall"]
