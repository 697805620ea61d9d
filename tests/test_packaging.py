"""The wheel holds every package of the tree: pyproject.toml lists packages explicitly."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


def test_every_package_directory_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    listed = set(config["setuptools"]["packages"])
    dirs = config["setuptools"]["package-dir"]
    missing = []
    for name, rel in dirs.items():
        top = ROOT / rel
        for init in top.rglob("__init__.py"):
            parts = init.parent.relative_to(top).parts
            if "templates" in parts or "__pycache__" in parts:
                continue
            package = ".".join((name, *parts))
            if package not in listed:
                missing.append(package)
    assert not missing, f"not in [tool.setuptools] packages, so not in the wheel: {missing}"
