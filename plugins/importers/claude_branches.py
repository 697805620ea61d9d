"""Following the branch of a Claude Code session that was continued after a rewind.

Claude Code links records into a tree with ``parentUuid``. A rewind (or an
edited prompt) starts a new branch from an earlier record; the old branch
stays in the file. The branch that was continued is the chain of ancestors
of the session's last message record. Records off that chain are kept when
they belong to it all the same (a parallel tool call's result and streamed
sibling blocks hang off the chain, as do progress and attachment records);
a side subtree holding a turn of its own (a user prompt, or an assistant
response other than the chain's) is an abandoned branch.

Conservative by design: only a subtree that forks off the continued chain is
ever abandoned; records whose ancestry is broken (a missing parent) are kept.

The tree, not the file, also decides the order: a record written before its
parent (a tool result flushed ahead of the streamed assistant block that
made the call, as some session writers do) is read right after that parent
(:func:`causal_order`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class _HasData(Protocol):
    line: int
    data: dict[str, Any]


@dataclass
class Branches:
    """The outcome: which records to keep and the abandoned branches, in file order."""

    kept: list[Any]
    #: each abandoned branch: its records in file order (the fork's subtree)
    abandoned: list[list[Any]] = field(default_factory=list)
    #: for each abandoned branch, the uuid of the record it forked from
    fork_points: list[str] = field(default_factory=list)


def _parent(data: dict[str, Any]) -> str | None:
    parent = data.get("parentUuid")
    if isinstance(parent, str) and parent:
        return parent
    logical = data.get("logicalParentUuid")  # a compact boundary bridges the compaction
    return logical if isinstance(logical, str) and logical else None


def _is_turn(data: dict[str, Any], chain_message_ids: set[str]) -> bool:
    """Whether a record starts or holds a turn of its own (not a side record of the chain)."""
    kind = data.get("type")
    message = data.get("message")
    if not isinstance(message, dict):
        return False
    if kind == "assistant":
        return message.get("id") not in chain_message_ids
    if kind != "user" or data.get("isMeta"):
        return False
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):
        return any(
            isinstance(block, dict) and block.get("type") != "tool_result" for block in content
        )
    return False


def follow_branches(records: Sequence[_HasData]) -> Branches:
    """Split ``records`` (one thread, file order) into the continued branch and abandoned ones."""
    by_uuid: dict[str, int] = {}
    for index, record in enumerate(records):
        uuid = record.data.get("uuid")
        if isinstance(uuid, str):
            by_uuid.setdefault(uuid, index)
    leaf = next(
        (
            i
            for i in range(len(records) - 1, -1, -1)
            if records[i].data.get("type") in ("user", "assistant")
            and isinstance(records[i].data.get("uuid"), str)
        ),
        None,
    )
    if leaf is None:
        return Branches(kept=list(records))
    chain: set[int] = set()
    current: int | None = leaf
    while current is not None and current not in chain:
        chain.add(current)
        parent = _parent(records[current].data)
        current = by_uuid.get(parent) if parent else None
    chain_ids = {
        str(records[i].data["message"].get("id"))
        for i in chain
        if records[i].data.get("type") == "assistant"
        and isinstance(records[i].data.get("message"), dict)
    }
    children: dict[int, list[int]] = defaultdict(list)
    for index, record in enumerate(records):
        parent = _parent(record.data)
        if parent is not None and parent in by_uuid and by_uuid[parent] != index:
            children[by_uuid[parent]].append(index)
    dropped: set[int] = set()
    abandoned: list[list[Any]] = []
    forks: list[str] = []
    for index in sorted(chain):
        for child in children.get(index, ()):
            if child in chain:
                continue
            subtree: list[int] = []
            stack = [child]
            while stack:
                node = stack.pop()
                if node in chain or node in subtree:
                    continue
                subtree.append(node)
                stack.extend(children.get(node, ()))
            if any(_is_turn(records[node].data, chain_ids) for node in subtree):
                subtree.sort()
                dropped.update(subtree)
                abandoned.append([records[node] for node in subtree])
                forks.append(str(records[index].data.get("uuid")))
    kept = [record for index, record in enumerate(records) if index not in dropped]
    order = sorted(range(len(abandoned)), key=lambda n: abandoned[n][0].line)
    return Branches(
        kept=kept,
        abandoned=[abandoned[n] for n in order],
        fork_points=[forks[n] for n in order],
    )


def causal_order(records: Sequence[_HasData]) -> list[Any]:
    """``records`` (one thread) in file order, except that a record whose parent comes
    later in the file follows its parent instead (its own children with it).

    File order is kept wherever it agrees with ``parentUuid``; a record whose parent is
    not among ``records`` stays where it is; records caught in a parent cycle keep
    their file order at the end.
    """
    present = {uuid for record in records if isinstance(uuid := record.data.get("uuid"), str)}
    placed: set[str] = set()
    waiting: dict[str, list[Any]] = defaultdict(list)
    out: list[Any] = []
    for record in records:
        parent = _parent(record.data)
        if parent is not None and parent in present and parent not in placed:
            waiting[parent].append(record)
            continue
        stack = [record]
        while stack:  # the record, then whatever waited for it, depth first in file order
            current = stack.pop()
            out.append(current)
            uuid = current.data.get("uuid")
            if isinstance(uuid, str) and uuid not in placed:
                placed.add(uuid)
                stack.extend(reversed(waiting.pop(uuid, ())))
    if waiting:
        out.extend(sorted((r for group in waiting.values() for r in group), key=lambda r: r.line))
    return out


def branch_with_context(kept: Sequence[_HasData], branch: Sequence[_HasData]) -> list[Any]:
    """An abandoned ``branch`` after the continued records written before it (its context)."""
    if not branch:
        return []
    start = branch[0].line
    return [record for record in kept if record.line < start] + list(branch)
