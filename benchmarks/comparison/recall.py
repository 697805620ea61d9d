"""Recall after compaction (issue 14): ours, hermes-agent 0.19.0 and keep-user-turns, same replays.

On each session that has recall probes (``transcripts/probes/README.md``), at each
window (128K, 64K, 32K by default), three systems get the same imported messages
(our importers, in the order :func:`hermes_core.replay.replay` feeds them) and
are scored with :mod:`hermes_core.recall`, the project's implementation of the
probes' scoring rules:

* **ours**: ``hermes-core replay TRANSCRIPT --context-length N --json --db FILE``
  in a child process, embedded defaults (SQLite, deterministic summarizer), no
  config file, memory in a scratch folder. Closed-book recall of the report's
  ``final_messages``; one-search recall, prefix-cache reuse (``prefix_reuse``),
  the number of compactions and the mean of ``tokens_after / threshold_tokens``
  over its compactions. When the replay report carries ``closed_book_recall`` /
  ``one_search_recall`` (``--probes``) those are used and the closed-book figure
  is cross-checked; until then one-search recall is measured here on the
  replay's database through the store's public API (one ``search`` with
  :func:`hermes_core.recall.content_words` of the question, limit 5, each hit
  opened with one neighbour before and after, as the probes' README says).
* **hermes-agent** 0.19.0 (``benchmarks/theirs/replay_bench.py`` in its own
  venv): its ContextCompressor driven as its agent loop drives it, at the same
  window with its own trigger. Two summaries, neither an LLM: ``fallback``, its
  own deterministic handoff built from the dropped turns (what it does when the
  summarizer model fails; the counterpart of our offline summarizer), and
  ``stub``, the fixed stub summary every other comparison row uses (what its
  head and tail policy alone keeps). Closed-book recall of its final context.
* **keep-user-turns**: every user message and each turn's final assistant answer
  (its last assistant message with text, without tool calls), no tool traffic,
  then only the newest of those that fit the window with the system prompt.

Kept text is measured the same way for all: characters of the scoring text of
the final context (:func:`hermes_core.recall.message_text`, system prompt and
summary included) and its tokens with the project's tiktoken counter. The 128K
target compares what each system keeps of the compacted history: our handoff
(the summary messages of the final context, ``kept_summary_chars`` of the
report) against the keep-user-turns text, which is what the issue measured
("in half the text that our handoff keeps"); the whole final context is shown
beside it.

``--held-out`` runs the same matrix on the held-out sessions instead
(``transcripts/probes-heldout/README.md``): probes the project wrote blind for
sessions nobody tuned on, the check that an improvement is general.

``python -m benchmarks recall`` runs this part alone and prints the matrix and
the issue's targets; ``python -m benchmarks`` includes it as the ``recall`` part.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hermes_core.config import settings_from
from hermes_core.host import Hermes
from hermes_core.recall import Probe, RecallScore, closed_book, load_probes, message_text
from hermes_core.recall import messages_text as recall_text
from hermes_core.replay import split_turns
from hermes_core.tokens import Tokens
from hermes_hookspecs import Message

from ..report import Row, Section, Target, render
from ..stub_summarizer import STUB_SUMMARY
from ..theirs.environment import HERMES_AGENT_SPEC, run_theirs_runner
from ..transcript_inputs import REPO, TRANSCRIPTS, counter, load, replay_order, wire

RESULTS = REPO / "benchmarks" / "results"
#: (transcript, probe file), both under ``transcripts/``: the sessions the probes came with
SESSIONS: tuple[tuple[str, str], ...] = (
    ("claude-code/entireio-cli-38ecf75f2f1d.jsonl.gz", "probes/entireio-cli-38ecf75f2f1d.json"),
    (
        "codex-rollout/entireio-git-sync-07ebffc93812.jsonl.gz",
        "probes/entireio-git-sync-07ebffc93812.json",
    ),
    (
        "claude-code/entireio-git-sync-516fe4e51170.jsonl.gz",
        "probes/entireio-git-sync-516fe4e51170.json",
    ),
)
#: the held-out check: sessions nobody tuned on, probes written blind (``--held-out``)
HELD_OUT: tuple[tuple[str, str], ...] = (
    (
        "codex-rollout/entireio-git-sync-2dcf2f1a3166-glued-lines.jsonl.gz",
        "probes-heldout/entireio-git-sync-2dcf2f1a3166-glued-lines.json",
    ),
    (
        "codex-rollout/entireio-entire-graph-54fb8b1d18b6.jsonl.gz",
        "probes-heldout/entireio-entire-graph-54fb8b1d18b6.json",
    ),
    (
        "claude-code/entireio-entire-graph-1a6d96aa7834.jsonl.gz",
        "probes-heldout/entireio-entire-graph-1a6d96aa7834.json",
    ),
)
WINDOWS: tuple[int, ...] = (128_000, 64_000, 32_000)
SEARCH_LIMIT = 5
THEIRS_SEAMS: tuple[str, ...] = ("fallback", "stub")
SOURCE = "issue 14"

CLOSED_BOOK_TARGETS = {128_000: 0.70, 64_000: 0.55, 32_000: 0.40}
ONE_SEARCH = Target(on="ours", op=">=", value=0.95, text=">= 0.95", source=SOURCE)
PREFIX_REUSE = Target(on="ours", op=">=", value=0.97, text=">= 0.97 at 128K", source=SOURCE)
AFTER_RATIO = Target(on="ours", op="<=", value=0.60, text="<= 0.60", source=SOURCE)
KEPT_VS_BASELINE = Target(
    on="ratio", op="<=", value=1.0, text="<= keep-user-turns at 128K", source=SOURCE
)

System = Literal["ours", "hermes-agent fallback", "hermes-agent stub", "keep-user-turns"]


class Kept(BaseModel):
    """What a system left as the final context, and its recall."""

    model_config = ConfigDict(extra="forbid")

    system: System
    closed_book: RecallScore
    one_search: RecallScore | None = None
    one_search_source: str = ""
    by_kind: dict[str, list[int]] = Field(
        default_factory=dict, description="closed-book [hits, probes] per probe kind"
    )
    chars: int
    tokens: int
    messages: int
    over_window: bool
    compactions: int | None = None
    #: characters of the handoff (the summary messages) in the final context, for ours
    handoff_chars: int | None = None
    requests: int | None = None
    after_ratio_mean: float | None = None
    prefix_reuse: float | None = None
    seconds: float = 0.0
    detail: dict[str, Any] = Field(default_factory=dict)


class Case(BaseModel):
    """One session at one window, all systems."""

    model_config = ConfigDict(extra="forbid")

    session: str
    transcript: str
    window: int
    probes: int
    input_messages: int
    input_chars: int
    input_tokens: int
    systems: list[Kept]

    def get(self, system: System) -> Kept | None:
        return next((k for k in self.systems if k.system == system), None)


def short(session: str) -> str:
    """``entireio-git-sync-07ebffc93812`` -> ``git-sync-07eb``."""
    name = session.removeprefix("entireio-")
    head, _, digest = name.rpartition("-")
    return f"{head}-{digest[:4]}" if head else name


# -- measuring ----------------------------------------------------------------------------------
def text_size(messages: Sequence[dict[str, Any]], tokens: Tokens) -> tuple[int, int]:
    """(characters of the scoring text, tokens) of a message list."""
    chars = sum(len(message_text(m)) for m in messages)
    count = sum(tokens.count_message(Message.from_api(m)) for m in messages)
    return chars, count


def keep_user_turns(
    messages: Sequence[Message], window: int, tokens: Tokens
) -> list[dict[str, Any]]:
    """The baseline: user messages and each turn's final answer, the newest that fit ``window``."""
    system_text, turns = split_turns(list(messages))
    picked: list[dict[str, Any]] = []
    for turn in turns:
        picked.append({"role": "user", "content": turn[0].text()})
        answers = [m for m in turn[1:] if m.role == "assistant" and m.text().strip()]
        if answers:
            picked.append({"role": "assistant", "content": answers[-1].text()})
    system = [{"role": "system", "content": system_text}] if system_text else []
    budget = window - sum(tokens.count_message(Message.from_api(m)) for m in system)
    kept: list[dict[str, Any]] = []
    for message in reversed(picked):
        cost = tokens.count_message(Message.from_api(message))
        if cost > budget:
            break
        budget -= cost
        kept.append(message)
    return [*system, *reversed(kept)]


