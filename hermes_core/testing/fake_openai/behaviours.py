"""What the fake answers: scripted behaviours, one per request."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from .validation import RecordedRequest

Endpoint = Literal["chat.completions", "responses", "responses.compact", "models"]
_ENDPOINTS: tuple[Endpoint, ...] = get_args(Endpoint)
_ROUTES: dict[tuple[str, str], Endpoint] = {
    ("POST", "/v1/chat/completions"): "chat.completions",
    ("POST", "/v1/responses"): "responses",
    ("POST", "/v1/responses/compact"): "responses.compact",
    ("GET", "/v1/models"): "models",
}

# --------------------------------------------------------------------------- behaviours


class _Behaviour(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    delay_s: float = Field(default=0.0, ge=0.0, description="sleep before answering")


class ToolCallReply(BaseModel):
    """One function call the fake's answer makes.

    ``arguments`` is sent as JSON text (a dict is serialised); ``id`` defaults
    to a fresh ``call_...`` id.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


class Reply(_Behaviour):
    """A successful answer carrying assistant text.

    ``finish_reason="length"`` makes a truncated answer (chat ``finish_reason``
    ``length``; Responses ``status="incomplete"`` with reason
    ``max_output_tokens``). ``text=""`` is an empty answer (with ``tool_calls``:
    content null). ``refusal`` makes a refusal instead of text. ``output_items``
    (Responses only) replaces the generated message with the given raw output items, sent verbatim.
    """

    kind: Literal["reply"] = "reply"
    text: str = "ok"
    finish_reason: Literal["stop", "length"] = "stop"
    refusal: str | None = None
    output_items: list[dict[str, Any]] | None = None
    chunk_chars: int = Field(default=8, ge=1, description="characters per streamed delta")
    tool_calls: list[ToolCallReply] | None = Field(
        default=None,
        description="function calls to make, as ToolCallReply or {'id', 'name', 'arguments'} "
        "dicts (chat: finish_reason tool_calls; Responses: function_call items after the text)",
    )
    usage: dict[str, int] | None = Field(
        default=None,
        description="usage fields reported instead of the computed ones (e.g. prompt_tokens)",
    )


class ErrorReply(_Behaviour):
    """An HTTP error with an OpenAI-style ``{"error": {...}}`` body."""

    kind: Literal["error"] = "error"
    status: int = Field(default=500, ge=400, le=599)
    message: str = "The server had an error while processing your request."
    type: str = "server_error"
    code: str | None = None
    param: str | None = None
    retry_after_s: int | None = None


class Malformed(_Behaviour):
    """A 200 answer whose body (or, when streaming, one SSE ``data:`` line) is not JSON."""

    kind: Literal["malformed"] = "malformed"
    body: str = '{"id": "broken", "object": '


class Drop(_Behaviour):
    """Close the connection without a complete answer.

    With a streaming request, ``after_events`` SSE events are sent first.
    """

    kind: Literal["drop"] = "drop"
    after_events: int = Field(default=0, ge=0)


class Failed(_Behaviour):
    """Responses only: a ``response.failed`` stream event (or ``status="failed"`` JSON)."""

    kind: Literal["failed"] = "failed"
    message: str = "The model failed to generate a response."
    code: str = "server_error"


class Compact(_Behaviour):
    """``/v1/responses/compact`` answer.

    ``kept`` overrides the kept items (default: the request's user messages,
    as stored message items). ``encrypted_content`` defaults to an opaque token
    derived from the request.
    """

    kind: Literal["compact"] = "compact"
    kept: list[dict[str, Any]] | None = None
    encrypted_content: str | None = None


Behaviour = Reply | ErrorReply | Malformed | Drop | Failed | Compact
BehaviourSource = Behaviour | Callable[["RecordedRequest"], Behaviour]


class Rule(BaseModel):
    """When the request's last message matches, answer with ``reply``.

    ``last_role`` (``user``, ``tool``, ``assistant``...) and ``last_contains``
    (a substring of that message's text) must both match when given.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    last_role: str | None = None
    last_contains: str | None = None
    reply: Reply | ErrorReply | Malformed | Drop | Failed = Field(discriminator="kind")

    def matches(self, last: dict[str, Any]) -> bool:
        if self.last_role is not None and last.get("role") != self.last_role:
            return False
        return self.last_contains is None or self.last_contains in _text(last)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content", message.get("output"))
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def last_message(body: Any) -> dict[str, Any]:
    """The last chat message (or Responses input item, role ``tool`` for call outputs)."""
    if not isinstance(body, dict):
        return {}
    items = body.get("messages", body.get("input"))
    if isinstance(items, str):
        return {"role": "user", "content": items}
    if not isinstance(items, list) or not items or not isinstance(items[-1], dict):
        return {}
    last = dict(items[-1])
    if last.get("type") == "function_call_output":
        last["role"] = "tool"
    return last


class Rules:
    """A behaviour source answering by the first matching :class:`Rule`.

    Use as a default (``fake.set_default("chat.completions", Rules([...]))``) or
    queue it; with no match, ``default`` answers.
    """

    def __init__(self, rules: Sequence[Rule] = (), default: Behaviour | None = None) -> None:
        self.rules = list(rules)
        self.default: Behaviour = default or Reply()

    def when(
        self,
        reply: Reply | ErrorReply | Malformed | Drop | Failed,
        *,
        last_role: str | None = None,
        last_contains: str | None = None,
    ) -> Rules:
        """Add a rule (after the others); returns self for chaining."""
        self.rules.append(Rule(last_role=last_role, last_contains=last_contains, reply=reply))
        return self

    def __call__(self, record: RecordedRequest) -> Behaviour:
        last = last_message(record.body)
        for rule in self.rules:
            if rule.matches(last):
                return rule.reply
        return self.default
