"""Benchmark of the ``compressor`` engine, side by side with hermes-agent's ContextCompressor.

What it measures (the summarizer is a fixed stub on both sides, so only the
mechanical work is compared):

1. ``compress()`` CPU time on a ~60K-token real session (the OpenHands django
   transcript) and a ~250K-token one (real transcripts concatenated with the
   project's importers), median of ``--runs``. Ours is timed three ways: on
   rows carrying what the turn runtime records with each message, its token
   count and its ``annotate_message`` results (the handoff facts and the lean
   tail's identifiers: the normal case, see :func:`record`); with the token
   counts only; and cold, everything counted and extracted inside
   ``compress``. The recording cost, paid once per message when it is
   recorded, is printed beside them.
2. Identifiers kept versus active size after replaying the django transcript
   with a small window so compression fires several times: of the identifiers
   (``hermes_core.identifiers``: paths, SHAs, issue numbers, URLs, branches,
   exceptions, error lines) in the transcript, how many are in the final
   active context, and how big that context is.

hermes-agent runs in its own venv (``benchmarks/.venv-hermes-agent``, see
``benchmarks/theirs/environment.py``) through ``benchmarks/theirs/compress_bench.py``
and ``replay_bench.py``; when that venv is missing only our numbers print.

Usage: ``.venv/bin/python -m benchmarks compression [--runs 5] [--json out.json]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hermes_core.config import Settings, compression_settings
from hermes_core.identifiers import extract_all, flatten
from hermes_core.thresholds import effective_threshold
from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    CompressionSettings,
    HandoffSummary,
    Message,
    NewMessage,
    StoredMessage,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    TailStrategy,
)
from hermes_plugin_compressor import ContextCompressor
from hermes_plugin_compressor.facts import annotation as facts_annotation
from hermes_plugin_summarizer_deterministic import DeterministicSummarizer
from hermes_plugin_tail_lean import LeanTail
from hermes_plugin_tail_lean.annotations import annotation as identifiers_annotation
from hermes_plugin_tail_legacy import LegacyTail
from hermes_plugin_tiktoken_counter.counter import TiktokenCounter

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = ROOT / "transcripts"
DJANGO = TRANSCRIPTS / "openai-chat" / "openhands-django-11149.json.gz"
THEIRS_PYTHON = ROOT / "benchmarks" / ".venv-hermes-agent" / "bin" / "python"
THEIRS_DIR = ROOT / "benchmarks" / "theirs"
STUB_SUMMARY = (
    "Summary of earlier work: the agent investigated the task, ran commands and edited files. "
    "Continue from the recent messages."
)
MODEL = "gpt-4o-mini"
OVERHEAD = 3


class StubSummarizer(Summarizer):
    """Returns the same fixed handoff every time (the same text hermes-agent's stub returns)."""

    name = "stub"

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        return SummaryResult(summary=HandoffSummary(progress=STUB_SUMMARY), summarizer=self.name)


class BenchHost:
    """EngineHost: tiktoken counts, the real tail plugins, stub and deterministic summarizers."""

    def __init__(self) -> None:
        self.counter = TiktokenCounter()
        self._summarizers: dict[str, Summarizer] = {
            "stub": StubSummarizer(),
            "deterministic": DeterministicSummarizer(),
        }
        self._tails: dict[str, TailStrategy] = {"lean": LeanTail(), "legacy": LegacyTail()}

    def count_text(self, text: str) -> int:
        return self.counter.count(text, MODEL) if text else 0

    def count_message(self, message: Message) -> int:
        text = message.text()
        for call in message.tool_calls or []:
            text += "\n" + call.function.name + "\n" + call.function.arguments
        return OVERHEAD + self.count_text(text)

    def summarizer(self, name: str) -> Summarizer:
        return self._summarizers[name]

    def tail_strategy(self, name: str) -> TailStrategy:
        return self._tails[name]


# -- inputs ------------------------------------------------------------------------------------


def load_django() -> list[Message]:
    data = json.loads(gzip.decompress(DJANGO.read_bytes()))
    out = []
    for raw in data["messages"]:
        raw = dict(raw)
        content = raw.get("content")
        if isinstance(content, list):
            raw["content"] = "\n".join(
                p.get("text", "") if p.get("type") == "text" else f"[{p.get('type')}]"
                for p in content
            )
        out.append(Message.from_api(raw))
    return out


def load_large(host: BenchHost, target_tokens: int = 250_000) -> tuple[list[Message], list[str]]:
    """Real transcripts concatenated (system prompt of the first) until ``target_tokens``."""
    from hermes_plugin_importers.claude_code import ClaudeCodeImporter
    from hermes_plugin_importers.codex_rollout import CodexRolloutImporter

    sources: list[tuple[str, list[Message]]] = [("openai-chat/django", load_django())]
    for importer, path in (
        (ClaudeCodeImporter(), TRANSCRIPTS / "claude-code" / "entireio-cli-3dffd2ffdd52.jsonl.gz"),
        (
            CodexRolloutImporter(),
            TRANSCRIPTS / "codex-rollout" / "entireio-entire-graph-54fb8b1d18b6.jsonl.gz",
        ),
        (ClaudeCodeImporter(), TRANSCRIPTS / "claude-code" / "entireio-cli-38ecf75f2f1d.jsonl.gz"),
    ):
        for conversation in importer.load(path):
            sources.append((f"{importer.name}/{path.stem}", conversation.messages))
    messages: list[Message] = []
    used: list[str] = []
    tokens = 0
    for name, source in sources:
        for message in source:
            if message.role == "system" and messages:
                continue
            messages.append(message)
            tokens += host.count_message(message)
            if tokens >= target_tokens and message.role != "tool":
                break
        used.append(name)
        if tokens >= target_tokens:
            break
    # never end inside a tool round: cut back to the last non-tool message
    while messages and (messages[-1].role == "tool" or messages[-1].tool_calls):
        messages.pop()
    return messages, used


def stored(
    messages: Sequence[Message],
    host: Any,
    counted: bool,
    annotate: Callable[[Message], dict[str, Any]] | None = None,
) -> list[StoredMessage]:
    """Rows as the store returns them; ``host`` is anything with ``count_message``.

    ``counted``: rows carry the token counts the runtime records with each
    message; ``annotate`` (``Hermes.annotate``): rows carry the annotations it
    records too (the lean tail's identifiers).
    """
    return [
        StoredMessage(
            id=i + 1,
            session_id="bench",
            position=i,
            message=m,
            token_count=host.count_message(m) if counted else None,
            annotations=annotate(m) if annotate is not None else {},
            created_at=0.0,
        )
        for i, m in enumerate(messages)
    ]


def record(message: Message) -> dict[str, Any]:
    """What ``Hermes.annotate`` records for ``message`` with the default plugins (the
    ``compressor`` engine's facts and the lean tail's identifiers), without a host."""
    return {**(facts_annotation(message) or {}), **identifiers_annotation(message)}


def settings_for(context_length: int, tail: str) -> CompressionSettings:
    settings = Settings()
    threshold = effective_threshold(settings, model=MODEL, context_length=context_length)
    return compression_settings(
        settings, threshold.threshold_tokens, context_length, "stub"
    ).model_copy(update={"tail": tail})


# -- ours --------------------------------------------------------------------------------------


def time_ours(
    messages: list[Message],
    host: BenchHost,
    context_length: int,
    tail: str,
    runs: int,
    counted: bool,
    annotated: bool = False,
) -> dict[str, Any]:
    """``counted``: rows carry their token counts; ``annotated``: and their annotations."""
    system, body = messages[0], messages[1:]
    start = time.process_time()
    rows = stored(body, host, counted, record if annotated else None)
    record_cpu = time.process_time() - start
    settings = settings_for(context_length, tail)
    cpus: list[float] = []
    result: CompressionResult | None = None
    for i in range(runs + 1):
        engine = ContextCompressor()
        engine.bind(host)
        request = CompressionRequest(
            session_id="bench",
            messages=rows,
            settings=settings,
            system_tokens=host.count_message(system),
            manual=True,
        )
        start = time.process_time()
        result = engine.compress(request)
        elapsed = time.process_time() - start
        if i:
            cpus.append(elapsed)
    assert result is not None
    return {
        "tail": tail,
        "stored_token_counts": counted,
        "stored_annotations": annotated,
        "record_cpu_s": record_cpu if counted else 0.0,
        "record_messages": len(body),
        "cpu_s_median": statistics.median(cpus),
        "status": result.status,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "messages_after": len(result.messages),
    }


def replay_ours(
    messages: list[Message], host: BenchHost, context_length: int, tail: str
) -> dict[str, Any]:
    """Append messages one by one; before each model call, compress at the threshold."""
    system, body = messages[0], messages[1:]
    settings = settings_for(context_length, tail)
    system_tokens = host.count_message(system)
    engine = ContextCompressor()
    engine.bind(host)
    active: list[StoredMessage] = []
    next_id = 1
    compressions = 0

    def add(new: NewMessage) -> StoredMessage:
        nonlocal next_id
        row = StoredMessage(
            id=next_id,
            session_id="bench",
            position=len(active),
            message=new.message,
            token_count=new.token_count
            if new.token_count is not None
            else host.count_message(new.message),
            origin_id=new.origin_id,
            created_at=0.0,
        )
        next_id += 1
        return row

    for position, message in enumerate(body):
        active.append(add(NewMessage(message=message)))
        following = body[position + 1] if position + 1 < len(body) else None
        if following is not None and following.role != "assistant":
            continue
        tokens = system_tokens + sum(row.token_count or 0 for row in active)
        if tokens < settings.threshold_tokens:
            continue
        result = engine.compress(
            CompressionRequest(
                session_id="bench",
                messages=active,
                settings=settings,
                system_tokens=system_tokens,
                compression_index=compressions + 1,
            )
        )
        if result.status == "compressed":
            compressions += 1
            active = [add(new) for new in result.messages]
    final = [system, *(row.message for row in active)]
    return {
        "compressions": compressions,
        "final_messages": [m.to_api() for m in final],
        "final_tokens": system_tokens + sum(row.token_count or 0 for row in active),
    }


# -- theirs ------------------------------------------------------------------------------------


def theirs_available() -> bool:
    return THEIRS_PYTHON.is_file() and (THEIRS_DIR / "compress_bench.py").is_file()


def run_theirs(script: str, job: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [str(THEIRS_PYTHON), str(THEIRS_DIR / script), json.dumps(job)],
        capture_output=True,
        text=True,
        check=False,
        cwd=THEIRS_DIR,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """OpenAI wire dicts with string content (what the reference runners accept)."""
    out = []
    for m in messages:
        body = m.to_api()
        if not isinstance(body.get("content"), str | None):
            body["content"] = m.text()
        out.append(body)
    return out


# -- identifiers -------------------------------------------------------------------------------


def message_text(m: dict[str, Any]) -> str:
    return str(m.get("content") or "") + " " + json.dumps(m.get("tool_calls") or "")


def identifiers_kept(source: Sequence[Message], final: Sequence[dict[str, Any]]) -> dict[str, Any]:
    wanted = flatten(extract_all(message_text(m) for m in wire(source[1:])))
    active = "\n".join(message_text(m) for m in final)
    kept = sum(1 for value in wanted if value in active)
    return {
        "identifiers": len(wanted),
        "kept": kept,
        "kept_ratio": round(kept / max(1, len(wanted)), 4),
    }


# -- main --------------------------------------------------------------------------------------

#: (token counts stored, annotations stored) -> label; the first is the normal case
CASES: dict[tuple[bool, bool], str] = {
    (True, True): "recorded counts + annotations",
    (True, False): "recorded counts only",
    (False, False): "cold: all in compress",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--context-length", type=int, default=128_000)
    parser.add_argument("--replay-context-length", type=int, default=16_000)
    parser.add_argument("--json", type=Path, default=None, help="write all results here")
    args = parser.parse_args(argv)

    host = BenchHost()
    medium = load_django()
    large, used = load_large(host)
    report: dict[str, Any] = {"theirs_available": theirs_available(), "large_sources": used}
    tmp = Path(tempfile.mkdtemp(prefix="hermes-compress-bench-"))
    found = "found" if report["theirs_available"] else "MISSING: ours only"
    print(f"hermes-agent reference venv: {found}")

    for label, messages in (("medium", medium), ("large", large)):
        tokens = sum(host.count_message(m) for m in messages)
        print(f"\n== {label}: {len(messages)} messages, {tokens:,} tokens (tiktoken {MODEL})")
        entry: dict[str, Any] = {"messages": len(messages), "tokens": tokens, "ours": []}
        for tail in ("lean", "legacy"):
            for counted, annotated in CASES:
                row = time_ours(
                    messages, host, args.context_length, tail, args.runs, counted, annotated
                )
                entry["ours"].append(row)
                print(
                    f"ours  {tail:6} ({CASES[counted, annotated]:28}): "
                    f"cpu {row['cpu_s_median'] * 1000:8.1f} ms  "
                    f"{row['status']} {row['tokens_before']:,} -> {row['tokens_after']:,} tokens"
                )
            recorded = entry["ours"][-len(CASES)]
            per_message = recorded["record_cpu_s"] / max(1, recorded["record_messages"]) * 1e6
            print(
                f"      recording counts + annotations once per message: "
                f"{recorded['record_cpu_s'] * 1000:.1f} ms for {recorded['record_messages']} "
                f"messages ({per_message:.0f} us a message, paid as turns are recorded)"
            )
        if report["theirs_available"]:
            path = tmp / f"{label}.json"
            path.write_text(json.dumps(wire(messages)), encoding="utf-8")
            theirs = run_theirs(
                "compress_bench.py",
                {
                    "messages_file": str(path),
                    "context_length": args.context_length,
                    "stub_summary": STUB_SUMMARY,
                    "runs": args.runs,
                    "include_messages": False,
                },
            )
            cpu = theirs["cpu_s"]["median"]
            entry["theirs"] = {
                "cpu_s_median": cpu,
                "output": theirs["output"],
                "input": theirs["input"],
            }
            print(
                f"theirs default  (their chars/4 estimate): cpu {cpu * 1000:8.1f} ms  "
                f"{theirs['input']['tokens_rough']:,} -> "
                f"{theirs['output']['tokens_rough']:,} rough tokens"
            )
            for row in entry["ours"]:
                row["ratio_ours_theirs"] = round(row["cpu_s_median"] / cpu, 3) if cpu else None
                case = CASES[row["stored_token_counts"], row["stored_annotations"]]
                print(f"ratio ours/theirs  {row['tail']:6} {case:28}: {row['ratio_ours_theirs']}")
        report[label] = entry

    print(
        "\n== identifiers kept vs active size "
        f"(django replay, window {args.replay_context_length:,})"
    )
    quality: dict[str, Any] = {}
    for tail in ("lean", "legacy"):
        replayed = replay_ours(medium, host, args.replay_context_length, tail)
        kept = identifiers_kept(medium, replayed["final_messages"])
        quality[f"ours_{tail}"] = {
            **kept,
            "compressions": replayed["compressions"],
            "final_tokens": replayed["final_tokens"],
        }
        print(
            f"ours  {tail:6}: {kept['kept']}/{kept['identifiers']} identifiers "
            f"({kept['kept_ratio']:.0%}) in {replayed['final_tokens']:,} active tokens "
            f"after {replayed['compressions']} compressions"
        )
    if report["theirs_available"]:
        path = tmp / "replay.json"
        path.write_text(json.dumps(wire(medium)), encoding="utf-8")
        theirs = run_theirs(
            "replay_bench.py",
            {
                "messages_file": str(path),
                "context_length": args.replay_context_length,
                "stub_summary": STUB_SUMMARY,
            },
        )
        final = theirs["messages"]
        kept = identifiers_kept(medium, final)
        final_tokens = sum(host.count_message(Message.from_api(m)) for m in final)
        quality["theirs"] = {
            **kept,
            "compressions": theirs["compressions"],
            "final_tokens": final_tokens,
        }
        print(
            f"theirs       : {kept['kept']}/{kept['identifiers']} identifiers "
            f"({kept['kept_ratio']:.0%}) in {final_tokens:,} active tokens (tiktoken) "
            f"after {theirs['compressions']} compressions"
        )
    else:
        print("theirs: reference venv missing; ours only")
    report["identifiers"] = quality
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
