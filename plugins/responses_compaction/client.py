"""A small httpx client for ``POST /v1/responses/compact`` and the checks on its answer.

The answer must be a compacted response (``object: "response.compaction"``)
whose ``output`` ends with exactly one opaque ``compaction`` item carrying a
non-empty ``encrypted_content``. Anything else (no connection, a timeout, a
4xx/5xx, a body that is not JSON or not that shape) raises
:class:`~.errors.ResponsesCompactionError`; nothing is retried here: the core
falls back to the local engine instead.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ResponsesCompactionError
from .settings import ResponsesCompactionSettings

COMPACTION_ITEM_TYPE = "compaction"


class CompactionItem(BaseModel):
    """The checks an opaque compaction item must pass before it is stored (extra keys kept)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: Literal["compaction"]
    encrypted_content: str = Field(min_length=1)
    id: str | None = None


class CompactedWindow(BaseModel):
    """A ``response.compaction`` object: the new context window, in order.

    ``output`` holds the raw item dicts exactly as the server sent them, so
    the compaction item can be stored and resent byte for byte.
    """

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    object: Literal["response.compaction"]
    created_at: int
    output: list[dict[str, Any]]
    usage: dict[str, Any] = Field(default_factory=dict)

    @property
    def compaction_item(self) -> dict[str, Any]:
        """The opaque item (validated to be the last output item)."""
        return self.output[-1]

    @property
    def kept_items(self) -> list[dict[str, Any]]:
        return self.output[:-1]


def check_compaction_item(item: Any, where: str) -> dict[str, Any]:
    """Validate one opaque compaction item; returns it unchanged."""
    if not isinstance(item, dict):
        raise ResponsesCompactionError("malformed", f"{where} is not an object: {item!r:.120}")
    if "encrypted_content" not in item:
        raise ResponsesCompactionError(
            "malformed", f"{where} has no 'encrypted_content' (keys: {sorted(item)})"
        )
    try:
        CompactionItem.model_validate(item)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'item'}: {e['msg']}" for e in exc.errors()
        )
        raise ResponsesCompactionError("malformed", f"{where} is invalid: {problems}") from None
    return item


def parse_compacted(payload: Any) -> CompactedWindow:
    """Validate a ``/responses/compact`` answer (see the module docstring)."""
    if not isinstance(payload, dict):
        raise ResponsesCompactionError(
            "malformed", f"answer is not a JSON object: {payload!r:.120}"
        )
    try:
        window = CompactedWindow.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ResponsesCompactionError(
            "malformed", f"answer is not a compacted response: {problems}"
        ) from None
    positions = [
        i for i, item in enumerate(window.output) if item.get("type") == COMPACTION_ITEM_TYPE
    ]
    if len(positions) != 1:
        raise ResponsesCompactionError(
            "malformed",
            f"expected exactly one compaction item in output, found {len(positions)} "
            f"(types: {[item.get('type') for item in window.output]})",
        )
    if positions[0] != len(window.output) - 1:
        raise ResponsesCompactionError(
            "malformed",
            f"the compaction item must be the last output item, it is item {positions[0]} "
            f"of {len(window.output)}",
        )
    check_compaction_item(window.compaction_item, f"output[{positions[0]}] (compaction item)")
    return window


def _error_text(response: httpx.Response) -> str:
    """``type/code: message`` from an OpenAI error body, else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        label = "/".join(str(error[k]) for k in ("type", "code") if error.get(k))
        message = str(error.get("message") or "").strip()
        return f"{label}: {message}" if label else message or "(no message)"
    text = response.text.strip()
    return text[:200] if text else "(empty body)"


def api_key(settings: ResponsesCompactionSettings) -> str | None:
    """The API key from ``api_key_env`` (None when no variable is configured)."""
    if not settings.api_key_env:
        return None
    value = os.environ.get(settings.api_key_env, "")
    if not value:
        raise ResponsesCompactionError(
            "auth", f"environment variable {settings.api_key_env!r} (api_key_env) is not set"
        )
    return value


def post_compact(settings: ResponsesCompactionSettings, body: dict[str, Any]) -> CompactedWindow:
    """``POST {base_url}/responses/compact`` and validate the answer."""
    url = settings.compact_url()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    key = api_key(settings)
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    try:
        with httpx.Client(timeout=httpx.Timeout(settings.timeout)) as client:
            response = client.post(url, content=data, headers=headers)
    except httpx.TimeoutException as exc:
        raise ResponsesCompactionError(
            "timeout", f"POST {url} timed out after {settings.timeout}s ({type(exc).__name__})"
        ) from exc
    except httpx.TransportError as exc:
        raise ResponsesCompactionError(
            "network", f"POST {url} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if response.status_code >= 400:
        kind: Literal["auth", "http"] = "auth" if response.status_code in (401, 403) else "http"
        raise ResponsesCompactionError(
            kind,
            f"POST {url} answered HTTP {response.status_code}: {_error_text(response)}",
            status=response.status_code,
        )
    try:
        payload = response.json()
    except ValueError:
        raise ResponsesCompactionError(
            "malformed",
            f"POST {url} answered HTTP {response.status_code} with a body that is not JSON: "
            f"{response.text[:120]!r}",
            status=response.status_code,
        ) from None
    return parse_compacted(payload)
