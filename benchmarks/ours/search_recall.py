"""One-search recall of the store search on the recall probes, per session and store.

For each probe file in ``transcripts/probes/`` (its README explains the
probes and the scoring) the session it belongs to (``transcripts/*/NAME.jsonl*``)
is read with the host's importer plugins and every message is written to a
fresh store: SQLite always, PostgreSQL too when ``HERMES_CORE_POSTGRES_DSN``
is set (a scratch schema, dropped afterwards). Then, per probe, one
:func:`hermes_core.search.search_with_context` call with the question's
content words (:func:`hermes_core.search.content_words`), ``limit=5``,
``neighbours=1``; the probe counts when an answer string occurs
(case-sensitive) in the returned text (:meth:`SearchResult.text`: content,
tool-call names, raw arguments and their decoded string values).

Usage::

    python -m benchmarks search-recall [--probes DIR] [--json FILE] [--verbose]

Prints one line per session and store and writes the JSON (default
``benchmarks/results/search_recall.json``). Exit status 0 unless something
crashed; a recall under the target (0.95) is a result, shown as FAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from hermes_core.config import settings_from
from hermes_core.host import Hermes
from hermes_core.replay import pick_importer
from hermes_core.search import content_words, search_with_context
from hermes_hookspecs import Message, NewMessage, NewSession, SessionStore, ToolCall, ToolFunction

REPO = Path(__file__).resolve().parents[2]
PROBES = REPO / "transcripts" / "probes"
TARGET = 0.95
LIMIT = 5
NEIGHBOURS = 1


class Probe(BaseModel):
    """One recall probe (the fields of ``transcripts/probes/*.json``)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    question: str
    answers: list[str]
    kind: str


def probe_sets(folder: Path) -> list[tuple[str, Path, list[Probe]]]:
    """``(name, transcript, probes)`` for every probe file in ``folder``."""
    out = []
    folder = folder.resolve()
    for path in sorted(folder.glob("*.json")):
        probes = [Probe.model_validate(p) for p in json.loads(path.read_text("utf-8"))]
        found = sorted(folder.parent.glob(f"*/{path.stem}.jsonl*"))
        if not found:
            raise FileNotFoundError(f"{path.name}: no transcript {path.stem}.jsonl* beside it")
        out.append((path.stem, found[0], probes))
    return out


def load_messages(hermes: Hermes, transcript: Path) -> list[Message]:
    """The first conversation of ``transcript``, read by the host's importer plugins."""
    importer = pick_importer(hermes.importers(), transcript)
    conversations = importer.load(transcript)
    if not conversations:
        raise ValueError(f"{transcript}: no conversation found")
    return conversations[0].messages


def score_probes(
    store: SessionStore, session_id: str, probes: list[Probe], tool: ToolRunner | None = None
) -> dict[str, Any]:
    """One search per probe; the recall and, per probe, the query and whether it hit.

    ``hit`` scores the places found, in full; with ``tool`` (the host's
    ``session_search``), ``tool_hit`` scores the tool's budgeted result text,
    what the model reads.
    """
    rows = []
    seconds = []
    for probe in probes:
        query = " ".join(content_words(probe.question))
        start = time.perf_counter()
        results = search_with_context(
            store, query, session_ids=[session_id], limit=LIMIT, neighbours=NEIGHBOURS
        )
        seconds.append(time.perf_counter() - start)
        text = "\n".join(result.text() for result in results)
        hit = any(answer and answer in text for answer in probe.answers)
        row: dict[str, Any] = {
            "id": probe.id,
            "kind": probe.kind,
            "query": query,
            "hit": hit,
            "places": [r.hit.message_id for r in results],
        }
        if tool is not None:
            shown = tool(store, session_id, query)
            row["tool_hit"] = any(answer and answer in shown for answer in probe.answers)
        rows.append(row)
    hits = sum(bool(row["hit"]) for row in rows)
    tool_hits = sum(bool(row.get("tool_hit", False)) for row in rows)
    return {
        "recall": round(hits / len(rows), 3) if rows else 0.0,
        "tool_recall": round(tool_hits / len(rows), 3) if rows and tool else None,
        "hits": hits,
        "probes": len(rows),
        "misses": [row["id"] for row in rows if not row["hit"]],
        "tool_misses": [row["id"] for row in rows if not row.get("tool_hit")] if tool else None,
        "search_ms_median": round(statistics.median(seconds) * 1000, 2) if seconds else 0.0,
        "per_probe": rows,
    }


StoreOpener = Callable[[str], Any]
ToolRunner = Callable[[SessionStore, str, str], str]


def session_search_tool(hermes: Hermes) -> ToolRunner | None:
    """A runner of the host's ``session_search`` tool on any store, or None without it."""
    toolbox = hermes.toolbox()
    if "session_search" not in toolbox.tools:
        return None
    tokens = hermes.tokens()

    def run(store: SessionStore, session_id: str, query: str) -> str:
        arguments = json.dumps({"query": query, "limit": LIMIT})
        call = ToolCall(
            id="probe", function=ToolFunction(name="session_search", arguments=arguments)
        )
        return toolbox.run(call, session_id=session_id, store=store, tokens=tokens)

    return run


@contextmanager
def sqlite_stores(folder: Path) -> Iterator[StoreOpener]:
    from hermes_plugin_sqlite_store import SqliteSessionStore

    opened: list[SessionStore] = []

    def open_store(name: str) -> SessionStore:
        store = SqliteSessionStore(folder / f"{name}.db")
        opened.append(store)
        return store

    try:
        yield open_store
    finally:
        for store in opened:
            store.close()


@contextmanager
def postgres_stores(dsn: str) -> Iterator[StoreOpener]:
    from hermes_plugin_postgres_store import PostgresSessionStore
    from hermes_plugin_postgres_store.testing import drop_schema

    opened: list[tuple[SessionStore, str]] = []

    def open_store(name: str) -> SessionStore:
        schema = f"recall_{os.getpid()}_{len(opened)}"
        drop_schema(dsn, schema)
        store = PostgresSessionStore(dsn, schema=schema)
        opened.append((store, schema))
        return store

    try:
        yield open_store
    finally:
        for store, schema in opened:
            store.close()
            drop_schema(dsn, schema)


def run(probes_dir: Path, dsn: str | None, verbose: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"target": TARGET, "limit": LIMIT, "neighbours": NEIGHBOURS}
    with tempfile.TemporaryDirectory(prefix="hermes-search-recall-") as tmp:
        folder = Path(tmp)
        settings = settings_from(
            {"session": {"path": str(folder / "host.db")}, "memory": {"home": str(folder / "m")}}
        )
        hermes = Hermes(settings)
        try:
            sets = [
                (name, transcript, load_messages(hermes, transcript), probes)
                for name, transcript, probes in probe_sets(probes_dir)
            ]
            tool = session_search_tool(hermes)
            result["scored"] = (
                "the session_search tool's result text (tool_recall) and the places in full"
                if tool
                else "the places in full (no session_search tool registered)"
            )
            _measure(result, folder, dsn, sets, tool, verbose)
        finally:
            hermes.close()
    return result


def _measure(
    result: dict[str, Any],
    folder: Path,
    dsn: str | None,
    sets: list[tuple[str, Path, list[Message], list[Probe]]],
    tool: ToolRunner | None,
    verbose: bool,
) -> None:
    backends: list[tuple[str, Any]] = [("sqlite", sqlite_stores(folder))]
    if dsn:
        backends.append(("postgres", postgres_stores(dsn)))
    result["sessions"] = {}
    for backend, opener_cm in backends:
        with opener_cm as open_store:
            for name, transcript, messages, probes in sets:
                store = open_store(name)
                sid = store.create_session(NewSession(title=name)).id
                store.append_messages(sid, [NewMessage(message=m) for m in messages])
                scored = score_probes(store, sid, probes, tool)
                scored["transcript"] = str(transcript.relative_to(REPO))
                scored["messages"] = len(messages)
                result["sessions"].setdefault(name, {})[backend] = scored
                recall = scored["tool_recall"] if tool else scored["recall"]
                verdict = "pass" if recall >= TARGET else "FAIL"
                told = f"tool result {scored['tool_recall']:.2f}, " if tool else ""
                print(
                    f"{backend:<9} {name:<34} {len(messages):>5} msgs  one-search recall "
                    f"{told}places in full {scored['recall']:.2f}  "
                    f"median search {scored['search_ms_median']:.1f} ms  {verdict}",
                    flush=True,
                )
                if verbose:
                    for row in scored["per_probe"]:
                        if not row.get("tool_hit", row["hit"]):
                            print(f"    miss {row['id']} ({row['kind']}): {row['query']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--probes", type=Path, default=PROBES)
    parser.add_argument(
        "--json", type=Path, default=REPO / "benchmarks" / "results" / "search_recall.json"
    )
    parser.add_argument("--verbose", action="store_true", help="list the missed probes")
    args = parser.parse_args(argv)
    dsn = os.environ.get("HERMES_CORE_POSTGRES_DSN", "").strip() or None
    if dsn is None:
        print("postgres  skipped: HERMES_CORE_POSTGRES_DSN is not set", flush=True)
    result = run(args.probes, dsn, verbose=args.verbose)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
