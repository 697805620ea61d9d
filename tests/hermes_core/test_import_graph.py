"""The core's imports run one way: no module of hermes_core imports itself back.

The graph is built from the source with :mod:`ast`, so it sees what running
the code does not: imports inside functions (deferred to dodge a cycle at
import time) count like module-level ones. Imports under ``if TYPE_CHECKING:``
are left out of the first check (they never run) and counted by the second
for every module outside ``hermes_core.testing``: a type-only import back
into an outer layer is still a circle in the design (``Turn`` typed against
``Hermes`` while ``Hermes`` builds the ``Turn``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
PACKAGE = "hermes_core"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(module: str, is_package: bool, tree: ast.AST, type_checking: bool) -> set[str]:
    """Every module name ``tree`` imports (``from m import x`` yields ``m`` and ``m.x``)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not type_checking:
                for other in child.orelse:
                    visit_node(other)
                continue
            visit_node(child)

    def visit_node(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
        visit(node)

    visit(tree)
    return found


def import_graph(*, type_checking: bool, root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: modules of hermes_core it imports}`` for every module under hermes_core/."""
    paths = {_module_name(p, root): p for p in sorted((root / PACKAGE).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        imported = _imported(name, path.name == "__init__.py", tree, type_checking)
        graph[name] = {m for m in imported if m in paths and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (``[a, b, ..., a]``), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := walk(target)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := walk(start)) is not None:
            return found
    return None


def test_no_module_of_the_core_imports_itself_back() -> None:
    """Module-level and function-level imports (the ones that run) form no cycle."""
    cycle = find_cycle(import_graph(type_checking=False))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_not_even_type_only_imports_point_back_to_an_outer_layer() -> None:
    graph = import_graph(type_checking=True)
    # the wire fake is a test helper, not a layer of the runtime
    core = {
        name: {m for m in targets if not m.startswith(f"{PACKAGE}.testing")}
        for name, targets in graph.items()
        if not name.startswith(f"{PACKAGE}.testing")
    }
    cycle = find_cycle(core)
    assert cycle is None, "import cycle (TYPE_CHECKING imports included): " + " -> ".join(
        cycle or []
    )


def test_the_runtime_does_not_import_the_host() -> None:
    """Session, turn and coordinator reach the host only through ``RuntimeServices``."""
    graph = import_graph(type_checking=True)
    for module in (
        "session",
        "turn",
        "async_turn",
        "draft",
        "view",
        "lease",
        "ledger",
        "compression",
        "services",
        "events",
        "pressure",
        "messages",
        "context_select",
    ):
        name = f"{PACKAGE}.{module}"
        assert name in graph, f"{name} is missing"
        assert f"{PACKAGE}.host" not in graph[name], f"{name} imports the host"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (  # a deferred (function-level) import closing the circle counts
            {
                "host.py": "from . import runtime\n",
                "runtime.py": "def f():\n    from .host import Hermes\n",
            },
            ["hermes_core.host", "hermes_core.runtime", "hermes_core.host"],
        ),
        (  # a type-only import is left out of the first check
            {
                "host.py": "from . import runtime\n",
                "runtime.py": (
                    "from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from .host import Hermes\n"
                ),
            },
            None,
        ),
        (  # absolute imports and three modules
            {
                "a.py": "import hermes_core.b\n",
                "b.py": "from hermes_core.c import thing\n",
                "c.py": "class X:\n    def m(self):\n        from hermes_core import a\n",
            },
            ["hermes_core.a", "hermes_core.b", "hermes_core.c", "hermes_core.a"],
        ),
    ],
)
def test_the_checker_finds_cycles(
    tmp_path: Path, files: dict[str, str], expected: list[str] | None
) -> None:
    package = tmp_path / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(text)
    assert find_cycle(import_graph(type_checking=False, root=tmp_path)) == expected


def test_the_runtime_names_import_from_the_package_and_their_former_module() -> None:
    import hermes_core
    import hermes_core.runtime as runtime
    from hermes_core.async_turn import AsyncTurn
    from hermes_core.session import Session
    from hermes_core.turn import Turn

    for name, value in (("Session", Session), ("Turn", Turn), ("AsyncTurn", AsyncTurn)):
        assert getattr(hermes_core, name) is value
        assert getattr(runtime, name) is value
    for name in ("PreparedRequest", "UNANSWERED_RESULT", "MAX_ARGUMENT_DEPTH", "RECALL_HEADER"):
        assert hasattr(runtime, name), name


def test_the_architecture_page_lists_what_each_module_imports() -> None:
    """The imports column of docs/architecture.md's module table is the graph's (run-time) edges."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    graph = import_graph(type_checking=False)
    checked = 0
    for line in text.splitlines():
        match = re.match(r"^\| `([a-z_]+)\.py` \|.*\| ([^|]+) \|$", line)
        if match is None:
            continue
        module, column = f"{PACKAGE}.{match.group(1)}", match.group(2).strip()
        if "..." in column or column == "the above":
            continue
        named = set(re.findall(r"`([a-z_]+)`", column))
        actual = {m.removeprefix(f"{PACKAGE}.") for m in graph[module]}
        assert named == actual, f"docs/architecture.md row {module}: says {named}, is {actual}"
        checked += 1
    assert checked >= 12
