"""Smoke test of the reference-side (hermes-agent) benchmark runners on tiny inputs.

Needs the separate reference venv (``.venv/bin/python benchmarks/theirs/environment.py``
builds it); skipped when it is absent.  Marked ``bench`` so the default run skips it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.bench

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
STUB = "STUB-SUMMARY-7f3a: fixed text standing in for the summarizer."


def load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def theirs_env() -> ModuleType:
    return load_module("bench_theirs_env", BENCH / "theirs" / "environment.py")


@pytest.fixture(scope="module")
def theirs_python(theirs_env: ModuleType) -> Path:
    python = theirs_env.venv_python(theirs_env.DEFAULT_VENV_DIR)
    if not python.exists():
        pytest.skip(
            f"reference venv missing at {theirs_env.DEFAULT_VENV_DIR}; "
            "build it with `.venv/bin/python benchmarks/theirs/environment.py`"
        )
    return Path(python)


def tiny_agent_transcript(turns: int = 14) -> list[dict[str, Any]]:
    """System + one task + ``turns`` tool-call rounds, each carrying an identifier."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Work in /repo."},
        {"role": "user", "content": "Fix the failing test in /repo/pkg/mod.py (IDENT-0000)."},
    ]
    for i in range(1, turns + 1):
        call_id = f"call_{i:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}: inspect IDENT-{i:04d}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "run",
                            "arguments": json.dumps({"cmd": f"grep -n IDENT-{i:04d} -r /repo"}),
                        },
                    }
                ],
            }
        )
        body = f"/repo/pkg/mod.py:{i}: IDENT-{i:04d} " + "output line " * 160
        messages.append({"role": "tool", "tool_call_id": call_id, "name": "run", "content": body})
    messages.append({"role": "assistant", "content": "Done: the fix for IDENT-0000 is in place."})
    return messages


@pytest.fixture(scope="module")
def messages_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("theirs") / "messages.json"
    path.write_text(json.dumps(tiny_agent_transcript()), encoding="utf-8")
    return path


def test_compress_bench_runs_their_compressor_with_stub(
    theirs_env: ModuleType, theirs_python: Path, messages_file: Path
) -> None:
    job = {
        "messages_file": str(messages_file),
        "context_length": 4000,
        "stub_summary": STUB,
        "runs": 2,
        "warmup": 0,
    }
    r = theirs_env.run_theirs_runner("compress_bench", job, python=theirs_python)
    assert r["system"] == "hermes-agent" and r["version"] == "0.19.0"
    assert r["compressed"] is True
    assert r["summary_calls_per_run"] == 1
    assert r["wall_s"]["n"] == 2 and r["wall_s"]["median"] > 0
    assert r["output"]["messages"] < r["input"]["messages"]
    out = r["messages"]
    assert out[0]["role"] == "system"
    assert any(STUB in (m.get("content") or "") for m in out)
    assert "Done: the fix for IDENT-0000" in (out[-1].get("content") or "")


def test_replay_bench_compresses_several_times(
    theirs_env: ModuleType, theirs_python: Path, messages_file: Path
) -> None:
    job = {"messages_file": str(messages_file), "context_length": 3000, "stub_summary": STUB}
    r = theirs_env.run_theirs_runner("replay_bench", job, python=theirs_python)
    assert r["turns_replayed"] == len(tiny_agent_transcript()) - 1
    assert r["compressions"] >= 2
    assert r["summary_stub"]["calls"] == r["compress_calls"]
    final = r["messages"]
    assert final[0] == {"role": "system", "content": "You are a coding agent. Work in /repo."}
    assert len(final) == r["final"]["messages"]
    assert any(STUB in (m.get("content") or "") for m in final)


def test_store_bench_append_search_compaction(theirs_env: ModuleType, theirs_python: Path) -> None:
    job = {
        "append_messages": 30,
        "search_messages": 90,
        "session_size": 40,
        "queries": ["django", "w0001"],
        "search_repeats": 3,
        "compaction_messages": 50,
        "compaction_keep": 5,
        "compaction_runs": 1,
    }
    r = theirs_env.run_theirs_runner("store_bench", job, python=theirs_python)
    assert r["append"]["stored"] == 30 and r["append"]["messages_per_s"] > 0
    assert r["search"]["db_messages"] == 90
    assert r["search"]["latency_s"]["n"] == 2 * 3
    assert r["search"]["per_query"]["w0001"]["hits"] > 0
    assert r["compaction"]["row_checks"] == [{"active": 6, "total_rows": 56}]


def test_lease_bench_hands_over_between_processes(
    theirs_env: ModuleType, theirs_python: Path
) -> None:
    r = theirs_env.run_theirs_runner(
        "lease_bench", {"rounds": 3, "uncontended": 5}, python=theirs_python
    )
    assert r["handover_s"]["n"] == 6
    assert 0 < r["handover_s"]["max"] < 5


def test_runner_rejects_a_bad_job_naming_the_field(
    theirs_env: ModuleType, theirs_python: Path, messages_file: Path
) -> None:
    job = {"messages_file": str(messages_file), "context_length": 0, "stub_summary": STUB}
    with pytest.raises(theirs_env.RunnerFailed, match="context_length"):
        theirs_env.run_theirs_runner("compress_bench", job, python=theirs_python)


def test_loader_flattens_content_parts(tmp_path: Path) -> None:
    loader = load_module("bench_theirs_loader", BENCH / "theirs" / "transcript_loader.py")
    raw: dict[str, Any] = {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "sys", "cache_control": {}}]},
            {"role": "user", "content": [{"type": "text", "text": t} for t in ("a", "b")]},
        ],
        "response": {"choices": [{"message": {"role": "assistant", "content": "ok"}}]},
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    assert loader.load_openai_chat_transcript(path) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "a\nb"},
        {"role": "assistant", "content": "ok"},
    ]
    raw["messages"][1]["role"] = "robot"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(loader.TranscriptFormatError, match=r"messages\[1\]\.role"):
        loader.load_openai_chat_transcript(path)
