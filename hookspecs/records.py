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

    #: the id to use (None: a fresh uuid4 hex)
    id: str | None = None
    #: a human title
    title: str = ""
    #: the working directory
    cwd: str = ""
    #: what the session is for
    goal: str = ""
    #: free-form routing metadata (JSON)
    routing: dict[str, Any] = Field(default_factory=dict)
    #: the model
    model: str = ""
    #: the provider name
    provider: str = ""
    #: the session this one continues (a rotation's child)
    parent_id: str | None = None


class SessionRecord(BaseModel):
    """A stored session.

    ``routing`` holds free-form routing metadata (gateway chat id, Codex
    thread id, ``previous_response_id``, ...); ``system_prompt_hash`` and
    ``tools_hash`` point at the frozen prompt and tool schemas (see
    :meth:`SessionStore.put_blob`).
    """

    model_config = ConfigDict(extra="forbid")

    #: the session id
    id: str
    #: a human title
    title: str = ""
    #: the working directory
    cwd: str = ""
    #: what the session is for
    goal: str = ""
    #: free-form routing metadata (JSON)
    routing: dict[str, Any] = Field(default_factory=dict)
    #: the model
    model: str = ""
    #: the provider name
    provider: str = ""
    #: the session this one continues, after a rotation
    parent_id: str | None = None
    #: why it ended (``user``, ``compression``, ...); None while live
    end_reason: str | None = None
    #: Unix time of creation
    created_at: float
    #: Unix time of the last write
    updated_at: float
    #: Unix time of the end, None while live
    ended_at: float | None = None
    #: SHA-256 of the frozen system prompt (a ``system_prompt`` blob)
    system_prompt_hash: str | None = None
    #: SHA-256 of the frozen tool schemas (a ``tools`` blob)
    tools_hash: str | None = None
    #: compactions committed so far
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

    #: the message
    message: Message
    api_content: str | list[dict[str, Any]] | None = None
    #: its token count, when the writer counted it (None: counted when it is read)
    token_count: int | None = None
    #: the turn that wrote it
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

    #: the row id, unique in the store: the recovery pointer ``session_open`` takes
    id: int
    #: the session it belongs to
    session_id: str
    #: its place in the active view
    position: int
    #: the message
    message: Message
    #: the exact content once sent, when it differs from ``message.content``
    api_content: str | list[dict[str, Any]] | None = None
    #: its token count, if stored
    token_count: int | None = None
    #: the turn that wrote it
    turn_id: str | None = None
    #: the row it copies, for a row a compaction carried forward
    origin_id: int | None = None
    #: facts derived once when it was recorded, by plugin namespace
    annotations: dict[str, JsonValue] = Field(default_factory=dict)
    #: part of the active view
    active: bool = True
    #: replaced by a compaction (still searchable)
    compacted: bool = False
    #: Unix time it was written
    created_at: float

    def to_api(self) -> dict[str, Any]:
        """The wire dict, using the ``api_content`` sidecar when present."""
        return self.message.to_api(self.api_content)


class SearchHit(BaseModel):
    """One search result: a recovery pointer into the session's history."""

    model_config = ConfigDict(extra="forbid")

    #: the matching row (``session_open`` opens it)
    message_id: int
    #: its session
    session_id: str
    #: its role
    role: str
    #: the matching text around the terms
    snippet: str
    #: rank: ``[1, 2)`` covers every term, ``[0, 1)`` some of them; higher first
    score: float
    #: the row is in the active view
    active: bool
    #: the row was replaced by a compaction
    compacted: bool
    #: Unix time it was written
    created_at: float


class LeaseHolder(BaseModel):
    """Who holds a lease: a name plus the host and pid that prove liveness."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: who asks (the ``holder`` argument of ``Session.turn``)
    name: str
    #: the machine it runs on
    host: str = Field(default_factory=socket.gethostname)
    #: its process id; a dead pid on this host frees the lease
    pid: int = Field(default_factory=os.getpid)


class LeaseGrant(BaseModel):
    """A granted turn lease.

    ``token`` is the fencing token: it strictly increases with every grant for
    the session, and every write made under the lease is checked against it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the leased session
    session_id: str
    #: who holds it
    holder: LeaseHolder
    #: the fencing token
    token: int
    #: Unix time it expires unless renewed
    expires_at: float
    #: Unix time it was granted
    acquired_at: float


class ContinuationUpdate(BaseModel):
    """Fields of the session that continues after a compaction, written in its transaction.

    The continuing session is the compacted one (in place) or the child
    (rotation). Hashes must name blobs already stored with
    :meth:`SessionStore.put_blob` (kinds ``system_prompt`` and ``tools``);
    ``routing`` replaces the session's routing. None leaves a field as it is.
    """

    model_config = ConfigDict(extra="forbid")

    #: the rebuilt prompt's hash (None: unchanged)
    system_prompt_hash: str | None = None
    #: the rebuilt tool schemas' hash (None: unchanged)
    tools_hash: str | None = None
    #: the new routing (None: unchanged)
    routing: dict[str, Any] | None = None


class CompactionCommit(BaseModel):
    """What :meth:`SessionStore.archive_and_compact` did."""

    model_config = ConfigDict(extra="forbid")

    #: the compacted session
    session_id: str
    #: rows made inactive and compacted
    archived: int
    #: rows of the new view
    inserted: int
    #: rows written after the engine's snapshot, kept after the new ones
    carried_after_watermark: int
    #: the session that continues, after a rotation (None: in place)
    child_session_id: str | None = None
    #: ids of the new active view, in order
    active_ids: list[int] = Field(default_factory=list)


class UsageRecord(BaseModel):
    """Usage of one model call, stored per session and turn."""

    model_config = ConfigDict(extra="forbid")

    #: the session
    session_id: str
    #: the turn of the model call, if any
    turn_id: str | None = None
    #: what the provider reported
    usage: Usage
    #: Unix time it was stored (set by the store when None)
    created_at: float | None = None


class PrefixEntry(BaseModel):
    """One row of the prefix ledger: how much of a request repeated the previous one.

    :param break_reason: ``None`` when the whole previous request is a prefix
        of this one; otherwise ``"system_prompt"``, ``"tools"``,
        ``"message_rewritten"``, ``"compaction"`` or ``"first"``.
    """

    model_config = ConfigDict(extra="forbid")

    #: the session
    session_id: str
    #: 0 for the session's first request, then 1, 2, ...
    request_index: int
    #: the hash chain's last link over the request's segments
    request_hash: str
    #: tokens of the whole request
    request_tokens: int
    #: the chain link where the shared prefix ends (empty: none shared)
    shared_prefix_hash: str
    #: tokens of the prefix shared with the previous request
    shared_prefix_tokens: int
    #: tokens of the previous request
    previous_tokens: int
    break_reason: str | None = None
    #: cached tokens the provider reported for this request
    provider_cached_tokens: int | None = None
    #: Unix time it was stored
    created_at: float | None = None


class CompactionEvent(BaseModel):
    """A compaction boundary, recorded for reports and the prefix ledger."""

    model_config = ConfigDict(extra="forbid")

    #: the compacted session
    session_id: str
    #: the context engine that compressed
    engine: str
    #: ``local``, or the provider-side compaction backend
    backend: str = "local"
    #: tokens of the view before
    tokens_before: int
    #: tokens after
    tokens_after: int
    #: the summarizer that wrote the handoff
    summarizer: str = ""
    #: the fallback summarizer wrote it
    fallback: bool = False
    #: trigger, focus and notes (JSON)
    detail: dict[str, Any] = Field(default_factory=dict)
    #: Unix time it was stored
    created_at: float | None = None
