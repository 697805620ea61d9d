"""``hermes-core mcp``: serve session recall to MCP clients over stdio.

A module of its own, so the command's import of the optional ``mcp`` extra
happens only when it runs (``hermes-core --help`` works without it).
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import click

from hermes_hookspecs import DISTRIBUTION, ConfigError

from .group import State, cli
from .sessions import missing_database


@cli.command("mcp")
@click.option(
    "--session",
    "sessions",
    multiple=True,
    help="Session id clients may read (repeat; default: extensions.mcp.sessions).",
)
@click.option("--all", "all_sessions", is_flag=True, help="Let clients read every session.")
@click.option("--db", type=click.Path(path_type=Path), help="SQLite file (session.path).")
@click.option("--budget-tokens", type=click.IntRange(min=100), help="Most tokens of one result.")
@click.pass_obj
def mcp_cmd(
    state: State,
    sessions: tuple[str, ...],
    all_sessions: bool,
    db: Path | None,
    budget_tokens: int | None,
) -> None:
    """Serve session_search, session_open and sessions_list over MCP (stdio, read-only)."""
    if sessions and all_sessions:
        raise click.UsageError("--session and --all exclude each other")
    try:
        from ..integrations.mcp_server import serve_stdio
    except ImportError as exc:
        raise ConfigError(str(exc)) from None
    from ..integrations.mcp_settings import McpSettings
    from ..integrations.recall_service import RecallService

    overrides = {"session": {"path": str(db)}} if db is not None else None
    hermes = state.hermes(overrides)
    missing = missing_database(hermes.settings)
    if missing is not None:
        # a read-only server must not create an empty store at a mistyped path
        raise ConfigError(f"no session store at {missing} (session.path / --db)")
    try:
        scope: str | list[str] | None = "all" if all_sessions else (list(sessions) or None)
        settings = McpSettings.from_settings(
            hermes.settings, sessions=scope, budget_tokens=budget_tokens
        )
        serve_stdio(RecallService(hermes, settings), version(DISTRIBUTION))
    finally:
        hermes.close()
