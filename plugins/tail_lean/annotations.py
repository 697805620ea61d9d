"""The lean tail's per-message annotation: identifiers extracted once, when a message is recorded.

Extracting identifiers is the lean tail's one costly step: a compression
scans every evicted message (often a megabyte of tool output) and the whole
verbatim tail. Each message's text never changes, so the ``annotate_message``
hook extracts them once when the turn runtime records the message, and the
store keeps them with the row under :data:`KEY`::

    {"lean_identifiers": {"v": 1, "path": ["src/app.py", ...], "sha": ["3f2a9c1"], ...}}

(kinds with no identifier are left out; each list is in the text's order).

:func:`message_identifiers` reads that entry and falls back to extracting from
the text when it is missing or of another :data:`VERSION` (rows written by
importers, by older versions, or before the lean tail was chosen), so the
result is the same either way; only the time spent differs.

Bump :data:`VERSION` whenever :func:`extract_identifiers` changes what it
finds: older annotations are then ignored and re-derived.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_hookspecs import Message, StoredMessage
from hermes_plugin_compressor.identifiers import (
    KIND_ORDER,
    IdentifierKind,
    extract_identifiers,
)

KEY = "lean_identifiers"
VERSION = 7
#: identifiers kept per kind and message (the last ones in the text, the newest):
#: far more than a default 2,000-token index can show, and it bounds the row's size
MAX_PER_KIND = 1_000

_KINDS = frozenset(KIND_ORDER)
_STR = {str}


def identifier_text(message: Message) -> str:
    """Content plus the tool calls' argument values, decoded: where identifiers live.

    The decoded values, not the raw JSON: in JSON a patch's newline is ``\\n``,
    so a path at the start of a line would be read as ``n`` glued to the path.
    """
    text = message.text()
    calls = message.tool_calls
    if calls:
        values = [value for call in calls for value in call.function.string_values()]
        text += "\n" + "\n".join(values)
    return text


def extract(message: Message) -> list[tuple[IdentifierKind, str]]:
    """Identifiers of ``message`` in extraction order, at most :data:`MAX_PER_KIND` per kind."""
    found = extract_identifiers(identifier_text(message))
    counts = dict.fromkeys(KIND_ORDER, 0)
    for kind, _value in found:
        counts[kind] += 1
    if all(n <= MAX_PER_KIND for n in counts.values()):
        return found
    skip = {kind: max(0, n - MAX_PER_KIND) for kind, n in counts.items()}
    kept: list[tuple[IdentifierKind, str]] = []
    for kind, value in found:
        if skip[kind]:
            skip[kind] -= 1
        else:
            kept.append((kind, value))
    return kept


def annotation(message: Message) -> dict[str, Any]:
    """The ``annotate_message`` result for ``message``."""
    entry: dict[str, Any] = {"v": VERSION}
    for kind, value in extract(message):
        entry.setdefault(kind, []).append(value)
    return {KEY: entry}


def _stored(row: StoredMessage) -> dict[str, Any] | None:
    entry = row.annotations.get(KEY)
    if not isinstance(entry, dict) or entry.get("v") != VERSION:
        return None
    for key, values in entry.items():
        if key == "v":
            continue
        if key not in _KINDS or not isinstance(values, list) or not set(map(type, values)) <= _STR:
            return None  # not ours after all: derive from the text
    return entry


def message_identifiers(
    row: StoredMessage, kinds: Sequence[IdentifierKind] = KIND_ORDER
) -> list[tuple[IdentifierKind, str]]:
    """The identifiers of ``row`` of the given ``kinds``, in extraction order.

    Read from the row's annotation when it has a valid one of this
    :data:`VERSION`, else extracted from the text: the same list either way.
    """
    entry = _stored(row)
    if entry is None:
        wanted = set(kinds)
        return [(kind, value) for kind, value in extract(row.message) if kind in wanted]
    out: list[tuple[IdentifierKind, str]] = []
    for kind in KIND_ORDER:  # extraction groups by kind in this order
        values = entry.get(kind)
        if values and kind in kinds:
            out.extend((kind, value) for value in values)
    return out
