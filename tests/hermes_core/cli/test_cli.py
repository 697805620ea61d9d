"""The hermes-core command line, run as a real child process against a real SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
TRANSCRIPT = ROOT / "transcripts" / "openai-chat" / "openhands-django-11149.json.gz"


def run(tmp_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HERMES_CORE__SESSION__PATH": str(tmp_path / "s.db"),
        "HERMES_CORE__MEMORY__HOME": str(tmp_path / "mem"),
        "PYTHONWARNINGS": "ignore",
    }
    env.pop("HERMES_CORE_CONFIG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "hermes_core.cli", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("cli")
    probes = tmp / "probes.json"
    probes.write_text(
        json.dumps(
            [
                {
                    "id": "p1",
                    "question": "which django file was edited",
                    "answers": ["django/contrib/admin"],
                    "kind": "path",
                    "message_index": 1,
                },
                {
                    "id": "p2",
                    "question": "unanswerable zebra question",
                    "answers": ["zebra-unicorn-42"],
                    "kind": "number",
                    "message_index": 1,
                },
            ]
        ),
        encoding="utf-8",
    )
    out = run(
        tmp,
        "replay",
        str(TRANSCRIPT),
        "--context-length",
        "32000",
        "--json",
        "--probes",
        str(probes),
        "--chart",
        str(tmp / "chart.svg"),
    )
    return tmp, json.loads(out.stdout)


def test_replay_report_json(replayed: tuple[Path, dict[str, Any]]) -> None:
    tmp, report = replayed
    assert report["format"] == "openai-chat"
    assert report["requests"] >= 40
    # the transcript is one long turn: mid-turn compressions shape the requests (nothing is
    # stored before commit) and the stored compaction happens once the turn is committed
    assert len(report["compressions"]) >= 1
    assert max(report["request_tokens"]) < 32000
    assert report["final_active_tokens"] < 32000
    assert report["final_messages"][0]["role"] == "system"
    ids = report["identifiers"]
    assert ids["compacted"] > 0 and ids["recoverable_ratio"] >= 0.9
    assert 0 < report["prefix_reuse"] <= 1
    assert "compaction" in report["prefix_breaks"]
    probes = {p["question"]: p for p in report["probes"]}
    assert probes["unanswerable zebra question"] == {
        "id": "p2",
        "kind": "number",
        "question": "unanswerable zebra question",
        "closed_book": False,
        "one_search": False,
    }
    assert probes["which django file was edited"]["one_search"] is True
    assert report["recall"]["probes"] == 2
    assert report["recall"]["one_search"] == 0.5
    assert report["recall"]["one_search_misses"] == ["p2"]
    svg = (tmp / "chart.svg").read_text(encoding="utf-8")
    assert svg.startswith("<svg") and "threshold" in svg and "polyline" in svg


def test_replay_text_report(tmp_path: Path) -> None:
    out = run(tmp_path, "replay", str(TRANSCRIPT), "--context-length", "32000")
    assert "compressions" in out.stdout and "prefix-cache reuse" in out.stdout
    assert "identifiers" in out.stdout


def test_sessions_commands(replayed: tuple[Path, dict[str, Any]]) -> None:
    tmp, report = replayed
    sid = report["session_id"]
    listed = json.loads(run(tmp, "sessions", "list", "--json").stdout)
    assert any(s["id"] == sid for s in listed)
    shown = json.loads(run(tmp, "sessions", "show", sid, "--all", "--json").stdout)
    assert any(not m["active"] for m in shown["messages"])
    hits = json.loads(run(tmp, "sessions", "search", "django", "--session", sid, "--json").stdout)
    assert hits and hits[0]["context"]
    # each place names the user's next messages, if any (this task's one request came first)
    assert all(h["replies"] == [] for h in hits)
    compacted_hit = any(not h["hit"]["active"] for h in hits)
    assert compacted_hit, "compacted history must stay searchable"
    # FTS syntax is plain text: no error (run checks the exit status), nothing on stderr
    syntax = run(tmp, "sessions", "search", 'AND OR NOT "(', "--session", sid)
    assert syntax.stderr == "" and not syntax.stdout.startswith("Error")
    prefix = json.loads(run(tmp, "sessions", "prefix", sid, "--json").stdout)
    assert prefix["entries"][0]["break_reason"] == "first"
    assert 0 < prefix["reuse"] <= 1


def test_manual_compress(tmp_path: Path) -> None:
    # a large window: the replay never compresses, so a manual compress has work to do
    report = json.loads(
        run(tmp_path, "replay", str(TRANSCRIPT), "--context-length", "128000", "--json").stdout
    )
    assert not report["compressions"]
    sid = report["session_id"]
    out = json.loads(run(tmp_path, "compress", sid, "--focus", "tests", "--json").stdout)
    assert out["status"] == "compressed", out["reason"]
    assert out["tokens_after"] < out["tokens_before"] / 2
    shown = json.loads(run(tmp_path, "sessions", "show", sid, "--json").stdout)
    assert shown["session"]["compression_count"] == 1
    assert any(m["message"]["kind"] == "summary" for m in shown["messages"])


def test_plugins_and_config(tmp_path: Path) -> None:
    rows = json.loads(run(tmp_path, "plugins", "--json").stdout)
    names = {r["name"]: r for r in rows}
    assert names["sqlite_store"]["registered"] == {"stores": ["sqlite"]}
    assert "register_session_stores" in names["sqlite_store"]["hooks"]
    assert names["sqlite_store"]["distribution"] == "hermes-session-core"
    blocked = json.loads(
        subprocess.run(
            [sys.executable, "-m", "hermes_core.cli", "plugins", "--json"],
            env={
                **os.environ,
                "HERMES_CORE_BLOCK_PLUGINS": "tail_legacy",
                "PYTHONWARNINGS": "ignore",
            },
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        ).stdout
    )
    assert {r["name"]: r for r in blocked}["tail_legacy"]["blocked"] is True
    shown = json.loads(
        run(
            tmp_path, "config", "show", "--model", "gpt-4o", "--context-length", "200000", "--json"
        ).stdout
    )
    assert shown["effective_threshold"]["floor_applied"] is True
    text = run(tmp_path, "config", "show").stdout
    assert "[compression]" in text and "threshold_tokens =" in text


def test_errors_are_one_line_with_exit_code_1(tmp_path: Path) -> None:
    missing = run(tmp_path, "sessions", "show", "nope", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip().count("\n") == 0 and missing.stderr.startswith("Error:")
    traced = run(tmp_path, "--traceback", "sessions", "show", "nope", check=False)
    assert traced.returncode == 1 and "Traceback" in traced.stderr
    usage = run(tmp_path, "replay", check=False)
    assert usage.returncode == 2
    bad = tmp_path / "hermes.toml"
    bad.write_text("[compression]\nengine = 3\n", encoding="utf-8")
    config = run(tmp_path, "config", "show", check=False)
    assert config.returncode == 1 and "compression.engine" in config.stderr
    bad.unlink()
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("this is not a transcript\n", encoding="utf-8")
    wrong = run(tmp_path, "replay", str(garbage), check=False)
    assert wrong.returncode == 1 and "no importer recognises" in wrong.stderr
