"""One chat-completions call over httpx, with every failure classified.

Classification (:class:`~hermes_hookspecs.SummarizerError` kinds):

========================================  ==============
what happened                             kind
========================================  ==============
connection refused / DNS / connect timeout  ``network``
read or write timeout                     ``timeout``
connection dropped mid-answer             ``server``
HTTP 401, 403                             ``auth``
HTTP 429 with ``insufficient_quota``      ``quota``
HTTP 429 otherwise                        ``rate_limit``
HTTP 404                                  ``config``
HTTP 408                                  ``timeout``
HTTP 5xx                                  ``server``
other HTTP 4xx                            ``other``
body not JSON / no choices / no headings  ``malformed``
``refusal`` set or ``content_filter``     ``refused``
``finish_reason`` ``length``              ``truncated``
empty content                             ``empty``
========================================  ==============
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from hermes_hookspecs import SummarizerError, Usage

NAME = "openai"


class Endpoint(BaseModel):
    """An OpenAI-compatible chat-completions endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(description="'auxiliary' or 'main', for messages")
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


class Completion(BaseModel):
    """The parts of a chat completion the summarizer needs."""

    model_config = ConfigDict(extra="forbid")

    text: str
    usage: Usage


def _error_detail(response: httpx.Response) -> tuple[str, str, str]:
    """(message, type, code) of an OpenAI-style error body (blank when absent)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200], "", ""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return str(body)[:200], "", ""
    return (
        str(error.get("message") or ""),
        str(error.get("type") or ""),
        str(error.get("code") or ""),
    )


def classify_status(response: httpx.Response, endpoint: Endpoint) -> SummarizerError:
    """The error for a non-2xx answer."""
    status = response.status_code
    message, kind_name, code = _error_detail(response)
    where = f"{endpoint.label} endpoint {endpoint.url} (model {endpoint.model!r})"
    text = f"HTTP {status} from {where}: {message}".rstrip(": ")
    if status in (401, 403):
        return SummarizerError("auth", text, summarizer=NAME)
    if status == 429:
        if "insufficient_quota" in (kind_name, code):
            return SummarizerError("quota", text, summarizer=NAME)
        return SummarizerError("rate_limit", text, summarizer=NAME)
    if status == 404:
        return SummarizerError("config", text, summarizer=NAME)
    if status == 408:
        return SummarizerError("timeout", text, summarizer=NAME)
    if status >= 500:
        return SummarizerError("server", text, summarizer=NAME)
    return SummarizerError("other", text, summarizer=NAME)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def read_completion(data: Any, endpoint: Endpoint) -> Completion:
    """Check a parsed chat completion and return its text and usage."""
    where = f"{endpoint.label} endpoint {endpoint.url}"
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise SummarizerError("malformed", f"{where} answered without 'choices'", summarizer=NAME)
    if not data["choices"] or not isinstance(data["choices"][0], dict):
        raise SummarizerError("malformed", f"{where} answered with no choice", summarizer=NAME)
    choice = data["choices"][0]
    raw_message = choice.get("message")
    message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
    finish = choice.get("finish_reason")
    if message.get("refusal") or finish == "content_filter":
        reason = message.get("refusal") or "content filter"
        raise SummarizerError("refused", f"{where} refused: {reason}", summarizer=NAME)
    if finish == "length":
        raise SummarizerError(
            "truncated",
            f"{where} stopped at the output limit (finish_reason=length)",
            summarizer=NAME,
        )
    text = _content_text(message.get("content"))
    if not text.strip():
        raise SummarizerError("empty", f"{where} returned an empty summary", summarizer=NAME)
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    return Completion(text=text, usage=Usage.from_openai(usage, str(data.get("model") or "")))


def chat_completion(endpoint: Endpoint, body: dict[str, Any]) -> Completion:
    """POST ``body`` to ``endpoint``; raise a classified SummarizerError on any failure."""
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    where = f"{endpoint.label} endpoint {endpoint.url}"
    try:
        with httpx.Client(timeout=endpoint.timeout) as client:
            response = client.post(endpoint.url, headers=headers, content=json.dumps(body))
    except httpx.ConnectTimeout as exc:
        raise SummarizerError("network", f"cannot reach {where}: {exc}", summarizer=NAME) from exc
    except httpx.TimeoutException as exc:
        raise SummarizerError(
            "timeout", f"{where} did not answer within {endpoint.timeout}s", summarizer=NAME
        ) from exc
    except httpx.ConnectError as exc:
        raise SummarizerError("network", f"cannot reach {where}: {exc}", summarizer=NAME) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise SummarizerError(
            "server", f"{where} dropped the connection: {exc}", summarizer=NAME
        ) from exc
    except httpx.HTTPError as exc:
        raise SummarizerError(
            "network", f"request to {where} failed: {exc}", summarizer=NAME
        ) from exc
    if response.status_code >= 400:
        raise classify_status(response, endpoint)
    try:
        data = response.json()
    except ValueError as exc:
        raise SummarizerError(
            "malformed",
            f"{where} answered with a body that is not JSON: {response.text[:120]!r}",
            summarizer=NAME,
        ) from exc
    return read_completion(data, endpoint)
