"""The ``hermes-core`` commands: plugins, sessions, compress, replay (``config`` and ``new``
live in :mod:`.config_cmd` and :mod:`.new_cmd`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from hermes_hookspecs import SessionStore

from ..plugins import implemented_hooks, origins
from ..search import search_with_context
from .group import State, cli, db_option, pass_state
from .output import emit_json, one_line, print_table, say_empty, visible, when
from .render import chart_file, print_replay_report, replay_warnings
from .sessions import describe_store, missing_database, require_database, resolve_session_id

# ---------------------------------------------------------------------------
# plugins
# ---------------------------------------------------------------------------


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def plugins_cmd(state: State, as_json: bool) -> None:
    """List plugins: distribution, version, hooks, contributions, settings, blocked or not."""
    hermes = state.hermes()
    contributions = hermes.registry.contributions()
    tables: dict[str, list[str]] = {}
    for model in hermes.settings.sections():
        owner = hermes.settings.section_owner(model)
        tables.setdefault(owner, []).append(model.config_section)
    rows: list[dict[str, Any]] = []
    known = origins(hermes.pm)
    for name, plugin in sorted(hermes.pm.list_name_plugin(), key=lambda item: item[0]):
        if plugin is None:  # blocked: listed below with its origin
            continue
        origin = known.get(name)
        rows.append(
            {
                "name": name,
                "distribution": origin.distribution if origin else "",
                "version": origin.version if origin else "",
                "hooks": implemented_hooks(hermes.pm, plugin),
                "registered": contributions.get(name, {}),
                "settings": sorted(tables.get(name, [])),
                "blocked": False,
                "error": "",
            }
        )
    for name, origin in sorted(known.items()):
        if origin.blocked or origin.error:
            rows.append(
                {
                    "name": name,
                    "distribution": origin.distribution,
                    "version": origin.version,
                    "hooks": [],
                    "registered": {},
                    "settings": [],
                    "blocked": origin.blocked,
                    "error": origin.error,
                }
            )
    rows.sort(key=lambda row: row["name"])
    if as_json:
        emit_json(rows)
        return
    if not rows:
        say_empty("plugins", "this environment (entry-point group hermes_core)")
        return
    print_table(
        ["PLUGIN", "STATE", "DISTRIBUTION", "VERSION", "REGISTERS", "HOOKS"],
        [
            [
                row["name"],
                "blocked" if row["blocked"] else ("FAILED" if row["error"] else "loaded"),
                row["distribution"],
                row["version"],
                "; ".join(
                    f"{kind}: {', '.join(sorted(names))}"
                    for kind, names in sorted(row["registered"].items())
                ),
                ", ".join(row["hooks"]),
            ]
            for row in rows
        ],
    )
    for row in rows:
        if row["error"]:
            click.echo(f"{row['name']} failed: {visible(row['error'])}")


# ---------------------------------------------------------------------------
# sessions
# ---------------------------------------------------------------------------


@cli.group("sessions")
def sessions_group() -> None:
    """List, show and search stored sessions.

    SESSION_ID arguments take a full id or an unambiguous prefix of one.
    """


def _size(store: SessionStore, session_id: str) -> tuple[int, int]:
    rows = store.active_messages(session_id)
    return len(rows), sum(r.token_count or 0 for r in rows)


@sessions_group.command("list")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def sessions_list(state: State, limit: int, as_json: bool) -> None:
    """Sessions, most recently updated first, with their size."""
    hermes = state.hermes()
    missing = missing_database(hermes.settings)
    if missing is not None:
        if as_json:
            emit_json([])
        else:
            say_empty("sessions", f"{missing} (no such file)")
        return
    store = hermes.store()
    sessions = store.list_sessions(limit=limit)
    sizes = {s.id: _size(store, s.id) for s in sessions}
    if as_json:
        emit_json(
            [
                {
                    **s.model_dump(mode="json"),
                    "active_messages": sizes[s.id][0],
                    "active_tokens": sizes[s.id][1],
                }
                for s in sessions
            ]
        )
        return
    if not sessions:
        say_empty("sessions", describe_store(hermes.settings))
        return
    print_table(
        ["ID", "UPDATED", "MESSAGES", "TOKENS", "COMPRESSIONS", "ENDED", "TITLE"],
        [
            [
                s.id,
                when(s.updated_at),
                sizes[s.id][0],
                sizes[s.id][1],
                s.compression_count,
                s.end_reason or "",
                one_line(s.title or "(untitled)", 60),
            ]
            for s in sessions
        ],
        right=["MESSAGES", "TOKENS", "COMPRESSIONS"],
    )


@sessions_group.command("show")
@click.argument("session_id")
@click.option("--all", "show_all", is_flag=True, help="Include compacted rows.")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def sessions_show(state: State, session_id: str, show_all: bool, as_json: bool) -> None:
    """A session and its active messages."""
    hermes = state.hermes()
    require_database(hermes.settings, session_id)
    store = hermes.store()
    session_id = resolve_session_id(store, session_id, hermes.settings)
    record = store.get_session(session_id)
    rows = store.all_messages(session_id) if show_all else store.active_messages(session_id)
    if as_json:
        emit_json(
            {
                "session": record.model_dump(mode="json"),
                "messages": [r.model_dump(mode="json") for r in rows],
            }
        )
        return
    click.echo(
        f"session {record.id}  {one_line(record.title or '(untitled)')}  "
        f"updated {when(record.updated_at)}  compressions {record.compression_count}"
    )
    if not rows:
        say_empty("active messages" if not show_all else "messages", f"session {record.id}")
        return
    print_table(
        ["#", "ROLE", "TEXT"],
        [
            [
                row.id,
                row.message.role + ("" if row.active else " (compacted)"),
                one_line(row.message.text(), 160)
                + (
                    " → " + ", ".join(c.function.name for c in row.message.tool_calls)
                    if row.message.tool_calls
                    else ""
                ),
            ]
            for row in rows
        ],
        right=["#"],
    )


@sessions_group.command("search")
@click.argument("query")
@click.option("--session", "session_id", help="Only this session.")
@click.option("--limit", type=click.IntRange(min=0), default=10, show_default=True)
@click.option("--active-only", is_flag=True, help="Skip compacted history.")
@click.option(
    "--context",
    "context",
    type=int,
    default=1,
    show_default=True,
    help="Messages shown on each side of a hit (one with little text does not count).",
)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def sessions_search(
    state: State,
    query: str,
    session_id: str | None,
    limit: int,
    active_only: bool,
    context: int,
    as_json: bool,
) -> None:
    """Full-text search; each hit is a recovery pointer with context around it."""
    hermes = state.hermes()
    missing = missing_database(hermes.settings)
    if missing is not None:
        if session_id:
            require_database(hermes.settings, session_id)
        if as_json:
            emit_json([])
        else:
            say_empty(f"matches for {one_line(query)!r}", f"{missing} (no such file)")
        return
    store = hermes.store()
    if session_id:
        session_id = resolve_session_id(store, session_id, hermes.settings)
    results = search_with_context(
        store,
        query,
        session_ids=[session_id] if session_id else None,
        limit=limit,
        neighbours=context,
        include_compacted=not active_only,
    )
    out: list[dict[str, Any]] = [
        {
            "hit": result.hit.model_dump(mode="json"),
            "hits": [h.message_id for h in result.hits],
            "context": [
                {"id": r.id, "role": r.message.role, "text": r.message.text()[:500]}
                for r in result.window
            ],
            "replies": [
                {"id": reply.id, "text": reply.message.text()[:500]} for reply in result.replies
            ],
        }
        for result in results
    ]
    if as_json:
        emit_json(out)
        return
    if not out:
        where = f"session {session_id} of " if session_id else ""
        say_empty(f"matches for {one_line(query)!r}", where + describe_store(hermes.settings))
        return
    for item in out:
        found = item["hit"]
        state_word = "active" if found["active"] else "compacted"
        click.echo(
            f"message {found['message_id']} ({found['role']}, {state_word}, "
            f"session {found['session_id']})"
        )
        click.echo(f"    {one_line(found['snippet'])}")
        for row in item["context"]:
            click.echo(f"      #{row['id']} {row['role']}: {one_line(row['text'], 140)}")
        for reply in item["replies"]:
            click.echo(f"      then #{reply['id']} user: {one_line(reply['text'], 140)}")


@sessions_group.command("prefix")
@click.argument("session_id")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=None,
    help="Show the last N requests; 0: all (default: 20, with --json all). "
    "The reuse ratio always covers every request.",
)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def sessions_prefix(state: State, session_id: str, limit: int | None, as_json: bool) -> None:
    """The prefix ledger: shared-prefix tokens per request and what broke it."""
    hermes = state.hermes()
    require_database(hermes.settings, session_id)
    store = hermes.store()
    session_id = resolve_session_id(store, session_id, hermes.settings)
    entries = store.prefix_entries(session_id)
    scored = [e for e in entries if e.break_reason != "first"]
    shared = sum(e.shared_prefix_tokens for e in scored)
    previous = sum(e.previous_tokens for e in scored)
    reuse = shared / previous if previous else 1.0
    if limit is None:
        limit = 0 if as_json else 20
    shown = entries[-limit:] if limit else entries
    if as_json:
        emit_json(
            {
                "session_id": session_id,
                "reuse": reuse,
                "total_entries": len(entries),
                "entries": [e.model_dump(mode="json") for e in shown],
            }
        )
        return
    if not entries:
        say_empty("prefix-ledger entries", f"session {session_id}")
        return
    if len(shown) < len(entries):
        click.echo(f"(last {len(shown)} of {len(entries)} requests; --limit 0 shows all)")
    print_table(
        ["REQUEST", "TOKENS", "SHARED", "CACHED", "BREAK"],
        [
            [
                e.request_index,
                e.request_tokens,
                e.shared_prefix_tokens,
                "" if e.provider_cached_tokens is None else e.provider_cached_tokens,
                e.break_reason or "full prefix",
            ]
            for e in shown
        ],
        right=["REQUEST", "TOKENS", "SHARED", "CACHED"],
    )
    click.echo(f"reuse ratio: {reuse:.4f} over {len(scored)} requests")


# ---------------------------------------------------------------------------
# compress
# ---------------------------------------------------------------------------


@cli.command("compress")
@click.argument("session_id")
@click.option("--focus", help="Topic the summary should keep in focus.")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def compress_cmd(state: State, session_id: str, focus: str | None, as_json: bool) -> None:
    """Compress a session now (manual: bypasses the cooldown).

    SESSION_ID takes a full id or an unambiguous prefix.
    """
    hermes = state.hermes()
    require_database(hermes.settings, session_id)
    try:
        session_id = resolve_session_id(hermes.store(), session_id, hermes.settings)
        session = hermes.open_session(session_id)
        outcome = session.compress(focus=focus)
        active = session.active_tokens
    finally:
        hermes.close()
    data = outcome.model_dump(mode="json")
    data["session_id"] = outcome.session_id or session_id
    if outcome.status != "compressed":
        # nothing changed: the context is what it was, not "0 tokens"
        data["tokens_after"] = data["tokens_before"] = outcome.tokens_before or active
    if as_json:
        emit_json(data)
        return
    if outcome.status == "compressed":
        moved = f"; continues as session {outcome.new_session_id}" if outcome.new_session_id else ""
        click.echo(
            f"compressed session {data['session_id']}: {outcome.tokens_before} → "
            f"{outcome.tokens_after} tokens (engine {outcome.engine or '-'}, "
            f"summarizer {outcome.summarizer or '-'}){moved}"
        )
        return
    click.echo(
        f"{outcome.status}: session {data['session_id']} was not compressed"
        + (f" ({visible(outcome.reason)})" if outcome.reason else "")
        + f"; it stays at {data['tokens_before']} tokens"
    )


# ---------------------------------------------------------------------------
# replay
# ---------------------------------------------------------------------------


@cli.command("replay")
@click.argument("transcript", type=click.Path(path_type=Path))
@click.option("--format", "fmt", help="Importer name (default: detected).")
@click.option("--conversation", type=int, default=0, show_default=True)
@click.option("--context-length", type=int, help="Model window, so compression fires early.")
@click.option("--engine", help="Context engine (compression.engine).")
@click.option("--tail", help="Tail strategy (compression.tail).")
@click.option("--summarizer", help="Summarizer (compression.summarizer).")
@click.option("--store", help="Session store (session.store).")
@click.option("--db", type=click.Path(path_type=Path), help="SQLite file (session.path).")
@click.option("--probes", type=click.Path(path_type=Path, exists=True), help="Recall probes JSON.")
@click.option("--chart", type=click.Path(path_type=Path), help="Write tokens-per-request chart.")
@click.option(
    "--branches",
    type=click.Choice(["continued", "all"]),
    default=None,
    help="Claude Code rewinds: follow the continued branch (default) or also import the "
    "abandoned ones as extra conversations (pick one with --conversation).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def replay_cmd(
    state: State,
    transcript: Path,
    fmt: str | None,
    conversation: int,
    context_length: int | None,
    engine: str | None,
    tail: str | None,
    summarizer: str | None,
    store: str | None,
    db: Path | None,
    probes: Path | None,
    chart: Path | None,
    branches: str | None,
    as_json: bool,
) -> None:
    """Replay a real transcript through the configured stack and report what was kept."""
    import os

    from ..recall import load_probes
    from ..replay import replay

    if branches:  # read by the importers (HERMES_CORE_IMPORT_BRANCHES)
        os.environ["HERMES_CORE_IMPORT_BRANCHES"] = branches

    overrides: dict[str, Any] = {}
    compression = {
        k: v for k, v in {"engine": engine, "tail": tail, "summarizer": summarizer}.items() if v
    }
    if compression:
        overrides["compression"] = compression
    session: dict[str, Any] = {}
    if store:
        session["store"] = store
    if db:
        session["path"] = str(db)
    if session:
        overrides["session"] = session
    if context_length:
        overrides["model"] = {"context_length": context_length}
    hermes = state.hermes(overrides)
    probe_list = load_probes(probes) if probes else []
    try:
        progress = None
        bar = None
        if sys.stderr.isatty() and not as_json:
            from rich.progress import Progress

            bar = Progress(transient=True)
            bar.start()
            task = bar.add_task("replaying turns", total=None)

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

        try:
            report = replay(
                hermes,
                transcript,
                format=fmt,
                conversation=conversation,
                context_length=context_length,
                probes=probe_list,
                progress=progress,
            )
        finally:
            if bar is not None:
                bar.stop()
    finally:
        hermes.close()
    if chart:
        chart_file(report, chart)
    if as_json:
        emit_json(report.model_dump(mode="json"))
    else:
        print_replay_report(report)
    for warning in replay_warnings(report):
        click.echo(f"Warning: {warning}", err=True)
