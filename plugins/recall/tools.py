"""``session_search`` and ``session_open``: the agent's way back into its own history.

Both answer every call with text: a bad call (unknown or mistyped arguments,
an empty or oversized query, a message id that does not exist or belongs to
another session) is answered with what was wrong and how to call it right,
never with an exception. Results stay within ``budget_tokens`` (counted with
the session's token counter) and say how to get more.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hermes_core.search import SearchResult, search_with_context
from hermes_core.searchkit import Passages
from hermes_core.terminal import plain_text
from hermes_hookspecs import AgentTool, Message, NotFoundError, StoredMessage, ToolContext

from .settings import RecallSettings

SEARCH_NAME = "session_search"
OPEN_NAME = "session_open"
_WORD = re.compile(r"[\w./-]{3,}")


def _fail(name: str, problem: str, usage: str) -> str:
    return f"Error: {problem}. Call it as {usage}."


def _check_arguments(
    name: str, arguments: dict[str, Any], allowed: Mapping[str, type], usage: str
) -> str | None:
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        return _fail(name, f"{name} takes no argument {', '.join(map(repr, unknown))}", usage)
    for key, kind in allowed.items():
        value = arguments.get(key)
        if value is None:
            continue
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            return _fail(name, f"{key} must be a whole number, got {value!r:.40}", usage)
        if kind is str and not isinstance(value, str):
            return _fail(name, f"{key} must be a string, got {value!r:.40}", usage)
    return None


def display_text(message: Message) -> str:
    """What a result shows of ``message``: its content (terminal control sequences
    removed, :func:`plain_text`), then each tool call once as ``name: key=value;
    ...`` with the decoded argument values (the raw JSON would repeat them,
    escaped)."""
    parts = [plain_text(message.text())]
    for call in message.tool_calls or []:
        function = call.function
        try:
            decoded = json.loads(function.arguments or "{}")
        except ValueError:
            decoded = function.arguments
        if isinstance(decoded, dict):
            shown = "; ".join(
                f"{key}={value if isinstance(value, str) else json.dumps(value)}"
                for key, value in decoded.items()
            )
        else:
            shown = str(decoded)
        parts.append(f"{function.name}: {shown}")
    return "\n".join(part for part in parts if part)


class _Rows:
    """What a result shows of each row, made once per call: its display text and its
    passages (:class:`hermes_core.searchkit.Passages`). Fitting a result to its budget
    renders it several times at other sizes; the texts and their coverage stay."""

    def __init__(self, terms: Sequence[str] = ()) -> None:
        self.terms = tuple(terms)
        self._texts: dict[int, Passages] = {}

    def passages(self, row: StoredMessage) -> Passages:
        found = self._texts.get(row.id)
        if found is None:
            found = self._texts[row.id] = Passages(display_text(row.message), self.terms)
        return found

    def text(self, row: StoredMessage) -> str:
        return self.passages(row).text

    def excerpt(self, row: StoredMessage, limit: int, offset: int = 0) -> str:
        """At most about ``limit`` chars of the row: the passages covering the most query
        terms, or from ``offset``."""
        if not offset:
            return self.passages(row).excerpt(limit)
        text = self.text(row)
        text_from = text[offset:]
        if len(text_from) <= limit:
            return f"…[from char {offset:,}] {text_from}"
        return f"…[chars {offset:,}-{offset + limit:,} of {len(text):,}] {text_from[:limit]}…"


#: renders :meth:`_Budgeted._fit` tries to grow or refine a cap that fits (shrinking
#: a result over budget goes on until one fits)
FIT_ROUNDS = 8
#: the smallest per-message cap in characters
MIN_CAP = 120
#: a place's best hit is shown with this many times a neighbour's cap (another hit, twice):
#: hits of the same turn widen a place, and the row that ranked best keeps its room
BEST_HIT_ROOM = 3
_CUT_MARKS = ("more chars]", "chars skipped]")


def _cut(text: str) -> bool:
    """Whether a rendered result cut a message short (a larger cap would show more)."""
    return any(mark in text for mark in _CUT_MARKS)


def _label(row: StoredMessage) -> str:
    state = "compacted" if row.compacted else ("active" if row.active else "inactive")
    origin = f", copy of #{row.origin_id}" if row.origin_id is not None else ""
    return f"#{row.id} {row.message.role} ({state}{origin})"


def _harness_label(row: StoredMessage, rows: _Rows) -> str:
    size = len(rows.text(row))
    return f"{_label(row)}: [text the harness injected ({row.message.harness}), {size:,} chars]"


def _render(row: StoredMessage, limit: int, rows: _Rows, offset: int = 0) -> str:
    body = rows.excerpt(row, limit, offset)
    if row.message.kind == "summary":
        body = f"[an earlier compaction summary] {body}"
    return f"{_label(row)}: {body}"


class _Budgeted(AgentTool):
    def __init__(self, settings: RecallSettings) -> None:
        self.settings = settings

    def _fit(self, render: Callable[[int], str], context: ToolContext, start_chars: int) -> str:
        """Render with the largest per-message char cap whose result fits the budget.

        The budget is the tool's own (``budget_tokens``) within the host's
        ceiling (``context.budget_tokens``). From ``start_chars`` the cap
        shrinks in proportion to an overshoot, or grows while the result
        leaves a tenth of the budget unused and still cuts a message, closing
        in on the largest cap that fits in a few renders.
        """
        budget = min(context.budget_tokens, self.settings.budget_tokens)
        fits: tuple[int, str] | None = None  # the largest cap known to fit, and its text
        over: int | None = None  # the smallest cap known not to fit
        limit = start_chars
        text = render(limit)
        rounds = 0
        while True:
            used = context.tokens.count(text, context.model)
            if used <= budget:
                fits = (limit, text)
                if used >= budget * 0.9 or not _cut(text) or rounds >= FIT_ROUNDS:
                    break
                wanted = int(limit * min(4.0, budget / max(1, used) * 0.95))
                if over is not None:
                    wanted = min(wanted, (limit + over) // 2)
            else:
                over = limit
                if limit <= MIN_CAP or (fits is not None and rounds >= FIT_ROUNDS):
                    break
                # shrink in proportion to the overshoot (fixed text does not shrink: a margin);
                # until one render fits, every round shrinks, whatever the round count
                wanted = max(MIN_CAP, min(limit - 1, int(limit * budget / used * 0.9)))
                if fits is not None:
                    wanted = max(wanted, (fits[0] + limit) // 2)
            if wanted == limit or (fits is not None and over is not None and over - fits[0] <= 40):
                break
            rounds += 1
            limit = wanted
            text = render(limit)
        return fits[1] if fits is not None else text


class SessionSearchTool(_Budgeted):
    """Search this session's history, compacted turns included."""

    name = SEARCH_NAME
    USAGE = 'session_search(query="words, a path, an error line or an id", limit=5)'

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": (
                    "Search this session's whole history, including turns compacted out of "
                    "your context (their summary names them by message id). Matches words, "
                    "file paths, commit SHAs, error text and other identifiers; rows holding "
                    "every word rank first. Each place found is shown with its neighbouring "
                    "messages; open more with session_open."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {
                            "type": "string",
                            "description": "Plain text: words, a path, an error, an id.",
                        },
                        "limit": {
                            "type": "integer",
                            "description": (
                                f"Places to show (default {self.settings.default_limit}, "
                                f"at most {self.settings.max_limit})."
                            ),
                        },
                    },
                    "required": ["query"],
                    "additionalProperties": False,
                },
            },
        }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        problem = _check_arguments(self.name, arguments, {"query": str, "limit": int}, self.USAGE)
        if problem:
            return problem
        query = str(arguments.get("query") or "").strip()
        if not query:
            return _fail(self.name, "the query is empty", self.USAGE)
        if len(query) > self.settings.max_query_chars:
            return _fail(
                self.name,
                f"the query has {len(query):,} characters; at most "
                f"{self.settings.max_query_chars:,} are searched (use the distinctive words)",
                self.USAGE,
            )
        limit = arguments.get("limit")
        if limit is None:
            limit = self.settings.default_limit
        if not 1 <= limit <= self.settings.max_limit:
            return _fail(
                self.name, f"limit must be 1 to {self.settings.max_limit}, got {limit}", self.USAGE
            )
        results = search_with_context(
            context.store, query, session_ids=list(context.session_ids), limit=limit
        )
        if not results:
            return (
                f"No message of this session's history matches {query!r}. Try fewer or other "
                "words, or one distinctive identifier (a file name, an error fragment)."
            )
        rows = _Rows(_WORD.findall(query) or [query])
        per_message = max(400, self.settings.budget_tokens * 4 // max(1, 3 * len(results)))

        def render(limit_chars: int) -> str:
            return self._render(query, results, rows, limit_chars)

        return self._fit(render, context, per_message)

    @staticmethod
    def _render(query: str, results: Sequence[SearchResult], rows: _Rows, limit: int) -> str:
        lines = [f"{len(results)} place(s) in this session's history match {query!r}, best first:"]
        shown: dict[int, int] = {}  # a message (or the one it copies) shown already -> as id
        for number, result in enumerate(results, 1):
            also = ""
            if result.duplicates:
                also = (
                    " (the same text also at "
                    + ", ".join(f"#{i}" for i in result.duplicates[:5])
                    + ")"
                )
            lines.append(f"\n[{number}] around message #{result.message.id}{also}")
            for row in result.window:
                is_hit = any(hit.message_id == row.id for hit in result.hits)
                mark = "» " if is_hit else "  "
                family = row.origin_id if row.origin_id is not None else row.id
                if family in shown:  # a compaction's copy and its original: shown once
                    lines.append(f"{mark}{_label(row)}: [shown above as #{shown[family]}]")
                    continue
                shown[family] = row.id
                if row.message.harness is not None and not is_hit:
                    # text a harness injected (a reminder, an environment block) beside a
                    # hit is context, not evidence: named, not shown
                    lines.append(f"{mark}{_harness_label(row, rows)}")
                    continue
                # the place's best hit gets the most room, another hit twice a neighbour's
                if row.id == result.message.id:
                    room = limit * BEST_HIT_ROOM
                else:
                    room = limit * 2 if is_hit else limit
                lines.append(mark + _render(row, room, rows))
            for reply in result.replies:  # what the user said next, once the work was done
                family = reply.origin_id if reply.origin_id is not None else reply.id
                if family in shown:
                    lines.append(f"  then {_label(reply)}: [shown above as #{shown[family]}]")
                else:
                    shown[family] = reply.id
                    lines.append("  then " + _render(reply, limit, rows))
        first = results[0].message.id
        lines.append(
            f"\nRead a place in full with session_open(message_id={first}, before=3, after=3); "
            "a long message continues with session_open(message_id=N, offset=CHARS)."
        )
        return "\n".join(lines)


class SessionOpenTool(_Budgeted):
    """Open one stored message of this session's history, with its neighbours."""

    name = OPEN_NAME
    USAGE = "session_open(message_id=123, before=2, after=2, offset=0)"

    def schema(self) -> dict[str, Any]:
        span = self.settings.max_open_span
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": (
                    "Open a message of this session's history by its message id (as named by "
                    "session_search results, compaction placeholders and the summary's "
                    "recovery pointers), with the messages before and after it."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "message_id": {"type": "integer", "description": "The message id."},
                        "before": {
                            "type": "integer",
                            "description": f"Messages to show before it (default 2, max {span}).",
                        },
                        "after": {
                            "type": "integer",
                            "description": f"Messages to show after it (default 2, max {span}).",
                        },
                        "offset": {
                            "type": "integer",
                            "description": "Start the message itself at this character.",
                        },
                    },
                    "required": ["message_id"],
                    "additionalProperties": False,
                },
            },
        }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        allowed = {"message_id": int, "before": int, "after": int, "offset": int}
        problem = _check_arguments(self.name, arguments, allowed, self.USAGE)
        if problem:
            return problem
        message_id = arguments.get("message_id")
        if message_id is None:
            return _fail(self.name, "message_id is required", self.USAGE)
        span = self.settings.max_open_span
        before = arguments.get("before", 2)
        after = arguments.get("after", 2)
        offset = arguments.get("offset") or 0
        for key, value in (("before", before), ("after", after)):
            if not 0 <= value <= span:
                return _fail(self.name, f"{key} must be 0 to {span}, got {value}", self.USAGE)
        if offset < 0:
            return _fail(self.name, f"offset must be 0 or more, got {offset}", self.USAGE)
        missing = (
            f"Error: message id {message_id} is not in this session's history. Use an id "
            "from session_search results or from the summary's recovery pointers."
        )
        try:
            rows = context.store.get_messages([message_id])
        except NotFoundError:
            return missing
        if not rows or rows[0].session_id not in context.session_ids:
            return missing
        around = context.store.message_context(message_id, before=before, after=after)
        around = [row for row in around if row.session_id in context.session_ids]
        target = next(row for row in around if row.id == message_id)
        cut = _Rows()
        text_len = len(cut.text(target))
        if offset >= max(1, text_len):
            return _fail(
                self.name,
                f"offset {offset:,} is past the end of message #{message_id} "
                f"({text_len:,} characters)",
                self.USAGE,
            )

        def render(limit: int) -> str:
            lines = []
            for row in around:
                if row.id == message_id:
                    lines.append("» " + _render(row, limit * 4, cut, offset=offset))
                else:
                    lines.append("  " + _render(row, limit, cut))
            first, last = around[0].id, around[-1].id
            lines.append(
                f"\n(messages #{first}-#{last}; more with before/after, a long message "
                f"continues with session_open(message_id={message_id}, offset=CHARS))"
            )
            return "\n".join(lines)

        return self._fit(render, context, max(400, self.settings.budget_tokens // 2))
