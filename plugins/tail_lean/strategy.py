"""The ``lean`` tail (the default): a small verbatim tail and a mechanical memory of the rest.

* **Tail band.** The verbatim tail is the longest run of whole message groups
  from the end that fits ``hi`` tokens, grown by one group when still under
  ``lo``, where ``hi = min(lean_tail_max_tokens, threshold_tokens * 0.35)``
  and ``lo = min(lean_tail_min_tokens, hi / 2)``: 10K-25K tokens on ordinary
  windows, scaled down on small ones so the tail never dominates the budget.
  ``threshold_tokens`` here is the room for messages (the engine subtracts the
  system prompt), so every share below shrinks with a large system prompt.
* **Chunked digest.** The engine summarises the middle in chunks of
  ``summary_input_tokens / 3`` tokens, each chunk updating the running handoff.
* **Identifier Index.** File paths, commit SHAs, PR/issue numbers, URLs,
  branch names, error lines and exception names from every evicted message,
  extracted mechanically (:mod:`hermes_plugin_compressor.identifiers`) once per
  message when it is recorded (:mod:`.annotations`), newest
  first, sharing tokens evenly across kinds within ``identifier_budget_tokens``
  (see :func:`index_budget`); identifiers still in the tail are left
  out; the previous index is carried forward at lower priority. Scanning goes
  from the newest evicted message back and stops, per kind, once the
  candidates found would cost twice the budget (older ones could never be
  shown), so the cost follows the budget rather than the session's length.
* **User Quotes.** The user's own words from evicted messages, verbatim,
  within ``user_quote_budget_tokens`` (at most 1/32 of the threshold; the
  first quote - the task - first, then the newest). The last real user
  message is not quoted: the engine keeps it verbatim in the active view.
* **Recovery Pointers.** ``message id`` ranges of everything evicted (per
  compression, history carried) and the largest evicted items, for session
  search.
"""

from __future__ import annotations

from collections.abc import Sequence

from hermes_hookspecs import (
    CompressionSettings,
    StoredMessage,
    SummarySection,
    TailPlan,
    TailRequest,
    TailStrategy,
)
from hermes_plugin_compressor.groups import group_starts, suffix_within
from hermes_plugin_compressor.identifiers import (
    KIND_ORDER,
    IdentifierIndex,
    IdentifierKind,
    estimate_tokens,
    parse_index,
    render_index,
)
from hermes_plugin_compressor.prune import short_args

from .annotations import message_identifiers
from .sections import (
    INDEX_TITLE,
    POINTERS_TITLE,
    QUOTES_TITLE,
    parse_pointer_lines,
    parse_quotes,
    render_pointers,
    select_quotes,
)
from .settings import LeanTailSettings

#: the tail's upper bound never exceeds this share of the threshold
TAIL_SHARE = 0.28
LARGEST_EVICTED = 5


def recovery_id(row: StoredMessage) -> int:
    return row.origin_id if row.origin_id is not None else row.id


#: the Identifier Index never takes more than this share of the threshold ...
INDEX_SHARE = 1 / 120
#: ... unless that is below this many tokens
INDEX_FLOOR = 1_000