def _child_env(scratch: Path) -> dict[str, str]:
    """Our defaults only: no HERMES_CORE_* settings from the caller, memory in ``scratch``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_CORE")}
    env["HERMES_CORE__MEMORY__HOME"] = str(scratch / "memory")
    return env


def report_supports_probes() -> bool:
    """Whether this replay report carries the recall fields (then ``--probes`` is passed)."""
    from hermes_core.replay import ReplayReport

    return "recall" in ReplayReport.model_fields


def _reported(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dict) and isinstance(value.get("recall"), int | float):
        return float(value["recall"])
    return None


def replay_ours(transcript: Path, window: int, probes_file: Path, folder: Path) -> dict[str, Any]:
    """``hermes-core replay ... --json --db FILE`` in a child process; the report as a dict."""
    db = folder / f"ours-{window}.db"
    command = [
        sys.executable,
        "-m",
        "hermes_core.cli",
        "replay",
        str(transcript),
        "--context-length",
        str(window),
        "--json",
        "--db",
        str(db),
    ]
    if report_supports_probes():
        command += ["--probes", str(probes_file)]
    start = time.perf_counter()
    proc = subprocess.run(
        command, cwd=folder, env=_child_env(folder), capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"hermes-core replay exited {proc.returncode}: {proc.stderr[-1500:]}")
    report: dict[str, Any] = json.loads(proc.stdout)
    report["_bench"] = {"db": str(db), "seconds": seconds, "command": command[1:]}
    return report


def one_search(db: Path, session_id: str, probes: Sequence[Probe], scratch: Path) -> RecallScore:
    """One search per probe on the replay's database: content words, limit 5, +-1 message."""
    settings = settings_from(
        {"session": {"path": str(db)}, "memory": {"home": str(scratch / "memory")}}
    )
    hermes = Hermes(settings)
    try:
        store = hermes.store()
        hits: list[str] = []
        misses: list[str] = []
        for probe in probes:
            found = store.search(probe.query(), session_id=session_id, limit=SEARCH_LIMIT)
            texts = [
                recall_text(row.to_api() for row in store.message_context(h.message_id, 1, 1))
                for h in found
            ]
            (hits if any(probe.hit(text) for text in texts) else misses).append(probe.id)
    finally:
        hermes.close()
    return RecallScore(recall=len(hits) / len(probes) if probes else 0.0, hits=hits, misses=misses)


