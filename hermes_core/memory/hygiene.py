"""Checks on what memory providers hand back: names, text and tool schemas."""

from __future__ import annotations

from hermes_hookspecs import MemoryProvider


def provider_name(provider: MemoryProvider) -> str:
    """The name a provider is logged under."""
    return provider.name or type(provider).__name__


def clean_text(text: str) -> str:
    """``text`` itself when it is valid Unicode, else a copy with lone surrogates as U+FFFD.

    A well-formed surrogate pair (as a ``surrogateescape`` decoder leaves
    none, but a JSON ``\\ud83d\\ude00`` escape does) becomes the character it
    encodes.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def tool_schema_problem(schema: object) -> str | None:
    """What makes ``schema`` an invalid OpenAI function-tool schema, or None when valid."""
    if not isinstance(schema, dict):
        return f"expected a dict, got {type(schema).__name__}"
    if schema.get("type") != "function":
        return f"'type' is {schema.get('type')!r}; expected 'function'"
    function = schema.get("function")
    if not isinstance(function, dict):
        return "'function' is missing or not an object"
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return "'function.name' is missing or empty"
    if not all(ch.isalnum() or ch in "_-" for ch in name) or len(name) > 64:
        return f"'function.name' {name!r} must be 1-64 characters of a-z, A-Z, 0-9, _ or -"
    if "description" in function and not isinstance(function["description"], str):
        return f"'function.description' of {name!r} is not a string"
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        return f"'function.parameters' of {name!r} must be a JSON schema with type 'object'"
    properties = parameters.get("properties", {})
    if not isinstance(properties, dict):
        return f"'function.parameters.properties' of {name!r} is not an object"
    required = parameters.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return f"'function.parameters.required' of {name!r} is not a list of names"
    missing = [r for r in required if r not in properties]
    if missing:
        return f"'function.parameters.required' of {name!r} names undeclared {missing!r}"
    return None
