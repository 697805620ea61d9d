"""`hermes-core new`: every template makes a project that installs, loads, adds a command and
passes its conformance suite, in a fresh venv holding our distribution as a built wheel.

The wheel is built once per session from this checkout. The fresh venv gets the wheel
(and the generated projects) through a real ``pip install`` that resolves the projects'
``hermes-session-core`` requirement from the wheel; the third-party dependencies (pydantic,
pluggy, ...) come from the development venv through a ``.pth`` line pointing at a copy of
its site-packages *without* our editable install, so the test needs no network and the
fresh venv can only import hermes-core from the wheel (checked).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hermes_core.scaffold import KINDS, names_for, render_project
from hermes_hookspecs import CONTRACT_VERSION, ConfigError
from tests.child_pytest import pytest_argv

ROOT = Path(__file__).resolve().parents[2]


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_CORE", "PYTHON"))}
    env["HERMES_CORE__MEMORY__HOME"] = str(home / "memory")
    env["HERMES_CORE__SESSION__PATH"] = str(home / "sessions.db")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="session")
def core_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            str(out),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    wheels = sorted(out.glob("hermes_session_core-*.whl"))
    if build.returncode != 0 or not wheels:
        pytest.skip(f"a wheel of this checkout cannot be built here: {build.stderr[-800:]}")
    return wheels[0]


@dataclass
class PluginVenv:
    root: Path
    python: Path
    hermes_core: Path
    projects: dict[str, Path]
    env: dict[str, str]

    def run(self, *args: str, check: bool = True, **extra: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.hermes_core), *args],
            env={**self.env, **extra},
            cwd=self.root,
            capture_output=True,
            text=True,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"hermes-core {' '.join(args)}: exit {proc.returncode}\n"
                f"{proc.stdout}\n{proc.stderr}"
            )
        return proc


def _dependency_dir(target: Path) -> Path:
    """The dev venv's site-packages as symlinks, minus hermes-core's own editable install."""
    target.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("hermes", "__editable__", "_hermes")) or name.endswith(".pth"):
            continue
        (target / entry.name).symlink_to(entry)
    return target


@pytest.fixture(scope="module")
def plugin_venv(core_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PluginVenv]:
    root = tmp_path_factory.mktemp("plugin-venv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    deps = _dependency_dir(root / "deps")
    Path(purelib, "dev_dependencies.pth").write_text(f"{deps}\n", encoding="utf-8")
    env = clean_env(root)

    def pip_install(*targets: str) -> None:
        install = subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-index",
                "--no-build-isolation",
                "--find-links",
                str(core_wheel.parent),
                *targets,
            ],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
        )
        assert install.returncode == 0, install.stdout + install.stderr

    pip_install("hermes-session-core")  # by name: pip finds it among the wheels
    hermes_core = venv / "bin" / "hermes-core"

    def new(kind: str, name: str) -> Path:
        dest = root / "projects" / name
        made = subprocess.run(
            [str(hermes_core), "new", kind, name, "--dir", str(dest)],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
        )
        assert made.returncode == 0, made.stdout + made.stderr  # the wheel ships the templates
        return dest

    projects = {kind: new(kind, f"acme-{kind}") for kind in KINDS}
    # each project requires hermes-session-core: pip resolves it to the installed wheel. The
    # engine is installed editable (as the template's README says), so the test can change
    # the contract it declares.
    others = [str(p) for kind, p in projects.items() if kind != "engine"]
    pip_install("-e", str(projects["engine"]), *others)
    yield PluginVenv(root, python, hermes_core, projects, env)


def test_a_template_project_installs_from_the_wheel_loads_adds_a_command_and_checks_contract(
    plugin_venv: PluginVenv,
) -> None:
    v = plugin_venv
    # hermes-core in the fresh venv is the wheel, not this checkout
    where = subprocess.run(
        [
            str(v.python),
            "-c",
            "import hermes_core, importlib.metadata as m; "
            "print(hermes_core.__file__); print(m.version('hermes-session-core'))",
        ],
        env=v.env,
        cwd=v.root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where[0].startswith(str(v.root / "venv")), where
    assert not where[0].startswith(str(ROOT)), where

    listed = v.run("plugins", "--json")
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    engine = rows["acme_engine"]
    assert engine["error"] == "" and engine["distribution"] == "acme-engine"
    assert engine["registered"] == {"engines": ["acme-engine"]}
    assert "register_commands" in engine["hooks"]
    assert rows["sqlite_store"]["distribution"] == "hermes-session-core"

    info = json.loads(v.run("acme-engine", "info", "--json").stdout)
    assert info == {
        "plugin": "acme_engine",
        "kind": "context engine",
        "name": "acme-engine",
        "hermes_contract": ">=1,<2",
        "host_contract": CONTRACT_VERSION,
    }

    suite = subprocess.run(
        pytest_argv(v.python, v.root / "pytest-engine"),
        cwd=v.projects["engine"],
        env=v.env,
        capture_output=True,
        text=True,
    )
    assert suite.returncode == 0, suite.stdout + suite.stderr
    assert "passed" in suite.stdout and "failed" not in suite.stdout

    # the same plugin declaring a contract this host does not provide: refused, listed as
    # failed with both versions, its command gone; strict mode makes it an error
    plugin_py = v.projects["engine"] / "src" / "acme_engine" / "plugin.py"
    original = plugin_py.read_text(encoding="utf-8")
    assert 'hermes_contract = ">=1,<2"' in original
    plugin_py.write_text(
        original.replace('hermes_contract = ">=1,<2"', 'hermes_contract = ">=99,<100"'),
        encoding="utf-8",
    )
    try:
        refused = v.run("plugins", "--json")
        row = {r["name"]: r for r in json.loads(refused.stdout)}["acme_engine"]
        assert "'>=99,<100'" in row["error"] and CONTRACT_VERSION in row["error"], row
        assert row["hooks"] == [] and row["registered"] == {}
        assert "acme_engine" in refused.stderr and "contract" in refused.stderr
        missing = v.run("acme-engine", "info", check=False)
        assert missing.returncode == 2 and "No such command 'acme-engine'" in missing.stderr
        strict = v.run("plugins", check=False, HERMES_CORE_STRICT_PLUGINS="1")
        assert strict.returncode == 1, strict.stdout + strict.stderr
        assert "acme_engine" in strict.stderr and ">=99,<100" in strict.stderr
    finally:
        plugin_py.write_text(original, encoding="utf-8")


def test_every_template_passes_its_conformance_suite_as_generated(
    plugin_venv: PluginVenv,
) -> None:
    v = plugin_venv
    rows = {row["name"]: row for row in json.loads(v.run("plugins", "--json").stdout)}
    for kind, spec in KINDS.items():
        row = rows[f"acme_{kind}"]
        assert row["error"] == "", row
        assert row["registered"] == {spec.registry: [f"acme-{kind}"]}, row
    running = {
        kind: subprocess.Popen(
            pytest_argv(v.python, v.root / f"pytest-{kind}"),  # its own temporary root
            cwd=v.projects[kind],
            env=v.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for kind in KINDS
        if kind != "engine"  # run by the test above
    }
    failures = {}
    for kind, proc in running.items():
        out, _ = proc.communicate(timeout=240)
        if proc.returncode != 0 or "passed" not in out:
            failures[kind] = out[-3000:]
    assert not failures, failures


def test_new_refuses_bad_names_and_non_empty_directories(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown plugin kind"):
        names_for("widget", "acme")
    for bad in ("Acme", "1acme", "acme--x", "acme engine"):
        with pytest.raises(ConfigError, match="project name"):
            names_for("engine", bad)
    with pytest.raises(ConfigError, match="built-in command 'replay'"):
        names_for("engine", "replay")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match="not empty"):
        render_project("engine", "acme", tmp_path / "taken")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_core",
            "new",
            "tail",
            "my-tail",
            "--dir",
            str(tmp_path / "t"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert out.returncode == 0, out.stderr
    files = json.loads(out.stdout)["files"]
    assert any(f.endswith("src/my_tail/plugin.py") for f in files)
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_core",
            "new",
            "tail",
            "my-tail",
            "--dir",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert (
        again.returncode == 1 and again.stderr.startswith("Error:") and "not empty" in again.stderr
    )


def test_generated_code_is_lint_clean(tmp_path: Path) -> None:
    pytest.importorskip("ruff", reason="ruff (the dev extra) lints the generated projects")
    for kind in KINDS:
        render_project(kind, f"acme-{kind}", tmp_path / kind)
    lint = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--isolated",
            "--line-length",
            "100",
            "--select",
            "E,F,W,B,UP,SIM,RUF",
            "--ignore",
            "RUF001,RUF002,RUF003",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
