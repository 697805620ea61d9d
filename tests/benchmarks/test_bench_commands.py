"""Smoke runs of the two commands, ``python -m benchmarks`` and ``python -m benchmarks torture``.

Marked ``bench`` (not in the default run: they take a minute or two and the
comparison needs the reference venv, built from PyPI on first use).
Run with ``pytest -m bench tests/test_bench_commands.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_benchmark_quick_prints_one_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    proc = run("benchmarks", "--quick", "--only", "compress,tokens", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compress() CPU, small session" in proc.stdout
    assert "exact token counting" in proc.stdout
    result = json.loads(out.read_text())
    summary = result["summary"]
    assert summary["compress_cpu_large"]["target"] == "<= 0.2x"
    assert summary["compress_cpu_large"]["verdict"] in ("pass", "FAIL")
    assert summary["compress_cpu_large"]["ratio_ours_theirs"] > 0
    assert not [s for s in result["sections"] if s["error"]]


def test_torture_quick_reports_one_line_per_scenario(tmp_path: Path) -> None:
    out = tmp_path / "torture.json"
    scenarios = "summarizer,disk-full,race-sqlite,sigstop-sqlite"
    proc = run("benchmarks", "torture", "--quick", "--only", scenarios, "--json", str(out))
    lines = [line for line in proc.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "SKIP")]
    assert [line.split()[1] for line in lines] == scenarios.split(","), proc.stdout
    result = json.loads(out.read_text())
    failed = [r["name"] for r in result["results"] if r["failures"]]
    assert proc.returncode == (1 if failed else 0)
    assert not failed, proc.stdout
