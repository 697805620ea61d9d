"""The contract reference: what ``hermes_hookspecs`` defines, rendered as Markdown.

:func:`reference_markdown` walks the contract's modules (the hook
specifications excepted: ``docs/hooks.md`` has them) and renders, module by
module, every public interface (abstract base class, protocol or base class)
with its attributes and methods, every model (pydantic or dataclass) with a
table of its fields, every enum, error and function, and the module's
constants and type aliases as written. Text comes only from the source:
docstrings (``:param:``, ``:raises:`` and ``:return:`` become lists; a model's
``:param NAME:`` describes field ``NAME``), ``#:`` comments above attributes,
and annotations spelled as in the source. ``hermes_core.docsgen`` writes it
into ``docs/reference.md``.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import importlib
import inspect
import pkgutil
import re
import textwrap
from types import ModuleType
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

import hermes_hookspecs

#: the contract's modules in reading order; a module not named here follows, by name
MODULE_ORDER = (
    "compression",
    "store",
    "memory",
    "tools",
    "tokens",
    "compaction",
    "importers",
    "prompt",
    "messages",
    "records",
    "redaction",
    "errors",
    "contract",
    "markers",
)
#: modules documented elsewhere (the hook specifications: docs/hooks.md)
SKIPPED_MODULES = frozenset({"specs"})
#: sections of a module, in this order; within each, source order
KINDS = ("interface", "model", "enum", "error", "function")

#: signatures longer than this are shown one parameter a line
WIDTH = 88

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|data|obj):`(~?)([^`]+)`")
_FIELD = re.compile(r"^:(param|attr|raises|raise|returns|return)\b\s*([^:]*):\s*(.*)$")
_LABELS = {"param": "`{}`", "attr": "`{}`", "raises": "raises `{}`", "raise": "raises `{}`"}


# -- what the contract holds ------------------------------------------------------------


def modules() -> list[ModuleType]:
    """The contract's documented modules, in reading order."""
    names = {
        info.name
        for info in pkgutil.iter_modules(hermes_hookspecs.__path__)
        if not info.name.startswith("_") and info.name not in SKIPPED_MODULES
    }
    order = [n for n in MODULE_ORDER if n in names] + sorted(names - set(MODULE_ORDER))
    return [importlib.import_module(f"hermes_hookspecs.{name}") for name in order]


def kind(value: Any) -> str:
    """``interface``, ``model``, ``enum``, ``error`` or ``function``."""
    if not inspect.isclass(value):
        return "function"
    if issubclass(value, BaseException):
        return "error"
    if issubclass(value, BaseModel) or dataclasses.is_dataclass(value):
        return "model"
    if issubclass(value, enum.Enum):
        return "enum"
    return "interface"


def members(module: ModuleType) -> list[tuple[str, Any]]:
    """The public classes and functions ``module`` defines, grouped by :data:`KINDS`."""
    found = [
        (name, value)
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == module.__name__
    ]
    return sorted(
        found, key=lambda item: (KINDS.index(kind(item[1])), inspect.getsourcelines(item[1])[1])
    )


def methods(cls: type) -> list[tuple[str, Any]]:
    """The public methods and properties ``cls`` itself defines, in source order."""
    found = []
    for name, value in vars(cls).items():
        target = value.__func__ if isinstance(value, classmethod | staticmethod) else value
        if not name.startswith("_") and (
            inspect.isfunction(target) or isinstance(target, property)
        ):
            found.append((name, value))
    return found


# -- text from the source ---------------------------------------------------------------