def measure_ours(
    transcript: Path,
    window: int,
    probes_file: Path,
    probes: list[Probe],
    folder: Path,
    tokens: Tokens,
) -> Kept:
    report = replay_ours(transcript, window, probes_file, folder)
    final = report["final_messages"]
    score = closed_book(final, probes)
    detail: dict[str, Any] = {"command": report["_bench"]["command"]}
    recall_part = report.get("recall") or {}
    reported_closed = _reported(recall_part.get("closed_book"))
    if reported_closed is not None:
        detail["report_closed_book_recall"] = reported_closed
        detail["closed_book_agrees"] = abs(reported_closed - score.recall) < 1e-9
    measured = one_search(Path(report["_bench"]["db"]), report["session_id"], probes, folder)
    detail["benchmark_one_search"] = json.loads(measured.model_dump_json())
    searched, source = measured, "benchmark (store.search + message_context)"
    reported_search = _reported(recall_part.get("one_search"))
    if reported_search is not None:
        missed = list(recall_part.get("one_search_misses", []))
        searched = RecallScore(
            recall=reported_search,
            hits=[p.id for p in probes if p.id not in missed],
            misses=missed,
        )
        scored = recall_part.get("one_search_source") or "the places found"
        source = f"replay report, {scored} (benchmark's own search: {measured.recall:.2f})"
        if "one_search_windows" in recall_part:
            detail["one_search_windows"] = recall_part["one_search_windows"]
    threshold = report["threshold_tokens"]
    compressions = report["compressions"]
    ratios = [c["tokens_after"] / threshold for c in compressions] if threshold else []
    chars, count = text_size(final, tokens)
    detail.update(
        {
            "threshold_tokens": threshold,
            "final_active_tokens_reported": report["final_active_tokens"],
            "after_ratios": [round(r, 4) for r in ratios],
            "fallbacks": sum(1 for c in compressions if c.get("fallback_used")),
            "prefix_breaks": report.get("prefix_breaks", {}),
            "imported_messages": report["imported_messages"],
        }
    )
    return Kept(
        system="ours",
        closed_book=score,
        one_search=searched,
        one_search_source=source,
        chars=chars,
        tokens=count,
        messages=len(final),
        over_window=count > window,
        compactions=len(compressions),
        handoff_chars=report.get("kept_summary_chars"),
        requests=report["requests"],
        after_ratio_mean=statistics.fmean(ratios) if ratios else None,
        prefix_reuse=report["prefix_reuse"],
        seconds=round(report["_bench"]["seconds"], 2),
        detail=detail,
    )


