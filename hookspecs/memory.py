"""The memory-provider contract.

A provider is registered by name through ``register_memory_providers``. The
builtin provider (``builtin``: ``MEMORY.md`` / ``USER.md``) is always active;
``memory.provider`` selects at most one external provider beside it.

The core's memory manager calls providers with isolation: ``prefetch`` is cut
off after ``memory.prefetch_timeout`` seconds and the turn goes on without
it; an exception in any call is logged with the provider's name and the turn
goes on; ``sync_turn`` runs off the request path, in order per session.
Everything handed to a provider has passed the redaction hooks first.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .messages import Message


class MemorySession(BaseModel):
    """What a provider learns when initialised for a session."""

    model_config = ConfigDict(extra="forbid")

    #: the session
    session_id: str
    #: its working directory
    cwd: str = ""
    #: its model
    model: str = ""
    #: the memory folder in force (``memory.home``)
    home: str = ""
    #: host-specific values (empty by default)
    options: dict[str, Any] = Field(default_factory=dict)


class TurnRecord(BaseModel):
    """A committed turn, as passed to :meth:`MemoryProvider.sync_turn` (redacted)."""

    model_config = ConfigDict(extra="forbid")

    #: the session
    session_id: str
    #: the committed turn
    turn_id: str
    #: the user's message as text
    user_text: str
    #: the final assistant answer as text
    assistant_text: str
    #: every message of the turn, in order
    messages: list[Message] = Field(default_factory=list)


class MemoryProvider:
    """Base class for memory providers; override what you need.

    Every method has a safe default, so a provider implements only the parts
    it offers. Methods may be called from worker threads.
    """

    #: registered name, e.g. ``"builtin"`` or ``"acme-memory"``
    name: str = ""

    def is_available(self) -> bool:
        """Whether the provider can work here (credentials, service reachable)."""
        return True

    def initialize(self, session: MemorySession) -> None:
        """Prepare for a session, before its prompt is built.

        Called again before each rebuild of that session's prompt (compaction),
        so make it idempotent; the builtin provider takes its prompt snapshot here.
        """

    def system_prompt_block(self, session_id: str) -> str | None:
        """Text for the volatile layer; read only when the prompt is (re)built."""
        return None

    def prefetch(self, query: str, session_id: str) -> str | None:
        """Per-turn recall for ``query``; goes into the current user message's API content."""
        return None

    def sync_turn(self, turn: TurnRecord) -> None:
        """Learn from a committed turn (runs off the request path, in order per session)."""

    def on_pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
        """Insights the summary must keep, from the messages about to be compacted."""
        return []

    def on_session_switch(self, old_session_id: str, new_session_id: str, reason: str) -> None:
        """The active session changed (``compression``, ``new``, ``resume``, ``branch``)."""

    def on_session_end(self, session_id: str, reason: str) -> None:
        """The session ended."""

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas this provider exposes (frozen per session)."""
        return []

    def handle_tool_call(self, name: str, arguments: dict[str, Any], session_id: str) -> str:
        """Run one of this provider's tools and return the tool result text."""
        raise NotImplementedError(f"memory provider {self.name!r} has no tool {name!r}")

    def shutdown(self) -> None:
        """Release resources; called once when the host closes."""
