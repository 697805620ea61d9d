"""Turn-runtime overhead at 100 / 1,000 / 10,000 active messages (no LLM).

Measures one step of the runtime as an integrator drives it: ``prepare`` +
``record_response`` + ``commit`` on a session that already holds N active
messages, on a real SQLite file. Reports p50/p95 per size and the growth
ratio p50(10,000) / p50(100), which must stay under 1.5: the runtime caches
every active message's wire dict, token count and prefix hash, so its own
cost must not grow with the session.

    python -m benchmarks runtime [--sizes 100,1000,10000] [--repeat 60] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Literal


def build(size: int, folder: Path) -> tuple[Any, Any]:
    from hermes_core.config import settings_from
    from hermes_core.host import Hermes
    from hermes_hookspecs import Message, NewMessage

    settings = settings_from(
        {
            "session": {"path": str(folder / f"rt-{size}.db")},
            "memory": {"home": str(folder / "mem")},
            "model": {"context_length": 100_000_000},
            "compression": {"hygiene_max_messages": 1_000_000},
        }
    )
    hermes = Hermes(settings)
    session = hermes.new_session(caller_message="benchmark")
    batch = []
    for i in range(size):
        role: Literal["user", "assistant"] = "user" if i % 2 == 0 else "assistant"
        batch.append(
            NewMessage(message=Message(role=role, content=f"message {i} " + "lorem ipsum " * 20))
        )
    store = hermes.store()
    for start in range(0, size, 1000):
        store.append_messages(session.id, batch[start : start + 1000])
    session.reload(force=True)
    return hermes, session


def measure(session: Any, repeat: int) -> list[float]:
    times = []
    with session.turn("bench") as turn:  # warm-up (tokenizer, caches)
        turn.prepare("warm up")
        turn.record_response({"role": "assistant", "content": "ok"})
        turn.commit()
    for i in range(repeat):
        turn = session.turn("bench")
        start = time.perf_counter()
        turn.prepare(f"question {i}")
        turn.record_response({"role": "assistant", "content": f"answer {i}"})
        turn.commit()
        times.append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=60)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {"sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            hermes, session = build(size, Path(tmp))
            try:
                times = measure(session, args.repeat)
            finally:
                hermes.close()
            q = statistics.quantiles(times, n=20)
            results["sizes"][str(size)] = {
                "p50_ms": round(statistics.median(times) * 1000, 3),
                "p95_ms": round(q[18] * 1000, 3),
            }
            print(
                f"{size:>6} active messages: p50 {results['sizes'][str(size)]['p50_ms']:.3f} ms, "
                f"p95 {results['sizes'][str(size)]['p95_ms']:.3f} ms"
            )
    lo, hi = str(sizes[0]), str(sizes[-1])
    ratio = results["sizes"][hi]["p50_ms"] / results["sizes"][lo]["p50_ms"]
    results["growth_ratio"] = round(ratio, 3)
    results["target"] = "< 1.5"
    print(f"growth ratio p50({hi})/p50({lo}) = {ratio:.3f} (target < 1.5)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
