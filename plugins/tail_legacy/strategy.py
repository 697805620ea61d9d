"""The ``legacy`` tail: a verbatim tail of ``threshold_tokens * target_ratio`` tokens.

The tail is the longest run of whole message groups (an assistant message with
its tool results counts as one) from the end whose tokens fit the budget,
grown if needed to hold at least ``tail_min_messages`` messages. It adds no
summary sections and asks for a single-pass summary.
"""

from __future__ import annotations

from hermes_hookspecs import TailPlan, TailRequest, TailStrategy
from hermes_plugin_compressor.groups import group_starts, snap_back, suffix_within

from .settings import LegacyTailSettings


class LegacyTail(TailStrategy):
    """Tail of ``threshold x target_ratio`` tokens with a minimum message count."""

    name = "legacy"

    def __init__(self, settings: LegacyTailSettings | None = None) -> None:
        self.settings = settings or LegacyTailSettings()

    def plan(self, request: TailRequest) -> TailPlan:
        settings = request.settings
        own = self.settings
        messages = [row.message for row in request.messages]
        n = len(messages)
        if n == 0:
            return TailPlan(tail_start=0)
        starts = group_starts(messages)
        budget = int(settings.threshold_tokens * own.target_ratio)
        start = suffix_within(request.token_counts, starts, budget)
        minimum = snap_back(starts, max(0, n - own.tail_min_messages))
        start = min(start, minimum)
        kept = sum(request.token_counts[start:])
        return TailPlan(
            tail_start=start,
            notes=[f"legacy tail: {n - start} message(s), {kept} tokens (budget {budget})"],
        )