def index_budget(settings: CompressionSettings, identifier_budget_tokens: int) -> int:
    """Tokens for the Identifier Index: the configured budget, within a share of the threshold.

    ``min(identifier_budget_tokens, threshold / 4, max(INDEX_FLOOR, threshold * INDEX_SHARE))``.
    A larger index leaves each compression so little room under the trigger that the
    next turns trigger it again and the breaker stops it. The share is a 120th: the
    handoff's facts hold the identifiers that matter most with their context (the
    command, the error). Measured on the recall probes, an index of a sixtieth took a
    fifth of the handoff's text and was the only holder of at most one answer per
    session, where the facts beside it held eight to thirteen; the floor keeps the index
    useful on small windows.
    """
    threshold = settings.threshold_tokens
    share = max(INDEX_FLOOR, int(threshold * INDEX_SHARE))
    return min(identifier_budget_tokens, threshold // 4, share)


class LeanTail(TailStrategy):
    """10K-25K token tail, chunked digest, identifier index, quotes, recovery pointers."""

    name = "lean"

    def __init__(self, settings: LeanTailSettings | None = None) -> None:
        self.settings = settings or LeanTailSettings()

    def plan(self, request: TailRequest) -> TailPlan:
        settings = request.settings
        own = self.settings
        rows = request.messages
        n = len(rows)
        if n == 0:
            return TailPlan(tail_start=0)
        messages = [row.message for row in rows]
        starts = group_starts(messages)
        hi = max(1, min(own.lean_tail_max_tokens, int(settings.threshold_tokens * TAIL_SHARE)))
        lo = min(own.lean_tail_min_tokens, hi // 2)
        start = suffix_within(request.token_counts, starts, hi, min_tokens=lo)
        last_summary = max((i for i, m in enumerate(messages) if m.kind == "summary"), default=-1)
        if start <= last_summary:
            later = [s for s in starts if s > last_summary]
            start = later[0] if later else n
        evicted, tail = rows[:start], rows[start:]
        # the engine carries the last real user message verbatim: not "evicted"
        carried = max((i for i, m in enumerate(messages) if m.written_by_user), default=-1)
        skip = carried if 0 <= carried < start else -1
        threshold = settings.threshold_tokens
        sections = [
            self._quotes(evicted, skip, min(own.user_quote_budget_tokens, threshold // 32)),
            self._index(evicted, tail, index_budget(settings, own.identifier_budget_tokens)),
            self._pointers(
                evicted, skip, request.token_counts[:start], max(80, min(600, threshold // 160))
            ),
        ]
        kept = sum(request.token_counts[start:])
        return TailPlan(
            tail_start=start,
            extra_sections=[section for section in sections if section.body],
            digest_chunks=max(2_000, settings.summary_input_tokens // 3),
            notes=[f"lean tail: {n - start} message(s), {kept} tokens (band {lo}-{hi})"],
        )

    # -- sections ----------------------------------------------------------------
    @staticmethod
    def _previous(evicted: Sequence[StoredMessage], title: str) -> str:
        for row in reversed(evicted):
            summary = row.message.summary
            if row.message.kind == "summary" and summary is not None:
                for section in summary.extra:
                    if section.title == title:
                        return section.body
                return ""
        return ""

    def _quotes(self, evicted: Sequence[StoredMessage], skip: int, budget: int) -> SummarySection:
        previous = parse_quotes(self._previous(evicted, QUOTES_TITLE))
        fresh = [
            (rid if (rid := recovery_id(row)) > 0 else None, row.message.text())
            for position, row in enumerate(evicted)
            if row.message.written_by_user and position != skip
        ]
        return SummarySection(title=QUOTES_TITLE, body=select_quotes(previous, fresh, budget))

    def _index(
        self, evicted: Sequence[StoredMessage], tail: Sequence[StoredMessage], budget: int
    ) -> SummarySection:
        in_tail: set[str] = set()
        for row in tail:
            in_tail.update(value for _kind, value in message_identifiers(row))
        index = IdentifierIndex()
        previous = parse_index(self._previous(evicted, INDEX_TITLE))
        for position, (kind, value) in enumerate(previous):
            index.add(kind, value, -1.0 - position)
        # newest first; a kind stops being scanned once its candidates would
        # cost twice the whole budget: older ones could never be shown
        cap = 2 * budget
        spent: dict[IdentifierKind, int] = dict.fromkeys(KIND_ORDER, 0)
        open_kinds = list(KIND_ORDER)
        for position in range(len(evicted) - 1, -1, -1):
            row = evicted[position]
            if row.message.kind != "message":
                continue
            found = message_identifiers(row, open_kinds)
            step = 1.0 / (len(found) + 1)
            for order, (kind, value) in enumerate(found):
                if value in in_tail:
                    continue
                # later in the message is newer; extraction groups by kind, so
                # order within a kind is the text's order
                if index.add(kind, value, position + order * step):
                    spent[kind] += estimate_tokens(value)
            open_kinds = [kind for kind in open_kinds if spent[kind] < cap]
            if not open_kinds:
                break
        selected = index.select(budget, skip=in_tail.__contains__)
        return SummarySection(title=INDEX_TITLE, body=render_index(selected))

    def _pointers(
        self, evicted: Sequence[StoredMessage], skip: int, counts: Sequence[int], budget: int
    ) -> SummarySection:
        previous = parse_pointer_lines(self._previous(evicted, POINTERS_TITLE))
        ids: list[int] = []
        sized: list[tuple[int, int]] = []
        for position, row in enumerate(evicted):
            # a row of a turn not committed yet (a negative draft id) has no id to open
            if row.message.kind != "message" or position == skip or recovery_id(row) <= 0:
                continue
            ids.append(recovery_id(row))
            sized.append((counts[position], position))
        sized.sort(reverse=True)
        largest = [self._label(evicted, position) for _tokens, position in sized[:LARGEST_EVICTED]]
        body = render_pointers(ids, largest, previous, budget)
        return SummarySection(title=POINTERS_TITLE, body=body if ids or previous else "")

    @staticmethod
    def _label(evicted: Sequence[StoredMessage], position: int) -> str:
        row = evicted[position]
        message = row.message
        size = f"{len(message.text()):,} chars"
        if message.role == "tool":
            for back in range(position - 1, -1, -1):
                calls = evicted[back].message.tool_calls
                if evicted[back].message.role != "tool":
                    for call in calls or []:
                        if call.id == message.tool_call_id:
                            args = short_args(call.function.arguments, 60)
                            what = f"{call.function.name}: {args}"
                            return f"message id {recovery_id(row)} ({what}, {size})"
                    break
        return f"message id {recovery_id(row)} ({message.role}, {size})"
