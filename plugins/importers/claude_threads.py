"""Claude Code threads: records, the main thread and its subagents, titles and links.

The parts of :mod:`.claude_code` that look across records: splitting inline
sidechains by ``parentUuid``, the Task/Agent calls that started subagents,
and the session title.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_hookspecs import ImportFormatError

from .reading import flatten_content

#: record types that make messages
MESSAGE_TYPES = frozenset({"user", "assistant", "system"})


@dataclass
class Record:
    line: int
    data: dict[str, Any]


@dataclass
class Thread:
    key: str
    records: list[Record] = field(default_factory=list)


def split_threads(path: Path, records: list[Record]) -> tuple[Thread, list[Thread]]:
    """The main thread and the sidechain threads (keyed by their root uuid)."""
    by_uuid = {r.data["uuid"]: r for r in records if isinstance(r.data.get("uuid"), str)}
    roots: dict[str, str] = {}

    def root_of(record: Record) -> str:
        chain: list[str] = []
        current = record
        while True:
            uuid = current.data.get("uuid")
            if isinstance(uuid, str):
                if uuid in roots:
                    found = roots[uuid]
                    break
                chain.append(uuid)
            parent = current.data.get("parentUuid")
            parent_record = by_uuid.get(parent) if isinstance(parent, str) else None
            if parent_record is None or not parent_record.data.get("isSidechain"):
                found = uuid if isinstance(uuid, str) else f"line-{current.line}"
                break
            if isinstance(parent, str) and parent in chain:
                raise ImportFormatError(f"{path}:{current.line}: parentUuid cycle")
            current = parent_record
        for uuid in chain:
            roots[uuid] = found
        return found

    main = Thread(key="main")
    sidechains: dict[str, Thread] = {}
    for record in records:
        if record.data.get("isSidechain"):
            key = root_of(record)
            sidechains.setdefault(key, Thread(key=key)).records.append(record)
        else:
            main.records.append(record)
    return main, [
        t for t in sidechains.values() if any(r.data["type"] in MESSAGE_TYPES for r in t.records)
    ]


def task_prompts(records: list[Record]) -> dict[str, str]:
    """Task tool prompts of the main thread mapped to their tool_use ids."""
    out: dict[str, str] = {}
    for record in records:
        if record.data["type"] != "assistant":
            continue
        message = record.data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                arguments = block.get("input")
                if isinstance(arguments, dict) and isinstance(arguments.get("prompt"), str):
                    out.setdefault(arguments["prompt"], str(block.get("id")))
    return out


def title_of(records: list[Record]) -> str:
    """The session's title: the last user-set title, else the last AI title, else a summary."""
    for kind, key in (
        ("custom-title", "customTitle"),
        ("ai-title", "aiTitle"),
        ("summary", "summary"),
    ):
        titles = [r.data.get(key) for r in records if r.data["type"] == kind]
        titles = [t for t in titles if isinstance(t, str) and t.strip()]
        if titles:
            return str(titles[-1] if kind != "summary" else titles[0])
    return ""


_AGENT_ID = re.compile(r"agentId:\s*([A-Za-z0-9_-]+)")


def agent_calls(records: list[Record]) -> dict[str, str]:
    """Agent ids of the main thread's Task/Agent tool results mapped to their tool_use ids."""
    out: dict[str, str] = {}
    for record in records:
        if record.data["type"] != "user":
            continue
        message = record.data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if not results:
            continue
        structured = record.data.get("toolUseResult")
        agent = structured.get("agentId") if isinstance(structured, dict) else None
        if isinstance(agent, str) and agent and len(results) == 1:
            out.setdefault(agent, str(results[0].get("tool_use_id")))
            continue
        for block in results:
            found = _AGENT_ID.search(flatten_content(block.get("content")))
            if found:
                out.setdefault(found.group(1), str(block.get("tool_use_id")))
    return out


def root_prompt(thread: Thread) -> str:
    for record in thread.records:
        if record.data["type"] == "user":
            message = record.data.get("message")
            if isinstance(message, dict):
                return flatten_content(message.get("content"))
    return ""


def agent_label(thread: Thread) -> str:
    agent = first_str(thread.records, "agentId")
    return f"agent-{agent}" if agent else ""


def first_str(records: list[Record], key: str) -> str:
    for record in records:
        value = record.data.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def first_line_of(text: str, limit: int = 80) -> str:
    line = text.strip().split("\n", 1)[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
