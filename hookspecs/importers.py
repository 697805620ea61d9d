"""The transcript-importer contract."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .messages import Message


class ImportedConversation(BaseModel):
    """One conversation read from a transcript, in chat-completions messages.

    Every ``tool`` message answers a call of the assistant message right
    before its run of tool messages, and every call is answered (an importer
    answers a call whose result was never recorded with a marked synthetic
    result and counts it in ``metadata["counts"]``). ``skipped`` counts what
    the importer read and deliberately left out, by kind (for example
    ``{"record.file-history-snapshot": 12, "branch.abandoned": 3}``); the
    replay report shows it. Text an agent harness injected carries
    :attr:`Message.harness`.
    """

    model_config = ConfigDict(extra="forbid")

    #: the importer's name
    source_format: str
    #: the transcript file
    source_path: str
    #: the conversation's id in the source, if it has one
    conversation_id: str = ""
    #: its title, if any
    title: str = ""
    #: the working directory it ran in, if recorded
    cwd: str = ""
    #: the model it used, if recorded
    model: str = ""
    #: when it began (its earliest recorded timestamp, timezone-aware), if the
    #: transcript records one; a replay dates its session by it
    started_at: datetime | None = None
    #: the conversation in chat-completions messages, oldest first
    messages: list[Message]
    #: format-specific facts (JSON), ``counts`` among them
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: records read and left out, by kind
    skipped: dict[str, int] = Field(default_factory=dict)


class Recognition(BaseModel):
    """An importer's verdict on a file's first bytes (see :meth:`Importer.recognise`)."""

    model_config = ConfigDict(extra="forbid")

    #: the importer can read this file
    matched: bool
    #: how close the file comes to the format, 0..1 (used to name the closest
    #: format when nothing matched)
    score: float = Field(default=0.0, ge=0.0, le=1.0)
    #: why it matched or, more usefully, why not ("no record has a 'payload'")
    reason: str = ""


class Importer(ABC):
    """Reads one transcript format; registered through ``register_importers``."""

    #: format name, e.g. ``"claude-code"``
    name: str = ""
    description: str = ""

    @abstractmethod
    def sniff(self, path: Path, head: bytes) -> bool:
        """Whether ``path`` (its first bytes in ``head``) looks like this format.

        ``head`` holds enough of the file for several records (detection
        passes 256 KiB, decompressed); it may be a raw gzip head or cut a
        record short. Decide from several records, never from the first alone.
        """

    def recognise(self, path: Path, sample: bytes) -> Recognition:
        """:meth:`sniff` with a score and a reason, for detection's error messages.

        The default wraps :meth:`sniff`; importers override it to say how close
        a near miss came and why it did not match (the detector names the
        closest format when no importer matches).
        """
        if self.sniff(path, sample):
            return Recognition(matched=True, score=1.0)
        return Recognition(matched=False, reason=f"the {self.name} importer does not accept it")

    @abstractmethod
    def load(self, path: Path) -> list[ImportedConversation]:
        """Read every conversation; raise ImportFormatError naming the line on bad input."""
