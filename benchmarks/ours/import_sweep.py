"""Import every transcript of a folder with the detected importer: what fails, what is skipped.

``python -m benchmarks import-sweep DIR [--replay WINDOW] [--limit N] [--suffix .md]``:
each file under ``DIR`` (any depth; ``*.jsonl``, ``*.json``, ``*.traj`` and their
``.gz``; ``--suffix .md`` adds aider's chat histories) is detected and imported as
a user would import it. The report counts the files per format, lists each
failure with its error (an importer's error names the file and line), and sums
the record kinds the importers skipped, so a record type that starts to carry
text shows up. With
``--replay WINDOW`` each imported file is also replayed at that window
(embedded defaults, a throw-away SQLite file) and the worst after/trigger
ratios and the requests over the window are listed: a session whose view
stays over its window after a compaction is a defect whatever its recall.

The bundled transcripts are a small sample; real session folders are larger
(e.g. the ``entire/checkpoints/v1`` branch of a repository that uses Entire
holds every session as ``xx/yyyyyyyyyy/N/full.jsonl``, which
``git archive entire/checkpoints/v1 | tar -x -C DIR`` writes out). Nothing here
reaches the network.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

from hermes_core import Hermes
from hermes_core.config import settings_from
from hermes_core.replay import pick_importer, replay

SUFFIXES = (".jsonl", ".json", ".traj")


def transcripts(folder: Path, suffixes: tuple[str, ...] = SUFFIXES) -> list[Path]:
    """The transcript files under ``folder``, sorted."""
    found = []
    for path in sorted(folder.rglob("*")):
        name = path.name[: -len(".gz")] if path.name.endswith(".gz") else path.name
        if path.is_file() and name.endswith(suffixes):
            found.append(path)
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks import-sweep")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--replay", type=int, default=0, metavar="WINDOW")
    parser.add_argument("--limit", type=int, default=0, help="at most this many files")
    parser.add_argument("--suffix", action="append", default=[], help="another file suffix")
    args = parser.parse_args(argv)
    files = transcripts(args.folder, SUFFIXES + tuple(args.suffix))[: args.limit or None]
    formats: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    failures: list[tuple[Path, str]] = []
    replays: list[tuple[float, int, Path]] = []
    with tempfile.TemporaryDirectory(prefix="hermes-sweep-") as tmp:
        folder = Path(tmp)
        hermes = Hermes(settings_from({"session": {"path": str(folder / "import.db")}}))
        try:
            for path in files:
                try:
                    importer = pick_importer(hermes.importers(), path)
                    conversations = importer.load(path)
                except Exception as exc:  # every failure is a finding, whatever its type
                    failures.append((path, f"{type(exc).__name__}: {exc}"))
                    continue
                formats[importer.name] += 1
                for conversation in conversations[:1]:
                    skipped.update(conversation.skipped)
                if args.replay:
                    replays.append(_replay(path, folder, args.replay))
        finally:
            hermes.close()
    print(f"{len(files)} files: " + ", ".join(f"{n} {f}" for f, n in formats.most_common()))
    print(f"{len(failures)} failed to import")
    for path, error in failures:
        print(f"  {path}: {error[:300]}")
    print("skipped record kinds (first conversation of each file):")
    for kind, count in skipped.most_common():
        print(f"  {kind:50s} {count:8,d}")
    if replays:
        print(f"replayed at {args.replay:,} tokens, worst mean after/trigger first:")
        for ratio, over, path in sorted(replays, key=lambda r: (-r[0], -r[1])):
            print(f"  {ratio:5.2f}  {over:3d} request(s) over the window  {path}")


def _replay(path: Path, folder: Path, window: int) -> tuple[float, int, Path]:
    """The mean after/trigger of the compactions and the requests over ``window``."""
    db = folder / "replay.db"
    for leftover in folder.glob("replay.db*"):
        leftover.unlink()
    hermes = Hermes(settings_from({"session": {"path": str(db)}}))
    try:
        report = replay(hermes, path, context_length=window)
    except Exception as exc:  # a replay that fails is listed as the worst case
        print(f"  replay failed: {path}: {type(exc).__name__}: {exc}")
        return float("inf"), 0, path
    finally:
        hermes.close()
    ratios = [c.tokens_after / report.threshold_tokens for c in report.compressions]
    over = sum(tokens > window for tokens in report.request_tokens)
    return (sum(ratios) / len(ratios) if ratios else 0.0), over, path


if __name__ == "__main__":
    main()
