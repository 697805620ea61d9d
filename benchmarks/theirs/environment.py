"""Build and locate the separate venv that holds the reference system.

The reference system (hermes-agent from PyPI, pinned below) must never be
installed into the project's own venv: the two are measured side by side, each
in its own interpreter.  ``ensure_theirs_venv()`` creates the venv on first use
(about 15 s and ~230 MB here), records how long the install took and how big the
venv is, and returns the venv's python.  Later calls only check that the pinned
version still imports and return at once.

The only network it needs is PyPI, through pip as configured on the machine.
Run it as a script to build the venv and print the install record as JSON.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

HERMES_AGENT_SPEC = "hermes-agent==0.19.0"
BENCH_DIR = Path(__file__).resolve().parents[1]
DEFAULT_VENV_DIR = BENCH_DIR / ".venv-hermes-agent"
THEIRS_DIR = BENCH_DIR / "theirs"
CONSTRAINTS_FILE = THEIRS_DIR / "constraints.txt"
RUNNERS = ("store_bench", "compress_bench", "replay_bench", "lease_bench")
RECORD_NAME = "hermes-bench-install.json"
LOCK_NAME = ".ensure.lock"
# What the runners under benchmarks/theirs/ import; the venv is usable iff this works.
IMPORT_PROBE = "import hermes_state, agent.context_compressor, agent.conversation_compression"
SUPPORTED_PYTHON = ((3, 11), (3, 14))  # hermes-agent 0.19.0: Requires-Python >=3.11,<3.14


class TheirsVenvError(RuntimeError):
    """The reference venv could not be created, installed or verified."""


class InstallRecord(BaseModel):
    """What ``ensure_theirs_venv`` wrote after a successful install."""

    spec: str
    constraints_sha256: str
    python_version: str
    pip_command: list[str]
    install_seconds: float
    size_bytes: int
    installed_at: float


def venv_python(venv_dir: Path) -> Path:
    """Path of the python inside ``venv_dir`` (whether or not it exists)."""
    return venv_dir / "bin" / "python"


def constraints_digest(constraints: Path = CONSTRAINTS_FILE) -> str:
    """SHA-256 of the constraints file, or of nothing when it is absent."""
    data = constraints.read_bytes() if constraints.is_file() else b""
    return hashlib.sha256(data).hexdigest()


def read_install_record(venv_dir: Path) -> InstallRecord | None:
    """The record left by the last successful install, or None."""
    path = venv_dir / RECORD_NAME
    if not path.is_file():
        return None
    try:
        return InstallRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError:
        return None


def directory_size(root: Path) -> int:
    """Bytes used by regular files under ``root`` (symlinks not followed)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_size
    return total