def measure_theirs(
    wire_file: Path, window: int, seam: str, probes: list[Probe], tokens: Tokens
) -> Kept:
    start = time.perf_counter()
    result = run_theirs_runner(
        "replay_bench",
        {
            "messages_file": str(wire_file),
            "context_length": window,
            "stub_summary": STUB_SUMMARY,
            "seam": "call_llm" if seam == "stub" else seam,
        },
    )
    seconds = time.perf_counter() - start
    final = [{k: v for k, v in m.items() if not k.startswith("_")} for m in result["messages"]]
    chars, count = text_size(final, tokens)
    threshold = result["config"]["threshold_tokens"]
    done = [e for e in result["events"] if e["progressed"]]
    ratios = [e["tokens_after"] / threshold for e in done] if threshold else []
    fallbacks = sum(1 for e in done if e.get("fallback_used"))
    if (seam == "fallback") != (fallbacks == len(done)) and done:
        raise RuntimeError(
            f"hermes-agent replay, seam {seam}: {fallbacks} of {len(done)} compactions used "
            "its deterministic fallback (the seam did not take effect as intended)"
        )
    return Kept(
        system="hermes-agent fallback" if seam == "fallback" else "hermes-agent stub",
        closed_book=closed_book(final, probes),
        chars=chars,
        tokens=count,
        messages=len(final),
        over_window=count > window,
        compactions=result["compressions"],
        after_ratio_mean=statistics.fmean(ratios) if ratios else None,
        seconds=round(seconds, 2),
        detail={
            "threshold_tokens": threshold,
            "after_ratios_rough": [round(r, 4) for r in ratios],
            "guards_at_end": result["guards_at_end"],
            "fallbacks": fallbacks,
            "token_counter_for_ratios": result["token_counter"],
        },
    )


def kinds_hit(score: RecallScore, probes: Sequence[Probe]) -> dict[str, list[int]]:
    """[hits, probes] of each probe kind."""
    hit = set(score.hits)
    out: dict[str, list[int]] = {}
    for probe in probes:
        counts = out.setdefault(probe.kind, [0, 0])
        counts[0] += probe.id in hit
        counts[1] += 1
    return out


