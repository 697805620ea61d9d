"""Real installed third-party plugins for tests: a site folder of dist-infos with entry points.

The ``plugin_site`` fixture (``tests/conftest.py``) hands out a :class:`PluginSite`
under the test's ``tmp_path``; :meth:`PluginSite.activate` puts it on ``sys.path``
for the rest of the test (undone, and its modules forgotten, at teardown), or a child
process gets it through ``PYTHONPATH``.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest


class PluginSite:
    """A folder holding one-module distributions, each with a ``hermes_core`` entry point."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path = path
        self.modules: list[str] = []
        self._monkeypatch = monkeypatch

    def add(
        self, name: str, source: str, *, distribution: str | None = None, version: str = "1.2.3"
    ) -> Path:
        """Install module ``name`` (``source``, dedented) as distribution ``distribution``.

        The entry point is ``name = name``; the distribution is named ``name`` unless
        given. Returns the site folder.
        """
        dist = distribution or name
        self.path.mkdir(exist_ok=True)
        (self.path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        info = self.path / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(
            f"[hermes_core]\n{name} = {name}\n", encoding="utf-8"
        )
        self.modules.append(name)
        return self.path

    def activate(self) -> Path:
        """Put the site on ``sys.path`` until the test ends; returns the site folder."""
        self._monkeypatch.syspath_prepend(str(self.path))
        return self.path

    def forget(self) -> None:
        """Drop the site's modules from ``sys.modules`` (teardown)."""
        for name in self.modules:
            sys.modules.pop(name, None)
