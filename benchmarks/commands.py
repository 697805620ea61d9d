"""The one runner's commands: ``python -m benchmarks [COMMAND] [ARGS...]``.

Without a command it runs the comparison (:mod:`benchmarks.comparison.runner`,
ours vs hermes-agent, every part, one table and one JSON; ``--only``/``--skip``
pick parts). A command runs one benchmark or the torture suite with its own
options (``python -m benchmarks COMMAND --help``). ``--list`` prints both.
"""

from __future__ import annotations

import importlib
import inspect
import runpy
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .comparison.runner import PARTS

#: one line per part of the comparison (``--only`` / ``--skip`` take these names)
PART_SUMMARIES: dict[str, str] = {
    "compress": "compress() CPU time on the small and large sessions, same stub summary",
    "identifiers": "identifiers kept after a replay with compressions, same window",
    "store": "append, archive_and_compact, lease hand-over, FTS search at 10^4..10^6",
    "runtime": "turn-runtime overhead at 100 / 1,000 / 10,000 messages, growth ratio",
    "tokens": "exact token counting throughput vs plain tiktoken",
    "postgres": "the store numbers on PostgreSQL (skipped with the reason without a server)",
    "recall": "recall after compaction on the probed sessions, three systems",
    "redaction": "every default redaction rule on 1 MB against 10 x the 100 KB time",
}


class Command(BaseModel):
    """One command of the runner: the module whose ``main`` it calls."""

    model_config = ConfigDict(frozen=True)

    module: str
    summary: str
    by_path: bool = False  # a reference-side script that imports its neighbours flat


COMMANDS: dict[str, Command] = {
    "torture": Command(
        module="benchmarks.torture.runner",
        summary="the torture suite: kills, races, freezes, fuzzing, a full disk",
    ),
    "recall": Command(
        module="benchmarks.comparison.recall",
        summary="recall after compaction alone: ours, hermes-agent, keep-user-turns",
    ),
    "runtime": Command(module="benchmarks.ours.runtime", summary="turn-runtime overhead"),
    "store-sqlite": Command(
        module="benchmarks.ours.store_sqlite", summary="SQLite store with the raw-SQLite ceiling"
    ),
    "store-postgres": Command(
        module="benchmarks.ours.store_postgres", summary="the same on PostgreSQL (needs a server)"
    ),
    "compression": Command(
        module="benchmarks.ours.compression", summary="the compressor's own comparison"
    ),
    "tokens": Command(module="benchmarks.ours.tokens", summary="token counting throughput"),
    "redaction": Command(
        module="benchmarks.ours.redaction", summary="redaction time at 100 KB and 1 MB"
    ),
    "search-recall": Command(
        module="benchmarks.ours.search_recall",
        summary="one-search recall on the probe sessions, both stores",
    ),
    "import-sweep": Command(
        module="benchmarks.ours.import_sweep",
        summary="import (and replay) every transcript of a folder: failures, skipped kinds",
    ),
    "facts-ceiling": Command(
        module="benchmarks.ours.facts_ceiling",
        summary="the facts the extractor finds per probe session (an upper bound)",
    ),
    "theirs-env": Command(
        module="benchmarks.theirs.environment", summary="build the hermes-agent reference venv"
    ),
    "theirs-samples": Command(
        module="benchmarks.theirs.run_samples",
        summary="every reference-side runner once on a transcript",
        by_path=True,
    ),
}


def listing() -> str:
    """The text of ``--list``: the comparison's parts, then the commands."""
    width = max(len(name) for name in [*PARTS, *COMMANDS])
    lines = ["parts of `python -m benchmarks` (--only / --skip NAME,NAME):"]
    lines += [f"  {name:<{width}}  {PART_SUMMARIES[name]}" for name in PARTS]
    lines += ["", "commands (`python -m benchmarks COMMAND --help` for their options):"]
    lines += [f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()]
    return "\n".join(lines)


def run_command(name: str, argv: list[str]) -> int:
    """Run command ``name`` with ``argv``; its exit status."""
    command = COMMANDS[name]
    prog = f"python -m benchmarks {name}"
    saved = sys.argv
    sys.argv = [prog, *argv]
    try:
        if command.by_path:
            path = Path(__file__).resolve().parent.joinpath(*command.module.split(".")[1:])
            try:
                runpy.run_path(str(path.with_suffix(".py")), run_name="__main__")
            except SystemExit as exc:
                return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            return 0
        main = importlib.import_module(command.module).main
        if inspect.signature(main).parameters:
            result = main(argv)
        elif argv:
            print(f"{prog}: takes no arguments, got {argv}", file=sys.stderr)
            return 2
        else:
            result = main()
        return result if isinstance(result, int) else 0
    finally:
        sys.argv = saved


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks``: a command by name, ``--list``, or the comparison."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--list":
        print(listing())
        return 0
    if args and args[0] in COMMANDS:
        return run_command(args[0], args[1:])
    if args and not args[0].startswith("-"):
        print(
            f"python -m benchmarks: unknown command {args[0]!r}; "
            f"expected one of {', '.join(COMMANDS)} (or --list)",
            file=sys.stderr,
        )
        return 2
    from .comparison.runner import main as compare

    return compare(args)
