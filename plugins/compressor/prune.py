"""Phase 1, prune: cheap, mechanical shrinking of old tool traffic before any summary.

Applied to every non-system message before the protected tail:

* identical tool results (same text, longer than a placeholder) collapse to
  the most recent copy - which may sit in the tail; older copies become
  ``[tool result compacted: identical to message id N]``;
* tool results longer than ``prune_min_chars`` become one line naming the
  tool, its arguments in short and the recovery pointer (in the head, which
  stays in the view and is never summarized, also what the result said: its
  outcome line, :func:`.facts.tool_outcome`);
* tool-call arguments longer than ``max_tool_args_chars`` keep their JSON
  keys, with long string values cut and a pointer appended.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from hermes_hookspecs import CompressionSettings, Message, ToolCall, ToolFunction

from .facts import tool_outcome
from .items import Item, recovery_pointer

SHORT_ARGS_CHARS = 100
_DEDUP_MIN_CHARS = 160


_SCALARS = {True: "true", False: "false", None: "null"}


def _collapsed(text: str, limit: int) -> str:
    """``" ".join(text.split())[:limit]`` without splitting all of a long ``text``."""
    head = " ".join(text[: 4 * limit].split())
    if len(head) > limit or len(text) <= 4 * limit:
        return head[:limit]
    return " ".join(text.split())[:limit]


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return _SCALARS[value]
    if isinstance(value, int | float):
        return json.dumps(value) if isinstance(value, float) else str(value)
    return json.dumps(value, ensure_ascii=False)


def short_args(arguments: str, limit: int = SHORT_ARGS_CHARS) -> str:
    """Tool-call arguments as ``key=value, ...`` cut to about ``limit`` characters."""
    try:
        data = json.loads(arguments)
    except ValueError:
        data = arguments
    if isinstance(data, dict):
        parts = []
        size = -2
        for key, value in data.items():
            parts.append(f"{key}={_collapsed(_shown(value), 60)}")
            size += len(parts[-1]) + 2
            if size > limit:
                break  # the rest would be cut anyway
        text = ", ".join(parts)
    else:
        text = _collapsed(str(data), limit + 1)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_calls_by_id(items: Sequence[Item]) -> dict[int, ToolFunction]:
    """For each tool message (by index), the function of the call it answers."""
    current: dict[str, ToolFunction] = {}
    found: dict[int, ToolFunction] = {}
    for index, item in enumerate(items):
        message = item.message
        if message.role == "assistant" and message.tool_calls:
            current = {call.id: call.function for call in message.tool_calls}
        elif message.role == "tool":
            function = current.get(message.tool_call_id or "")
            if function is not None:
                found[index] = function
        else:
            current = {}
    return found


def placeholder(
    function: ToolFunction | None, chars: int, message_id: int | None, outcome: str = ""
) -> str:
    """The one-line stand-in for a pruned tool result (with what it said, when given)."""
    call = f"{function.name}({short_args(function.arguments)})" if function else "a tool call"
    pointer = recovery_pointer(message_id)
    where = f"; open it with {pointer}" if pointer else ""
    said = f": {outcome}" if outcome else ""
    return f"[tool result compacted: {call} returned {chars:,} chars{said}{where}]"


#: harness constructs that carry standing context, never cut whatever the harness: the
#: project's instructions, developer notices, what a hook added to a prompt, a harness's
#: meta text (Claude Code's expanded slash-command prompts and skills) and its own summary
#: of an earlier conversation
STANDING_HARNESS = frozenset(
    {
        "user_instructions",
        "developer_notice",
        "hook_context",
        "meta",
        "compaction_summary",
        "context_compaction",
    }
)


def cuttable_harness(harness: str) -> bool:
    """Whether text a harness injected (``<harness>.<kind>``) may be cut when long: every
    construct but those of :data:`STANDING_HARNESS`."""
    return harness.rpartition(".")[2] not in STANDING_HARNESS


#: a compacted harness text keeps this many characters of its start (what it was)
HARNESS_HEAD_CHARS = 160


def harness_placeholder(harness: str, text: str, message_id: int | None) -> str:
    """The stand-in for a long text a harness injected: its start, then what was cut."""
    pointer = recovery_pointer(message_id)
    where = f"; open it with {pointer}" if pointer else ""
    head = " ".join(text[:HARNESS_HEAD_CHARS].split())
    return f"{head}…\n[{harness} text compacted: {len(text):,} chars{where}]"


def _cut_value(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"…[{len(value) - limit:,} chars cut]"
    if isinstance(value, dict):
        return {k: _cut_value(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_value(v, limit) for v in value]
    return value


def cut_arguments(arguments: str, max_chars: int, message_id: int | None) -> str:
    """Shrink JSON ``arguments`` under about ``max_chars``, keeping its keys."""
    try:
        data = json.loads(arguments)
    except ValueError:
        data = arguments
    limit = max(40, max_chars // 2)
    for _ in range(6):
        cut = _cut_value(data, limit)
        if not isinstance(cut, dict):
            cut = {"value": cut}
        pointer = recovery_pointer(message_id)
        cut["_compacted"] = f"arguments cut; full call: {pointer}" if pointer else "arguments cut"
        text = json.dumps(cut, ensure_ascii=False)
        if len(text) <= max_chars or limit <= 40:
            return text
        limit = max(40, limit // 2)
    return text


def cut_calls(message: Message, max_chars: int, message_id: int | None) -> Message:
    """``message`` with each tool call's arguments longer than ``max_chars`` cut
    (:func:`cut_arguments`), naming ``message_id`` for the full call. A call whose cut
    would not be shorter (many short strings and lists, which :func:`cut_arguments`
    cannot shorten, each string over its limit gaining a marker) keeps its arguments."""
    calls: list[ToolCall] = []
    for call in message.tool_calls or ():
        arguments = call.function.arguments
        if len(arguments) > max_chars:
            cut = cut_arguments(arguments, max_chars, message_id)
            if len(cut) < len(arguments):
                call = ToolCall(
                    id=call.id, function=ToolFunction(name=call.function.name, arguments=cut)
                )
        calls.append(call)
    return message.model_copy(update={"tool_calls": calls})


def estimate_tokens(message: Message) -> int:
    """An upper estimate of a pruned message's tokens (about three characters a token)."""
    chars = len(message.text()) + sum(
        len(call.function.name) + len(call.function.arguments) for call in message.tool_calls or ()
    )
    return chars // 3 + 8


