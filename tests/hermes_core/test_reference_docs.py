"""docs/reference.md covers the whole contract, and the contract documents itself.

The reference is generated (``python -m hermes_core.docsgen``) from
``hermes_hookspecs``; these tests pin that it is fresh, that every public name
of the contract is in it, and that the source gives it something to say: a
docstring on every class and method, a description on every model field.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import hermes_hookspecs
from hermes_core import apiref, docsgen

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
REFERENCE = ROOT / "docs" / "reference.md"


def reference_text() -> str:
    return REFERENCE.read_text(encoding="utf-8")


def contract_members() -> list[tuple[str, object]]:
    return [(name, value) for module in apiref.modules() for name, value in apiref.members(module)]


def test_the_reference_is_fresh() -> None:
    name, make = docsgen.SECTIONS["docs/reference.md"]
    assert docsgen.render(REFERENCE, name, make()) == reference_text(), (
        "docs/reference.md is stale: run python -m hermes_core.docsgen"
    )


def test_every_public_name_of_the_contract_is_in_the_reference() -> None:
    text = reference_text()
    for name in hermes_hookspecs.__all__:
        value = getattr(hermes_hookspecs, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert re.search(rf"^### \w+ `{name}\b", text, re.M), f"{name} missing"
        elif name != "__version__":  # CONTRACT_VERSION, shown among the constants
            assert re.search(rf"^{name}\b\s*[:=]", text, re.M), f"constant {name} missing"


def test_every_method_of_every_interface_is_shown_with_its_signature() -> None:
    text = reference_text()
    shown = 0
    for name, value in contract_members():
        if apiref.kind(value) in ("interface", "model", "enum") and isinstance(value, type):
            for method, member in apiref.methods(value):
                if isinstance(member, property):
                    continue
                fn = member.__func__ if isinstance(member, classmethod | staticmethod) else member
                assert apiref.signature(method, fn, drop_self=True) in text, f"{name}.{method}"
                shown += 1
    assert shown >= 60  # SessionStore alone has 24


@pytest.mark.parametrize(
    "name",
    [
        "ContextEngine",
        "SessionStore",
        "Summarizer",
        "TailStrategy",
        "MemoryProvider",
        "Importer",
        "CompactionBackend",
        "TokenCounter",
        "AgentTool",
        "EngineHost",
    ],
)
def test_the_plugin_interfaces_are_documented_as_interfaces(name: str) -> None:
    assert f"### interface `{name}" in reference_text()


def test_every_class_method_and_function_of_the_contract_has_a_docstring() -> None:
    missing = []
    for name, value in contract_members():
        if not (inspect.getdoc(value) or "").strip():
            missing.append(name)
        if isinstance(value, type):
            for method, member in apiref.methods(value):
                text, _ = apiref.docstring(member)
                if not text:
                    missing.append(f"{name}.{method}")
    assert not missing, f"no docstring (it is the API reference): {missing}"


def test_every_field_of_every_contract_model_is_described() -> None:
    missing = [
        f"{name}.{field}"
        for name, value in contract_members()
        if apiref.kind(value) == "model" and isinstance(value, type)
        for field, _type, _default, text in apiref.field_rows(value)
        if not text.strip()
    ]
    assert not missing, (
        "describe these fields with a '#:' comment above them or a ':param NAME:' line in the "
        f"class docstring: {missing}"
    )


def test_a_param_line_in_a_model_docstring_names_one_of_its_fields() -> None:
    stale = []
    for name, value in contract_members():
        if apiref.kind(value) == "model" and isinstance(value, type):
            _, named = apiref.docstring(value, fields=True)
            fields = {row[0] for row in apiref.field_rows(value)}
            stale += [f"{name}: {param}" for param in named if param not in fields]
    assert not stale, f":param names no field: {stale}"


def test_field_rows_read_comments_docstring_params_and_defaults() -> None:
    rows = {row[0]: row for row in apiref.field_rows(hermes_hookspecs.PromptBlock)}
    assert rows["order"] == (
        "order",
        "int",
        "500",
        "position within the layer, ascending (default 500).",
    )
    assert rows["text"][3] == "the block's text, rendered as is"
    assert rows["key"][1:3] == ("str", "required")
    holder = {row[0]: row for row in apiref.field_rows(hermes_hookspecs.LeaseHolder)}
    assert holder["host"][2] == "socket.gethostname()"  # shown, never called: no host values


def sample(query: str, limit: int = 20) -> list[str]:
    """Search.

    :param query: the text to look
        for, as written.
    :param limit: at most this many.
    :raises ValidationError: a bad limit.
    A closing remark.
    """
    return []


def test_docstring_fields_become_a_markdown_list() -> None:
    text, named = apiref.docstring(sample)
    assert text == (
        "Search.\n\n"
        "- `query`: the text to look for, as written.\n"
        "- `limit`: at most this many.\n"
        "- raises `ValidationError`: a bad limit.\n\n"
        "A closing remark."
    )
    assert named == {}
    assert apiref.docstring(sample, fields=True)[1] == {
        "query": "the text to look for, as written.",
        "limit": "at most this many.",
    }
    assert apiref.signature("sample", sample) == "sample(query: str, limit: int = 20) -> list[str]"


def test_a_long_signature_is_shown_one_parameter_a_line() -> None:
    shown = apiref.signature("search", hermes_hookspecs.SessionStore.search, drop_self=True)
    assert shown.startswith(
        "search(\n    query: str,\n    *,\n    session_id: str | None = None,\n"
    )
    assert shown.endswith("\n    limit: int = 20,\n) -> list[SearchHit]")
