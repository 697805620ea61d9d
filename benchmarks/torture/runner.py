"""``python -m benchmarks torture``: the torture suite. Bounded, loopback only, stops by itself.

One line per scenario (trials, failures, what was checked); the exit status is
1 when any scenario lost or corrupted anything (or crashed), else 0. A
scenario that cannot run here (no PostgreSQL server) prints SKIP with the
reason and does not fail the run. Results also go to
``benchmarks/results/torture.json``.

==================  ===========================================================================
sigkill-sqlite      writer processes SIGKILLed at random points (``torture/sqlite.py``)
sigkill-postgres    the same on PostgreSQL, through the store API (``torture/kill.py``)
race-*              8 processes racing turns on one session via ``Hermes`` + ``session.turn()``
sigstop-*           a lease holder frozen past its TTL: its later writes get ``LeaseLost``
summarizer          the summary endpoint times out / 401 / 429 / 500 / truncated / empty / refused
fuzz-importers      hypothesis-made malformed transcripts against every importer
fuzz-runtime        hypothesis-made calls of Turn.prepare / record_response / add_tool_result
fuzz-store          hypothesis-made batches for append_messages
disk-full           the SQLite file's disk fills up (a small tmpfs, else RLIMIT_FSIZE)
secrets-canary      26 secret formats vs every outbound path (``torture/hostile.py``)
redaction-timing    every redaction rule on 100 KB and 1 MB of ordinary and adversarial text
file-deletion       the database file or its -wal deleted / replaced under an open store
zombie-holder       a lease holder exits unreaped (a zombie) while another handle waits
==================  ===========================================================================

``--quick`` runs every scenario with few trials (about a minute); the full run
takes about ten minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .stores import REPO_ROOT, postgres_dsn, store_specs

SCENARIOS = (
    "sigkill-sqlite",
    "sigkill-postgres",
    "race-sqlite",
    "race-postgres",
    "sigstop-sqlite",
    "sigstop-postgres",
    "summarizer",
    "fuzz-importers",
    "fuzz-runtime",
    "fuzz-store",
    "disk-full",
    "secrets-canary",
    "redaction-timing",
    "file-deletion",
    "zombie-holder",
)


class Counts(BaseModel):
    """How big a run is (``--quick`` picks the small set)."""

    model_config = ConfigDict(extra="forbid")

    kill_trials: int = 200
    kill_seconds: float = 0.3
    race_processes: int = 8
    race_turns: int = 25
    freeze_trials: int = 3
    fuzz_examples: int = 500
    diskfull_trials: int = 3
    redaction_repeat: int = 3
    file_trials: int = 3
    zombie_trials: int = 5


QUICK = Counts(
    kill_trials=15,
    kill_seconds=0.3,
    race_processes=4,
    race_turns=5,
    freeze_trials=1,
    fuzz_examples=30,
    diskfull_trials=1,
    redaction_repeat=1,
    file_trials=1,
    zombie_trials=2,
)


class ScenarioResult(BaseModel):
    """One line of the report."""

    model_config = ConfigDict(extra="forbid")

    name: str
    trials: int = 0
    failures: list[str] = Field(default_factory=list)
    checked: str = ""
    skipped: str = ""
    seconds: float = 0.0
    detail: dict[str, Any] = Field(default_factory=dict)

    def line(self) -> str:
        if self.skipped:
            return f"SKIP  {self.name:17} {self.skipped}"
        status = "PASS" if not self.failures else "FAIL"
        return (
            f"{status}  {self.name:17} trials={self.trials:<5} failures={len(self.failures):<3} "
            f"{self.seconds:6.1f}s  checked: {self.checked}"
        )


def sigkill_sqlite(counts: Counts, folder: Path) -> ScenarioResult:
    from . import sqlite as torture_sqlite

    result = torture_sqlite.run(counts.kill_trials, counts.kill_seconds, workdir=str(folder))
    kills = result["kills"]
    return ScenarioResult(
        name="sigkill-sqlite",
        trials=result["trials"],
        failures=result["failures"],
        checked=(
            "integrity_check + FTS5 checks, every committed message once, active view all old or "
            f"all new, tool pairs (killed {kills['in_append']} in append, {kills['in_compact']} in "
            f"compaction, {kills['between']} between; {result['committed_messages']} committed)"
        ),
        detail=result,
    )


def sigkill_postgres(counts: Counts, folder: Path) -> ScenarioResult:
    from . import kill as torture_kill

    with store_specs(folder, "kill") as specs:
        if len(specs) < 2:
            return ScenarioResult(name="sigkill-postgres", skipped=postgres_dsn()[1])
        result = torture_kill.run(specs[1], counts.kill_trials, counts.kill_seconds)
    killed = result["killed"]
    return ScenarioResult(
        name="sigkill-postgres",
        trials=result["trials"],
        failures=result["failures"],
        checked=(
            "every committed message once, no partial batch, active view all old or all new, tool "
            f"pairs, last commit searchable (killed {killed['in_append']} in append, "
            f"{killed['in_compact']} in compaction, {killed['between']} between; "
            f"{result['committed_messages']} committed)"
        ),
        detail=result,
    )


def _race(kind: str) -> Callable[[Counts, Path], ScenarioResult]:
    def scenario(counts: Counts, folder: Path) -> ScenarioResult:
        from . import runtime as torture_runtime

        name = f"race-{kind}"
        with store_specs(folder, "race", with_postgres=kind == "postgres") as specs:
            spec = next((s for s in specs if s.kind == kind), None)
            if spec is None:
                return ScenarioResult(name=name, skipped=postgres_dsn()[1])
            result = torture_runtime.race(spec, counts.race_processes, counts.race_turns)
        return ScenarioResult(
            name=name,
            trials=result["turns"],
            failures=result["failures"],
            checked=(
                f"{counts.race_processes} processes x {counts.race_turns} turns on one session: "
                "each turn's messages stored once, turns not interleaved, in fencing-token order, "
                f"sound view and file ({result['compactions']} compactions during the race)"
            ),
            detail=result,
        )

    return scenario


def _freeze(kind: str) -> Callable[[Counts, Path], ScenarioResult]:
    def scenario(counts: Counts, folder: Path) -> ScenarioResult:
        from . import runtime as torture_runtime

        name = f"sigstop-{kind}"
        with store_specs(folder, "freeze", with_postgres=kind == "postgres") as specs:
            spec = next((s for s in specs if s.kind == kind), None)
            if spec is None:
                return ScenarioResult(name=name, skipped=postgres_dsn()[1])
            result = torture_runtime.freeze(spec, counts.freeze_trials)
        return ScenarioResult(
            name=name,
            trials=result["trials"],
            failures=result["failures"],
            checked=(
                f"holder SIGSTOPped {2.5 * result['ttl_s']:.1f}s with a "
                f"{result['ttl_s']:.0f}s TTL: "
                "another process took over and committed; on SIGCONT the holder's commit and "
                "direct append raised LeaseLost, none of its writes stored, store sound"
            ),
            detail=result,
        )

    return scenario


def summarizer(counts: Counts, folder: Path) -> ScenarioResult:
    from . import summarizer as torture_summarizer

    result = torture_summarizer.run()
    return ScenarioResult(
        name="summarizer",
        trials=result["cases"],
        failures=result["failures"],
        checked=(
            "loopback fake endpoint; aborting failures (401, quota, truncated, empty, refused) "
            "leave the session byte-identical; timeout/429/500/not-JSON/dropped fall back to "
            "deterministic; abort_on_summary_failure keeps an automatic run untouched"
        ),
        detail=result,
    )


def _fuzz(target: str) -> Callable[[Counts, Path], ScenarioResult]:
    def scenario(counts: Counts, folder: Path) -> ScenarioResult:
        from . import fuzz as torture_fuzz

        fn = {
            "importers": torture_fuzz.fuzz_importers,
            "runtime": torture_fuzz.fuzz_runtime,
            "store": torture_fuzz.fuzz_store,
        }[target]
        started = time.monotonic()
        tally = fn(counts.fuzz_examples)
        checked = {
            "importers": "mutated real transcripts (7 formats) x 7 importers and detection, deep "
            "JSON, a 1 GiB gzip bomb: only ImportFormatError (limits named), loaded "
            "conversations are valid sequences",
            "runtime": "random prepare/record_response/add_tool_result then commit/abort: only "
            "hermes ValidationError, rows grow by the turn or not at all",
            "store": "append_messages with malformed batches: only hermes ValidationError, whole "
            "batch or nothing, rows readable back, file sound",
        }[target]
        return ScenarioResult(
            name=f"fuzz-{target}",
            trials=tally.examples,
            failures=tally.failures,
            checked=checked,
            detail={
                "elapsed_s": round(time.monotonic() - started, 1),
                **(torture_fuzz.CAPS_FIGURES if target == "importers" else {}),
            },
        )

    return scenario


def disk_full(counts: Counts, folder: Path) -> ScenarioResult:
    from . import diskfull as torture_diskfull

    result = torture_diskfull.run(counts.diskfull_trials)
    return ScenarioResult(
        name="disk-full",
        trials=result["trials"],
        failures=result["failures"],
        checked=(
            f"{result['method']}: refusals are StoreError naming the cause, committed batches "
            "intact after freeing space, no partial batch, integrity_check ok, appends resume"
        ),
        detail=result,
    )


def secrets_canary(counts: Counts, folder: Path) -> ScenarioResult:
    from . import hostile as torture_hostile

    result = torture_hostile.secrets_canary(folder)
    return ScenarioResult(
        name="secrets-canary",
        trials=result["trials"],
        failures=result["failures"],
        checked=(
            f"{result['formats']} formats planted in turns and memory-tool calls, session "
            f"compressed with the openai summarizer ({result['summarizer_calls']} requests to the "
            "loopback fake): none in its raw request bytes, a memory provider's inputs, "
            f"MEMORY.md/USER.md, or {result['log_lines']} log records with tracebacks"
        ),
        detail=result,
    )


def redaction_timing(counts: Counts, folder: Path) -> ScenarioResult:
    from . import hostile as torture_hostile

    result = torture_hostile.redaction_timing(counts.redaction_repeat)
    cases = result["cases"]
    figures = ", ".join(
        f"{name} {case['ms_100kb']:.0f}/{case['ms_1mb']:.0f} ms (x{case['linearity']})"
        for name, case in cases.items()
    )
    return ScenarioResult(
        name="redaction-timing",
        trials=result["trials"],
        failures=result["failures"],
        checked=(
            f"{result['rules']} rules, 100 KB/1 MB (t(1MB)/10t(100KB)): {figures}; linear "
            "(ratio < 2) and 100 KB x-x-x- under 1 s"
        ),
        detail=result,
    )


def file_deletion(counts: Counts, folder: Path) -> ScenarioResult:
    from . import hostile as torture_hostile

    result = torture_hostile.file_deletion(folder, counts.file_trials)
    return ScenarioResult(
        name="file-deletion",
        trials=result["trials"],
        failures=result["failures"],
        checked=(
            "db deleted / db replaced / -wal deleted then SIGKILL, in a child: 0 of 5 later writes "
            "acknowledged, StoreError names the file, all 20 earlier messages found afterwards "
            "(rescue copy 0600, or checkpointed main file)"
        ),
        detail=result,
    )


def zombie_holder(counts: Counts, folder: Path) -> ScenarioResult:
    from . import hostile as torture_hostile

    result = torture_hostile.zombie_holder(folder, counts.zombie_trials)
    latency = "; ".join(
        f"{kind} max {v['max_ms']} ms, median {v['median_ms']} ms"
        for kind, v in result["latency"].items()
    )
    skipped = (
        f" (PostgreSQL skipped: {result['postgres_skipped']})" if result["postgres_skipped"] else ""
    )
    return ScenarioResult(
        name="zombie-holder",
        trials=result["trials"],
        failures=result["failures"],
        checked=(
            f"holder child exits unreaped while a waiter waits; take-over {latency}; "
            f"each under 1 s{skipped}"
        ),
        detail=result,
    )


RUNNERS: dict[str, Callable[[Counts, Path], ScenarioResult]] = {
    "sigkill-sqlite": sigkill_sqlite,
    "sigkill-postgres": sigkill_postgres,
    "race-sqlite": _race("sqlite"),
    "race-postgres": _race("postgres"),
    "sigstop-sqlite": _freeze("sqlite"),
    "sigstop-postgres": _freeze("postgres"),
    "summarizer": summarizer,
    "fuzz-importers": _fuzz("importers"),
    "fuzz-runtime": _fuzz("runtime"),
    "fuzz-store": _fuzz("store"),
    "disk-full": disk_full,
    "secrets-canary": secrets_canary,
    "redaction-timing": redaction_timing,
    "file-deletion": file_deletion,
    "zombie-holder": zombie_holder,
}


def run_all(names: list[str], counts: Counts) -> list[ScenarioResult]:
    results: list[ScenarioResult] = []
    for name in names:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"torture-{name}-") as tmp:
            try:
                result = RUNNERS[name](counts, Path(tmp))
            except Exception as exc:
                result = ScenarioResult(
                    name=name,
                    failures=[f"scenario crashed: {type(exc).__name__}: {exc}"],
                    detail={"traceback": traceback.format_exc()},
                )
        result.seconds = time.monotonic() - started
        print(result.line(), flush=True)
        for failure in result.failures[:5]:
            print(f"      - {failure[:400]}", flush=True)
        if len(result.failures) > 5:
            print(f"      ... {len(result.failures) - 5} more in the JSON", flush=True)
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks torture",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="few trials per scenario")
    parser.add_argument("--only", help=f"comma-separated scenarios of {','.join(SCENARIOS)}")
    parser.add_argument("--skip", help="comma-separated scenarios to leave out")
    parser.add_argument("--kill-trials", type=int, help="SIGKILL trials per backend")
    parser.add_argument("--fuzz-examples", type=int, help="hypothesis examples per target")
    parser.add_argument(
        "--json", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "torture.json"
    )
    args = parser.parse_args(argv)
    names = [n for n in (args.only or ",".join(SCENARIOS)).split(",") if n]
    names = [n for n in names if n not in set((args.skip or "").split(","))]
    unknown = [n for n in names if n not in RUNNERS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; expected some of {list(SCENARIOS)}")
    counts = QUICK if args.quick else Counts()
    update = {
        k: v
        for k, v in (("kill_trials", args.kill_trials), ("fuzz_examples", args.fuzz_examples))
        if v is not None
    }
    counts = counts.model_copy(update=update)
    started = time.monotonic()
    print(
        f"hermes-core torture suite{' (quick)' if args.quick else ''}: {len(names)} scenarios",
        flush=True,
    )
    results = run_all(names, counts)
    failed = [r.name for r in results if r.failures]
    elapsed = time.monotonic() - started
    print(
        f"{len(results) - len(failed)} of {len(results)} scenarios without failures "
        f"({sum(1 for r in results if r.skipped)} skipped) in {elapsed:.0f}s"
        + (f"; FAILED: {', '.join(failed)}" if failed else "")
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "counts": counts.model_dump(),
                "seconds": round(elapsed, 1),
                "results": [r.model_dump() for r in results],
            },
            indent=2,
            default=str,
        ),
        encoding="utf-8",
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
