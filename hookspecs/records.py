"""Records a session store keeps and returns: sessions, stored messages, leases, usage.

These models are the store contract's vocabulary; every backend (SQLite,
PostgreSQL, a third party's) accepts and returns exactly these.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from .messages import Message, Usage, check_unicode

EndReason = Literal["user", "compression", "error", "expired", "other"]
SwitchReason = Literal["compression", "new", "resume", "branch"]


class NewSession(BaseModel):
    """What a caller supplies to create a session."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    title: str = ""
    cwd: str = ""
    goal: str = ""
    routing: dict[str, Any] = Field(default_factory=dict)
    model: str = ""
    provider: str = ""
    parent_id: str | None = None


class SessionRecord(BaseModel):
    """A stored session.

    ``routing`` holds free-form routing metadata (gateway chat id, Codex
    thread id, ``previous_response_id``, ...); ``system_prompt_hash`` and
    ``tools_hash`` point at the frozen prompt and tool schemas (see
    :meth:`SessionStore.put_blob`).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str = ""
    cwd: str = ""
    goal: str = ""
    routing: dict[str, Any] = Field(default_factory=dict)
    model: str = ""
    provider: str = ""
    parent_id: str | None = None
    end_reason: str | None = None
    created_at: float
    updated_at: float
    ended_at: float | None = None
    system_prompt_hash: str | None = None
    tools_hash: str | None = None
    compression_count: int = 0


class NewMessage(BaseModel):
    """A message to append (or to place in a new active view).

    :param api_content: the exact content sent to the model for this message
        when it differs from ``message.content`` (per-turn recall injected into
        a user message); later requests resend these bytes.
    :param origin_id: for a message carried forward unchanged by a compaction,
        the id of the row it copies; search never counts both.
    :param annotations: facts derived from the message once, when it is
        recorded (see the ``annotate_message`` hook), keyed by the plugin's
        namespace; stored with the row and never sent to the model. A
        compaction that carries a row forward carries its annotations too.
    """

    model_config = ConfigDict(extra="forbid")

    message: Message
    api_content: str | list[dict[str, Any]] | None = None
    token_count: int | None = None
    turn_id: str | None = None
    origin_id: int | None = None
    annotations: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("api_content", "annotations")
    @classmethod
    def _storable_text(cls, value: Any, info: Any) -> Any:
        check_unicode(value, info.field_name)
        return value

    @classmethod
    def carried_from(cls, row: StoredMessage) -> NewMessage:
        """``row`` carried forward unchanged by a compaction.

        Every stored fact comes along (``api_content``, token count, turn id,
        annotations) and ``origin_id`` points at ``row``, so search counts the
        two once.
        """
        return cls(
            message=row.message,
            api_content=row.api_content,
            token_count=row.token_count,
            turn_id=row.turn_id,
            origin_id=row.id,
            annotations=row.annotations,
        )


class StoredMessage(BaseModel):
    """A message row as stored.

    ``seq`` orders a session's rows as written; ``position`` orders the
    active view. ``active`` rows make up the current context; ``compacted``
    rows were replaced by a compaction but stay searchable. ``annotations``
    are what :class:`NewMessage` brought (an empty dict when none).
    """

    model_config = ConfigDict(extra="forbid")

    id: int
    session_id: str
    position: int
    message: Message
    api_content: str | list[dict[str, Any]] | None = None
    token_count: int | None = None
    turn_id: str | None = None
    origin_id: int | None = None
    annotations: dict[str, JsonValue] = Field(default_factory=dict)
    active: bool = True
    compacted: bool = False
    created_at: float

    def to_api(self) -> dict[str, Any]:
        """The wire dict, using the ``api_content`` sidecar when present."""
        return self.message.to_api(self.api_content)


class SearchHit(BaseModel):
    """One search result: a recovery pointer into the session's history."""

    model_config = ConfigDict(extra="forbid")

    message_id: int
    session_id: str
    role: str
    snippet: str
    score: float
    active: bool
    compacted: bool
    created_at: float


class LeaseHolder(BaseModel):
    """Who holds a lease: a name plus the host and pid that prove liveness."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    host: str = Field(default_factory=socket.gethostname)
    pid: int = Field(default_factory=os.getpid)


class LeaseGrant(BaseModel):
    """A granted turn lease.

    ``token`` is the fencing token: it strictly increases with every grant for
    the session, and every write made under the lease is checked against it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str
    holder: LeaseHolder
    token: int
    expires_at: float
    acquired_at: float


class ContinuationUpdate(BaseModel):
    """Fields of the session that continues after a compaction, written in its transaction.

    The continuing session is the compacted one (in place) or the child
    (rotation). Hashes must name blobs already stored with
    :meth:`SessionStore.put_blob` (kinds ``system_prompt`` and ``tools``);
    ``routing`` replaces the session's routing. None leaves a field as it is.
    """

    model_config = ConfigDict(extra="forbid")

    system_prompt_hash: str | None = None
    tools_hash: str | None = None
    routing: dict[str, Any] | None = None


class CompactionCommit(BaseModel):
    """What :meth:`SessionStore.archive_and_compact` did."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    archived: int
    inserted: int
    carried_after_watermark: int
    child_session_id: str | None = None
    active_ids: list[int] = Field(default_factory=list)


class UsageRecord(BaseModel):
    """Usage of one model call, stored per session and turn."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    turn_id: str | None = None
    usage: Usage
    created_at: float | None = None


class PrefixEntry(BaseModel):
    """One row of the prefix ledger: how much of a request repeated the previous one.

    :param break_reason: ``None`` when the whole previous request is a prefix
        of this one; otherwise ``"system_prompt"``, ``"tools"``,
        ``"message_rewritten"``, ``"compaction"`` or ``"first"``.
    """

    model_config = ConfigDict(extra="forbid")

    session_id: str
    request_index: int
    request_hash: str
    request_tokens: int
    shared_prefix_hash: str
    shared_prefix_tokens: int
    previous_tokens: int
    break_reason: str | None = None
    provider_cached_tokens: int | None = None
    created_at: float | None = None


class CompactionEvent(BaseModel):
    """A compaction boundary, recorded for reports and the prefix ledger."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    engine: str
    backend: str = "local"
    tokens_before: int
    tokens_after: int
    summarizer: str = ""
    fallback: bool = False
    detail: dict[str, Any] = Field(default_factory=dict)
    created_at: float | None = None
