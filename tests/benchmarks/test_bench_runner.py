"""``python -m benchmarks`` is the one runner: the comparison, ``--list`` and every command.

Fast (imports and ``--help`` only), so in the default run; the real runs are the ``bench``
smoke tests beside it.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.commands import COMMANDS, PART_SUMMARIES, listing, main
from benchmarks.comparison.runner import PARTS

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_list_names_every_part_and_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert list(PART_SUMMARIES) == list(PARTS)
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == listing()
    names = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert names == [*PARTS, *COMMANDS]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_names_a_module_with_a_main(name: str) -> None:
    command = COMMANDS[name]
    if command.by_path:  # a reference-side script: it runs by path, not imported here
        path = REPO.joinpath(*command.module.split(".")).with_suffix(".py")
        assert "def main(" in path.read_text(encoding="utf-8")
    else:
        assert callable(importlib.import_module(command.module).main)


def test_an_unknown_command_is_refused_with_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["tortur"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'tortur'" in err
    assert "torture" in err and "--list" in err


def test_a_command_runs_with_its_own_options_under_the_runner() -> None:
    proc = run("benchmarks", "tokens", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m benchmarks tokens")
    assert "--repeat" in proc.stdout


def test_the_comparison_keeps_its_parts_and_the_torture_package_still_runs() -> None:
    compare = run("benchmarks", "--help")
    assert compare.returncode == 0, compare.stderr
    assert "--only" in compare.stdout and "--skip" in compare.stdout
    torture = run("benchmarks.torture", "--help")
    assert torture.returncode == 0, torture.stderr
    assert "--only" in torture.stdout


def test_the_import_sweep_counts_formats_and_names_each_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.ours.import_sweep import main as sweep

    source = REPO / "transcripts" / "swe-agent" / "pydicom-1458.traj.gz"
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / source.name).write_bytes(source.read_bytes())
    (tmp_path / "broken.jsonl").write_text('{"not": "a transcript"}\n', encoding="utf-8")
    sweep([str(tmp_path)])
    out = capsys.readouterr().out
    assert out.startswith("2 files: 1 swe-agent")
    assert "1 failed to import" in out
    assert "broken.jsonl:1: no importer recognises this file" in out
