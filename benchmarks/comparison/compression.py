"""Compression, ours vs hermes-agent on the same inputs, with the same fixed stub summary.

* ``compress()`` CPU time on the small (~60K tokens) and large (~250K tokens)
  sessions of :mod:`benchmarks.transcript_inputs`. Ours runs the selected
  engine of a real :class:`~hermes_core.host.Hermes` (default ``compressor``,
  lean tail) with the ``stub`` summarizer, on rows carrying what the turn
  runtime records with each message: its token count and its annotations
  (``Hermes.annotate``: the lean tail's identifiers). The cost of recording
  them, paid once per message as turns are recorded, is reported too, and so
  is ``cold``: rows without them, everything counted and extracted inside
  ``compress``. Theirs
  runs ``benchmarks/theirs/compress_bench.py`` with the LLM call replaced
  (seam ``call_llm``; ``generate_summary`` also reported). Same window.
* identifiers kept after a replay with several compressions: ours through
  :func:`hermes_core.replay.replay` (the real runtime and store), theirs
  through ``replay_bench.py`` on the same message list; identifiers of both
  final message lists are counted with the same function
  (:func:`hermes_core.identifiers.extract_all`) against those of the input,
  and both active sizes with the same tiktoken counter.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_core.identifiers import extract_all, flatten
from hermes_core.replay import replay
from hermes_core.tokens import Tokens
from hermes_hookspecs import CompressionRequest, Message

from ..ours.compression import stored
from ..report import Row, Section, Target
from ..stub_summarizer import STUB_SUMMARY, bench_hermes
from ..theirs.environment import run_theirs_runner
from ..transcript_inputs import (
    MODEL,
    SessionInput,
    counter,
    large_session,
    small_session,
    wire,
    wire_text,
    write_wire,
)

COMPRESS_TARGET = Target(
    on="ratio", op="<=", value=0.2, text="<= 0.2x", source="issue 5 / issue 10"
)


def time_ours(
    session: SessionInput,
    folder: Path,
    context_length: int,
    runs: int,
    recorded: bool,
    in_process: bool = False,
) -> dict[str, Any]:
    """CPU seconds of the engine's ``compress`` (median of ``runs`` after one warm-up).

    ``recorded``: the rows carry the token counts and annotations the runtime
    records per message (else ``compress`` derives both itself). ``in_process``:
    the stub summarizer is declared in process, so the host does not redact its
    input (the default deterministic summarizer's case; a summarizer that sends
    its input to a model gets it redacted, which the other rows include).
    """
    hermes = bench_hermes(
        folder, {"model": {"context_length": context_length}}, in_process=in_process
    )
    try:
        engine = hermes.engine()
        tokens = hermes.tokens(MODEL)
        body = session.body()
        tokens.count_message(body[0])  # load the encoding before timing
        start = time.process_time()
        rows = stored(body, tokens, recorded, hermes.annotate if recorded else None)
        record_cpu = time.process_time() - start
        threshold = hermes.threshold(MODEL, context_length).threshold_tokens
        settings = hermes.compression_settings(threshold, context_length)
        system_tokens = tokens.count_message(session.system())
        cpus: list[float] = []
        result = None
        for run in range(runs + 1):
            request = CompressionRequest(
                session_id=f"bench-{session.label}-{recorded}-{run}",
                messages=[row.model_copy() for row in rows],
                model=MODEL,
                settings=settings,
                system_tokens=system_tokens,
                manual=True,
            )
            start = time.process_time()
            result = engine.compress(request)
            elapsed = time.process_time() - start
            if run:
                cpus.append(elapsed)
        assert result is not None
        return {
            "engine": hermes.settings.compression.engine,
            "tail": settings.tail,
            "recorded_facts": recorded,
            "record_cpu_s": record_cpu if recorded else 0.0,
            "record_messages": len(body),
            "cpu_s": cpus,
            "cpu_s_median": statistics.median(cpus),
            "status": result.status,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "messages_after": len(result.messages),
        }
    finally:
        hermes.close()


def time_theirs(
    session: SessionInput, folder: Path, context_length: int, runs: int, seam: str
) -> dict[str, Any]:
    path = write_wire(session.messages, folder / f"{session.label}.json")
    result = run_theirs_runner(
        "compress_bench",
        {
            "messages_file": str(path),
            "context_length": context_length,
            "stub_summary": STUB_SUMMARY,
            "runs": runs,
            "seam": seam,
            "include_messages": False,
        },
    )
    return {
        "seam": seam,
        "cpu_s_median": result["cpu_s"]["median"],
        "cpu_s": result["cpu_s"],
        "compressed": result["compressed"],
        "input": result["input"],
        "output": result["output"],
        "config": result["config"],
    }


def identifiers_of(messages: Sequence[dict[str, Any]]) -> set[str]:
    return flatten(extract_all(wire_text(m) for m in messages))


def active_tokens(messages: Sequence[dict[str, Any]], tokens: Tokens) -> int:
    return sum(tokens.count_message(Message.from_api(m)) for m in messages)


def replay_both(session: SessionInput, folder: Path, window: int, tokens: Tokens) -> dict[str, Any]:
    """Replay ``session`` on both sides at ``window``; identifiers and sizes of the final lists."""
    source = write_wire(session.messages, folder / f"replay-{session.label}.json")
    wanted = identifiers_of(wire(session.messages))
    work = folder / f"replay-{session.label}-{window}"
    work.mkdir()
    hermes = bench_hermes(work, {"model": {"context_length": window}})
    try:
        start = time.perf_counter()
        report = replay(hermes, source, format="openai-chat", context_length=window)
        ours_seconds = time.perf_counter() - start
    finally:
        hermes.close()
    if report.imported_messages != len(session.messages):
        raise RuntimeError(
            f"replay imported {report.imported_messages} messages, expected {len(session.messages)}"
        )
    theirs = run_theirs_runner(
        "replay_bench",
        {"messages_file": str(source), "context_length": window, "stub_summary": STUB_SUMMARY},
    )
    ours_final = report.final_messages
    theirs_final = theirs["messages"]
    ours_kept = len(wanted & identifiers_of(ours_final))
    theirs_kept = len(wanted & identifiers_of(theirs_final))
    return {
        "window": window,
        "identifiers_in_input": len(wanted),
        "ours": {
            "kept": ours_kept,
            "active_tokens": active_tokens(ours_final, tokens),
            "active_messages": len(ours_final),
            "compressions": len(report.compressions),
            "threshold_tokens": report.threshold_tokens,
            "recoverable_ratio_one_search": report.identifiers.recoverable_ratio,
            "replay_seconds": round(ours_seconds, 2),
        },
        "theirs": {
            "kept": theirs_kept,
            "active_tokens": active_tokens(theirs_final, tokens),
            "active_messages": len(theirs_final),
            "compressions": theirs["compressions"],
            "threshold_tokens": theirs["config"]["threshold_tokens"],
            "guards_at_end": theirs["guards_at_end"],
        },
    }


def run_compress(*, runs: int, context_length: int) -> Section:
    """The compress-time section."""
    tokens = counter()
    inputs = {"small": small_session(tokens), "large": large_session(tokens)}
    timing = Section(name="compress")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hermes-compare-compress-") as tmp:
        folder = Path(tmp)
        for label, session in inputs.items():
            ours = time_ours(session, folder, context_length, runs, recorded=True)
            cold = time_ours(session, folder, context_length, runs, recorded=False)
            local = time_ours(session, folder, context_length, runs, True, in_process=True)
            theirs = time_theirs(session, folder, context_length, runs, "call_llm")
            minimal = time_theirs(session, folder, context_length, runs, "generate_summary")
            timing.detail[label] = {
                "source": session.source,
                "messages": len(session.messages),
                "tokens": session.tokens,
                "context_length": context_length,
                "ours": ours,
                "ours_cold": cold,
                "ours_in_process": local,
                "theirs": theirs,
                "theirs_generate_summary_seam": minimal,
            }
            size = f"{session.tokens / 1000:.0f}K tok"
            timing.rows.append(
                Row(
                    key=f"compress_cpu_{label}",
                    metric=f"compress() CPU, {label} session ({size})",
                    unit="ms",
                    ours=ours["cpu_s_median"] * 1000,
                    theirs=theirs["cpu_s_median"] * 1000,
                    target=COMPRESS_TARGET,
                    note=(
                        f"median of {runs}; window {context_length:,}; ours {ours['tail']} tail, "
                        "rows with the token counts and identifier annotations recorded per "
                        f"message ({ours['tokens_before']:,}->{ours['tokens_after']:,} "
                        f"tok); theirs LLM call stubbed ({theirs['input']['tokens_rough']:,}->"
                        f"{theirs['output']['tokens_rough']:,} rough tok)"
                    ),
                ).finish()
            )
            timing.rows.append(
                Row(
                    key=f"compress_cpu_{label}_cold",
                    metric="  same, ours counting and extracting in compress()",
                    unit="ms",
                    ours=cold["cpu_s_median"] * 1000,
                    theirs=theirs["cpu_s_median"] * 1000,
                ).finish()
            )
            timing.rows.append(
                Row(
                    key=f"compress_cpu_{label}_in_process",
                    metric="  same, summarizer in process (its input not redacted)",
                    unit="ms",
                    ours=local["cpu_s_median"] * 1000,
                    theirs=theirs["cpu_s_median"] * 1000,
                    note=(
                        "the default deterministic summarizer's case; a summarizer that sends "
                        "its input to a model gets it redacted first, as the row above"
                    ),
                ).finish()
            )
            per_message = ours["record_cpu_s"] / max(1, ours["record_messages"]) * 1e6
            timing.rows.append(
                Row(
                    key=f"record_cpu_{label}",
                    metric="  recording those facts, once per message (all msgs)",
                    unit="ms",
                    ours=ours["record_cpu_s"] * 1000,
                    theirs_text="n/a",
                    note=(
                        f"token count + annotate_message for {ours['record_messages']} messages, "
                        f"{per_message:.0f} us a message, paid as each turn is recorded, "
                        "not at compression time"
                    ),
                ).finish()
            )
            timing.rows.append(
                Row(
                    key=f"compress_cpu_{label}_minimal",
                    metric="  same, theirs without prompt building",
                    unit="ms",
                    ours=ours["cpu_s_median"] * 1000,
                    theirs=minimal["cpu_s_median"] * 1000,
                    baseline="hermes-agent, _generate_summary stubbed",
                ).finish()
            )
    timing.seconds = time.perf_counter() - start
    return timing


def run_identifiers(replays: Sequence[tuple[str, int]]) -> Section:
    """The identifiers-kept section: one row per (session, window)."""
    tokens = counter()
    inputs = {"small": small_session(tokens), "large": large_session(tokens)}
    kept = Section(name="identifiers")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hermes-compare-replay-") as tmp:
        for label, window in replays:
            result = replay_both(inputs[label], Path(tmp), window, tokens)
            kept.detail[f"{label}@{window}"] = result
            ours, theirs = result["ours"], result["theirs"]
            total = result["identifiers_in_input"]
            better = (
                ours["kept"] > theirs["kept"] and ours["active_tokens"] <= theirs["active_tokens"]
            )

            def size(side: dict[str, Any], window: int = window) -> str:
                over = " OVER WINDOW" if side["active_tokens"] > window else ""
                return f"{side['kept']} in {side['active_tokens'] / 1000:.1f}K tok{over}"

            kept.rows.append(
                Row(
                    key=f"identifiers_{label}_{window}",
                    metric=f"identifiers kept, {label} session, window {window // 1000}K",
                    unit=f"of {total}",
                    ours=ours["kept"],
                    theirs=theirs["kept"],
                    ours_text=size(ours),
                    theirs_text=size(theirs),
                    verdict="pass" if better else "FAIL",
                    note=(
                        "goal (issue 5): more kept at a smaller or equal active size; "
                        f"compressions ours {ours['compressions']} / theirs "
                        f"{theirs['compressions']}; triggers {ours['threshold_tokens']:,} / "
                        f"{theirs['threshold_tokens']:,} tok; ours recoverable with one search: "
                        f"{ours['recoverable_ratio_one_search']:.0%}"
                    ),
                ).finish()
            )
    kept.seconds = time.perf_counter() - start
    return kept
