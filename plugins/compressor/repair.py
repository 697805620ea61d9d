"""Sequence repair: make a message list valid for chat completions again.

The rule (also stated in the engine's module docstring):

1. A ``tool`` message is kept only inside the group of the assistant message
   whose tool call it answers: it must follow that assistant message with
   nothing but tool messages in between, and answer one of its calls not
   answered before. Every other tool message is an orphan and is removed.
2. An assistant tool call without a result gets a stub tool result, placed
   right after the group's existing results, saying the result was compacted
   (with ``message id N`` when the caller knows where the original is) -
   except for an assistant message that ends the sequence (only its own tool
   results after it): its calls are still in flight and are left alone.

Repair is idempotent: stubs are valid results and removing orphans never
creates new ones, so a second pass changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hermes_hookspecs import Message, ToolCall


@dataclass(frozen=True)
class RepairPlan:
    """What :func:`plan_repair` found: indexes to drop and stubs to insert."""

    drop: frozenset[int] = frozenset()
    #: index of the message after which stubs go -> the calls needing one
    stubs_after: Mapping[int, tuple[ToolCall, ...]] = field(default_factory=dict)

    @property
    def changes(self) -> bool:
        return bool(self.drop or self.stubs_after)


def plan_repair(messages: Sequence[Message]) -> RepairPlan:
    """Find orphan tool results and unanswered tool calls (see the module docstring)."""
    drop: set[int] = set()
    stubs: dict[int, tuple[ToolCall, ...]] = {}
    n = len(messages)
    i = 0
    while i < n:
        message = messages[i]
        if message.role == "tool":
            drop.add(i)
            i += 1
            continue
        if message.role != "assistant" or not message.tool_calls:
            i += 1
            continue
        wanted = {call.id for call in message.tool_calls}
        answered: set[str] = set()
        j = i + 1
        while j < n and messages[j].role == "tool":
            call_id = messages[j].tool_call_id or ""
            if call_id in wanted and call_id not in answered:
                answered.add(call_id)
            else:
                drop.add(j)
            j += 1
        if j < n:
            missing: dict[str, ToolCall] = {}
            for call in message.tool_calls:
                if call.id not in answered and call.id not in missing:
                    missing[call.id] = call
            if missing:
                stubs[j - 1] = tuple(missing.values())
        i = j
    return RepairPlan(drop=frozenset(drop), stubs_after=stubs)


def stub_text(call: ToolCall, recovery_id: int | None) -> str:
    """Content of a stub result for ``call``."""
    if recovery_id is not None:
        return (
            f"[tool result of {call.function.name} compacted out of the active context; "
            f"open it with session_open(message_id={recovery_id})]"
        )
    return (
        f"[tool result of {call.function.name} not in the active context "
        "(compacted or never recorded)]"
    )


def stub_message(call: ToolCall, recovery_id: int | None) -> Message:
    """The stub tool message answering ``call``."""
    return Message(role="tool", tool_call_id=call.id, content=stub_text(call, recovery_id))


def repair_messages(
    messages: Sequence[Message], recovery_ids: Mapping[str, int] | None = None
) -> list[Message]:
    """Apply :func:`plan_repair` to a plain message list.

    :param recovery_ids: tool-call id -> message id of the original result,
        used in stub texts.
    """
    plan = plan_repair(messages)
    if not plan.changes:
        return list(messages)
    ids = recovery_ids or {}
    out: list[Message] = []
    for index, message in enumerate(messages):
        if index not in plan.drop:
            out.append(message)
        for call in plan.stubs_after.get(index, ()):
            out.append(stub_message(call, ids.get(call.id)))
    return out
