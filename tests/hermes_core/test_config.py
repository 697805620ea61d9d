"""Settings loading and the effective compression threshold."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_core.config import Settings, load_settings, settings_from
from hermes_core.plugin_settings import bind_plugin_settings, declared_settings
from hermes_core.plugins import get_plugin_manager
from hermes_core.thresholds import effective_threshold
from hermes_hookspecs import ConfigError


def validated(settings: Settings, *plugins: object) -> Settings:
    """``settings`` with every plugin section validated, as the host does once plugins load."""
    pm = get_plugin_manager(settings, load_entrypoints=False, plugins=plugins)
    bind_plugin_settings(settings, declared_settings(pm))
    return settings


def test_toml_file_and_env_overrides(tmp_path: Path) -> None:
    path = tmp_path / "hermes.toml"
    path.write_text('[compression]\ntail = "legacy"\nthreshold = 0.6\n', encoding="utf-8")
    env = {"HERMES_CORE__COMPRESSION__THRESHOLD": "0.7", "HERMES_CORE_BLOCK_PLUGINS": "a, b"}
    settings = load_settings(path, environ=env)
    assert settings.compression.tail == "legacy"
    assert settings.compression.threshold == 0.7
    assert settings.plugins.block == ["a", "b"]


def test_unknown_key_names_the_key_and_value(tmp_path: Path) -> None:
    path = tmp_path / "hermes.toml"
    path.write_text("[compression]\ntreshold = 0.6\n", encoding="utf-8")
    settings = load_settings(path, environ={})  # the core's keys: plugins may add to the table
    with pytest.raises(ConfigError) as info:
        validated(settings)
    assert "compression.treshold" in str(info.value) and "0.6" in str(info.value)


def test_bad_value_names_key_value_and_expectation() -> None:
    with pytest.raises(ConfigError) as info:
        settings_from({"compression": {"threshold": 1.5}})
    text = str(info.value)
    assert "compression.threshold" in text and "1.5" in text and "less than or equal" in text


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml", environ={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[compression\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad, environ={})


def test_threshold_floor_for_small_windows() -> None:
    report = effective_threshold(settings_from({}), model="gpt-4o", context_length=200_000)
    assert report.floor_applied and report.ratio == 0.75
    big = effective_threshold(settings_from({}), model="gpt-4.1", context_length=1_000_000)
    assert not big.floor_applied and big.ratio == 0.5


def test_model_thresholds_longest_match_wins_and_floor_never_lowers() -> None:
    s = settings_from({"compression": {"model_thresholds": {"gpt": 0.6, "gpt-4.1": 0.9}}})
    report = effective_threshold(s, model="openai/gpt-4.1-mini", context_length=1_000_000)
    assert report.matched_model_key == "gpt-4.1" and report.ratio == 0.9
    small = effective_threshold(s, model="gpt-4.1", context_length=100_000)
    assert small.ratio == 0.9  # above the floor: unchanged


def test_threshold_tokens_caps_and_summarizer_clamps() -> None:
    s = settings_from({"compression": {"threshold_tokens": 50_000}})
    report = effective_threshold(s, model="m", context_length=200_000)
    assert report.threshold_tokens == 50_000 and report.capped_by_threshold_tokens
    clamped = effective_threshold(
        settings_from({}), model="m", context_length=200_000, summarizer_window=32_000
    )
    assert clamped.clamped_by_summarizer
    assert clamped.threshold_tokens == 32_000 - 4_000 - 2_000
    with pytest.raises(ConfigError, match="too small"):
        effective_threshold(settings_from({}), model="m", summarizer_window=8_000)


def test_reserved_output_comes_off_the_window() -> None:
    s = settings_from({"model": {"max_output_tokens": 10_000}})
    report = effective_threshold(s, model="m", context_length=100_000)
    assert report.usable_window == 90_000
    assert report.threshold_tokens == int(90_000 * 0.75)


# -- secrets in config errors (issue #16 item 11) ------------------------------------------


def test_config_errors_hide_values_of_secret_keys() -> None:
    from hermes_core.config import HIDDEN

    key = "sk-proj-Zt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO"
    import hermes_plugin_summarizer_openai

    with pytest.raises(ConfigError) as bad:  # an unknown key
        validated(
            settings_from({"summarizer": {"openai": {"api_key": key}}}),
            hermes_plugin_summarizer_openai,
        )
    message = str(bad.value)
    assert "summarizer.openai.api_key" in message and HIDDEN in message
    assert key not in message


def test_config_errors_hide_secret_shaped_values_under_any_key() -> None:
    secrets = [
        "sk-proj-Zt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO",  # an API key in the wrong place
        "ghp_4rT9wQ2zX7cV1bN8mK3jH6gF5dS0aP2oI9uY",
        "postgres://app:pg-Pa55word@db.internal:5432/app",
    ]
    for secret in secrets:
        with pytest.raises(ConfigError) as bad:
            settings_from({"model": {"name": "gpt-4o", "context_length": secret}})
        assert secret not in str(bad.value) and "model.context_length" in str(bad.value)
    env = {"HERMES_CORE__MODEL__BASE_URL": "x", "HERMES_CORE__MODEL__APIKEY": secrets[0]}
    with pytest.raises(ConfigError) as bad:
        validated(load_settings(environ=env))
    assert secrets[0] not in str(bad.value) and "model.apikey" in str(bad.value)


def test_config_errors_still_show_ordinary_values() -> None:
    with pytest.raises(ConfigError) as bad:
        settings_from({"model": {"context_length": "lots"}})
    assert "'lots'" in str(bad.value)
    with pytest.raises(ConfigError) as bad:
        settings_from({"compression": {"summary_input_tokens": -5}})
    assert "-5" in str(bad.value)  # a number is not a secret, even under a *_tokens key


def test_config_errors_show_model_names_and_paths() -> None:
    from hermes_core.config import may_be_secret

    assert not may_be_secret("model.name", "gpt-4o-mini-2024-07-18")
    assert not may_be_secret("session.path", "/home/ada/projects/agent-2024/sessions.db")
    assert may_be_secret("model.name", "9f8e7d6c5b4a39281706f5e4d3c2b1a0")  # 32 hex digits
    assert may_be_secret("model.name", "sk-proj-Zt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO")
