"""Exact token counting throughput: our counter vs plain tiktoken with the same encoding.

Input: the text of every message of every bundled transcript (``transcripts/``,
read with the project's importers), as the core counts it
(:meth:`hermes_core.tokens.Tokens.message_text`). Measured in one process,
best of ``--repeat`` passes each (the machine is shared; the best pass is the
least disturbed one):

* ``plain``: ``tiktoken.Encoding.encode_ordinary`` in a loop on the very
  Encoding object (o200k_base for gpt-4o-mini) that our counter built from
  its hash-checked BPE file, so the baseline is tiktoken itself, same ranks;
* ``plain batch``: ``Encoding.encode_ordinary_batch`` with 2 threads;
* ``counter``: :class:`TiktokenCounter.count` per text (argument checks, cached
  encoding lookup);
* ``count_many``: :class:`TiktokenCounter.count_many` on the whole list;
* ``core``: :meth:`Tokens.count_messages` on the Message objects (message text
  assembly and framing included), what the runtime pays per new message;
* the first-use cost of loading and verifying the BPE file.

The counts of every path must be identical (exactness); the run fails otherwise.

    python -m benchmarks tokens [--repeat 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_core.tokens import MESSAGE_OVERHEAD, Tokens
from hermes_hookspecs import Message
from hermes_plugin_importers import builtin_importers, load_transcript
from hermes_plugin_tiktoken_counter import TiktokenCounter

from ..transcript_inputs import MODEL, TRANSCRIPTS


def all_messages() -> list[Message]:
    importers = builtin_importers()
    out: list[Message] = []
    for path in sorted(TRANSCRIPTS.rglob("*.gz")):
        for conversation in load_transcript(path, importers):
            out.extend(conversation.messages)
    return out


def _best(fn: Callable[[], int], repeat: int) -> tuple[float, int]:
    best = float("inf")
    total = 0
    for _ in range(repeat):
        start = time.perf_counter()
        total = fn()
        best = min(best, time.perf_counter() - start)
    return best, total


def measure(repeat: int = 5) -> dict[str, Any]:
    messages = all_messages()
    start = time.perf_counter()
    counter = TiktokenCounter()
    encoding = counter.encoding(MODEL)
    load_s = time.perf_counter() - start
    tokens = Tokens(counter, MODEL)
    texts = [tokens.message_text(m) for m in messages]
    chars = sum(len(t) for t in texts)

    paths: dict[str, Callable[[], int]] = {
        "plain": lambda: sum(len(encoding.encode_ordinary(t)) for t in texts),
        "plain_batch": lambda: sum(
            len(x) for x in encoding.encode_ordinary_batch(texts, num_threads=2)
        ),
        "counter": lambda: sum(counter.count(t, MODEL) for t in texts),
        "count_many": lambda: sum(counter.count_many(texts, MODEL)),
        "core": lambda: sum(tokens.count_messages(messages)) - MESSAGE_OVERHEAD * len(messages),
    }
    results: dict[str, Any] = {}
    totals = {}
    for name, fn in paths.items():
        seconds, total = _best(fn, repeat)
        totals[name] = total
        results[name] = {
            "seconds": seconds,
            "tokens_per_s": total / seconds,
            "mb_per_s": chars / seconds / 1e6,
        }
    plain = results["plain"]["tokens_per_s"]
    for entry in results.values():
        entry["ratio_vs_plain"] = entry["tokens_per_s"] / plain
    return {
        "encoding": encoding.name,
        "messages": len(messages),
        "characters": chars,
        "tokens": totals["plain"],
        "exact": len(set(totals.values())) == 1,
        "totals": totals,
        "first_use_load_s": load_s,
        "repeat": repeat,
        "paths": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.repeat)
    print(
        f"{result['messages']:,} messages, {result['characters']:,} chars, "
        f"{result['tokens']:,} tokens ({result['encoding']}); "
        f"first use {result['first_use_load_s']:.2f} s"
    )
    for name, entry in result["paths"].items():
        print(
            f"{name:12} {entry['tokens_per_s']:>12,.0f} tok/s  {entry['mb_per_s']:6.2f} MB/s  "
            f"{entry['ratio_vs_plain']:.3f}x plain"
        )
    print(
        "counts identical on every path"
        if result["exact"]
        else f"COUNTS DIFFER: {result['totals']}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0 if result["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
