"""The transcript-importer contract."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .messages import Message


class ImportedConversation(BaseModel):
    """One conversation read from a transcript, in chat-completions messages.

    Every ``tool`` message answers a call of an earlier assistant message;
    only the final assistant message may hold unanswered calls.
    """

    model_config = ConfigDict(extra="forbid")

    source_format: str
    source_path: str
    conversation_id: str = ""
    title: str = ""
    cwd: str = ""
    model: str = ""
    messages: list[Message]
    metadata: dict[str, Any] = Field(default_factory=dict)


class Importer(ABC):
    """Reads one transcript format; registered through ``register_importers``."""

    #: format name, e.g. ``"claude-code"``
    name: str = ""
    description: str = ""

    @abstractmethod
    def sniff(self, path: Path, head: bytes) -> bool:
        """Whether ``path`` (its first bytes in ``head``) looks like this format."""

    @abstractmethod
    def load(self, path: Path) -> list[ImportedConversation]:
        """Read every conversation; raise ImportFormatError naming the line on bad input."""
