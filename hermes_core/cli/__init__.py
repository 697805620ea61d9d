"""The ``hermes-core`` command line (also ``python -m hermes_core``).

Exit codes: 0 success (an empty result included: it says so on stderr); 1 a
hermes-core error such as an unknown session id (one line on stderr; add
``--traceback``, accepted before or after the subcommand, for the rest); 2 a
usage error (bad flag or argument). Every command that prints data takes
``--json``: the stored text exactly as stored, where the human output shows
control characters escaped (``\\x1b``).

Plugins add commands through the ``register_commands(cli)`` hook; they are
collected once at start-up from the plugins that ``--config`` /
``HERMES_CORE_CONFIG`` / ``./hermes.toml`` and the environment select.
"""

from __future__ import annotations

import sys
import warnings

import click
import pluggy

from hermes_hookspecs import HermesError

from ..config import Settings, load_settings
from .group import (
    _STARTUP,
    TRACEBACK_OPTION,
    HermesCommand,
    HermesGroup,
    State,
    cli,
    db_option,
    pass_state,
)
from .output import visible

__all__ = [
    "TRACEBACK_OPTION",
    "HermesCommand",
    "HermesGroup",
    "State",
    "add_plugin_commands",
    "cli",
    "db_option",
    "load_commands",
    "main",
    "pass_state",
]


def load_commands() -> None:
    """Register the built-in commands on :data:`cli` (idempotent)."""
    from . import commands, config_cmd, mcp, new_cmd  # noqa: F401


def _one_line_warning(
    message: Warning | str, category: type[Warning], *args: object, **kwargs: object
) -> str:
    return f"Warning: {visible(message)}\n"


def _config_arg(argv: list[str]) -> str | None:
    for index, arg in enumerate(argv):
        if arg == "--config" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def add_plugin_commands(
    group: click.Group, argv: list[str]
) -> tuple[pluggy.PluginManager, Settings] | None:
    """Load the selected plugins and let them add commands (``register_commands``).

    Returns the manager and settings for reuse, or None when the settings do not
    load (the command itself then reports the error).
    """
    from ..plugins import get_plugin_manager

    try:
        settings = load_settings(_config_arg(argv))
    except HermesError:
        return None
    try:
        pm = get_plugin_manager(settings)
    except HermesError as exc:
        click.echo(f"Warning: plugin commands not loaded: {exc}", err=True)
        return None
    from ..plugins import each_implementation

    builtin = dict(group.commands)
    for owner, caller in each_implementation(pm, "register_commands"):
        try:
            caller(cli=group)
        except Exception as exc:
            if settings.plugins.strict:
                raise HermesError(
                    f"plugin {owner!r} failed in register_commands: {type(exc).__name__}: {exc}"
                ) from exc
            click.echo(
                f"Warning: plugin {owner!r} failed in register_commands and its commands are "
                f"missing: {type(exc).__name__}: {exc}",
                err=True,
            )
        for name, command in builtin.items():
            if group.commands.get(name) is not command:
                group.commands[name] = command
                click.echo(
                    f"Warning: plugin {owner!r} adds a command {name!r}, which is built in; "
                    "the built-in command is kept",
                    err=True,
                )
    return pm, settings


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    load_commands()
    args = sys.argv[1:] if argv is None else list(argv)
    warnings.formatwarning = _one_line_warning  # this process is the CLI: one line each
    try:
        startup = add_plugin_commands(cli, args)
    except HermesError as exc:
        click.echo(f"Error: {exc}", err=True)
        raise SystemExit(1) from None
    _STARTUP[:] = [startup] if startup else []
    cli.main(args=args, prog_name="hermes-core")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
