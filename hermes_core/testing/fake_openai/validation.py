"""Checking requests and answers against the official ``openai`` package's types."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from .behaviours import Endpoint

# --------------------------------------------------------------------------- records


class RecordedRequest(BaseModel):
    """One HTTP request the fake received."""

    model_config = ConfigDict(frozen=True)

    method: str
    path: str
    query: str
    endpoint: Endpoint | None
    headers: dict[str, str]
    raw: bytes
    body: Any = None
    received_at: float

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class ValidationIssue(BaseModel):
    """A request or response that did not match the ``openai`` package's types."""

    model_config = ConfigDict(frozen=True)

    direction: Literal["request", "response", "script", "route", "server"]
    endpoint: str
    type_name: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.direction} {self.endpoint}] {self.type_name}: {self.detail}"


class FakeOpenAIValidationError(AssertionError):
    """Raised by :meth:`FakeOpenAIServer.check` when validation issues were recorded."""

    def __init__(self, issues: list[ValidationIssue]) -> None:
        self.issues = issues
        lines = "\n".join(f"  - {issue}" for issue in issues)
        super().__init__(f"fake OpenAI server saw {len(issues)} validation issue(s):\n{lines}")


# --------------------------------------------------------------------------- validation


class _Validators:
    """TypeAdapters over the official ``openai`` types, built once per server."""

    def __init__(self) -> None:
        from openai.types import Model
        from openai.types.chat import ChatCompletion, ChatCompletionChunk
        from openai.types.chat import completion_create_params as chat_params
        from openai.types.responses import (
            Response,
            ResponseInputMessageItem,
            ResponseOutputItem,
            ResponseStreamEvent,
        )
        from openai.types.responses import response_compact_params as compact_params
        from openai.types.responses import response_create_params as create_params
        from openai.types.responses.compacted_response import CompactedResponse
        from openai.types.shared import ErrorObject

        self.requests: dict[tuple[Endpoint, bool], Any] = {
            ("chat.completions", False): chat_params.CompletionCreateParamsNonStreaming,
            ("chat.completions", True): chat_params.CompletionCreateParamsStreaming,
            ("responses", False): create_params.ResponseCreateParamsNonStreaming,
            ("responses", True): create_params.ResponseCreateParamsStreaming,
            ("responses.compact", False): compact_params.ResponseCompactParams,
            ("responses.compact", True): compact_params.ResponseCompactParams,
        }
        self._adapters: dict[Any, TypeAdapter[Any]] = {}
        self.chat_completion = ChatCompletion
        self.chat_chunk = ChatCompletionChunk
        self.response = Response
        self.stream_event: Any = ResponseStreamEvent
        self.compacted = CompactedResponse
        self.output_item: Any = ResponseOutputItem
        self.input_message_item = ResponseInputMessageItem
        self.model = Model
        self.error = ErrorObject

    def adapter(self, tp: Any) -> TypeAdapter[Any]:
        if tp not in self._adapters:
            self._adapters[tp] = TypeAdapter(tp)
        return self._adapters[tp]

    def type_name(self, tp: Any) -> str:
        if tp is self.stream_event:
            return "ResponseStreamEvent"
        if tp is self.output_item:
            return "ResponseOutputItem"
        return str(getattr(tp, "__name__", None) or tp)


def _force(value: Any) -> Any:
    """Materialise pydantic's lazy ``Iterable`` validators so their items get validated."""
    if isinstance(value, dict):
        return {k: _force(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_force(v) for v in value]
    if isinstance(value, (str, bytes, bytearray)) or value is None:
        return value
    if isinstance(value, Iterator) or type(value).__name__ == "ValidatorIterator":
        return [_force(v) for v in value]
    return value


def _dropped_keys(raw: Any, validated: Any, path: str = "") -> list[str]:
    """Keys present in ``raw`` that validation against a TypedDict silently dropped."""
    out: list[str] = []
    if isinstance(raw, dict) and isinstance(validated, dict):
        for key, value in raw.items():
            where = f"{path}.{key}" if path else key
            if key not in validated:
                out.append(where)
            else:
                out.extend(_dropped_keys(value, validated[key], where))
    elif isinstance(raw, list) and isinstance(validated, list) and len(raw) == len(validated):
        for i, (r, v) in enumerate(zip(raw, validated, strict=True)):
            out.extend(_dropped_keys(r, v, f"{path}[{i}]"))
    return out


def _model_extras(value: Any, path: str = "") -> list[str]:
    """Fields a lenient (``extra="allow"``) SDK model accepted without knowing them."""
    out: list[str] = []
    if isinstance(value, BaseModel):
        for key in value.model_extra or {}:
            out.append(f"{path}.{key}" if path else key)
        for name in type(value).model_fields:
            out.extend(_model_extras(getattr(value, name), f"{path}.{name}" if path else name))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            out.extend(_model_extras(item, f"{path}[{i}]"))
    elif isinstance(value, dict):
        for key, item in value.items():
            out.extend(_model_extras(item, f"{path}.{key}" if path else str(key)))
    return out


def _summarize(err: ValidationError, limit: int = 6) -> str:
    """Readable summary of a pydantic error.

    Union branches whose ``type`` tag did not match are pruned, the deepest
    (most specific) errors come first, and union member lists in locations are
    shortened to their outer name.
    """
    errors = err.errors(include_url=False)
    rejected = {
        tuple(e["loc"][:-1])
        for e in errors
        if e["loc"] and e["loc"][-1] == "type" and e["type"] == "literal_error"
    }

    def pruned(e: Any) -> bool:
        loc = tuple(e["loc"])
        return any(loc[: len(prefix)] == prefix for prefix in rejected)

    kept = [e for e in errors if not pruned(e)] or errors
    kept.sort(key=lambda e: -len(e["loc"]))
    lines: list[str] = []
    for e in kept:
        loc = ".".join(str(p).split("[", 1)[0] for p in e["loc"])
        line = f"{loc}: {e['msg']} (got {str(e.get('input'))[:60]!r})"
        if line not in lines:
            lines.append(line)
    more = f" (+{len(lines) - limit} more)" if len(lines) > limit else ""
    return "; ".join(lines[:limit]) + more


def _strip_indexes(path: str) -> str:
    out, depth = [], 0
    for ch in path:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)
