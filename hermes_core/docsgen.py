"""Generated documentation: the hook, contract, configuration and CLI references.

``python -m hermes_core.docsgen`` rewrites the generated sections of
``docs/hooks.md``, ``docs/reference.md``, ``docs/configuration.md`` and ``docs/cli.md`` (between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` markers);
``python -m hermes_core.docsgen --check`` fails when any is stale (CI runs
the same check as a test).
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import hermes_hookspecs.specs as specs

from .config import Settings, SettingsSection

MARK = "<!-- generated:{name} -->"
END = "<!-- /generated:{name} -->"


def hook_names() -> list[str]:
    return [
        name
        for name, fn in inspect.getmembers(specs, inspect.isfunction)
        if hasattr(fn, "hermes_core_spec")
    ]


def hook_signature(name: str) -> str:
    fn = getattr(specs, name)
    return f"{name}{inspect.signature(fn)}"


def hooks_section() -> str:
    lines: list[str] = []
    source = inspect.getsource(specs)
    order = [m.group(1) for m in re.finditer(r"^def (\w+)\(", source, re.M)]
    for name in order:
        fn = getattr(specs, name)
        opts = getattr(fn, "hermes_core_spec", {})
        first = " (firstresult)" if opts.get("firstresult") else ""
        first += " (historic)" if opts.get("historic") else ""
        lines.append(f"### `{name}`{first}\n")
        lines.append(f"```python\n{hook_signature(name)}\n```\n")
        if opts.get("warn_on_impl") is not None:
            lines.append(f"**Deprecated:** {opts['warn_on_impl']}\n")
        for arg, warning in (opts.get("warn_on_impl_args") or {}).items():
            lines.append(f"**Deprecated argument `{arg}`:** {warning}\n")
        lines.append(inspect.cleandoc(fn.__doc__ or "") + "\n")
    return "\n".join(lines)


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _model_rows(model: type[BaseModel], prefix: str, owner: str, rows: list[str]) -> None:
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            continue  # a core section: listed on its own
        default: Any = field.default
        if field.default_factory is not None:
            default = field.default_factory()  # type: ignore[call-arg]
        shown = repr(default).replace("|", "\\|")
        kind = _type_name(annotation).replace("|", "\\|")
        desc = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{prefix}{name}` | `{kind}` | `{shown}` | {owner} | {desc} |")


def default_settings_models() -> list[tuple[str, type[SettingsSection]]]:
    """``(plugin, model)`` for every settings model this distribution's plugins declare.

    Only the entry points of this distribution are loaded, so the generated
    reference does not depend on what else is installed.
    """
    from importlib import metadata

    from hermes_hookspecs import DISTRIBUTION, ENTRY_POINT_GROUP

    from .plugin_settings import declared_settings
    from .plugins import get_plugin_manager

    ours = [
        ep
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
        if ep.dist is not None and ep.dist.metadata["Name"] == DISTRIBUTION
    ]
    from .host import CORE_PLUGIN_NAME, CorePlugin

    plugins = [(ep.name, ep.load()) for ep in sorted(ours, key=lambda e: e.name)]
    pm = get_plugin_manager(Settings(), load_entrypoints=False, plugins=plugins)
    pm.register(CorePlugin(), name=CORE_PLUGIN_NAME)
    return [(item.plugin, item.model) for item in declared_settings(pm)]


def config_section() -> str:
    """The configuration reference: the core's keys, each core section followed by the keys
    plugins add to it, then the tables plugins own."""
    rows = [
        "| key | type | default | declared by | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    declared = sorted(default_settings_models(), key=lambda pm: (pm[1].config_section, pm[0]))
    core_tables = []
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            core_tables.append(name)
            _model_rows(annotation, f"{name}.", "core", rows)
            for plugin, model in declared:
                if model.config_section == name:
                    _model_rows(model, f"{name}.", f"`{plugin}`", rows)
    _model_rows(Settings, "", "core", rows)
    for plugin, model in declared:
        if model.config_section not in core_tables:
            _model_rows(model, f"{model.config_section}.", f"`{plugin}`", rows)
    return "\n".join(rows) + "\n"


def cli_section() -> str:
    from click.testing import CliRunner

    from .cli import cli, load_commands

    load_commands()

    runner = CliRunner()
    out: list[str] = []

    def walk(path: list[str], command: Any) -> None:
        result = runner.invoke(cli, [*path, "--help"], prog_name="hermes-core", terminal_width=100)
        title = " ".join(["hermes-core", *path])
        out.append(f"### `{title}`\n\n```text\n{result.output.rstrip()}\n```\n")
        for name in sorted(getattr(command, "commands", {}) or {}):
            walk([*path, name], command.commands[name])

    walk([], cli)
    return "\n".join(out)


def reference_section() -> str:
    """The contract's interfaces, models, errors and constants (see :mod:`hermes_core.apiref`)."""
    from .apiref import reference_markdown

    return reference_markdown()


def runtime_section() -> str:
    """Hermes, Session, Turn and what they hand back (see :mod:`hermes_core.apiref`)."""
    from .apiref import runtime_markdown

    return runtime_markdown()


SECTIONS = {
    "docs/hooks.md": ("hooks", hooks_section),
    "docs/runtime.md": ("runtime", runtime_section),
    "docs/configuration.md": ("config", config_section),
    "docs/cli.md": ("cli", cli_section),
    "docs/reference.md": ("reference", reference_section),
}


def render(path: Path, name: str, body: str) -> str:
    text = path.read_text(encoding="utf-8")
    start, end = MARK.format(name=name), END.format(name=name)
    if start not in text or end not in text:
        raise SystemExit(f"{path}: markers {start} ... {end} not found")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body.rstrip()}\n{end}{tail}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    root = Path(__file__).resolve().parent.parent
    stale = []
    for rel, (name, make) in SECTIONS.items():
        path = root / rel
        new = render(path, name, make())
        if path.read_text(encoding="utf-8") != new:
            stale.append(rel)
            if not check:
                path.write_text(new, encoding="utf-8")
    if check and stale:
        print("stale generated docs: " + ", ".join(stale) + " (run python -m hermes_core.docsgen)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