def kinds_table(cases: Sequence[Case]) -> str:
    """Closed-book hits per probe kind, summed over the sessions, per window and system."""
    totals: dict[tuple[int, str], dict[str, list[int]]] = {}
    kinds: set[str] = set()
    for case in cases:
        for kept in case.systems:
            row = totals.setdefault((case.window, kept.system), {})
            for kind, (hits, count) in kept.by_kind.items():
                kinds.add(kind)
                cell = row.setdefault(kind, [0, 0])
                cell[0] += hits
                cell[1] += count
    order = sorted(kinds)
    lines = [("window", "system", *order)]
    for (window, system), row in totals.items():
        cells = [f"{row[k][0]}/{row[k][1]}" if k in row else "-" for k in order]
        lines.append((f"{window // 1000}K", system, *cells))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    ]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def measure_case(
    transcript_rel: str,
    probe_name: str,
    window: int,
    folder: Path,
    tokens: Tokens,
    seams: Sequence[str] = THEIRS_SEAMS,
) -> Case:
    transcript = TRANSCRIPTS / transcript_rel
    probes_file = TRANSCRIPTS / probe_name
    probes = load_probes(probes_file)
    messages = replay_order(load(transcript_rel))
    source = wire(messages)
    wire_file = folder / "input.json"
    wire_file.write_text(json.dumps(source, ensure_ascii=False), encoding="utf-8")
    full = closed_book(source, probes)
    if full.recall != 1.0:
        raise RuntimeError(f"{transcript_rel}: the imported messages miss probes {full.misses}")
    in_chars, in_tokens = text_size(source, tokens)
    systems = [measure_ours(transcript, window, probes_file, probes, folder, tokens)]
    systems += [measure_theirs(wire_file, window, seam, probes, tokens) for seam in seams]
    start = time.perf_counter()
    baseline = keep_user_turns(messages, window, tokens)
    chars, count = text_size(baseline, tokens)
    systems.append(
        Kept(
            system="keep-user-turns",
            closed_book=closed_book(baseline, probes),
            chars=chars,
            tokens=count,
            messages=len(baseline),
            over_window=count > window,
            seconds=round(time.perf_counter() - start, 2),
        )
    )
    for kept in systems:
        kept.by_kind = kinds_hit(kept.closed_book, probes)
    return Case(
        session=Path(probe_name).stem,
        transcript=transcript_rel,
        window=window,
        probes=len(probes),
        input_messages=len(source),
        input_chars=in_chars,
        input_tokens=in_tokens,
        systems=systems,
    )


# -- reporting ----------------------------------------------------------------------------------
def _size(kept: Kept) -> str:
    over = " OVER WINDOW" if kept.over_window else ""
    return f"{kept.chars / 1000:.0f}K ch / {kept.tokens / 1000:.1f}K tok{over}"


def _recall_text(kept: Kept | None) -> str:
    """A closed-book figure, flagged when the context it comes from does not fit the window."""
    if kept is None:
        return "n/a"
    return f"{kept.closed_book.recall:.2f}" + (" OVER WINDOW" if kept.over_window else "")