class _Raw:
    """An annotation shown as the source spells it (no quotes, no module paths)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _annotation(value: Any) -> Any:
    if value is inspect.Parameter.empty or isinstance(value, _Raw):
        return value
    if isinstance(value, str):
        return _Raw(value)
    if isinstance(value, type):
        return _Raw(value.__name__)
    return _Raw(re.sub(r"\b(?:typing|collections\.abc|hermes_hookspecs\.\w+)\.", "", repr(value)))


def signature(name: str, fn: Any, *, drop_self: bool = False) -> str:
    """``name(params) -> returns``, annotations as written in the source.

    ``drop_self`` leaves out a method's ``self`` or ``cls``, as API references do.
    """
    sig = inspect.signature(fn)
    params = [p.replace(annotation=_annotation(p.annotation)) for p in sig.parameters.values()]
    if drop_self and params and params[0].name in ("self", "cls"):
        params = params[1:]
    shown = sig.replace(parameters=params, return_annotation=_annotation(sig.return_annotation))
    text = f"{name}{shown}"
    if len(text) <= WIDTH:
        return text
    # one parameter a line, as black formats a long ``def``
    empty = shown.return_annotation is inspect.Signature.empty
    returns = "" if empty else f" -> {shown.return_annotation!r}"
    lines = [f"    {part}," for part in _parameter_texts(shown)]
    return f"{name}(\n" + "\n".join(lines) + f"\n){returns}"


def _parameter_texts(sig: inspect.Signature) -> list[str]:
    """Each parameter as ``str(Signature)`` shows it, with ``*`` and ``/`` markers."""
    out: list[str] = []
    kinds = inspect.Parameter
    seen_star = False
    previous = None
    for param in sig.parameters.values():
        if previous == kinds.POSITIONAL_ONLY and param.kind != kinds.POSITIONAL_ONLY:
            out.append("/")
        if param.kind == kinds.KEYWORD_ONLY and not seen_star:
            out.append("*")
            seen_star = True
        if param.kind == kinds.VAR_POSITIONAL:
            seen_star = True
        out.append(str(param))
        previous = param.kind
    if previous == kinds.POSITIONAL_ONLY:
        out.append("/")
    return out


def _roles(text: str) -> str:
    """Sphinx roles as Markdown code: ``:class:`~a.B``` becomes `` `B` ``."""
    return _ROLE.sub(lambda m: f"`{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}`", text)


def docstring(obj: Any, *, fields: bool = False) -> tuple[str, dict[str, str]]:
    """``obj``'s own docstring as Markdown, ``:param:``-style entries as a list.

    With ``fields``, the ``:param NAME:`` and ``:attr NAME:`` entries are taken
    out of the text and returned by name instead (they describe the fields or
    attributes a table shows).
    """
    own = obj.__doc__ if not inspect.isclass(obj) else vars(obj).get("__doc__")
    lines: list[str] = []
    named: dict[str, str] = {}
    last: str | None = None  # "list", or the name in ``named`` a continuation extends
    for line in _roles(inspect.cleandoc(own or "")).splitlines():
        entry = _FIELD.match(line)
        if entry:
            what, name, text = entry[1], entry[2].strip(), entry[3]
            if fields and what in ("param", "attr"):
                named[name], last = text, name
                continue
            if lines and lines[-1] and not lines[-1].startswith("- "):
                lines.append("")
            lines.append(f"- {_LABELS.get(what, 'returns').format(name)}: {text}")
            last = "list"
        elif last is not None and line.startswith(" ") and line.strip():
            if last == "list":
                lines[-1] += " " + line.strip()
            else:
                named[last] += " " + line.strip()
        else:
            if line.strip() and last == "list":
                lines.append("")
            last = None
            # reST's "text::" introduces an indented literal block: Markdown reads it as code
            lines.append(line[:-1] if line.endswith("::") and line.strip() != "::" else line)
    return "\n".join(lines).strip(), named


@functools.cache
def attribute_comments(cls: type) -> dict[str, str]:
    """The ``#: text`` comments written above attributes in ``cls``'s body."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    pending: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        target = re.match(r"(\w+)\s*[:=]", stripped)
        if pending and target:
            found[target[1]] = " ".join(pending)
        pending = []
    return found


def source_annotations(cls: type) -> dict[str, str]:
    """Attribute annotations as written, a class's own over its bases'."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).get("__annotations__", {}).items():
            out[name] = repr(_annotation(value))
    return out


def constants(module: ModuleType) -> str:
    """The module's public top-level assignments as written, with their ``#:`` comments."""
    source = inspect.getsource(module)
    lines = source.splitlines()
    shown: list[str] = []
    for node in ast.parse(source).body:
        target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if not isinstance(target, ast.Name) or target.id.startswith("_"):
            continue
        start = node.lineno - 1
        while start > 0 and lines[start - 1].lstrip().startswith("#:"):
            start -= 1
        shown.append("\n".join(lines[start : node.end_lineno]))
    return "\n".join(shown)


