"""The ``hermes-core`` commands: plugins, config, sessions, compress, replay."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..plugins import implemented_hooks, origins
from . import State, cli
from .render import chart_file, print_replay_report

pass_state = click.make_pass_decorator(State)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


# ---------------------------------------------------------------------------
# plugins
# ---------------------------------------------------------------------------


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def plugins_cmd(state: State, as_json: bool) -> None:
    """List plugins: distribution, version, hooks, contributions, blocked or not."""
    hermes = state.hermes()
    contributions = hermes.registry.contributions()
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
                    "blocked": origin.blocked,
                    "error": origin.error,
                }
            )
    rows.sort(key=lambda row: row["name"])
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        state_word = "blocked" if row["blocked"] else ("FAILED" if row["error"] else "loaded")
        dist = f"{row['distribution']} {row['version']}".strip()
        click.echo(f"{row['name']}  [{state_word}]  {dist}")
        if row["hooks"]:
            click.echo(f"    hooks: {', '.join(row['hooks'])}")
        for kind, names in sorted(row["registered"].items()):
            click.echo(f"    {kind}: {', '.join(sorted(names))}")
        if row["error"]:
            click.echo(f"    error: {row['error']}")


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
    """Print the effective configuration and compression threshold."""
    hermes = state.hermes()
    data = hermes.settings.model_dump(mode="json")
    threshold = hermes.threshold(model=model, context_length=context_length)
    data["effective_threshold"] = threshold.model_dump()
    if as_json:
        emit_json(data)
        return
    for section, values in data.items():
        if section == "effective_threshold":
            continue
        click.echo(f"[{section}]")
        if isinstance(values, dict):
            for key, value in values.items():
                click.echo(f"{key} = {json.dumps(value)}")
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


# ---------------------------------------------------------------------------
# sessions
# ---------------------------------------------------------------------------


@cli.group("sessions")
def sessions_group() -> None:
    """List, show and search stored sessions."""


@sessions_group.command("list")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def sessions_list(state: State, limit: int, as_json: bool) -> None:
    """Sessions, most recently updated first."""
    hermes = state.hermes()
    sessions = hermes.store().list_sessions(limit=limit)
    if as_json:
        emit_json([s.model_dump(mode="json") for s in sessions])
        return
    for s in sessions:
        ended = f" ended:{s.end_reason}" if s.end_reason else ""
        click.echo(f"{s.id}  {s.title or '(untitled)'}  compressions:{s.compression_count}{ended}")


@sessions_group.command("show")
@click.argument("session_id")
@click.option("--all", "show_all", is_flag=True, help="Include compacted rows.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def sessions_show(state: State, session_id: str, show_all: bool, as_json: bool) -> None:
    """A session and its active messages."""
    hermes = state.hermes()
    store = hermes.store()
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
    click.echo(f"session {record.id}  {record.title}")
    for row in rows:
        flag = "" if row.active else " (compacted)"
        text = row.message.text().replace("\n", " ")
        calls = ", ".join(c.function.name for c in row.message.tool_calls or [])
        click.echo(
            f"  #{row.id} {row.message.role}{flag}: {text[:160]}{' → ' + calls if calls else ''}"
        )


@sessions_group.command("search")
@click.argument("query")
@click.option("--session", "session_id", help="Only this session.")
@click.option("--limit", type=click.IntRange(min=0), default=10, show_default=True)
@click.option("--active-only", is_flag=True, help="Skip compacted history.")
@click.option("--context", "context", type=int, default=1, show_default=True)
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
    store = hermes.store()
    hits = store.search(
        query, session_id=session_id, limit=limit, include_compacted=not active_only
    )
    out: list[dict[str, Any]] = []
    for hit in hits:
        around = store.message_context(hit.message_id, before=context, after=context)
        out.append(
            {
                "hit": hit.model_dump(mode="json"),
                "context": [
                    {"id": r.id, "role": r.message.role, "text": r.message.text()[:500]}
                    for r in around
                ],
            }
        )
    if as_json:
        emit_json(out)
        return
    for item in out:
        found = item["hit"]
        state_word = "active" if found["active"] else "compacted"
        click.echo(
            f"message {found['message_id']} ({found['role']}, {state_word}, "
            f"session {found['session_id']})"
        )
        click.echo(f"    {found['snippet']}")
        for row in item["context"]:
            text = row["text"].replace("\n", " ")[:140]
            click.echo(f"      #{row['id']} {row['role']}: {text}")


@sessions_group.command("prefix")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def sessions_prefix(state: State, session_id: str, as_json: bool) -> None:
    """The prefix ledger: shared-prefix tokens per request and what broke it."""
    hermes = state.hermes()
    entries = hermes.store().prefix_entries(session_id)
    scored = [e for e in entries if e.break_reason != "first"]
    shared = sum(e.shared_prefix_tokens for e in scored)
    previous = sum(e.previous_tokens for e in scored)
    reuse = shared / previous if previous else 1.0
    if as_json:
        emit_json({"reuse": reuse, "entries": [e.model_dump(mode="json") for e in entries]})
        return
    for e in entries:
        why = e.break_reason or "full prefix"
        cached = (
            f" cached:{e.provider_cached_tokens}" if e.provider_cached_tokens is not None else ""
        )
        click.echo(
            f"#{e.request_index:>4} tokens:{e.request_tokens:>8} shared:{e.shared_prefix_tokens:>8}"
            f"{cached}  {why}"
        )
    click.echo(f"reuse ratio: {reuse:.4f} over {len(scored)} requests")


# ---------------------------------------------------------------------------
# compress
# ---------------------------------------------------------------------------


@cli.command("compress")
@click.argument("session_id")
@click.option("--focus", help="Topic the summary should keep in focus.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def compress_cmd(state: State, session_id: str, focus: str | None, as_json: bool) -> None:
    """Compress a session now (manual: bypasses the cooldown)."""
    hermes = state.hermes()
    try:
        session = hermes.open_session(session_id)
        outcome = session.compress(focus=focus)
    finally:
        hermes.close()
    if as_json:
        emit_json(outcome.model_dump(mode="json"))
        return
    click.echo(
        f"{outcome.status}: {outcome.tokens_before} → {outcome.tokens_after} tokens"
        + (f" ({outcome.reason})" if outcome.reason else "")
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
    as_json: bool,
) -> None:
    """Replay a real transcript through the configured stack and report what was kept."""
    from ..recall import load_probes
    from ..replay import replay

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
        return
    print_replay_report(report)
