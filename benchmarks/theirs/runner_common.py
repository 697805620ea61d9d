"""Helpers shared by the reference-side runners (run with the reference venv's python).

Nothing here imports hermes-agent at module level: a runner first calls
``isolate_home()`` so the reference system resolves its data directory to a
temporary folder, and only then imports ``hermes_state`` or ``agent.*``.

This module must also never import the hermes-core package: the runners measure
the reference system alone.  ``emit()`` checks that before it prints.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

REFERENCE_DIST = "hermes-agent"
OUR_PACKAGES = ("hermes_core", "hermes_hookspecs")

JobT = TypeVar("JobT", bound=BaseModel)


class RunnerError(Exception):
    """A job could not be run; the message names the bad field or value."""


def isolate_home(prefix: str) -> Path:
    """Point HOME and HERMES_HOME at a fresh temp folder; call before importing hermes-agent.

    Every other ``HERMES_*`` variable is dropped so the reference system runs with
    its defaults (e.g. secret redaction on, no profile), whatever the caller's shell has.
    """
    for key in [k for k in os.environ if k.startswith("HERMES_")]:
        del os.environ[key]
    home = Path(tempfile.mkdtemp(prefix=f"theirs-{prefix}-"))
    os.environ["HOME"] = str(home)
    os.environ["HERMES_HOME"] = str(home / ".hermes")
    (home / ".hermes").mkdir()
    return home


def remove_home(home: Path) -> None:
    """Delete a folder made by ``isolate_home`` (and only such a folder)."""
    if not home.name.startswith("theirs-") or home.parent != Path(tempfile.gettempdir()):
        raise RunnerError(f"refusing to delete {home}: not a runner temp home")
    shutil.rmtree(home, ignore_errors=True)


def read_job(argv: list[str], model: type[JobT]) -> JobT:
    """Parse the job given as ``argv[1]``: a JSON file path, ``-`` for stdin, or inline JSON."""
    if len(argv) != 2:
        raise RunnerError(f"usage: {Path(argv[0]).name} JOB.json | - | '{{...}}'")
    arg = argv[1]
    if arg == "-":
        text = sys.stdin.read()
    elif arg.lstrip().startswith("{"):
        text = arg
    else:
        path = Path(arg)
        if not path.is_file():
            raise RunnerError(f"job file {arg!r} does not exist")
        text = path.read_text(encoding="utf-8")
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise RunnerError(f"invalid job for {model.__name__}: {exc}") from exc


def load_messages(path: str, field: str = "messages_file") -> list[dict[str, Any]]:
    """Read a JSON list of OpenAI chat messages (dicts with a string ``role``)."""
    p = Path(path)
    if not p.is_file():
        raise RunnerError(f"{field}={path!r}: no such file")
    data = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise RunnerError(f"{field}={path!r}: expected a JSON list, got {type(data).__name__}")
    for i, msg in enumerate(data):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise RunnerError(f"{field}={path!r}: message {i} is not an object with a 'role'")
        content = msg.get("content")
        if content is not None and not isinstance(content, str):
            raise RunnerError(
                f"{field}={path!r}: message {i} content is {type(content).__name__}; "
                "flatten content parts to a string first"
            )
    return data


def percentile(values: list[float], pct: float) -> float:
    """Linear-interpolated percentile (as numpy's default) of a non-empty list."""
    if not values:
        raise RunnerError("percentile of an empty sample")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    lo = math.floor(rank)
    hi = math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def summarize(values: list[float]) -> dict[str, float | int]:
    """Median, p95, min, max and count of a sample of seconds."""
    return {
        "n": len(values),
        "median": statistics.median(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "min": min(values),
        "max": max(values),
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """Run ``fn`` and return (result, wall seconds, CPU seconds of this process)."""
    c0 = time.process_time()
    w0 = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0
    return result, wall, cpu


def environment_facts() -> dict[str, Any]:
    """Versions that matter when comparing numbers across runs."""
    return {
        "system": REFERENCE_DIST,
        "version": metadata.version(REFERENCE_DIST),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "executable": sys.executable,
    }


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send anything the reference system prints to stderr, keeping stdout for the result."""
    real = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = real


def emit(result: dict[str, Any]) -> None:
    """Print the one JSON result line, after checking no hermes-core module was loaded."""
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in OUR_PACKAGES)
    if leaked:
        raise RunnerError(f"clean-room breach: hermes-core modules loaded: {leaked}")
    sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def run_main(main: Callable[[list[str]], dict[str, Any]]) -> int:
    """Run a runner's main, print its result, and turn RunnerError into one line on stderr."""
    try:
        with stdout_to_stderr():
            result = main(sys.argv)
        emit(result)
    except RunnerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


SEAMS = ("call_llm", "generate_summary", "fallback")


class SummaryStub:
    """Stands in for hermes-agent's summarizer LLM call and counts what it was asked.

    ``install()`` replaces ``call_llm`` as looked up by ``agent.context_compressor``
    (seam ``call_llm``: their prompt building, redaction and prefixing all still
    run) or the compressor's ``_generate_summary`` method (seam
    ``generate_summary``: only boundary finding and message assembly run). Seam
    ``fallback`` makes ``_generate_summary`` fail the way a summarizer model error
    does (not an auth or network failure, which abort compaction), so their own
    deterministic fallback handoff is built from the dropped turns: their
    compressor with no LLM, the counterpart of our offline summarizer. The stub
    text is then unused.
    """

    def __init__(self, text: str, seam: str) -> None:
        if not text.strip():
            raise RunnerError("stub_summary must not be blank (hermes-agent treats it as failure)")
        if seam not in SEAMS:
            raise RunnerError(f"seam={seam!r}: expected one of {', '.join(SEAMS)}")
        self.text = text
        self.seam = seam
        self.calls = 0
        self.prompt_chars: list[int] = []

    def _call_llm(self, **kwargs: Any) -> SimpleNamespace:
        self.calls += 1
        prompt = "".join(str(m.get("content", "")) for m in kwargs.get("messages") or [])
        self.prompt_chars.append(len(prompt))
        message = SimpleNamespace(content=self.text, role="assistant", tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")])

    def install(self, compressor: Any) -> None:
        """Patch the summarizer seam for ``compressor`` (a ContextCompressor)."""
        if self.seam == "call_llm":
            import agent.context_compressor as cc_module

            cc_module.call_llm = self._call_llm
            return
        stub = self
        if self.seam == "fallback":

            def _failed_summary(*_args: Any, **_kwargs: Any) -> None:
                stub.calls += 1
                stub.prompt_chars.append(0)
                compressor._last_summary_error = "summarizer unavailable (benchmark seam)"
                return None

            compressor._generate_summary = _failed_summary
            return

        def _generate_summary(*_args: Any, **_kwargs: Any) -> str:
            stub.calls += 1
            stub.prompt_chars.append(0)
            compressor._previous_summary = stub.text
            return str(compressor._with_summary_prefix(stub.text))

        compressor._generate_summary = _generate_summary

    def stats(self) -> dict[str, Any]:
        return {"seam": self.seam, "calls": self.calls, "prompt_chars": self.prompt_chars}


def message_chars(messages: list[dict[str, Any]]) -> int:
    """Characters of content plus serialized tool calls (a size that needs no tokenizer)."""
    total = 0
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, str):
            total += len(content)
        elif content is not None:
            total += len(json.dumps(content, ensure_ascii=False))
        if msg.get("tool_calls"):
            total += len(json.dumps(msg["tool_calls"], ensure_ascii=False))
    return total


def public_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copy of ``messages`` with only JSON-serializable values (their metadata keys kept)."""
    copied: list[dict[str, Any]] = json.loads(json.dumps(messages, ensure_ascii=False, default=str))
    return copied