# -- rendering --------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@functools.cache
def factories(cls: type) -> dict[str, str]:
    """``default_factory=`` expressions of ``cls``'s fields, as written in the source."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(textwrap.dedent(source))):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if isinstance(node.value, ast.Call):
            for keyword in node.value.keywords:
                if keyword.arg == "default_factory":
                    found[node.target.id] = ast.unparse(keyword.value)
    return found


def _default(default: Any, factory: Any, written: str | None) -> str:
    if factory is not None and factory is not dataclasses.MISSING:
        if factory in (list, dict, set, tuple):
            return repr(factory())
        return f"{written or factory.__qualname__}()"  # never called: no values of this host
    if default is PydanticUndefined or default is dataclasses.MISSING:
        return "required"
    return repr(default)


def field_rows(cls: type) -> list[tuple[str, str, str, str]]:
    """``(name, type, default, description)`` of each field of a model or dataclass."""
    comments = attribute_comments(cls)
    _, params = docstring(cls, fields=True)
    types = source_annotations(cls)
    written = factories(cls)
    fields: list[tuple[str, Any, Any, str | None]]
    if issubclass(cls, BaseModel):
        fields = [
            (n, f.default, f.default_factory, f.description) for n, f in cls.model_fields.items()
        ]
    else:
        fields = [
            (f.name, f.default, f.default_factory, None)
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        ]
    return [
        (
            name,
            types.get(name, ""),
            _default(default, factory, written.get(name)),
            description or comments.get(name) or params.get(name, ""),
        )
        for name, default, factory, description in fields
    ]


def _fields_table(cls: type) -> str:
    rows = ["| field | type | default | description |", "| --- | --- | --- | --- |"]
    for name, type_, default, text in field_rows(cls):
        rows.append(f"| `{name}` | `{_cell(type_)}` | `{_cell(default)}` | {_cell(text)} |")
    return "\n".join(rows) + "\n"


def _attributes(cls: type) -> str:
    """An interface's own annotated attributes (``name``, flags) with their comments."""
    comments = attribute_comments(cls)
    _, params = docstring(cls, fields=True)
    rows = []
    for name, annotation in vars(cls).get("__annotations__", {}).items():
        if name.startswith("_"):
            continue
        value = f" = {vars(cls)[name]!r}" if name in vars(cls) else ""
        note = comments.get(name) or params.get(name)
        rows.append(
            f"- `{name}: {_annotation(annotation)!r}{value}`" + (f": {note}" if note else "")
        )
    return "\n".join(rows) + "\n" if rows else ""


def _methods(cls: type) -> list[str]:
    out: list[str] = []
    abstract: frozenset[str] = getattr(cls, "__abstractmethods__", frozenset())
    for name, value in methods(cls):
        if isinstance(value, property):
            out.append(f"#### `{name}` (property)\n")
        else:
            fn = value.__func__ if isinstance(value, classmethod | staticmethod) else value
            tag = " (abstract)" if name in abstract else ""
            tag = " (classmethod)" if isinstance(value, classmethod) else tag
            out.append(f"#### `{name}`{tag}\n")
            out.append(f"```python\n{signature(name, fn, drop_self=True)}\n```\n")
        text, _ = docstring(value)
        if text:
            out.append(text + "\n")
    return out


def _bases(cls: type) -> str:
    names = [b.__name__ for b in cls.__bases__ if b is not object and b.__name__ != "Generic"]
    return f"({', '.join(names)})" if names else ""


def _member(name: str, value: Any) -> list[str]:
    what = kind(value)
    if what == "function":
        text, _ = docstring(value)
        return [f"### function `{name}`\n", f"```python\n{signature(name, value)}\n```\n", text]
    text, _ = docstring(value, fields=what in ("model", "interface"))
    out = [f"### {what} `{name}{_bases(value)}`\n", text + "\n" if text else ""]
    if what == "interface":
        out += [_attributes(value), *_methods(value)]
    elif what == "model":
        out += [_fields_table(value), *_methods(value)]
    elif what == "enum":
        out.append(", ".join(f"`{m.name} = {m.value!r}`" for m in value) + "\n")
        out += _methods(value)
    elif what == "error":
        if "__init__" in vars(value):
            init = signature(name, vars(value)["__init__"], drop_self=True)
            out.append(f"```python\nraise {init.split(' -> ')[0]}\n```\n")
        out += _methods(value)
    return out


#: the classes an integrator drives, in reading order: (module, class)
RUNTIME_CLASSES = (
    ("hermes_core.host", "Hermes"),
    ("hermes_core.session", "Session"),
    ("hermes_core.turn", "Turn"),
    ("hermes_core.async_turn", "AsyncTurn"),
    ("hermes_core.requests", "PreparedRequest"),
)


def runtime_markdown() -> str:
    """The runtime's classes (:data:`RUNTIME_CLASSES`), rendered as the contract's are:
    docstring, then each public method and property with its signature and docstring
    (a model's fields as a table)."""
    out: list[str] = []
    for module_name, name in RUNTIME_CLASSES:
        cls = getattr(importlib.import_module(module_name), name)
        parts = _member(name, cls)
        parts[0] = parts[0].replace("### interface ", "### class ", 1)
        out += parts
    return "\n".join(part.rstrip("\n") + "\n" for part in out if part.strip())


def reference_markdown() -> str:
    """The reference of every contract module, as Markdown."""
    out: list[str] = []
    index: list[str] = []
    for module in modules():
        short = module.__name__.rsplit(".", 1)[-1]
        listed = members(module)
        names = ", ".join(f"`{name}`" for name, _ in listed) or "constants"
        index.append(f"- [{short}](#{short}): {names}")
        text, _ = docstring(module)
        out.append(f"## {short}\n")
        out.append(text + "\n")
        for name, value in listed:
            out += _member(name, value)
        shown = constants(module)
        if shown:
            out.append(f"### constants and type aliases\n\n```python\n{shown}\n```\n")
    out = ["\n".join(index) + "\n", *out]
    return "\n".join(part.rstrip("\n") + "\n" for part in out if part.strip())