def prune(
    items: list[Item],
    end: int,
    settings: CompressionSettings,
    recount: Callable[[Message], int],
    *,
    exact_before: int | None = None,
) -> int:
    """Prune ``items[:end]`` in place (system messages untouched); returns how many changed.

    ``items[end:]`` is the protected tail: read (for duplicate detection) but
    never changed. A changed item before ``exact_before`` (default: all) is
    recounted exactly with ``recount``; later ones, which only feed the
    summarizer's bounded input and never reach the new active view, get
    :func:`estimate_tokens` instead (exact counting is the costliest step of
    pruning a long middle).
    """
    exact_until = end if exact_before is None else exact_before
    functions = tool_calls_by_id(items)
    latest: dict[str, int] = {}
    for index, item in enumerate(items):
        message = item.message
        content = message.content
        if message.role == "tool" and isinstance(content, str) and len(content) >= _DEDUP_MIN_CHARS:
            latest[content] = index
    changed = 0
    for index in range(min(end, len(items))):
        item = items[index]
        message = item.message
        new: Message | None = None
        if message.role == "tool" and message.kind == "message":
            text = message.content if isinstance(message.content, str) else message.text()
            last = latest.get(text) if isinstance(message.content, str) else None
            if last is not None and last != index:
                pointer = recovery_pointer(items[last].recovery_id)
                content = f"[tool result compacted: identical to a later result; {pointer}]"
                if not pointer:
                    content = "[tool result compacted: identical to a later result]"
                new = message.model_copy(update={"content": content})
            elif len(text) > settings.prune_min_chars:
                # a placeholder that stays in the view (the head) says what the result was:
                # the head is never summarized, so nothing else keeps it
                outcome = ""
                if index < exact_until:
                    notes = item.stored.annotations if item.stored is not None else None
                    outcome = tool_outcome(message, notes)
                content = placeholder(functions.get(index), len(text), item.recovery_id, outcome)
                new = message.model_copy(update={"content": content})
        elif (
            message.harness is not None
            and message.kind == "message"
            and cuttable_harness(message.harness)
        ):
            # text a harness injected (a local command's output, a reminder) is not the
            # user's words: kept whole in the head it would sit in every request to come
            text = message.text()
            if len(text) > settings.prune_min_chars:
                content = harness_placeholder(message.harness, text, item.recovery_id)
                new = message.model_copy(update={"content": content})
        elif message.role == "assistant" and message.tool_calls:
            limit = settings.max_tool_args_chars
            if any(len(call.function.arguments) > limit for call in message.tool_calls):
                new = cut_calls(message, limit, item.recovery_id)
        if new is not None:
            item.message = new
            item.tokens = recount(new) if index < exact_until else estimate_tokens(new)
            item.changed = True
            changed += 1
    return changed


