"""benchmarks.ours.search_recall end to end on the bundled probe sessions (a bench smoke test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.bench
def test_search_recall_reports_every_session(tmp_path: Path) -> None:
    out = tmp_path / "recall.json"
    env = {k: v for k, v in os.environ.items() if k != "HERMES_CORE_POSTGRES_DSN"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.ours.search_recall", "--json", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert set(result["sessions"]) == {p.stem for p in (REPO / "transcripts/probes").glob("*.json")}
    for name, stores in result["sessions"].items():
        row = stores["sqlite"]
        assert row["probes"] == 20 and len(row["per_probe"]) == 20, name
        assert row["recall"] == pytest.approx(row["hits"] / 20)
        assert row["recall"] >= 0.5, (name, row["misses"])  # the every-term-only search had 0.05
        # the tool's budgeted result is scored too: what the model reads
        assert row["tool_recall"] == pytest.approx(
            sum(p["tool_hit"] for p in row["per_probe"]) / 20
        )
        assert row["tool_recall"] >= 0.5, (name, row["tool_misses"])
        assert f"sqlite    {name}" in proc.stdout
    assert "postgres  skipped" in proc.stdout
