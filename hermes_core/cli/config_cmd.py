"""``hermes-core config show``: the effective settings, the paths in force, the threshold."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from ..config import HIDDEN, Settings, config_path, may_be_secret
from ..plugin_settings import resolved_value, section_values
from . import State, cli, pass_state
from .output import emit_json, visible
from .sessions import describe_store

# ---------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------


def effective_tables(settings: Settings) -> dict[str, Any]:
    """The core's settings with every plugin's validated keys merged in, as nested tables."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    for model in settings.sections():
        node = data
        for part in model.config_section.split("."):
            node = node.setdefault(part, {})
        node.update(section_values(settings, model.config_section))
    return data


def flat_tables(settings: Settings, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The nested tables as ``{"summarizer.openai": {...}}``, one entry per table printed.

    The top-level keys and the tables plugins declare are tables; any other
    dict (``compression.model_thresholds``) is a value.
    """
    declared = {model.config_section for model in settings.sections()}
    out: dict[str, dict[str, Any]] = {}

    def is_table(path: str, value: Any) -> bool:
        nested = path in declared or any(d.startswith(path + ".") for d in declared)
        return isinstance(value, dict) and ("." not in path or nested)

    def walk(node: dict[str, Any], prefix: str) -> None:
        plain = {k: v for k, v in node.items() if not is_table(f"{prefix}.{k}" if prefix else k, v)}
        if prefix and (plain or prefix in declared or prefix in Settings.model_fields):
            out[prefix] = plain
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            if is_table(path, value):
                walk(value, path)

    walk(data, "")
    return out


def masked(key: str, value: Any) -> Any:
    """``value``, or :data:`~hermes_core.config.HIDDEN` when it may be a secret (a DSN, a
    token, a URL with a password; see :func:`~hermes_core.config.may_be_secret`). Keys
    naming an environment variable (``api_key_env``) hold a name, not a secret."""
    if key.endswith("_env") or not isinstance(value, str) or not value:
        return value
    return HIDDEN if may_be_secret(key, value) else value


def masked_tree(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``data`` with every value that may be a secret replaced (see :func:`masked`)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        out[key] = masked_tree(value, path) if isinstance(value, dict) else masked(path, value)
    return out


def table_owners(settings: Settings, table: str) -> list[str]:
    """The plugins that declare keys of ``table``, for the ``config show`` heading."""
    return sorted(
        {
            settings.section_owner(model) or model.__name__
            for model in settings.sections()
            if model.config_section == table
        }
    )


def resolved_paths(settings: Settings) -> dict[tuple[str, str], str]:
    """``(table, key) → value`` for every plugin key its plugin resolves (a default file)."""
    out: dict[tuple[str, str], str] = {}
    for model, section in settings.sections().items():
        for key, value in section.resolved_values().items():
            out[(model.config_section, key)] = value
    return out


@cli.group("config")
def config_group() -> None:
    """Inspect the configuration."""


@config_group.command("show")
@click.option("--model", help="Model name for the effective threshold.")
@click.option("--context-length", type=int, help="Context window for the effective threshold.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def config_show(state: State, model: str | None, context_length: int | None, as_json: bool) -> None:
    """Print the effective configuration, the paths in force and the compression threshold."""
    hermes = state.hermes()
    settings = hermes.settings
    data = effective_tables(settings)
    threshold = hermes.threshold(model=model, context_length=context_length)
    file = config_path(state.config, os.environ)
    resolved = {
        "config_file": str(file) if file is not None else None,
        "session.path": resolved_value(settings, "session", "path") or None,
        "memory.home": str(settings.memory.home_path()),
        "store": describe_store(settings),
    }
    if as_json:
        shown = masked_tree(data)
        emit_json({**shown, "effective_threshold": threshold.model_dump(), "resolved": resolved})
        return
    click.echo(f"# configuration file: {resolved['config_file'] or '(none: defaults)'}")
    click.echo("")
    shown_paths = resolved_paths(settings)
    shown_paths[("memory", "home")] = str(settings.memory.home_path())
    for section, values in flat_tables(settings, data).items():
        owners = table_owners(settings, section)
        if owners and section in Settings.model_fields:
            owners = ["the core", *owners]
        click.echo(f"[{section}]" + (f"  # declared by {', '.join(owners)}" if owners else ""))
        for key, value in values.items():
            line = f"{key} = {json.dumps(masked(f'{section}.{key}', value))}"
            path = shown_paths.get((section, key))
            if path is not None and value != path:
                line = f"{key} = {json.dumps(path)}" + ("  # default location" if not value else "")
            click.echo(visible(line))
        click.echo("")
    t = threshold
    click.echo("# effective compression threshold")
    click.echo(
        f"model {t.model!r}, window {t.context_length}, usable {t.usable_window}, "
        f"ratio {t.ratio} (base {t.base_ratio}"
        + (f", matched {t.matched_model_key!r}" if t.matched_model_key else "")
        + (", raised to the small-window floor" if t.floor_applied else "")
        + ")"
    )
    click.echo(
        f"threshold_tokens = {t.threshold_tokens}"
        + (" (capped by threshold_tokens)" if t.capped_by_threshold_tokens else "")
        + (" (clamped to the summarizer window)" if t.clamped_by_summarizer else "")
    )
    click.echo(f"hygiene_tokens = {t.hygiene_tokens}")
