"""A prepared model request, renderable as chat-completions or Responses input."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


def message_to_response_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One chat-completions wire message as OpenAI Responses input items."""
    role = message["role"]
    if "provider_item" in message:  # opaque compaction item: resent verbatim
        return [message["provider_item"]]
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message["tool_call_id"],
                "output": _text_of(message.get("content")),
            }
        ]
    items: list[dict[str, Any]] = []
    text = _text_of(message.get("content"))
    if text or not message.get("tool_calls"):
        # the "easy" input message form: string content, valid for every role
        wire_role = "developer" if role == "system" else role
        items.append({"type": "message", "role": wire_role, "content": text})
    for call in message.get("tool_calls") or []:
        items.append(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
            }
        )
    return items


class PreparedRequest(BaseModel):
    """What to send to the model for one step of a turn.

    ``messages`` are chat-completions wire dicts, the frozen system prompt
    first; ``tools`` are the session's frozen tool schemas. Send them as they
    are: any change of bytes breaks the provider's prefix cache.
    ``extra_body`` holds Responses-only request fields from a compaction
    backend (``context_management``); only :meth:`responses_body` adds them.
    """

    model_config = ConfigDict(extra="forbid")

    session_id: str
    turn_id: str
    request_index: int
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    prompt_tokens: int
    tokens_exact: bool = True
    compressed: bool = False
    extra_body: dict[str, Any] = Field(default_factory=dict)

    def chat_body(self, **extra: Any) -> dict[str, Any]:
        """The body of ``POST /v1/chat/completions``.

        Opaque provider compaction items (Responses API) cannot be sent over chat
        completions and are left out; sessions compacted by the ``responses``
        backend should be sent with :meth:`responses_body`.
        """
        messages = [m for m in self.messages if "provider_item" not in m]
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.tools:
            body["tools"] = self.tools
        body.update(extra)
        return body

    def responses_body(self, **extra: Any) -> dict[str, Any]:
        """The body of ``POST /v1/responses`` (prompt as ``instructions``, items as ``input``)."""
        instructions = ""
        items: list[dict[str, Any]] = []
        for index, message in enumerate(self.messages):
            if index == 0 and message["role"] == "system":
                instructions = _text_of(message.get("content"))
                continue
            items.extend(message_to_response_items(message))
        body: dict[str, Any] = {"model": self.model, "input": items}
        if instructions:
            body["instructions"] = instructions
        if self.tools:
            body["tools"] = [
                {"type": "function", **tool.get("function", {})} for tool in self.tools
            ]
        body.update(self.extra_body)
        body.update(extra)
        return body
