"""Time hermes-agent's ContextCompressor.compress on one message list, LLM call stubbed.

Run with the reference venv's python.  Job (JSON; see runner_common.read_job)::

    {"messages_file": "msgs.json", "context_length": 32000,
     "stub_summary": "fixed summary text", "runs": 5}

Optional: ``warmup`` (1), ``seam`` ("call_llm" | "generate_summary"),
``threshold_percent`` (0.50, their config default), ``protect_first_n`` (3),
``protect_last_n`` (20), ``summary_target_ratio`` (0.20), ``model``,
``current_tokens`` (defaults to their rough estimate), ``include_messages`` (true).

Each run builds a fresh compressor and a deep copy of the input outside the timed
region; only ``compress()`` is timed.  Prints one JSON object.
"""

from __future__ import annotations

import copy
import functools
import statistics
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from runner_common import (
    RunnerError,
    SummaryStub,
    environment_facts,
    isolate_home,
    load_messages,
    message_chars,
    public_messages,
    read_job,
    remove_home,
    run_main,
    summarize,
    timed,
)


class CompressJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages_file: str
    context_length: int = Field(gt=0)
    stub_summary: str
    runs: int = Field(default=5, ge=1)
    warmup: int = Field(default=1, ge=0)
    seam: str = "call_llm"
    threshold_percent: float = Field(default=0.50, gt=0, le=1)
    protect_first_n: int = Field(default=3, ge=0)
    protect_last_n: int = Field(default=20, ge=0)
    summary_target_ratio: float = Field(default=0.20, gt=0, le=1)
    model: str = "reference-bench-model"
    current_tokens: int | None = Field(default=None, gt=0)
    include_messages: bool = True


def build_compressor(job: CompressJob) -> Any:
    """A ContextCompressor configured from the job, with no network lookups."""
    from agent.context_compressor import ContextCompressor

    return ContextCompressor(
        model=job.model,
        threshold_percent=job.threshold_percent,
        protect_first_n=job.protect_first_n,
        protect_last_n=job.protect_last_n,
        summary_target_ratio=job.summary_target_ratio,
        quiet_mode=True,
        config_context_length=job.context_length,
    )


def main(argv: list[str]) -> dict[str, Any]:
    job = read_compress_job(argv)
    home = isolate_home("compress")
    try:
        return run_compress(job)
    finally:
        remove_home(home)


def run_compress(job: CompressJob) -> dict[str, Any]:
    from agent.model_metadata import estimate_messages_tokens_rough

    messages = load_messages(job.messages_file)
    tokens_in = estimate_messages_tokens_rough(messages)
    current_tokens = job.current_tokens or tokens_in

    walls: list[float] = []
    cpus: list[float] = []
    output: list[dict[str, Any]] = []
    last: Any = None
    stub_calls: list[int] = []
    prompt_chars: list[int] = []
    for i in range(job.warmup + job.runs):
        compressor = build_compressor(job)
        stub = SummaryStub(job.stub_summary, job.seam)
        stub.install(compressor)
        work = copy.deepcopy(messages)
        output, wall, cpu = timed(functools.partial(compressor.compress, work, current_tokens))
        last = compressor
        if i >= job.warmup:
            walls.append(wall)
            cpus.append(cpu)
            stub_calls.append(stub.calls)
            prompt_chars.extend(stub.prompt_chars)

    assert last is not None
    result: dict[str, Any] = {
        "runner": "compress_bench",
        **environment_facts(),
        "config": {
            "context_length": last.context_length,
            "threshold_percent_effective": last.threshold_percent,
            "threshold_tokens": last.threshold_tokens,
            "tail_token_budget": last.tail_token_budget,
            "protect_first_n": last.protect_first_n,
            "protect_last_n": last.protect_last_n,
            "seam": job.seam,
            "current_tokens": current_tokens,
        },
        "runs": job.runs,
        "warmup": job.warmup,
        "wall_s": summarize(walls),
        "cpu_s": summarize(cpus),
        "input": {
            "messages": len(messages),
            "chars": message_chars(messages),
            "tokens_rough": tokens_in,
        },
        "output": {
            "messages": len(output),
            "chars": message_chars(output),
            "tokens_rough": estimate_messages_tokens_rough(output),
        },
        "compressed": bool(last._last_compression_made_progress),
        "compression_count": last.compression_count,
        "summary_fallback_used": bool(last._last_summary_fallback_used),
        "summary_calls_per_run": statistics.median(stub_calls),
        "summarizer_prompt_chars_median": statistics.median(prompt_chars) if prompt_chars else 0,
        "token_counter": "hermes-agent estimate_messages_tokens_rough (chars/4)",
    }
    if job.include_messages:
        result["messages"] = public_messages(output)
    return result


def read_compress_job(argv: list[str]) -> CompressJob:
    job: CompressJob = read_job(argv, CompressJob)
    if job.seam not in ("call_llm", "generate_summary"):
        raise RunnerError(f"seam={job.seam!r}: expected 'call_llm' or 'generate_summary'")
    return job


if __name__ == "__main__":
    sys.exit(run_main(main))
