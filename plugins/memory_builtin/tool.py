"""The builtin ``memory`` tool: its OpenAI function schema and its validated arguments."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

TOOL_NAME = "memory"

TOOL_DESCRIPTION = (
    "Save durable facts to persistent memory that survives across sessions. "
    "target 'memory' (MEMORY.md) holds your own notes about the environment, project "
    "conventions and lessons learned; target 'user' (USER.md) holds what you learn about "
    "the user (preferences, role, habits). Keep entries short and self-contained. "
    "Actions: 'add' a new entry (content); 'replace' the one entry containing old_text "
    "with content; 'remove' the one entry containing old_text. Changes are saved at once "
    "and appear in the system prompt from the next session (or compaction) on. "
    "Never store secrets."
)


def memory_tool_schema() -> dict[str, Any]:
    """The OpenAI function-tool schema of the ``memory`` tool (a fresh dict)."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": TOOL_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {
                        "type": "string",
                        "enum": ["add", "replace", "remove"],
                        "description": "What to do.",
                    },
                    "target": {
                        "type": "string",
                        "enum": ["memory", "user"],
                        "description": "'memory' for MEMORY.md, 'user' for USER.md.",
                    },
                    "content": {
                        "type": "string",
                        "description": "The entry text (add, replace).",
                    },
                    "old_text": {
                        "type": "string",
                        "description": "A unique part of the entry to replace or remove.",
                    },
                },
                "required": ["action", "target"],
                "additionalProperties": False,
            },
        },
    }


class MemoryToolCall(BaseModel):
    """Validated arguments of one ``memory`` tool call."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["add", "replace", "remove"]
    target: Literal["memory", "user"]
    content: str | None = None
    old_text: str | None = None

    @model_validator(mode="after")
    def _fields_for_action(self) -> MemoryToolCall:
        if self.action in ("add", "replace") and not (self.content or "").strip():
            raise ValueError(f"action {self.action!r} needs a non-empty 'content'")
        if self.action in ("replace", "remove") and not (self.old_text or "").strip():
            raise ValueError(f"action {self.action!r} needs a non-empty 'old_text'")
        return self


def parse_tool_call(arguments: dict[str, Any]) -> MemoryToolCall | str:
    """The validated call, or an error text naming the bad field and value."""
    try:
        return MemoryToolCall.model_validate(arguments)
    except ValidationError as exc:
        problems = []
        for item in exc.errors():
            field = ".".join(str(part) for part in item["loc"]) or "arguments"
            if item["type"] == "extra_forbidden":
                problems.append(f"unknown argument {field!r}")
            elif item["type"] == "missing":
                problems.append(f"missing argument {field!r}")
            elif field == "arguments":
                problems.append(str(item["msg"]).removeprefix("Value error, "))
            else:
                problems.append(f"{field}={item['input']!r}: {item['msg']}")
        return "Error: invalid memory tool arguments: " + "; ".join(problems)