#: after reassembly the view must sit under this share of the trigger, or the tail is fitted
FIT_RATIO = 0.55


def fit_limit(threshold_tokens: int, system_tokens: int) -> int:
    """The most tokens the messages of a compressed view may take before :func:`fit_tail`
    cuts the tail: :data:`FIT_RATIO` of the threshold less the system prompt and tool
    schemas (which stay beside the messages), never under an eighth of the threshold."""
    return max(int(threshold_tokens * FIT_RATIO) - system_tokens, threshold_tokens // 8)


#: a fitted piece keeps this many characters per token of its share (tool traffic is dense)
FIT_CHARS_PER_TOKEN = 3


def excerpt(text: str, keep_chars: int, message_id: int | None) -> str:
    """The head and the end of ``text`` (errors usually close a tool output) around a cut note."""
    half = max(80, keep_chars // 2)
    if len(text) <= 2 * half + 200:
        return text
    pointer = recovery_pointer(message_id)
    where = f"; the full output: {pointer}" if pointer else ""
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut:,} chars cut to fit the context{where} ...]\n{text[-half:]}"


def fit_share(limit: int) -> int:
    """The tokens :func:`fit_tail` cuts a tool output to when the view is over ``limit``."""
    return max(256, limit // 8)


def _fits(item: Item, per_message: int) -> bool:
    """Whether :func:`fit_tail` may cut ``item``: a tool output, or a call whose arguments
    (a patch, a file written whole) are longer than a tool output's share. A call that
    carries an opaque provider item is left alone: what the provider is sent is that item,
    which a cut of the arguments would not shorten."""
    message = item.message
    if message.kind != "message" or item.tokens <= per_message:
        return False
    if message.role == "tool":
        return True
    return message.role == "assistant" and bool(message.tool_calls) and not message.provider_item


def _cut(item: Item, keep: int) -> Message:
    """``item``'s message as :func:`fit_tail` cuts it (``keep`` characters a piece)."""
    message = item.message
    if message.role == "tool":
        return message.model_copy(
            update={"content": excerpt(message.text(), keep, item.recovery_id)}
        )
    return cut_calls(message, keep, item.recovery_id)


def fitted_tokens(items: Sequence[Item], limit: int, recount: Callable[[Message], int]) -> int:
    """About the least :func:`fit_tail` can bring ``items`` to: every long tool output cut
    to its share, every long call counted as cut.

    What the tail really claims of the view: when the view would be over ``limit``,
    its largest tool outputs and calls are cut to excerpts first. A call is counted
    cut exactly, with ``recount`` (a call of many short strings or lists shortens
    little, or not at all).
    """
    per_message = fit_share(limit)
    total = 0
    for item in items:
        if not _fits(item, per_message):
            total += item.tokens
        elif item.message.role == "tool":
            total += min(item.tokens, per_message)
        else:
            total += min(item.tokens, recount(_cut(item, per_message * FIT_CHARS_PER_TOKEN)))
    return total


def fit_tail(
    items: list[Item],
    start: int,
    limit: int,
    recount: Callable[[Message], int],
) -> int:
    """Cut the largest tool outputs and call arguments of ``items[start:]`` to excerpts
    until the view fits.

    Used only when the verbatim tail alone overflows ``limit`` (one huge tool
    output in the latest round, or a patch or a file the agent wrote whole):
    without it a compression could not get the session under its trigger, and
    the breaker would stop compressing while the session kept growing, or it
    would buy little room. A tool output keeps its head and its end; a call keeps
    its JSON keys, its long string values cut (:func:`cut_arguments`); a cut that
    would not make the message smaller is not made. Both name the stored message
    that holds them whole, when it has one (a turn's draft row has none yet).
    Returns how many messages were cut.
    """
    total = sum(item.tokens for item in items)
    if total <= limit:
        return 0
    per_message = fit_share(limit)
    candidates = sorted(
        (i for i in range(start, len(items)) if _fits(items[i], per_message)),
        key=lambda i: items[i].tokens,
        reverse=True,
    )
    keep = per_message * FIT_CHARS_PER_TOKEN
    changed = 0
    for index in candidates:
        if total <= limit:
            break
        item = items[index]
        new = _cut(item, keep)
        tokens = recount(new)
        if tokens >= item.tokens:
            continue
        total -= item.tokens - tokens
        item.message, item.tokens, item.changed = new, tokens, True
        changed += 1
    return changed
