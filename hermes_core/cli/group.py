"""The ``hermes-core`` click group and what every command shares (state, options).

The command modules (``commands``, ``config_cmd``, ``mcp``, ``new_cmd``)
import the group from here and register on it; :mod:`hermes_core.cli`
imports them, so the imports run one way.
"""

from __future__ import annotations

import traceback
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
