"""Project templates for plugin authors: ``hermes-core new KIND NAME``.

One template per plugin kind (engine, tail, summarizer, memory, store,
importer). A generated project is a complete, installable distribution:

* ``pyproject.toml`` depending on ``hermes-session-core`` and declaring the
  ``hermes_core`` entry point;
* ``src/<module>/plugin.py``: a working implementation, its ``register_*``
  hook and ``hermes_contract`` (the contract range it is written for);
* ``src/<module>/commands.py``: a ``register_commands`` hook adding
  ``hermes-core <name> info``;
* ``tests/``: the kind's conformance suite from :mod:`hermes_core.testing`
  and a registration test through the ``hermes_factory`` fixture.

The templates are plain files under ``hermes_core/templates`` filled in with
:class:`string.Template` (``${name}`` placeholders): no templating dependency,
and the test suite installs what they generate against a built wheel, so a
template that stops working fails CI.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from hermes_hookspecs import CONTRACT_VERSION, DISTRIBUTION, ConfigError


@dataclass(frozen=True)
class TemplateKind:
    """One plugin kind a project can be generated for."""

    label: str
    registry: str
    select_hint: str


KINDS: dict[str, TemplateKind] = {
    "engine": TemplateKind("context engine", "engines", '`compression.engine = "{c}"`'),
    "tail": TemplateKind("tail strategy", "tails", '`compression.tail = "{c}"`'),
    "summarizer": TemplateKind("summarizer", "summarizers", '`compression.summarizer = "{c}"`'),
    "memory": TemplateKind("memory provider", "memory", '`memory.provider = "{c}"`'),
    "store": TemplateKind("session store", "stores", '`session.store = "{c}"`'),
    "importer": TemplateKind(
        "transcript importer", "importers", "`hermes-core replay FILE` (or `--format {c}`)"
    ),
}

#: commands a generated plugin must not shadow
RESERVED_COMMANDS = frozenset({"plugins", "config", "sessions", "compress", "replay", "new", "mcp"})

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")

#: template file -> path in the generated project (``{module}`` is filled in)
COMMON_FILES = {
    "common/pyproject.toml.tmpl": "pyproject.toml",
    "common/README.md.tmpl": "README.md",
    "common/__init__.py.tmpl": "src/{module}/__init__.py",
    "common/commands.py.tmpl": "src/{module}/commands.py",
    "common/test_plugin.py.tmpl": "tests/test_plugin.py",
}
KIND_FILES = {
    "plugin.py.tmpl": "src/{module}/plugin.py",
    "test_conformance.py.tmpl": "tests/test_conformance.py",
}


def contract_range(version: str = CONTRACT_VERSION) -> str:
    """The range a new plugin declares: this contract's major version."""
    major = int(version.split(".")[0])
    return f">={major},<{major + 1}"


def names_for(kind: str, name: str) -> dict[str, str]:
    """The placeholder values for project ``name`` of ``kind``.

    :raises ConfigError: an unknown kind, or a name that cannot be a
        distribution, module and command name at once.
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown plugin kind {kind!r}; choose one of: {', '.join(KINDS)}")
    if not _NAME.match(name):
        raise ConfigError(
            f"project name {name!r}: use lower-case letters, digits and single '-' or '_' "
            "between them, starting with a letter (e.g. 'acme-engine')"
        )
    project = name.replace("_", "-")
    module = name.replace("-", "_")
    if keyword.iskeyword(module) or module.startswith(("hermes_core", "hermes_hookspecs")):
        raise ConfigError(f"project name {name!r}: module {module!r} is reserved")
    if project in RESERVED_COMMANDS:
        raise ConfigError(
            f"project name {name!r} would shadow the built-in command {project!r}; pick another"
        )
    from . import __version__

    spec = KINDS[kind]
    return {
        "kind": kind,
        "kind_label": spec.label,
        "registry_kind": spec.registry,
        "project": project,
        "module": module,
        "plugin": module,
        "component": project,
        "command": project,
        "cls": "".join(part.capitalize() for part in re.split(r"[-_]", name)),
        "distribution": DISTRIBUTION,
        "core_version": __version__,
        "contract_range": contract_range(),
        "select_hint": spec.select_hint.format(c=project),
    }


def _template(rel: str) -> str:
    return resources.files("hermes_core").joinpath("templates", rel).read_text(encoding="utf-8")


def render_project(kind: str, name: str, dest: Path) -> list[Path]:
    """Write the ``kind`` project ``name`` into ``dest`` (which must be new or empty).

    :return: the files written.
    :raises ConfigError: bad kind or name, or ``dest`` holds files already.
    """
    values = names_for(kind, name)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConfigError(f"{dest} exists and is not empty; choose a new directory")
    files = {**COMMON_FILES, **{f"{kind}/{src}": out for src, out in KIND_FILES.items()}}
    written: list[Path] = []
    for src, out in files.items():
        target = dest / out.format(module=values["module"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(Template(_template(src)).substitute(values), encoding="utf-8")
        written.append(target)
    marker = dest / "src" / values["module"] / "py.typed"
    marker.write_text("", encoding="utf-8")
    written.append(marker)
    return written
