"""Pydantic models for the Codex app-server JSON-RPC messages this client uses.

Wire facts (see PROTOCOL.md): one JSON object per line, no ``"jsonrpc"``
field, camelCase keys. Inbound models accept unknown keys (the server adds
fields such as ``emittedAtMs`` freely); outbound params are built from
explicit fields.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

TurnStatus = Literal["completed", "interrupted", "failed", "inProgress"]


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class RpcErrorBody(_Wire):
    code: int
    message: str
    data: Any = None


class InboundMessage(_Wire):
    """Any line the server writes: a response, an error, a notification or a server request."""

    id: int | str | None = None
    method: str | None = None
    params: Any = None
    result: Any = None
    error: RpcErrorBody | None = None

    @property
    def kind(self) -> Literal["response", "error", "notification", "request", "invalid"]:
        if self.method is not None:
            return "request" if self.id is not None else "notification"
        if self.id is None:
            return "invalid"
        return "error" if self.error is not None else "response"


class ClientInfo(_Wire):
    name: str = "hermes-core"
    title: str | None = None
    version: str = "0.1.0"


class InitializeResult(_Wire):
    user_agent: str = ""
    codex_home: str | None = None
    platform_family: str | None = None
    platform_os: str | None = None


class ThreadInfo(_Wire):
    """The parts of a Codex ``Thread`` this client relies on."""

    id: str
    model: str | None = None
    model_provider: str | None = None
    path: str | None = None
    preview: str = ""
    ephemeral: bool = False
    cli_version: str | None = None


class TurnErrorInfo(_Wire):
    message: str
    codex_error_info: Any = None
    additional_details: str | None = None


class ErrorNotice(_Wire):
    """An ``error`` notification (sent before a failed ``turn/completed``, or while retrying)."""

    thread_id: str
    turn_id: str
    will_retry: bool = False
    error: TurnErrorInfo


class TurnInfo(_Wire):
    id: str
    status: TurnStatus
    items: list[dict[str, Any]] = Field(default_factory=list)
    error: TurnErrorInfo | None = None
    duration_ms: int | None = None


class TurnOutcome(BaseModel):
    """How a ``turn/start`` turn ended."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str
    turn_id: str
    status: TurnStatus
    error: TurnErrorInfo | None = None
    errors: list[ErrorNotice] = Field(default_factory=list)
    agent_messages: list[str] = Field(default_factory=list)
    items: list[dict[str, Any]] = Field(default_factory=list)
    duration_ms: int | None = None

    @property
    def text(self) -> str:
        """The assistant's messages of this turn, joined by blank lines."""
        return "\n\n".join(self.agent_messages)

    @property
    def error_message(self) -> str | None:
        return _error_message(self.error, self.errors)


class CompactionOutcome(BaseModel):
    """How a ``thread/compact/start`` compaction turn ended.

    ``item_ids`` are the ids of the ``contextCompaction`` items completed in
    the turn (empty when it failed before producing one).
    """

    model_config = ConfigDict(extra="forbid")

    thread_id: str
    turn_id: str
    status: TurnStatus
    error: TurnErrorInfo | None = None
    errors: list[ErrorNotice] = Field(default_factory=list)
    item_ids: list[str] = Field(default_factory=list)
    duration_ms: int | None = None
    token_usage: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed" and bool(self.item_ids)

    @property
    def error_message(self) -> str | None:
        return _error_message(self.error, self.errors)


def _error_message(error: TurnErrorInfo | None, notices: list[ErrorNotice]) -> str | None:
    if error is not None:
        return error.message
    final = [n for n in notices if not n.will_retry]
    return final[-1].error.message if final else None