def section_rows(cases: Sequence[Case]) -> list[Row]:
    """The recall rows of the comparison table, with the issue's targets."""
    rows: list[Row] = []
    for case in cases:
        ours = case.get("ours")
        base = case.get("keep-user-turns")
        theirs = case.get("hermes-agent fallback") or case.get("hermes-agent stub")
        stub = case.get("hermes-agent stub")
        assert ours is not None and base is not None
        tag = f"{short(case.session)} {case.window // 1000}K"
        goal = CLOSED_BOOK_TARGETS.get(case.window)
        others = [k for k in case.systems if k.system != "ours"]
        rows.append(
            Row(
                key=f"recall_closed_{case.session}_{case.window}",
                metric=f"closed-book recall, {tag}",
                unit=f"of {case.probes}",
                ours=ours.closed_book.recall,
                theirs=theirs.closed_book.recall if theirs else None,
                theirs_text=_recall_text(theirs),
                baseline=f"{HERMES_AGENT_SPEC.replace('==', ' ')}"
                + (" fallback" if theirs and theirs is not stub else ""),
                target=Target(on="ours", op=">=", value=goal, text=f">= {goal:.2f}", source=SOURCE)
                if goal is not None
                else None,
                note="; ".join(f"{k.system} {_recall_text(k)}" for k in others)
                + f"; ours missed {', '.join(ours.closed_book.misses) or 'none'}",
            ).finish()
        )
        rows.append(
            Row(
                key=f"recall_closed_base_{case.session}_{case.window}",
                metric="  same, vs keep-user-turns",
                unit=f"of {case.probes}",
                ours=ours.closed_book.recall,
                theirs=base.closed_book.recall,
                baseline="keep-user-turns",
            ).finish()
        )
        rows.append(
            Row(
                key=f"recall_kept_{case.session}_{case.window}",
                metric="  kept text (chars: our handoff vs the baseline's turns)",
                unit="chars",
                ours=ours.handoff_chars if ours.handoff_chars is not None else ours.chars,
                theirs=base.chars,
                baseline="keep-user-turns",
                ours_text=(
                    f"{ours.handoff_chars / 1000:.0f}K ch handoff, final context {_size(ours)}"
                    if ours.handoff_chars is not None
                    else _size(ours)
                ),
                theirs_text=_size(base),
                target=KEPT_VS_BASELINE if case.window == 128_000 else None,
                note="; ".join(f"{k.system} {_size(k)}" for k in others)
                + f"; input {case.input_chars / 1000:.0f}K ch"
                + f" / {case.input_tokens / 1000:.0f}K tok",
            ).finish()
        )
        if ours.one_search is not None:
            rows.append(
                Row(
                    key=f"recall_search_{case.session}_{case.window}",
                    metric="  one-search recall (ours)",
                    unit=f"of {case.probes}",
                    ours=ours.one_search.recall,
                    theirs_text="n/a",
                    target=ONE_SEARCH,
                    note=f"measured by the {ours.one_search_source}" if case is cases[0] else "",
                ).finish()
            )
        if case.window == 128_000:
            rows.append(
                Row(
                    key=f"recall_prefix_{case.session}_{case.window}",
                    metric="  prefix-cache reuse (ours)",
                    unit="share",
                    ours=ours.prefix_reuse,
                    theirs_text="n/a",
                    target=PREFIX_REUSE,
                ).finish()
            )
        rows.append(
            Row(
                key=f"recall_after_{case.session}_{case.window}",
                metric="  active after compaction / trigger, mean",
                unit="ratio",
                ours=ours.after_ratio_mean,
                ours_text=None if ours.after_ratio_mean is not None else "no compaction",
                theirs=theirs.after_ratio_mean if theirs else None,
                target=AFTER_RATIO if ours.after_ratio_mean is not None else None,
                note=(
                    f"ours {ours.compactions} compactions in {ours.requests} requests"
                    + "".join(f"; {k.system} {k.compactions}" for k in others if k.compactions)
                ),
            ).finish()
        )
    return rows


