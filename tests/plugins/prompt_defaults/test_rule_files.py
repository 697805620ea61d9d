"""Project rule-file discovery (issue #16 item 6), with real folders, owners and files."""

from __future__ import annotations

import logging
import os
import tracemalloc
from pathlib import Path

import pytest

from hermes_plugin_prompt_defaults.rules import find_rule_file, read_rule_file

NAMES = [".hermes.md", "AGENTS.md"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


def test_nearest_rule_file_inside_the_repository_wins(tmp_path: Path, home: Path) -> None:
    repo = home / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("repo rules", encoding="utf-8")
    assert find_rule_file(str(repo / "src" / "pkg"), NAMES) == repo / "AGENTS.md"
    (repo / "src" / ".hermes.md").write_text("nearer", encoding="utf-8")
    assert find_rule_file(str(repo / "src" / "pkg"), NAMES) == repo / "src" / ".hermes.md"


def test_search_stops_at_the_repository_root(tmp_path: Path, home: Path) -> None:
    (home / "AGENTS.md").write_text("above the repository", encoding="utf-8")
    repo = home / "work" / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    assert find_rule_file(str(repo / "sub"), NAMES) is None


def test_search_stops_at_the_home_folder(tmp_path: Path, home: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("above home", encoding="utf-8")
    project = home / "notes" / "project"
    project.mkdir(parents=True)
    assert find_rule_file(str(project), NAMES) is None
    (home / "AGENTS.md").write_text("home rules", encoding="utf-8")
    assert find_rule_file(str(project), NAMES) == home / "AGENTS.md"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_owned_by_another_user_is_skipped(
    tmp_path: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = home / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("mine", encoding="utf-8")
    planted = repo / "sub" / "AGENTS.md"
    planted.parent.mkdir()
    planted.write_text("someone else's", encoding="utf-8")
    os.chown(planted, 65534, 65534)
    with caplog.at_level(logging.WARNING, logger="hermes_plugin_prompt_defaults"):
        assert find_rule_file(str(repo / "sub"), NAMES) == repo / "AGENTS.md"
    assert f"{planted} skipped: owned by uid 65534" in caplog.text


def test_files_in_a_world_writable_folder_are_skipped(
    tmp_path: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = home / "repo"
    (repo / ".git").mkdir(parents=True)
    shared = repo / "shared"
    shared.mkdir()
    (shared / "AGENTS.md").write_text("anyone could have written this", encoding="utf-8")
    shared.chmod(0o1777)
    with caplog.at_level(logging.WARNING, logger="hermes_plugin_prompt_defaults"):
        assert find_rule_file(str(shared), NAMES) is None
    assert "its folder is world-writable" in caplog.text


def test_a_fifo_is_skipped_not_read(tmp_path: Path, home: Path) -> None:
    repo = home / "repo"
    (repo / ".git").mkdir(parents=True)
    os.mkfifo(repo / "AGENTS.md")
    assert find_rule_file(str(repo), NAMES) is None


def test_a_huge_rule_file_is_read_only_up_to_the_cap(tmp_path: Path) -> None:
    huge = tmp_path / "AGENTS.md"
    with open(huge, "wb") as handle:  # 256 MiB, sparse: no disk used
        handle.write(b"rule line\n" * 100)
        handle.truncate(256 * 1024 * 1024)
    tracemalloc.start()
    try:
        text = read_rule_file(huge, 20_000)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"reading used {peak} bytes"
    assert text.startswith("rule line\n")
    assert text.endswith("[truncated at 20000 characters]")


def test_cut_inside_a_multibyte_character_leaves_no_replacement_char(tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_text("é" * 50, encoding="utf-8")  # 100 bytes; the cap reads 4 * 9 = 36
    text = read_rule_file(path, 9)
    assert text.splitlines()[0] == "é" * 9
    assert "\ufffd" not in text
