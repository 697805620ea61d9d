"""Replay a transcript turn by turn through hermes-agent's compressor, as its agent loop would.

Run with the reference venv's python.  Job (JSON; see runner_common.read_job)::

    {"messages_file": "msgs.json", "context_length": 16000,
     "stub_summary": "fixed summary text"}

Optional: ``seam`` ("call_llm" | "generate_summary" | "fallback": their
deterministic handoff, see ``runner_common.SummaryStub``), ``threshold_percent``
(0.50), ``protect_first_n`` (3), ``protect_last_n`` (20), ``summary_target_ratio``
(0.20), ``model``,
``system_in_messages`` (false), ``emulate_usage`` (true), ``include_messages`` (true).

The loop mirrors what hermes-agent does between API calls (see API_NOTES.md):

* The system prompt is kept out of the message list and only counted in the
  request estimate (``system_in_messages`` false), as their agent loop does.
* Before each assistant message is appended, the "provider" reports usage for the
  request that produced it: ``update_from_response`` with prompt_tokens set to their
  rough estimate of that request (``emulate_usage``).  This drives their
  anti-thrashing and post-compression deferral logic as real usage would.
* After each appended message: their pre-API guard chain
  (``should_defer_preflight_to_real_usage``, failure cooldown, ``should_compress``
  on the rough request estimate); on True, ``compress()`` then the bookkeeping
  their ``compress_context`` does (user-turn anchor, rough-token baseline,
  ``last_prompt_tokens = -1``, ``record_completed_compaction``).

Prints one JSON object with the final active messages and every compression event.
"""

from __future__ import annotations

import copy
import functools
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from runner_common import (
    SummaryStub,
    environment_facts,
    isolate_home,
    load_messages,
    message_chars,
    public_messages,
    read_job,
    remove_home,
    run_main,
    timed,
)


class ReplayJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages_file: str
    context_length: int = Field(gt=0)
    stub_summary: str
    seam: str = "call_llm"
    threshold_percent: float = Field(default=0.50, gt=0, le=1)
    protect_first_n: int = Field(default=3, ge=0)
    protect_last_n: int = Field(default=20, ge=0)
    summary_target_ratio: float = Field(default=0.20, gt=0, le=1)
    model: str = "reference-bench-model"
    system_in_messages: bool = False
    emulate_usage: bool = True
    include_messages: bool = True


def main(argv: list[str]) -> dict[str, Any]:
    job = read_job(argv, ReplayJob)
    home = isolate_home("replay")
    try:
        return run_replay(job)
    finally:
        remove_home(home)


def run_replay(job: ReplayJob) -> dict[str, Any]:
    from agent.context_compressor import ContextCompressor
    from agent.conversation_compression import _ensure_compressed_has_user_turn
    from agent.model_metadata import estimate_messages_tokens_rough, estimate_request_tokens_rough

    source = load_messages(job.messages_file)
    system_prompt = ""
    turns = source
    if source and source[0]["role"] == "system" and not job.system_in_messages:
        system_prompt = source[0].get("content") or ""
        turns = source[1:]

    compressor = ContextCompressor(
        model=job.model,
        threshold_percent=job.threshold_percent,
        protect_first_n=job.protect_first_n,
        protect_last_n=job.protect_last_n,
        summary_target_ratio=job.summary_target_ratio,
        quiet_mode=True,
        config_context_length=job.context_length,
    )
    stub = SummaryStub(job.stub_summary, job.seam)
    stub.install(compressor)

    def request_tokens(msgs: list[dict[str, Any]]) -> int:
        return int(estimate_request_tokens_rough(msgs, system_prompt=system_prompt))

    active: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    wall_total = 0.0
    cpu_total = 0.0
    peak_tokens = 0
    for index, msg in enumerate(turns):
        if job.emulate_usage and msg["role"] == "assistant":
            compressor.update_from_response(
                {
                    "prompt_tokens": request_tokens(active),
                    "completion_tokens": int(estimate_messages_tokens_rough([msg])),
                }
            )
        active.append(copy.deepcopy(msg))
        tokens = request_tokens(active)
        peak_tokens = max(peak_tokens, tokens)
        if compressor.should_defer_preflight_to_real_usage(tokens):
            continue
        if compressor.get_active_compression_failure_cooldown():
            continue
        if not compressor.should_compress(tokens):
            continue
        before = active
        compressed, wall, cpu = timed(functools.partial(compressor.compress, before, tokens))
        wall_total += wall
        cpu_total += cpu
        progressed = bool(compressor._last_compression_made_progress)
        if progressed and compressed != before:
            _ensure_compressed_has_user_turn(before, compressed)
            active = compressed
            compressor.last_compression_rough_tokens = request_tokens(active)
            compressor.last_prompt_tokens = -1
            compressor.last_completion_tokens = 0
            compressor.awaiting_real_usage_after_compression = True
            compressor.record_completed_compaction(
                used_fallback=bool(compressor._last_summary_fallback_used)
            )
        events.append(
            {
                "turn_index": index,
                "progressed": progressed,
                "fallback_used": bool(compressor._last_summary_fallback_used),
                "messages_before": len(before),
                "messages_after": len(active),
                "tokens_before": tokens,
                "tokens_after": request_tokens(active),
                "wall_s": wall,
                "cpu_s": cpu,
            }
        )

    final = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + active
    result: dict[str, Any] = {
        "runner": "replay_bench",
        **environment_facts(),
        "config": {
            "context_length": compressor.context_length,
            "threshold_percent_effective": compressor.threshold_percent,
            "threshold_tokens": compressor.threshold_tokens,
            "tail_token_budget": compressor.tail_token_budget,
            "seam": job.seam,
            "system_in_messages": job.system_in_messages,
            "emulate_usage": job.emulate_usage,
        },
        "turns_replayed": len(turns),
        "compressions": sum(1 for e in events if e["progressed"]),
        "compress_calls": len(events),
        "compressor_compression_count": compressor.compression_count,
        "compress_wall_s_total": wall_total,
        "compress_cpu_s_total": cpu_total,
        "peak_request_tokens_rough": peak_tokens,
        "final": {
            "messages": len(final),
            "chars": message_chars(final),
            "request_tokens_rough": request_tokens(active),
        },
        "guards_at_end": {
            "automatic_compression_blocked": bool(
                compressor._automatic_compression_blocked_locally()
            ),
            "ineffective_compression_count": compressor._ineffective_compression_count,
            "fallback_compression_streak": compressor._fallback_compression_streak,
        },
        "summary_stub": stub.stats(),
        "events": events,
        "token_counter": "hermes-agent estimate_request_tokens_rough (chars/4)",
    }
    if job.include_messages:
        result["messages"] = public_messages(final)
    return result


if __name__ == "__main__":
    sys.exit(run_main(main))
