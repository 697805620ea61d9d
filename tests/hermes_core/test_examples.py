"""The out-of-tree example projects in docs/examples install, load and replay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_pytest import pytest_argv

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPT = ROOT / "transcripts" / "openai-chat" / "openhands-django-11149.json.gz"


def install(project: Path, target: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(project),
        ],
        check=True,
    )


def test_example_engine_installs_is_selected_by_config_and_replays(tmp_path: Path) -> None:
    target = tmp_path / "site"
    install(ROOT / "docs" / "examples" / "context-engine", target)
    env = {
        **os.environ,
        "PYTHONPATH": str(target),
        "HERMES_CORE__COMPRESSION__ENGINE": "user-turns",
        "HERMES_CORE__MEMORY__HOME": str(tmp_path / "mem"),
        "PYTHONWARNINGS": "ignore",
    }
    listed = subprocess.run(
        [sys.executable, "-m", "hermes_core.cli", "plugins", "--json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["example_engine"]["registered"] == {"engines": ["user-turns"]}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_core.cli",
            "replay",
            str(TRANSCRIPT),
            "--context-length",
            "24000",
            "--db",
            str(tmp_path / "s.db"),
            "--json",
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    report = json.loads(out.stdout)
    assert report["compressions"], "the example engine never compressed"
    assert report["final_active_tokens"] < 24000
    tests = subprocess.run(
        pytest_argv(
            sys.executable,
            tmp_path / "pytest-tmp",
            str(ROOT / "docs" / "examples" / "context-engine" / "tests"),
        ),
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr


@pytest.mark.parametrize("name", ["context-engine", "memory-provider"])
def test_example_projects_declare_an_entry_point(name: str) -> None:
    project = ROOT / "docs" / "examples" / name
    if not project.exists():
        pytest.fail(f"docs/examples/{name} is missing")
    text = (project / "pyproject.toml").read_text(encoding="utf-8")
    assert "[project.entry-points.hermes_core]" in text
