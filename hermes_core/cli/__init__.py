"""The ``hermes-core`` command line.

Exit codes: 0 success; 1 a hermes-core error (one line on stderr; add
``--traceback`` for the rest); 2 a usage error (bad flag or argument).
Every command that prints data takes ``--json``.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import click

from hermes_hookspecs import HermesError

from ..config import load_settings
from ..host import Hermes


class State:
    """What the group passes to commands: how to build the host."""

    def __init__(self, config: str | None, traceback: bool) -> None:
        self.config = config
        self.traceback = traceback

    def hermes(self, overrides: dict[str, Any] | None = None) -> Hermes:
        return Hermes(load_settings(self.config, overrides=overrides))


class HermesGroup(click.Group):
    """Turns hermes-core errors into one line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HermesError as exc:
            state = ctx.find_object(State)
            if state is not None and state.traceback:
                traceback.print_exc()
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(1)


@click.group(cls=HermesGroup)
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False),
    envvar="HERMES_CORE_CONFIG",
    help="TOML settings file (default: ./hermes.toml when present).",
)
@click.option("--traceback", is_flag=True, help="Show the full traceback on errors.")
@click.version_option(package_name="hermes-core")
@click.pass_context
def cli(ctx: click.Context, config: str | None, traceback: bool) -> None:
    """hermes-core: keep LLM agent sessions healthy for days."""
    ctx.obj = State(config, traceback)


def _one_line_warning(
    message: Warning | str, category: type[Warning], *args: object, **kwargs: object
) -> str:
    return f"Warning: {message}\n"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    import warnings

    from . import commands, mcp  # noqa: F401  (registers the commands)

    warnings.formatwarning = _one_line_warning  # this process is the CLI: one line each
    cli.main(args=argv, prog_name="hermes-core")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
