"""A plugin with a misspelt hook name fails alone, listed with where it came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from hermes_core.config import settings_from
from hermes_core.plugins import PluginLoadWarning, get_plugin_manager, load_entrypoint_plugins
from hermes_hookspecs import PluginError
from tests.plugin_site import PluginSite

TYPO = """
from hermes_hookspecs import hookimpl

@hookimpl
def pre_llm_cal(user_message):
    return "never"
"""
GOOD = """
from hermes_hookspecs import hookimpl

@hookimpl
def pre_llm_call(user_message):
    return "good"
"""


@pytest.fixture
def site(plugin_site: PluginSite) -> Path:
    for name, source in (("typo_plugin", TYPO), ("fine_plugin", GOOD)):
        plugin_site.add(name, source, distribution=f"{name}-dist", version="4.5.6")
    return plugin_site.activate()


def _ours() -> list[metadata.EntryPoint]:
    eps = metadata.entry_points(group="hermes_core")
    return [ep for ep in eps if ep.name in ("typo_plugin", "fine_plugin")]


def test_an_unknown_hook_fails_that_plugin_only(site: Path) -> None:
    settings = settings_from({})
    pm = get_plugin_manager(settings, load_entrypoints=False)
    with pytest.warns(PluginLoadWarning) as record:
        load_entrypoint_plugins(pm, settings, entry_points=_ours())
    message = str(record[0].message)
    assert "typo_plugin-dist" in message and "4.5.6" in message
    assert "typo_plugin = typo_plugin" in message and "pre_llm_cal" in message
    assert pm.get_plugin("typo_plugin") is None and pm.get_plugin("fine_plugin") is not None
    pm.check_pending()  # the rest of the manager is healthy
    origin = pm.hermes_origins.origins["typo_plugin"]  # type: ignore[attr-defined]
    assert "pre_llm_cal" in origin.error and origin.entry_point == "typo_plugin"


def test_strict_mode_makes_an_unknown_hook_an_error(site: Path) -> None:
    strict = settings_from({"plugins": {"strict": True}})
    pm = get_plugin_manager(strict, load_entrypoints=False)
    with pytest.raises(PluginError, match=r"typo_plugin-dist 4\.5\.6.*pre_llm_cal"):
        load_entrypoint_plugins(pm, strict, entry_points=_ours())


def test_plugins_command_lists_the_misspelt_plugin_as_failed(site: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("HERMES_CORE_STRICT_PLUGINS", None)
    done = subprocess.run(
        [sys.executable, "-m", "hermes_core.cli", "plugins", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    typo = rows["typo_plugin"]
    assert typo["distribution"] == "typo_plugin-dist" and typo["version"] == "4.5.6"
    assert "typo_plugin = typo_plugin" in typo["error"] and "pre_llm_cal" in typo["error"]
    assert rows["fine_plugin"]["error"] == "" and "pre_llm_call" in rows["fine_plugin"]["hooks"]
    assert "sqlite_store" in rows  # the defaults still load
    human = subprocess.run(
        [sys.executable, "-m", "hermes_core.cli", "plugins"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert human.returncode == 0, human.stderr
    line = next(row for row in human.stdout.splitlines() if row.startswith("typo_plugin "))
    assert line.split()[:4] == ["typo_plugin", "FAILED", "typo_plugin-dist", "4.5.6"], line