def matrix(cases: Sequence[Case]) -> str:
    """Every system of every case, one line each."""
    header = (
        "session",
        "window",
        "system",
        "closed-book",
        "one-search",
        "chars",
        "tokens",
        "compactions",
        "after/trigger",
        "prefix reuse",
    )
    lines = [header]
    for case in cases:
        for kept in case.systems:
            lines.append(
                (
                    short(case.session),
                    f"{case.window // 1000}K",
                    kept.system,
                    f"{kept.closed_book.recall:.2f}",
                    f"{kept.one_search.recall:.2f}" if kept.one_search else "-",
                    f"{kept.chars:,}",
                    f"{kept.tokens:,}" + (" OVER" if kept.over_window else ""),
                    "-" if kept.compactions is None else str(kept.compactions),
                    "-" if kept.after_ratio_mean is None else f"{kept.after_ratio_mean:.2f}",
                    "-" if kept.prefix_reuse is None else f"{kept.prefix_reuse:.4f}",
                )
            )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    ]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def run_section(
    sessions: Sequence[tuple[str, str]] = SESSIONS,
    windows: Sequence[int] = WINDOWS,
    seams: Sequence[str] = THEIRS_SEAMS,
    log: Callable[[str], None] | None = None,
) -> Section:
    """Measure every (session, window) and build the ``recall`` section."""
    tokens = counter()
    start = time.perf_counter()
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="hermes-bench-recall-") as tmp:
        for transcript_rel, probe_name in sessions:
            for window in windows:
                folder = Path(tmp) / f"{Path(probe_name).stem}-{window}"
                folder.mkdir()
                began = time.perf_counter()
                case = measure_case(transcript_rel, probe_name, window, folder, tokens, seams)
                cases.append(case)
                if log is not None:
                    ours = case.systems[0]
                    log(
                        f"   {short(case.session)} {window // 1000}K: ours closed-book "
                        f"{ours.closed_book.recall:.2f}, one-search "
                        f"{ours.one_search.recall if ours.one_search else float('nan'):.2f} "
                        f"({time.perf_counter() - began:.0f} s)"
                    )
    return Section(
        name="recall",
        rows=section_rows(cases),
        detail={
            "cases": [json.loads(c.model_dump_json()) for c in cases],
            "matrix": matrix(cases),
            "kinds": kinds_table(cases),
            "probes_rules": "transcripts/probes/README.md, scored by hermes_core.recall",
        },
        seconds=time.perf_counter() - start,
    )


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks recall",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--windows", default=",".join(str(w) for w in WINDOWS), help="e.g. 128000,64000,32000"
    )
    parser.add_argument(
        "--sessions",
        help="comma-separated probe names (e.g. entireio-cli-38ecf75f2f1d); default all three",
    )
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="the held-out sessions (transcripts/probes-heldout/) instead of the probes' own",
    )
    parser.add_argument(
        "--theirs", default=",".join(THEIRS_SEAMS), help="hermes-agent summaries: fallback,stub"
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "recall.json", help="result file")
    args = parser.parse_args(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    from ..theirs.environment import ensure_theirs_venv
    from .runner import machine

    args = parse(argv)
    windows = [int(w) for w in args.windows.split(",") if w]
    known = list(HELD_OUT if args.held_out else SESSIONS)
    sessions = known
    if args.sessions:
        wanted = {s for s in args.sessions.split(",") if s}
        names = {Path(p).stem: (t, p) for t, p in known}
        unknown = wanted - set(names)
        if unknown:
            raise SystemExit(f"unknown session(s) {sorted(unknown)}; known: {sorted(names)}")
        sessions = [names[name] for name in names if name in wanted]
    seams = [s for s in args.theirs.split(",") if s]
    bad = [s for s in seams if s not in THEIRS_SEAMS]
    if bad:
        raise SystemExit(f"unknown --theirs {bad}; expected some of {list(THEIRS_SEAMS)}")

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    facts = machine()
    ensure_theirs_venv()
    section = run_section(sessions, windows, seams, log)
    result = {
        "machine": facts,
        "seconds": round(section.seconds, 1),
        "section": json.loads(section.model_dump_json()),
        "table": render([section]),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    print(f"recall after compaction  |  {facts['date']}  |  {section.seconds:.0f} s")
    print()
    print(section.detail["matrix"])
    print()
    print("closed-book hits by probe kind, all sessions:")
    print(section.detail["kinds"])
    print()
    print(result["table"])
    verdicts = [row.verdict for row in section.rows]
    print()
    print(f"targets: {verdicts.count('pass')} pass, {verdicts.count('FAIL')} FAIL")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
