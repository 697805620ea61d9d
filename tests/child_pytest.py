"""The command line of a pytest run in a child process (a generated project's suite).

A child pytest left on the default temporary root (``/tmp/pytest-of-<user>``) prunes that
root's old numbered folders when it starts and ends: the folders this run and its sibling
children are using or pruning too, so two prunes of one ``garbage-*`` folder race and one of
them fails (``OSError: [Errno 39] Directory not empty``, seen in CI). Each child gets a
temporary root of its own, and no cache folder in the project.
"""

from __future__ import annotations

from pathlib import Path


def pytest_argv(python: Path | str, basetemp: Path, *args: str) -> list[str]:
    """``python -m pytest -q`` with ``basetemp`` as the child's own temporary root."""
    return [
        str(python),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--basetemp",
        str(basetemp),
        *args,
    ]
