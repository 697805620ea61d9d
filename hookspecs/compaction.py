"""The provider-side compaction contract.

Some runtimes compact server-side (OpenAI Responses ``/responses/compact``)
or own the real thread (Codex app-server). A compaction backend is chosen by
``compaction.backend`` and by eligibility; when it is ineligible or fails, the
local context engine compresses instead and the session is left intact.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .messages import Message
from .records import NewMessage, SessionRecord, StoredMessage


class ProviderCompactionRequest(BaseModel):
    """Input of a backend: the session, its active view, and the backend's settings."""

    model_config = ConfigDict(extra="forbid")

    #: the session record, routing included
    session: SessionRecord
    #: its active view
    messages: list[StoredMessage]
    #: the session's model
    model: str = ""
    #: the backend's ``[compaction.NAME]`` table
    settings: dict[str, Any] = Field(default_factory=dict)


class ProviderCompactionResult(BaseModel):
    """A backend's answer.

    ``messages`` is the new active view; opaque provider items appear as
    ``Message(kind="compaction", provider_item=...)`` and are resent verbatim,
    never shown to summarizers. ``routing`` is merged into the session's
    routing metadata (thread ids, ``previous_response_id``, ...).
    """

    model_config = ConfigDict(extra="forbid")

    #: the answering backend's name
    backend: str
    #: the new active view
    messages: list[NewMessage]
    #: merged into the session's routing
    routing: dict[str, Any] = Field(default_factory=dict)
    #: tokens before, as the provider counts them (0: unknown)
    tokens_before: int = 0
    #: tokens after, likewise
    tokens_after: int = 0
    #: backend-specific facts for the compaction event (JSON)
    detail: dict[str, Any] = Field(default_factory=dict)


class CompactionBackend(ABC):
    """Provider-side compaction; registered through ``register_compaction_backends``."""

    name: str = ""

    @abstractmethod
    def eligible(self, session: SessionRecord, model: str, settings: dict[str, Any]) -> bool:
        """Whether this backend may compact ``session`` (explicit config, never a guess)."""

    @abstractmethod
    def compact(self, request: ProviderCompactionRequest) -> ProviderCompactionResult:
        """Compact, or raise CompactionBackendError leaving the session as it was."""

    def request_options(
        self, session: SessionRecord, model: str, settings: dict[str, Any]
    ) -> dict[str, Any]:
        """Extra request-body fields for normal requests (e.g. ``context_management``)."""
        return {}

    def close(self) -> None:  # noqa: B027
        """Release processes or connections."""


def render_for_summary(messages: list[Message]) -> list[Message]:
    """Drop opaque compaction items: summarizers never see them as text."""
    return [m for m in messages if m.kind != "compaction"]
