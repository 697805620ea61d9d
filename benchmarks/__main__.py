"""``python -m benchmarks``: run every benchmark in one go and keep their outputs.

Each benchmark is its own module (run one alone with ``python -m benchmarks.NAME``):

==================  =============================================================
``runtime``         turn-runtime overhead at 100 / 1,000 / 10,000 active messages
``store_sqlite``    append, search p50/p95 at 10^4..10^6, compaction, hand-over,
                    with the raw-SQLite ceiling measured in the same run
``store_postgres``  the same against PostgreSQL (needs HERMES_CORE_POSTGRES_DSN)
``compression``     compress() time and identifiers kept, ours vs hermes-agent
==================  =============================================================

The hermes-agent side runs in its own venv (``benchmarks/theirs_env.py`` builds
it from PyPI, pinned); nothing of theirs is imported here. Outputs go to
``benchmarks/results/`` (one text file per benchmark). ``--quick`` uses small
sizes for a smoke run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUICK = {
    "runtime": ["--sizes", "100,1000", "--repeat", "20"],
    "store_sqlite": ["--sizes", "10000", "--appends", "1000", "--queries", "50"],
    "store_postgres": ["--sizes", "10000", "--appends", "1000", "--queries", "50"],
    "compression": [],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", default=list(QUICK))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    failed = []
    for name in args.names:
        if not (HERE / f"{name}.py").exists():
            print(f"== {name}: not present, skipped")
            continue
        if name == "store_postgres" and not os.environ.get("HERMES_CORE_POSTGRES_DSN"):
            print("== store_postgres: HERMES_CORE_POSTGRES_DSN unset, skipped")
            continue
        extra = QUICK.get(name, []) if args.quick else []
        print(f"== {name}", flush=True)
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", f"benchmarks.{name}", *extra],
            cwd=HERE.parent,
            capture_output=True,
            text=True,
        )
        (out / f"{name}.txt").write_text(proc.stdout + proc.stderr, encoding="utf-8")
        print(proc.stdout.rstrip())
        if proc.returncode:
            failed.append(name)
            print(proc.stderr.rstrip()[-2000:])
        print(f"   ({time.perf_counter() - start:.0f} s)")
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
