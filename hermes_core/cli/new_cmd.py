"""``hermes-core new KIND NAME``: a plugin project from its template (:mod:`..scaffold`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..scaffold import KINDS, render_project
from .group import cli
from .output import emit_json

# ---------------------------------------------------------------------------
# new
# ---------------------------------------------------------------------------


@cli.command("new")
@click.argument("kind", type=click.Choice(list(KINDS)))
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the project (default: ./NAME).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def new_cmd(kind: str, name: str, directory: Path | None, as_json: bool) -> None:
    """Create a plugin project of KIND named NAME from its template.

    The project installs as is, is listed by `hermes-core plugins`, adds the command
    `hermes-core NAME info`, and its tests run hermes-core's conformance suite for KIND.
    """
    dest = directory or Path(name)
    written = render_project(kind, name, dest)
    if as_json:
        emit_json(
            {"kind": kind, "name": name, "path": str(dest), "files": [str(p) for p in written]}
        )
        return
    click.echo(f"created {kind} plugin project {name!r} in {dest}:")
    for path in written:
        click.echo(f"  {path}")
    click.echo(f"next: pip install -e '{dest}[test]' && pytest {dest}")
