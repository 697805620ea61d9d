"""Redaction time at 100 KB and 1 MB: every installed rule, ordinary and adversarial text.

Issue #16 found 100 KB of ``x-x-x-...`` taking 36 s (quadratic, GIL held, so a
lease renewer starved). This measures :meth:`hermes_core.redaction.Redactor.redact`
with the rules a default host has (the ``redaction`` plugin: own rules plus
the adopted detect-secrets patterns) on inputs of 100 KB and 1 MB:

* ``prose``: tool output and prose with the secrets canary sprinkled in;
* ``dashes``: ``x-x-x-...``, the issue's case;
* ``base64``: one long base64 line (a fetched binary, a key blob);
* ``adversarial``: the worst of the units the linear-time property test uses
  (rule prefixes repeated), chosen at 100 KB, measured at both sizes.

Each figure is the best of ``repeat`` runs (the machine is shared). The
linearity figure is ``t(1 MB) / (10 * t(100 KB))``: about 1 when the time
per byte is constant, about 10 when it is quadratic.

    python -m benchmarks redaction [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from hermes_core.redaction import Redactor
from hermes_core.testing.canary import canary_text
from hermes_plugin_redaction import redaction_rules

SMALL = 100_000
LARGE = 1_000_000
UNITS = (
    "x-", "a://", "sk-", "eyJ", "eyJa.", "password=", "bearer ", "//", ":_authToken=",
    "https://a:b@", "aws_key'", "-----BEGIN ", "AKIA", "xoxb-1-", "1-", "=", '"', "a",
)  # fmt: skip


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def inputs(size: int, adversarial_unit: str) -> dict[str, str]:
    rng = random.Random(16)
    words = [
        "the",
        "build",
        "failed",
        "in",
        "step",
        "three;",
        "retry",
        "with",
        "--verbose",
        "and",
        "check",
        "logs",
    ]
    lines: list[str] = []
    planted = canary_text()
    total = 0
    while total < size:
        chance = rng.random()
        line = planted if chance < 0.02 else " ".join(rng.choice(words) for _ in range(12))
        lines.append(line)
        total += len(line) + 1
    blob = base64.b64encode(rng.randbytes(size)).decode()[:size]
    return {
        "prose": "\n".join(lines)[:size],
        "dashes": _fill("x-", size),
        "base64": blob,
        "adversarial": _fill(adversarial_unit, size),
    }


def _best(redactor: Redactor, text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        redactor.redact(text)
        best = min(best, time.perf_counter() - started)
    return best


def measure(repeat: int = 3) -> dict[str, Any]:
    """Seconds per input at both sizes, per-MB rates and the linearity ratios."""
    redactor = Redactor(redaction_rules())
    worst_unit, worst = UNITS[0], 0.0
    for unit in UNITS:
        seconds = _best(redactor, _fill(unit, SMALL), 1)
        if seconds > worst:
            worst_unit, worst = unit, seconds
    small = inputs(SMALL, worst_unit)
    large = inputs(LARGE, worst_unit)
    cases: dict[str, dict[str, float]] = {}
    for name in small:
        t_small = _best(redactor, small[name], repeat)
        t_large = _best(redactor, large[name], repeat)
        cases[name] = {
            "ms_100kb": round(t_small * 1000, 2),
            "ms_1mb": round(t_large * 1000, 2),
            "linearity": round(t_large / (10 * t_small), 2) if t_small else 0.0,
        }
    return {
        "rules": len(redactor.rules),
        "repeat": repeat,
        "adversarial_unit": worst_unit,
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks redaction", description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.repeat)
    print(f"{result['rules']} rules; adversarial unit {result['adversarial_unit']!r}")
    print(f"{'input':12} {'100 KB ms':>10} {'1 MB ms':>10} {'t(1MB)/10t(100KB)':>18}")
    for name, case in result["cases"].items():
        print(
            f"{name:12} {case['ms_100kb']:10.1f} {case['ms_1mb']:10.1f} {case['linearity']:18.2f}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
