"""The extra summary sections of the ``lean`` tail: user quotes and recovery pointers.

Both are rendered in a fixed, parseable format so a re-compression reads the
previous summary's sections back and carries them forward:

* ``User Quotes``: ``(message id N) <the user's words, verbatim>``, one quote
  per paragraph; a quote over the per-quote cap ends with
  ``… [cut; full text: message id N]``.
* ``Recovery Pointers``: a fixed first line, then ``- message ids a-b, c
  (k messages)`` per compression (newest first) and ``- largest: ...``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from hermes_plugin_compressor.identifiers import estimate_tokens

QUOTES_TITLE = "User Quotes"
INDEX_TITLE = "Identifier Index"
POINTERS_TITLE = "Recovery Pointers"
POINTERS_INTRO = (
    "Compacted messages stay in the session store: session_search(query=...) finds them by "
    "any identifier above, session_open(message_id=N) opens one by its message id."
)
#: a quote's head: its message id, or ``?`` for a row of a turn not stored yet
_QUOTE_HEAD = re.compile(r"^\(message id (\d+|\?)\) ", re.MULTILINE)


def render_quote(message_id: int | None, text: str, cap_chars: int) -> str:
    text = text.strip()
    label = f"(message id {message_id}) " if message_id is not None else "(message id ?) "
    if len(text) > cap_chars:
        where = (
            f"session_open(message_id={message_id})"
            if message_id is not None
            else "session_search(query=...)"
        )
        text = text[:cap_chars].rstrip() + f"… [cut; full text: {where}]"
    return label + text


def parse_quotes(body: str) -> list[tuple[int | None, str]]:
    """``(message id, rendered quote)`` pairs of a ``User Quotes`` body, in order (None:
    a quote rendered without an id)."""
    heads = list(_QUOTE_HEAD.finditer(body))
    out: list[tuple[int | None, str]] = []
    for index, head in enumerate(heads):
        end = heads[index + 1].start() if index + 1 < len(heads) else len(body)
        mid = head.group(1)
        out.append((None if mid == "?" else int(mid), body[head.start() : end].strip()))
    return out


def select_quotes(
    previous: Sequence[tuple[int | None, str]],
    fresh: Sequence[tuple[int | None, str]],
    budget_tokens: int,
) -> str:
    """Quotes within the budget: the oldest one first (the task), then newest first.

    ``previous`` are rendered quotes from the last summary, ``fresh`` are
    ``(message id, raw text)`` of user messages evicted now (oldest first).
    Returns the section body, quotes in chronological order.
    """
    cap = max(200, budget_tokens * 4 // 3)
    rendered: list[tuple[float, str]] = [
        (-len(previous) + i, q) for i, (_id, q) in enumerate(previous)
    ]
    rendered += [(i, render_quote(mid, text, cap)) for i, (mid, text) in enumerate(fresh)]
    if not rendered:
        return ""
    seen: set[str] = set()
    unique: list[tuple[float, str]] = []
    for order, quote in rendered:
        if quote not in seen:
            seen.add(quote)
            unique.append((order, quote))
    left = budget_tokens
    chosen: list[tuple[float, str]] = []
    first = unique[0]
    candidates = [first, *reversed(unique[1:])]
    for order, quote in candidates:
        cost = estimate_tokens(quote) * 3 // 4 + 2
        if cost <= left:
            chosen.append((order, quote))
            left -= cost
    chosen.sort()
    return "\n\n".join(quote for _order, quote in chosen)


def id_ranges(ids: Iterable[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"3-5, 9"``."""
    ordered = sorted(set(ids))
    parts: list[str] = []
    start = prev = None
    for value in ordered:
        if start is None:
            start = prev = value
        elif prev is not None and value == prev + 1:
            prev = value
        else:
            parts.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = value
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ", ".join(parts)


def parse_pointer_lines(body: str) -> list[str]:
    """The ``- message ids ...`` lines of a previous ``Recovery Pointers`` body."""
    return [line for line in body.splitlines() if line.startswith("- message ids ")]


def render_pointers(
    evicted_ids: Sequence[int],
    largest: Sequence[str],
    previous_lines: Sequence[str],
    budget_tokens: int,
) -> str:
    """The ``Recovery Pointers`` body: this compression's ranges, the largest items, history."""
    lines = [POINTERS_INTRO]
    left = budget_tokens - estimate_tokens(POINTERS_INTRO) // 2
    if evicted_ids:
        line = f"- message ids {id_ranges(evicted_ids)} ({len(set(evicted_ids))} messages)"
        lines.append(line)
        left -= estimate_tokens(line) // 2
    if largest:
        line = "- largest: " + "; ".join(largest)
        if estimate_tokens(line) // 2 <= left:
            lines.append(line)
            left -= estimate_tokens(line) // 2
    for line in previous_lines:
        cost = estimate_tokens(line) // 2
        if cost > left:
            break
        lines.append(line)
        left -= cost
    return "\n".join(lines)
