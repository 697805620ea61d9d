"""Run every reference-side runner once on a transcript and print the headline numbers.

Run with the project's python (it only starts the reference venv's python)::

    .venv/bin/python benchmarks/theirs/run_samples.py \\
        [--transcript transcripts/openai-chat/openhands-django-11149.json.gz] \\
        [--quick] [--out results.json]

Builds the reference venv first if needed.  This is a check that the runners work
end to end, not the side-by-side benchmark itself.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

THEIRS = Path(__file__).resolve().parent
sys.path[:0] = [str(THEIRS.parent), str(THEIRS)]

from environment import (  # noqa: E402
    ensure_theirs_venv,
    read_install_record,
    run_theirs_runner,
)
from transcript_loader import load_openai_chat_transcript  # noqa: E402

DEFAULT_TRANSCRIPT = (
    THEIRS.parents[1] / "transcripts" / "openai-chat" / "openhands-django-11149.json.gz"
)
STUB = "Stub summary for benchmarking: earlier turns were compacted. No details kept here."


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def run(transcript: Path, quick: bool) -> dict[str, Any]:
    python = ensure_theirs_venv()
    record = read_install_record(python.parent.parent)
    messages = load_openai_chat_transcript(transcript)
    results: dict[str, Any] = {"install": record.model_dump() if record else None}
    with tempfile.TemporaryDirectory(prefix="theirs-samples-") as tmp:
        msgs_file = Path(tmp) / "messages.json"
        msgs_file.write_text(json.dumps(messages), encoding="utf-8")
        print(f"transcript: {transcript.name}: {len(messages)} messages")

        for ctx in (16000, 32000, 128000):
            job = {
                "messages_file": str(msgs_file),
                "context_length": ctx,
                "stub_summary": STUB,
                "runs": 3 if quick else 9,
                "include_messages": False,
            }
            r = run_theirs_runner("compress_bench", job, python=python)
            results[f"compress_{ctx}"] = r
            print(
                f"compress ctx={ctx}: wall {ms(r['wall_s']['median'])} "
                f"cpu {ms(r['cpu_s']['median'])} (median of {r['runs']}); "
                f"{r['input']['messages']}->{r['output']['messages']} msgs, "
                f"~{r['input']['tokens_rough']}->{r['output']['tokens_rough']} tokens"
            )

        for ctx in (16000, 32000):
            job = {
                "messages_file": str(msgs_file),
                "context_length": ctx,
                "stub_summary": STUB,
                "include_messages": False,
            }
            r = run_theirs_runner("replay_bench", job, python=python)
            results[f"replay_{ctx}"] = r
            print(
                f"replay ctx={ctx}: {r['compressions']} compressions in {r['turns_replayed']} "
                f"turns, final {r['final']['messages']} msgs "
                f"~{r['final']['request_tokens_rough']} tokens "
                f"(threshold {r['config']['threshold_tokens']}), "
                f"compress total {ms(r['compress_wall_s_total'])}"
            )

        store_job: dict[str, Any] = {"messages_file": str(msgs_file)}
        if quick:
            store_job |= {
                "append_messages": 300,
                "search_messages": 2000,
                "compaction_messages": 2000,
                "compaction_runs": 1,
            }
        else:
            store_job |= {"append_messages": 2000, "search_messages": 10000}
        r = run_theirs_runner("store_bench", store_job, python=python)
        results["store"] = r
        a, s, c = r["append"], r["search"], r["compaction"]
        print(f"store append: {a['messages_per_s']:.0f} msg/s ({a['messages']} messages)")
        print(
            f"store search over {s['db_messages']} msgs: p50 {ms(s['latency_s']['p50'])} "
            f"p95 {ms(s['latency_s']['p95'])} (raw FTS MATCH p50 "
            f"{ms(s['raw_fts_match_latency_s']['p50'])})"
        )
        print(
            f"store archive_and_compact of {c['messages']} msgs: median {ms(c['wall_s']['median'])}"
        )

        r = run_theirs_runner("lease_bench", {"rounds": 20 if quick else 100}, python=python)
        results["lease"] = r
        print(
            f"lease (compression lock, poll {r['poll_interval_s']} s): hand-over "
            f"p50 {ms(r['handover_s']['p50'])} p95 {ms(r['handover_s']['p95'])}"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcript", type=Path, default=DEFAULT_TRANSCRIPT)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs")
    parser.add_argument("--out", type=Path, default=None, help="write all results as JSON")
    args = parser.parse_args(argv)
    results = run(args.transcript, args.quick)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
