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
import traceback
import warnings
from typing import Any

import click
import pluggy

from hermes_hookspecs import DISTRIBUTION, HermesError

from ..config import Settings, load_settings
from ..host import Hermes
from .output import visible


class State:
    """What the group passes to commands: how to build the host."""

    def __init__(
        self,
        config: str | None,
        traceback: bool,
        pm: pluggy.PluginManager | None = None,
        pm_settings: Settings | None = None,
    ) -> None:
        self.config = config
        self.traceback = traceback
        self.db: str | None = None
        self._pm = pm
        self._pm_settings = pm_settings

    def settings(self, overrides: dict[str, Any] | None = None) -> Settings:
        merged: dict[str, Any] = dict(overrides or {})
        if self.db:
            merged["session"] = {**merged.get("session", {}), "path": self.db}
        return load_settings(self.config, overrides=merged or None)

    def hermes(self, overrides: dict[str, Any] | None = None) -> Hermes:
        settings = self.settings(overrides)
        pm = self._pm
        # the start-up manager (which also collected plugin commands) is reused when the
        # same plugins are selected: plugins load, and warn, once per process
        if (
            pm is not None
            and self._pm_settings is not None
            and self._pm_settings.plugins == settings.plugins
        ):
            self._pm = None  # one host per manager
            return Hermes(settings, pm=pm)
        return Hermes(settings)


pass_state = click.make_pass_decorator(State)


def load_commands() -> None:
    """Register the built-in commands on :data:`cli` (idempotent)."""
    from . import commands, config_cmd, mcp, new_cmd  # noqa: F401


def _set_traceback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    state = ctx.find_object(State)
    if value and state is not None:
        state.traceback = True


def _set_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    state = ctx.find_object(State)
    if value and state is not None:
        state.db = value


#: ``--traceback`` on every command, so it works after the subcommand too
TRACEBACK_OPTION = click.Option(
    ["--traceback"],
    is_flag=True,
    expose_value=False,
    callback=_set_traceback,
    help="Show the full traceback on errors.",
)


def db_option(fn: Any) -> Any:
    """``--db FILE``: the SQLite session file for this command (``session.path``)."""
    return click.option(
        "--db",
        type=click.Path(dir_okay=False),
        expose_value=False,
        callback=_set_db,
        help="SQLite session file (session.path).",
    )(fn)


class HermesCommand(click.Command):
    """A command that also accepts ``--traceback``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(TRACEBACK_OPTION)


class HermesGroup(click.Group):
    """Turns hermes-core errors into one line and exit code 1; subcommands take ``--traceback``."""

    command_class = HermesCommand

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not any(param.name == "traceback" for param in self.params):
            self.params.append(TRACEBACK_OPTION)  # `hermes-core sessions --traceback show ...`

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HermesError as exc:
            state = ctx.find_object(State)
            if state is not None and state.traceback:
                traceback.print_exc()
            click.echo(f"Error: {visible(exc)}", err=True)
            ctx.exit(1)


HermesGroup.group_class = HermesGroup


@click.group(cls=HermesGroup)
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False),
    envvar="HERMES_CORE_CONFIG",
    help="TOML settings file (default: ./hermes.toml when present).",
)
@click.option("--traceback", is_flag=True, help="Show the full traceback on errors.")
@click.version_option(package_name=DISTRIBUTION)
@click.pass_context
def cli(ctx: click.Context, config: str | None, traceback: bool) -> None:
    """hermes-core: keep LLM agent sessions healthy for days."""
    pm, pm_settings = _STARTUP.pop() if _STARTUP else (None, None)
    ctx.obj = State(config, traceback, pm=pm, pm_settings=pm_settings)


#: the start-up plugin manager and its settings, handed to the first command's host
_STARTUP: list[tuple[pluggy.PluginManager, Settings]] = []


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
