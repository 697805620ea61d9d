"""Benchmark inputs built from the bundled real transcripts (``transcripts/``).

Every input goes through the project's own importers
(:mod:`hermes_plugin_importers`), so both sides of a comparison receive the
same OpenAI chat-completions messages: ours as :class:`Message` objects, the
reference runners as plain dicts with string content (:func:`wire`).

* the **small** session (~60K tokens): the OpenHands django transcript, whole;
* the **large** session (~250K tokens): the longest real session (a Codex
  rollout of ~500K tokens) cut at a turn boundary once it reaches the target.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_core.replay import split_turns
from hermes_core.tokens import Tokens
from hermes_hookspecs import Message
from hermes_plugin_importers import builtin_importers, load_transcript
from hermes_plugin_tiktoken_counter import TiktokenCounter

REPO = Path(__file__).resolve().parents[1]
TRANSCRIPTS = REPO / "transcripts"
SMALL = "openai-chat/openhands-django-11149.json.gz"
LARGE = "codex-rollout/entireio-git-sync-07ebffc93812.jsonl.gz"
MODEL = "gpt-4o-mini"


@dataclass(frozen=True)
class SessionInput:
    """One benchmark input: where it came from and its messages (system first)."""

    label: str
    source: str
    messages: list[Message]
    tokens: int

    def body(self) -> list[Message]:
        """The messages after the leading system message."""
        return (
            self.messages[1:]
            if self.messages and self.messages[0].role == "system"
            else self.messages
        )

    def system(self) -> Message:
        first = self.messages[0] if self.messages else None
        return (
            first
            if first is not None and first.role == "system"
            else Message(role="system", content="")
        )


def counter() -> Tokens:
    """Exact counts with the project's tiktoken counter (the same numbers our runtime stores)."""
    return Tokens(TiktokenCounter(), MODEL)


def load(relative: str, conversation: int = 0) -> list[Message]:
    """The messages of one conversation of a bundled transcript, as the importers give them."""
    path = TRANSCRIPTS / relative
    if not path.is_file():
        raise FileNotFoundError(f"bundled transcript missing: {path}")
    conversations = load_transcript(path, builtin_importers())
    return conversations[conversation].messages


def replay_order(messages: Sequence[Message]) -> list[Message]:
    """System message + the turns exactly as :func:`hermes_core.replay.replay` feeds them.

    The replay merges consecutive user messages and turns later system
    messages into user notes; the reference side must see the same list.
    """
    system_text, turns = split_turns(list(messages))
    out = [Message(role="system", content=system_text)] if system_text else []
    for turn in turns:
        out.extend(turn)
    return out


def cut_at_tokens(messages: Sequence[Message], target: int, tokens: Tokens) -> list[Message]:
    """The shortest prefix holding ``target`` tokens that ends at a turn boundary.

    A boundary is an assistant message without tool calls (the model's final
    answer of a turn) or the message just before a user message; the cut never
    leaves a tool call without its results.
    """
    out: list[Message] = []
    total = 0
    for index, message in enumerate(messages):
        out.append(message)
        total += tokens.count_message(message)
        following = messages[index + 1] if index + 1 < len(messages) else None
        clean = (message.role == "assistant" and not message.tool_calls) or (
            following is not None and following.role == "user" and message.role != "assistant"
        )
        if total >= target and clean:
            break
    return out


def small_session(tokens: Tokens | None = None) -> SessionInput:
    tokens = tokens or counter()
    messages = replay_order(load(SMALL))
    return SessionInput("small", SMALL, messages, sum(tokens.count_message(m) for m in messages))


def large_session(tokens: Tokens | None = None, target: int = 250_000) -> SessionInput:
    tokens = tokens or counter()
    messages = cut_at_tokens(replay_order(load(LARGE)), target, tokens)
    total = sum(tokens.count_message(m) for m in messages)
    return SessionInput("large", f"{LARGE} (first {len(messages)} messages)", messages, total)


def wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """OpenAI wire dicts with string content (what the reference runners accept)."""
    out = []
    for message in messages:
        body = message.to_api()
        if not isinstance(body.get("content"), str | None):
            body["content"] = message.text()
        out.append(body)
    return out


def write_wire(messages: Sequence[Message], path: Path) -> Path:
    path.write_text(json.dumps(wire(messages), ensure_ascii=False), encoding="utf-8")
    return path


def wire_text(message: dict[str, Any]) -> str:
    """The text of a wire message that identifiers are looked for in (content + tool calls)."""
    text = message.get("content")
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False) if text else ""
    calls = message.get("tool_calls") or []
    for call in calls:
        function = call.get("function") or {}
        text += "\n" + str(function.get("name", "")) + "\n" + str(function.get("arguments", ""))
    return text
