"""Tool-pair-safe cut points over a message list.

A *group* is one non-tool message followed by the tool messages right after
it: an assistant message with its tool results (parallel calls included), or
any single other message. Cutting only at group starts can never separate an
assistant tool call from its results, so every cut in the engine and in the
tail strategies goes through :func:`group_starts` / :func:`snap_back`.

Pure functions over ``Message`` sequences (or anything with a ``role``); tail
strategy plugins may import this module.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Protocol


class _HasRole(Protocol):
    @property
    def role(self) -> str: ...


def group_starts(messages: Sequence[_HasRole]) -> list[int]:
    """Indexes where a group starts (every non-tool message; a leading tool message too)."""
    return [i for i, m in enumerate(messages) if m.role != "tool" or i == 0]


def snap_back(starts: Sequence[int], index: int) -> int:
    """The last group start at or before ``index`` (0 when none)."""
    pos = bisect_right(starts, index) - 1
    return starts[pos] if pos >= 0 else 0


def snap_forward(starts: Sequence[int], index: int, length: int) -> int:
    """The first group start at or after ``index`` (``length`` when none)."""
    pos = bisect_right(starts, index - 1)
    return starts[pos] if pos < len(starts) else length


def suffix_within(
    counts: Sequence[int], starts: Sequence[int], budget: int, *, min_tokens: int = 0
) -> int:
    """Start index of the longest group-aligned suffix whose tokens stay within ``budget``.

    The suffix always holds at least the last group, even when that group
    alone exceeds ``budget``. ``min_tokens`` lets the suffix grow past
    ``budget`` by one group only when it is still below ``min_tokens``.
    """
    n = len(counts)
    if n == 0:
        return 0
    total = 0
    chosen = n
    bounds = [*starts, n]
    for k in range(len(starts) - 1, -1, -1):
        start, end = bounds[k], bounds[k + 1]
        size = sum(counts[start:end])
        if chosen == n or total + size <= budget:
            total += size
            chosen = start
            continue
        if total < min_tokens:
            chosen = start
        break
    return chosen