def _imports_cleanly(python: Path) -> bool:
    if not python.exists():
        return False
    proc = subprocess.run(
        [str(python), "-c", IMPORT_PROBE],
        env=runner_environment(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    return proc.returncode == 0


def runner_environment(home: Path | None = None) -> dict[str, str]:
    """Environment for a process run with the reference venv's python.

    PYTHONPATH and friends are dropped so nothing from this project can leak
    onto its path.  ``home`` (if given) becomes HOME and HERMES_HOME so the
    reference system writes nothing into the real home directory.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONHASHSEED"] = "0"
    if home is not None:
        env["HOME"] = str(home)
        env["HERMES_HOME"] = str(home / ".hermes")
    return env


def _write_gitignore(venv_dir: Path) -> None:
    """Keep the venv out of git, as Python 3.13+ venvs do on their own."""
    path = venv_dir / ".gitignore"
    if not path.is_file():
        path.write_text("# created by benchmarks/theirs/environment.py\n*\n", encoding="utf-8")


def _check_base_python() -> None:
    low, high = SUPPORTED_PYTHON
    if not (low <= sys.version_info[:2] < high):
        raise TheirsVenvError(
            f"{HERMES_AGENT_SPEC} needs Python >={low[0]}.{low[1]},<{high[0]}.{high[1]}; "
            f"this interpreter is {sys.version_info.major}.{sys.version_info.minor} "
            f"({sys.executable})"
        )


def _install(venv_dir: Path) -> InstallRecord:
    _check_base_python()
    own_files = {LOCK_NAME, ".gitignore", RECORD_NAME}
    foreign = [p.name for p in venv_dir.iterdir() if p.name not in own_files]
    if foreign and not (venv_dir / "pyvenv.cfg").is_file():
        raise TheirsVenvError(
            f"venv path {venv_dir} exists, is not empty and is not a venv; refusing to touch it"
        )
    started = time.perf_counter()
    venv.EnvBuilder(with_pip=True, clear=False, symlinks=True).create(venv_dir)
    python = venv_python(venv_dir)
    pip_command = [
        str(python),
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        HERMES_AGENT_SPEC,
    ]
    if CONSTRAINTS_FILE.is_file():
        pip_command += ["--constraint", str(CONSTRAINTS_FILE)]
    proc = subprocess.run(
        pip_command, env=runner_environment(), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise TheirsVenvError(
            f"pip install of {HERMES_AGENT_SPEC} into {venv_dir} failed "
            f"(exit {proc.returncode}):\n{tail}"
        )
    elapsed = time.perf_counter() - started
    if not _imports_cleanly(python):
        raise TheirsVenvError(
            f"{HERMES_AGENT_SPEC} installed into {venv_dir} but `{IMPORT_PROBE}` fails"
        )
    version = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    record = InstallRecord(
        spec=HERMES_AGENT_SPEC,
        constraints_sha256=constraints_digest(),
        python_version=version,
        pip_command=pip_command,
        install_seconds=round(elapsed, 2),
        size_bytes=directory_size(venv_dir),
        installed_at=time.time(),
    )
    (venv_dir / RECORD_NAME).write_text(record.model_dump_json(indent=2), encoding="utf-8")
    return record


def ensure_theirs_venv(path: Path | None = None) -> Path:
    """Create (once) the reference venv and return its python.

    :param path: venv directory; default ``benchmarks/.venv-hermes-agent``.
    :returns: path of the venv's python executable.
    :raises TheirsVenvError: the install or the import probe failed.
    """
    venv_dir = (path or DEFAULT_VENV_DIR).resolve()
    venv_dir.mkdir(parents=True, exist_ok=True)
    _write_gitignore(venv_dir)
    with (venv_dir / LOCK_NAME).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = read_install_record(venv_dir)
        python = venv_python(venv_dir)
        up_to_date = (
            record is not None
            and record.spec == HERMES_AGENT_SPEC
            and record.constraints_sha256 == constraints_digest()
            and _imports_cleanly(python)
        )
        if not up_to_date:
            _install(venv_dir)
    return python


class RunnerFailed(RuntimeError):
    """A reference-side runner exited non-zero or did not print exactly one JSON object."""


def run_theirs_runner(
    runner: str,
    job: dict[str, Any],
    *,
    python: Path | None = None,
    timeout: float = 1800.0,
) -> dict[str, Any]:
    """Run ``benchmarks/theirs/<runner>.py`` with the reference venv's python.

    :param runner: one of ``RUNNERS``.
    :param job: the job object, written to a temp file and passed as the argument.
    :param python: the reference python; default ``ensure_theirs_venv()``.
    :returns: the runner's JSON result.
    :raises RunnerFailed: non-zero exit, timeout, or output that is not one JSON object.
    """
    if runner not in RUNNERS:
        raise ValueError(f"runner={runner!r}: expected one of {list(RUNNERS)}")
    python = python or ensure_theirs_venv()
    with tempfile.TemporaryDirectory(prefix="theirs-job-") as tmp:
        job_file = Path(tmp) / "job.json"
        job_file.write_text(json.dumps(job), encoding="utf-8")
        try:
            proc = subprocess.run(
                [str(python), str(THEIRS_DIR / f"{runner}.py"), str(job_file)],
                env=runner_environment(),
                cwd=tmp,
                capture_output=True,
                text=True,
                check=False,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise RunnerFailed(f"{runner} did not finish within {timeout} s") from exc
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-15:])
        raise RunnerFailed(f"{runner} exited with {proc.returncode}:\n{tail}")
    lines = proc.stdout.strip().splitlines()
    if len(lines) != 1:
        raise RunnerFailed(f"{runner} printed {len(lines)} lines on stdout, expected 1 JSON line")
    result = json.loads(lines[0])
    if not isinstance(result, dict):
        raise RunnerFailed(f"{runner} printed {type(result).__name__}, expected a JSON object")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=None, help="venv directory")
    args = parser.parse_args(argv)
    try:
        python = ensure_theirs_venv(args.path)
    except TheirsVenvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    record = read_install_record(python.parent.parent)
    out = {"python": str(python), "record": record.model_dump() if record else None}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
