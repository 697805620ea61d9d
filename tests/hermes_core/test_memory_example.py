"""The reference external memory provider (docs/examples/memory-provider), really installed.

The project is copied to a temporary folder, installed with
``pip install --no-deps --no-build-isolation --no-index --target SITE`` (no
network), and every check runs in a child process whose ``PYTHONPATH`` is
SITE, so the provider is found only the way a vendor's would be: through the
``hermes_core`` entry point of the installed distribution.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.child_pytest import pytest_argv

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "memory-provider"


def child_env(site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_CORE")}
    env["PYTHONPATH"] = str(site)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["HERMES_EXAMPLE_TEST_KEY"] = "test-key-not-secret"
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(site folder holding the installed distribution, copy of the project without src/)."""
    root = tmp_path_factory.mktemp("example-memory")
    project = root / "project"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".pytest*"),
    )
    site = root / "site"
    done = subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
            "--no-build-isolation", "--no-index", "--disable-pip-version-check",
            "--target", str(site), str(project),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # from now on only the installed copy can be imported
    shutil.rmtree(project / "src")
    return site, project


def run_child(site: Path, script: str, *args: str, timeout: float = 120) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(site),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_entry_point_is_discoverable_from_the_install(installed: tuple[Path, Path]) -> None:
    site, _project = installed
    found = run_child(
        site,
        """
        import json
        from importlib.metadata import distribution, entry_points
        eps = [ep for ep in entry_points(group="hermes_core") if ep.name == "example_memory"]
        module = eps[0].load()
        print(json.dumps({
            "values": [ep.value for ep in eps],
            "dist": eps[0].dist.name if eps[0].dist else None,
            "module_file": module.__file__,
            "version": distribution("hermes-example-memory").version,
        }))
        """,
    )
    assert found["values"] == ["hermes_example_memory.plugin"]
    assert found["dist"] == "hermes-example-memory"
    assert found["version"] == "0.1.0"
    assert Path(found["module_file"]).is_relative_to(site)


