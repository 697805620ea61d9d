"""``hermes-core config show``: the effective settings, the paths in force, the threshold."""

from __future__ import annotations

import json
import os

import click

from ..config import config_path
from .group import State, cli, pass_state
from .output import emit_json, visible
from .sessions import describe_store

# ---------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------


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
    data = settings.model_dump(mode="json")
    threshold = hermes.threshold(model=model, context_length=context_length)
    file = config_path(state.config, os.environ)
    resolved = {
        "config_file": str(file) if file is not None else None,
        "session.path": str(settings.session.sqlite_path()),
        "memory.home": str(settings.memory.home_path()),
        "store": describe_store(settings),
    }
    data["effective_threshold"] = threshold.model_dump()
    data["resolved"] = resolved
    if as_json:
        emit_json(data)
        return
    click.echo(f"# configuration file: {resolved['config_file'] or '(none: defaults)'}")
    click.echo("")
    shown_paths = {("session", "path"): resolved["session.path"]}
    shown_paths[("memory", "home")] = resolved["memory.home"]
    for section, values in data.items():
        if section in ("effective_threshold", "resolved"):
            continue
        click.echo(f"[{section}]")
        if isinstance(values, dict):
            for key, value in values.items():
                line = f"{key} = {json.dumps(value)}"
                path = shown_paths.get((section, key))
                if path is not None and value != path:
                    line = f"{key} = {json.dumps(path)}" + (
                        "  # default location" if not value else ""
                    )
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