def test_example_conformance_suite_passes_against_the_install(
    installed: tuple[Path, Path],
) -> None:
    site, project = installed
    done = subprocess.run(
        pytest_argv(sys.executable, project.parent / "pytest-tmp", str(project / "tests")),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=project,
        env=child_env(site),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert "passed" in summary and "failed" not in summary and "skipped" not in summary, summary
    assert int(summary.split()[0]) >= 20, summary  # the suite's tests really ran


SESSION_SCRIPT = """
import json, sys, time
from pathlib import Path

from hermes_core.config import settings_from
from hermes_core.host import Hermes
from hermes_core.testing.fake_openai import FakeOpenAIServer
from hermes_core.testing.memory_suite import HangingProvider, RaisingProvider
from hermes_example_memory import KeywordMemoryProvider
from hermes_hookspecs import hookimpl

base, mode = Path(sys.argv[1]), sys.argv[2]
facts = base / "facts.json"

class Misbehaving:
    # registers the installed example provider wrapped to hang or raise on every call
    def __init__(self):
        self.wrapper = None

    @hookimpl
    def register_memory_providers(self, register):
        inner = KeywordMemoryProvider(facts)
        self.wrapper = (HangingProvider if mode == "hang" else RaisingProvider)(inner)
        self.wrapper.name = "example-" + mode
        register(self.wrapper)

misbehaving = Misbehaving()
provider = "example-memory" if mode == "ok" else "example-" + mode
limit = 3.0 if mode == "ok" else 0.3
out = {}
with FakeOpenAIServer(check_on_exit=False) as fake:
    settings = settings_from({
        "plugins": {"autoload": True},
        "session": {"path": str(base / "sessions.db")},
        "memory": {"home": str(base / "memory"), "provider": provider,
                   "prefetch_timeout": limit, "call_timeout": limit},
        "extensions": {"example_memory": {"path": str(facts)}},
        "summarizer": {"openai": {"base_url": fake.base_url, "model": "gpt-4o-mini",
                                  "api_key_env": "HERMES_EXAMPLE_TEST_KEY"}},
        "compression": {"summarizer": "openai", "tail": "legacy", "tail_min_messages": 1,
                        "target_ratio": 0.01, "protect_first_n": 0, "threshold_tokens": 5000},
    })
    hermes = Hermes(settings, plugins=[misbehaving] if mode != "ok" else [])
    try:
        memory = hermes.memory()
        out["external"] = memory.external.name if memory.external else None
        session = hermes.new_session(cwd=str(base))
        started = time.monotonic()
        with session.turn() as turn:
            turn.prepare("Remember that the staging database is read-only on Fridays.")
            long_reply = "Noted. " + "The staging cluster runs PostgreSQL 15 with backups. " * 80
            turn.record_response({"role": "assistant", "content": long_reply})
            turn.commit()
        memory.flush(10)
        with session.turn() as turn:
            request = turn.prepare("Can I write to the staging database this Friday?")
            body = request.chat_body()
            turn.record_response({"role": "assistant", "content": "No, it is read-only."})
            turn.commit()
        out["turn_seconds"] = time.monotonic() - started
        out["system"] = body["messages"][0]["content"]
        out["last_user_api_content"] = body["messages"][-1]["content"]
        stored = [m.message for m in session.active_messages()]
        out["stored_user_texts"] = [m.text() for m in stored if m.role == "user"]
        outcome = session.compress()
        out["compress_status"] = outcome.status + ": " + outcome.reason
        out["summary_requests"] = [r.body for r in fake.requests_to("chat.completions")]
        memory.flush(10)
        if mode == "ok":
            out["switches"] = KeywordMemoryProvider(facts).switches()
            out["facts"] = [f["text"] for f in KeywordMemoryProvider(facts).facts()]
        else:
            out["wrapper_calls"] = sorted({m for m, _a in misbehaving.wrapper.calls})
    finally:
        if mode == "hang":
            misbehaving.wrapper.release.set()
        hermes.close()
print(json.dumps(out, default=str))
"""


def test_real_session_with_the_installed_provider(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    site, _project = installed
    out = run_child(site, SESSION_SCRIPT, str(tmp_path), "ok")
    assert out["external"] == "example-memory"  # selected by configuration
    fact = "The staging database is read-only on Fridays."
    assert out["facts"] == [fact]
    # prefetch text lands in the current user message's API content only
    assert "Recalled facts (example-memory):" in json.dumps(out["last_user_api_content"])
    assert fact in json.dumps(out["last_user_api_content"])
    assert "Recalled facts" not in out["system"]
    assert out["stored_user_texts"][-1] == "Can I write to the staging database this Friday?"
    # on_pre_compress insights reach the summary prompt
    assert out["compress_status"].startswith("compressed"), out["compress_status"]
    assert any(
        f"User stated (keep verbatim): {fact}" in json.dumps(body)
        for body in out["summary_requests"]
    ), "the insight never reached the summarizer's request"
    # on_session_switch fires on compaction
    assert {"reason": "compression"}.items() <= out["switches"][-1].items()
    assert [s["reason"] for s in out["switches"]][:1] == ["new"]


@pytest.mark.parametrize("mode", ["hang", "raise"])
def test_a_misbehaving_provider_does_not_break_the_session(
    installed: tuple[Path, Path], tmp_path: Path, mode: str
) -> None:
    site, _project = installed
    out = run_child(site, SESSION_SCRIPT, str(tmp_path), mode)
    assert out["external"] == f"example-{mode}"
    assert out["stored_user_texts"][-1] == "Can I write to the staging database this Friday?"
    assert "Recalled facts" not in json.dumps(out["last_user_api_content"])
    assert out["compress_status"].startswith("compressed"), out["compress_status"]
    if mode == "raise":
        # the provider was really called; after BREAKER_FAILURES errors in a row the one
        # breaker suspends it (errors count like timeouts), so later calls skip it
        assert out["wrapper_calls"] and len(out["wrapper_calls"]) <= 4, out["wrapper_calls"]
        assert "initialize" in out["wrapper_calls"]
    if mode == "hang":
        # two turns, each waiting at most the 0.3 s timeouts for a few blocking calls
        assert out["turn_seconds"] < 6.0, out["turn_seconds"]
