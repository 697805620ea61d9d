"""A loopback fake of the OpenAI HTTP API for tests.

``FakeOpenAIServer`` is a real ``http.server.ThreadingHTTPServer`` bound to
127.0.0.1 on an ephemeral port, served from a background thread. It speaks the
wire formats of:

- ``POST /v1/chat/completions`` (JSON, or SSE ``chat.completion.chunk`` frames
  ending with ``data: [DONE]`` when ``stream`` is true),
- ``POST /v1/responses`` (JSON, or SSE events ``response.created``,
  ``response.in_progress``, ``response.output_item.added``,
  ``response.content_part.added``, ``response.output_text.delta``/``done``,
  ``response.content_part.done``, ``response.output_item.done`` and one of
  ``response.completed`` / ``response.incomplete`` / ``response.failed``),
- ``POST /v1/responses/compact`` (a ``response.compaction`` object: the kept
  items followed by one opaque ``{"type": "compaction", "encrypted_content"}``
  item),
- ``GET /v1/models``.

Behaviour is scripted per endpoint with a FIFO queue of behaviour objects
(:class:`Reply`, :class:`ErrorReply`, :class:`Malformed`, :class:`Drop`,
:class:`Failed`, :class:`Compact`) or a callable that receives the recorded
request and returns one; when the queue is empty the endpoint's default is
used. Every request is recorded (method, path, headers, raw bytes, parsed JSON).

Faithfulness: every request body is validated against the official ``openai``
package's request ``TypedDict`` for the endpoint (keys the SDK does not know
are reported too, since pydantic would silently drop them), and every JSON
document the fake sends is validated against the SDK's pydantic model
(``ChatCompletion``, ``ChatCompletionChunk``, ``Response``, each
``ResponseStreamEvent``, ``CompactedResponse``, ``Model``, ``ErrorObject``).
Problems are recorded as :class:`ValidationIssue` and raised by
:meth:`FakeOpenAIServer.check` (called on context-manager exit by default).

One documented deviation: the SDK types ``CompactedResponse.output`` as a list
of *output* items, whose ``message`` variant is assistant-only, while the API
documents the output as "all user messages, followed by a single compaction
item". Kept user messages are therefore validated as
``ResponseInputMessageItem`` (the SDK's type for a stored user message item)
and every other output item as ``ResponseOutputItem``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = [
    "Behaviour",
    "Compact",
    "Drop",
    "Endpoint",
    "ErrorReply",
    "Failed",
    "FakeOpenAIServer",
    "FakeOpenAIValidationError",
    "Malformed",
    "RecordedRequest",
    "Reply",
    "ValidationIssue",
    "fake_openai_fixture",
]

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


class Reply(_Behaviour):
    """A successful answer carrying assistant text.

    ``finish_reason="length"`` makes a truncated answer (chat ``finish_reason``
    ``length``; Responses ``status="incomplete"`` with reason
    ``max_output_tokens``). ``text=""`` is an empty answer. ``refusal`` makes a
    refusal instead of text. ``output_items`` (Responses only) replaces the
    generated message with the given raw output items, sent verbatim.
    ``tool_calls`` (chat completions only) adds these calls to the assistant
    message, each ``{"id": ..., "name": ..., "arguments": "<JSON text>"}``;
    the finish reason becomes ``tool_calls`` (streamed as one delta per call).
    """

    kind: Literal["reply"] = "reply"
    text: str = "ok"
    finish_reason: Literal["stop", "length"] = "stop"
    refusal: str | None = None
    output_items: list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, str]] | None = None
    chunk_chars: int = Field(default=8, ge=1, description="characters per streamed delta")


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


def _chat_tool_calls(calls: list[dict[str, str]]) -> list[dict[str, Any]]:
    """``Reply.tool_calls`` as chat-completions ``tool_calls`` entries."""
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call.get("arguments", "{}")},
        }
        for call in calls
    ]


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


# --------------------------------------------------------------------------- server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, fake: FakeOpenAIServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (timeouts, drops) is normal; a crash in the fake is an issue."""
        exc = sys.exc_info()[1]
        if exc is None or isinstance(exc, (ConnectionError, TimeoutError)):
            return
        self.fake._issue(
            "server", "unknown", type(exc).__name__, "".join(traceback.format_exception(exc))
        )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.server.fake._serve(self)

    def do_POST(self) -> None:
        self.server.fake._serve(self)

    def do_DELETE(self) -> None:
        self.server.fake._serve(self)


class _Dropped(Exception):
    """Internal: the scripted behaviour closed the connection."""


class FakeOpenAIServer:
    """Scriptable loopback OpenAI API.

    Use it as a context manager or through :func:`fake_openai_fixture`.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        models: tuple[str, ...] = ("gpt-5.5", "gpt-4o-mini"),
        strict_request_keys: bool = True,
        allowed_unknown_request_keys: frozenset[str] = frozenset(),
        check_on_exit: bool = True,
    ) -> None:
        """``api_key``: when set, requests without ``Authorization: Bearer <api_key>`` get 401.

        ``strict_request_keys``: report request keys the SDK's TypedDicts do not know.
        ``allowed_unknown_request_keys``: dotted paths (list indexes removed, e.g.
        ``"input.foo"``) exempt from that check.
        """
        self.api_key = api_key
        self.models = models
        self.strict_request_keys = strict_request_keys
        self.allowed_unknown_request_keys = allowed_unknown_request_keys
        self.check_on_exit = check_on_exit
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._queues: dict[Endpoint, deque[BehaviourSource]] = {e: deque() for e in _ENDPOINTS}
        self._defaults: dict[Endpoint, BehaviourSource] = {
            "chat.completions": Reply(),
            "responses": Reply(),
            "responses.compact": Compact(),
            "models": Reply(),
        }
        self._requests: list[RecordedRequest] = []
        self._issues: list[ValidationIssue] = []
        self._arrived = threading.Condition(self._lock)
        self._validators = _Validators()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            raise RuntimeError("fake OpenAI server already started")
        self._stopping.clear()
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"fake-openai:{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if exc_type is None and self.check_on_exit:
            self.check()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("fake OpenAI server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """Base URL including ``/v1``, as the ``openai`` client's ``base_url`` expects."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ---- scripting

    def script(self, endpoint: Endpoint, *behaviours: BehaviourSource) -> None:
        """Queue behaviours for ``endpoint``; each request consumes one, FIFO."""
        self._check_endpoint(endpoint)
        with self._lock:
            self._queues[endpoint].extend(behaviours)

    def set_default(self, endpoint: Endpoint, behaviour: BehaviourSource) -> None:
        """Behaviour used for ``endpoint`` whenever its queue is empty."""
        self._check_endpoint(endpoint)
        with self._lock:
            self._defaults[endpoint] = behaviour

    def pending(self, endpoint: Endpoint) -> int:
        with self._lock:
            return len(self._queues[endpoint])

    @staticmethod
    def _check_endpoint(endpoint: str) -> None:
        if endpoint not in _ENDPOINTS:
            raise ValueError(f"unknown endpoint {endpoint!r}; expected one of {_ENDPOINTS}")

    # ---- inspection

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, endpoint: Endpoint) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self._requests if r.endpoint == endpoint]

    def wait_for_requests(
        self, count: int, *, endpoint: Endpoint | None = None, timeout: float = 10.0
    ) -> list[RecordedRequest]:
        """Block until at least ``count`` requests (to ``endpoint`` if given) arrived."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                got = [r for r in self._requests if endpoint is None or r.endpoint == endpoint]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    where = endpoint or "any endpoint"
                    raise TimeoutError(
                        f"fake OpenAI server got {len(got)} request(s) to {where}"
                        f" within {timeout}s, expected {count}"
                    )
                self._arrived.wait(left)

    @property
    def issues(self) -> list[ValidationIssue]:
        with self._lock:
            return list(self._issues)

    def take_issues(self) -> list[ValidationIssue]:
        """Return and clear the recorded issues (for tests that provoke them on purpose)."""
        with self._lock:
            issues, self._issues = self._issues, []
            return issues

    def check(self) -> None:
        """Raise :class:`FakeOpenAIValidationError` if any issue was recorded."""
        issues = self.issues
        if issues:
            raise FakeOpenAIValidationError(issues)

    def _issue(
        self,
        direction: Literal["request", "response", "script", "route", "server"],
        endpoint: str,
        type_name: str,
        detail: str,
    ) -> None:
        with self._lock:
            self._issues.append(
                ValidationIssue(
                    direction=direction, endpoint=endpoint, type_name=type_name, detail=detail
                )
            )

    # ---- validation

    def _validate_request(self, endpoint: Endpoint, body: Any) -> None:
        if endpoint == "models":
            return
        if not isinstance(body, dict):
            self._issue("request", endpoint, "json", f"body is not a JSON object: {body!r:.200}")
            return
        stream = bool(body.get("stream")) and endpoint != "responses.compact"
        tp = self._validators.requests[(endpoint, stream)]
        name = self._validators.type_name(tp)
        try:
            validated = _force(self._validators.adapter(tp).validate_python(body))
        except ValidationError as err:
            self._issue("request", endpoint, name, _summarize(err))
            return
        if self.strict_request_keys:
            unknown = [
                k
                for k in _dropped_keys(body, validated)
                if _strip_indexes(k) not in self.allowed_unknown_request_keys
            ]
            if unknown:
                self._issue(
                    "request",
                    endpoint,
                    name,
                    f"keys unknown to the openai package: {', '.join(unknown)}",
                )

    def _validate_model(self, endpoint: str, model: type[BaseModel] | Any, payload: Any) -> None:
        name = self._validators.type_name(model)
        try:
            if isinstance(model, type) and issubclass(model, BaseModel):
                parsed: Any = model.model_validate(payload)
            else:
                parsed = self._validators.adapter(model).validate_python(payload)
        except ValidationError as err:
            self._issue("response", endpoint, name, _summarize(err))
            return
        extras = _model_extras(parsed)
        if extras:
            self._issue(
                "response",
                endpoint,
                name,
                f"fields unknown to the openai package: {', '.join(extras)}",
            )

    # ---- HTTP plumbing

    def _serve(self, h: _Handler) -> None:
        path, _, query = h.path.partition("?")
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        body: Any = None
        parse_error: str | None = None
        if raw:
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                parse_error = f"request body is not JSON ({err}): {raw[:200]!r}"
        endpoint = _ROUTES.get((h.command, path.rstrip("/") or "/"))
        record = RecordedRequest(
            method=h.command,
            path=path,
            query=query,
            endpoint=endpoint,
            headers={k.lower(): v for k, v in h.headers.items()},
            raw=raw,
            body=body,
            received_at=time.time(),
        )
        with self._arrived:
            self._requests.append(record)
            self._arrived.notify_all()

        if endpoint is None:
            self._issue("route", path, h.command, "no such endpoint in the fake")
            self._send_error(
                h,
                "unknown",
                ErrorReply(
                    status=404,
                    type="invalid_request_error",
                    code="unknown_url",
                    message=f"Invalid URL ({h.command} {path})",
                ),
                validate=True,
            )
            return
        if parse_error is not None:
            self._issue("request", endpoint, "json", parse_error)
            self._send_error(
                h,
                endpoint,
                ErrorReply(
                    status=400,
                    type="invalid_request_error",
                    message="We could not parse the JSON body of your request.",
                ),
                validate=True,
            )
            return
        if endpoint != "models":
            self._validate_request(endpoint, body)

        if self.api_key is not None and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            self._send_error(
                h,
                endpoint,
                ErrorReply(
                    status=401,
                    type="invalid_request_error",
                    code="invalid_api_key",
                    message="Incorrect API key provided.",
                ),
                validate=True,
            )
            return

        behaviour = self._next_behaviour(endpoint, record)
        if behaviour.delay_s and self._stopping.wait(behaviour.delay_s):
            self._drop(h)
            return
        try:
            self._dispatch(h, endpoint, record, behaviour)
        except _Dropped:
            self._drop(h)
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True

    def _next_behaviour(self, endpoint: Endpoint, record: RecordedRequest) -> Behaviour:
        with self._lock:
            queue = self._queues[endpoint]
            source = queue.popleft() if queue else self._defaults[endpoint]
        if callable(source) and not isinstance(source, BaseModel):
            result: object = source(record)
            if not isinstance(result, (Reply, ErrorReply, Malformed, Drop, Failed, Compact)):
                self._issue(
                    "script",
                    endpoint,
                    "behaviour",
                    f"callable returned {type(result).__name__}, not a behaviour",
                )
                return ErrorReply(message="fake: scripted callable returned no behaviour")
            return result
        return source

    def _dispatch(
        self, h: _Handler, endpoint: Endpoint, record: RecordedRequest, b: Behaviour
    ) -> None:
        body = record.body if isinstance(record.body, dict) else {}
        stream = bool(body.get("stream")) and endpoint in ("chat.completions", "responses")
        if isinstance(b, ErrorReply):
            self._send_error(h, endpoint, b, validate=True)
        elif isinstance(b, Drop):
            if stream and b.after_events:
                if endpoint == "chat.completions":
                    self._stream_chat(h, body, Reply(text="x" * 8 * b.after_events), b.after_events)
                else:
                    self._stream_response(
                        h, body, Reply(text="x" * 8 * b.after_events), b.after_events
                    )
            raise _Dropped
        elif isinstance(b, Malformed):
            if stream:
                self._start_stream(h)
                self._write_chunk(h, f"data: {b.body}\n\n".encode())
                self._end_stream(h)
            else:
                self._send_json_bytes(h, 200, b.body.encode())
        elif endpoint == "models":
            self._send_models(h)
        elif endpoint == "responses.compact":
            if not isinstance(b, Compact):
                self._script_mismatch(h, endpoint, b)
            else:
                self._send_compact(h, body, b)
        elif endpoint == "chat.completions":
            if not isinstance(b, Reply):
                self._script_mismatch(h, endpoint, b)
            elif stream:
                self._stream_chat(h, body, b, None)
            else:
                self._send_chat(h, body, b)
        elif endpoint == "responses":
            if not isinstance(b, (Reply, Failed)):
                self._script_mismatch(h, endpoint, b)
            elif stream:
                self._stream_response(h, body, b, None)
            else:
                self._send_response(h, body, b)

    def _script_mismatch(self, h: _Handler, endpoint: Endpoint, b: Behaviour) -> None:
        self._issue(
            "script",
            endpoint,
            type(b).__name__,
            f"behaviour kind {b.kind!r} does not apply to this endpoint",
        )
        self._send_error(
            h,
            endpoint,
            ErrorReply(message=f"fake: behaviour {b.kind!r} does not apply to {endpoint}"),
            validate=False,
        )

    def _drop(self, h: _Handler) -> None:
        h.close_connection = True
        with contextlib.suppress(OSError):
            h.wfile.flush()
        with contextlib.suppress(OSError):
            h.connection.shutdown(socket.SHUT_RDWR)

    def _send_json_bytes(
        self, h: _Handler, status: int, data: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.send_header("x-request-id", f"req_{uuid.uuid4().hex[:24]}")
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

    def _send_json(self, h: _Handler, endpoint: str, payload: Any, model: Any) -> None:
        self._validate_model(endpoint, model, payload)
        self._send_json_bytes(h, 200, json.dumps(payload).encode())

    def _send_error(self, h: _Handler, endpoint: str, e: ErrorReply, *, validate: bool) -> None:
        error = {"message": e.message, "type": e.type, "param": e.param, "code": e.code}
        if validate:
            self._validate_model(endpoint, self._validators.error, error)
        headers = {"retry-after": str(e.retry_after_s)} if e.retry_after_s is not None else None
        self._send_json_bytes(h, e.status, json.dumps({"error": error}).encode(), headers)

    def _start_stream(self, h: _Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream; charset=utf-8")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Transfer-Encoding", "chunked")
        h.send_header("x-request-id", f"req_{uuid.uuid4().hex[:24]}")
        h.end_headers()
        h.wfile.flush()

    @staticmethod
    def _write_chunk(h: _Handler, data: bytes) -> None:
        h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        h.wfile.flush()

    @staticmethod
    def _end_stream(h: _Handler) -> None:
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

    # ---- /v1/models

    def _send_models(self, h: _Handler) -> None:
        data = [
            {"id": m, "object": "model", "created": 1_700_000_000, "owned_by": "fake-openai"}
            for m in self.models
        ]
        for item in data:
            self._validate_model("models", self._validators.model, item)
        self._send_json_bytes(h, 200, json.dumps({"object": "list", "data": data}).encode())

    # ---- /v1/chat/completions

    @staticmethod
    def _usage_chat(body: dict[str, Any], text: str) -> dict[str, int]:
        prompt = max(1, len(json.dumps(body.get("messages", ""))) // 4)
        completion = max(1, len(text) // 4) if text else 0
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _send_chat(self, h: _Handler, body: dict[str, Any], b: Reply) -> None:
        text = b.refusal or b.text
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if b.refusal else b.text,
            "refusal": b.refusal,
            "annotations": [],
        }
        finish: str = b.finish_reason
        if b.tool_calls:
            message["tool_calls"] = _chat_tool_calls(b.tool_calls)
            finish = "tool_calls"
        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model", "unknown")),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": self._usage_chat(body, text),
            "system_fingerprint": "fp_fake",
        }
        self._send_json(h, "chat.completions", payload, self._validators.chat_completion)

    def _stream_chat(
        self, h: _Handler, body: dict[str, Any], b: Reply, drop_after: int | None
    ) -> None:
        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        model = str(body.get("model", "unknown"))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        field = "refusal" if b.refusal is not None else "content"
        text = b.refusal if b.refusal is not None else b.text

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            c: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                c["usage"] = None
            return c

        chunks = [chunk({"role": "assistant", "content": "", "refusal": None}, None)]
        chunks += [
            chunk({field: text[i : i + b.chunk_chars]}, None)
            for i in range(0, len(text), b.chunk_chars)
        ]
        finish: str = b.finish_reason
        if b.tool_calls:
            calls = _chat_tool_calls(b.tool_calls)
            chunks += [
                chunk({"tool_calls": [{"index": i, **call}]}, None) for i, call in enumerate(calls)
            ]
            finish = "tool_calls"
        chunks.append(chunk({}, finish))
        if include_usage:
            chunks.append(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "system_fingerprint": "fp_fake",
                    "choices": [],
                    "usage": self._usage_chat(body, text),
                }
            )
        self._start_stream(h)
        for i, c in enumerate(chunks):
            if drop_after is not None and i >= drop_after:
                raise _Dropped
            self._validate_model("chat.completions", self._validators.chat_chunk, c)
            self._write_chunk(h, f"data: {json.dumps(c)}\n\n".encode())
        self._write_chunk(h, b"data: [DONE]\n\n")
        self._end_stream(h)

    # ---- /v1/responses

    @staticmethod
    def _usage_responses(body: dict[str, Any], text: str) -> dict[str, Any]:
        prompt = max(1, len(json.dumps(body.get("input", ""))) // 4)
        out = max(1, len(text) // 4) if text else 0
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + out,
        }

    @staticmethod
    def _response_envelope(body: dict[str, Any], rid: str, status: str) -> dict[str, Any]:
        instructions = body.get("instructions")
        return {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": str(body.get("model", "unknown")),
            "output": [],
            "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": [],
            "instructions": instructions if isinstance(instructions, str) else None,
            "previous_response_id": body.get("previous_response_id"),
            "metadata": body.get("metadata") or {},
            "error": None,
            "incomplete_details": None,
            "usage": None,
        }

    def _response_items(self, b: Reply | Failed) -> list[dict[str, Any]]:
        if isinstance(b, Failed):
            return []
        if b.output_items is not None:
            return [dict(item) for item in b.output_items]
        status = "incomplete" if b.finish_reason == "length" else "completed"
        part: dict[str, Any]
        if b.refusal is not None:
            part = {"type": "refusal", "refusal": b.refusal}
        else:
            part = {"type": "output_text", "text": b.text, "annotations": [], "logprobs": []}
        return [
            {
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "role": "assistant",
                "status": status,
                "content": [part],
            }
        ]

    def _final_response(
        self, body: dict[str, Any], rid: str, b: Reply | Failed, items: list[dict[str, Any]]
    ) -> dict[str, Any]:
        text = "" if isinstance(b, Failed) else (b.refusal or b.text)
        if isinstance(b, Failed):
            resp = self._response_envelope(body, rid, "failed")
            resp["error"] = {"code": b.code, "message": b.message}
        elif b.finish_reason == "length":
            resp = self._response_envelope(body, rid, "incomplete")
            resp["incomplete_details"] = {"reason": "max_output_tokens"}
        else:
            resp = self._response_envelope(body, rid, "completed")
        resp["output"] = items
        resp["usage"] = self._usage_responses(body, text)
        return resp

    def _send_response(self, h: _Handler, body: dict[str, Any], b: Reply | Failed) -> None:
        rid = f"resp_{uuid.uuid4().hex[:24]}"
        payload = self._final_response(body, rid, b, self._response_items(b))
        self._send_json(h, "responses", payload, self._validators.response)

    def _stream_response(
        self, h: _Handler, body: dict[str, Any], b: Reply | Failed, drop_after: int | None
    ) -> None:
        rid = f"resp_{uuid.uuid4().hex[:24]}"
        items = self._response_items(b)
        events: list[dict[str, Any]] = [
            {
                "type": "response.created",
                "response": self._response_envelope(body, rid, "in_progress"),
            },
            {
                "type": "response.in_progress",
                "response": self._response_envelope(body, rid, "in_progress"),
            },
        ]
        chunk = b.chunk_chars if isinstance(b, Reply) else 8
        for index, item in enumerate(items):
            events.extend(self._item_events(item, index, chunk))
        final = self._final_response(body, rid, b, items)
        final_type = {
            "completed": "response.completed",
            "incomplete": "response.incomplete",
            "failed": "response.failed",
        }[final["status"]]
        events.append({"type": final_type, "response": final})
        self._start_stream(h)
        for seq, event in enumerate(events):
            if drop_after is not None and seq >= drop_after:
                raise _Dropped
            event["sequence_number"] = seq
            self._validate_model("responses", self._validators.stream_event, event)
            frame = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
            self._write_chunk(h, frame.encode())
        self._end_stream(h)

    @staticmethod
    def _item_events(item: dict[str, Any], index: int, chunk: int) -> list[dict[str, Any]]:
        is_message = item.get("type") == "message" and item.get("role") == "assistant"
        if not is_message:
            return [
                {"type": "response.output_item.added", "output_index": index, "item": item},
                {"type": "response.output_item.done", "output_index": index, "item": item},
            ]
        item_id = str(item["id"])
        added = {**item, "status": "in_progress", "content": []}
        events: list[dict[str, Any]] = [
            {"type": "response.output_item.added", "output_index": index, "item": added}
        ]
        for ci, part in enumerate(item.get("content", [])):
            where = {"item_id": item_id, "output_index": index, "content_index": ci}
            if part.get("type") == "refusal":
                full = str(part.get("refusal", ""))
                events.append(
                    {
                        "type": "response.content_part.added",
                        **where,
                        "part": {"type": "refusal", "refusal": ""},
                    }
                )
                events += [
                    {"type": "response.refusal.delta", **where, "delta": full[i : i + chunk]}
                    for i in range(0, len(full), chunk)
                ]
                events.append({"type": "response.refusal.done", **where, "refusal": full})
            else:
                full = str(part.get("text", ""))
                events.append(
                    {
                        "type": "response.content_part.added",
                        **where,
                        "part": {
                            "type": "output_text",
                            "text": "",
                            "annotations": [],
                            "logprobs": [],
                        },
                    }
                )
                events += [
                    {
                        "type": "response.output_text.delta",
                        **where,
                        "delta": full[i : i + chunk],
                        "logprobs": [],
                    }
                    for i in range(0, len(full), chunk)
                ]
                events.append(
                    {"type": "response.output_text.done", **where, "text": full, "logprobs": []}
                )
            events.append({"type": "response.content_part.done", **where, "part": part})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        return events

    # ---- /v1/responses/compact

    def _send_compact(self, h: _Handler, body: dict[str, Any], b: Compact) -> None:
        if b.kept is not None:
            kept = [dict(item) for item in b.kept]
        else:
            kept = _kept_user_messages(body.get("input"))
        token = b.encrypted_content or (
            "enc_" + uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(body, sort_keys=True)).hex
        )
        compaction = {
            "id": f"cmp_{uuid.uuid4().hex[:24]}",
            "type": "compaction",
            "encrypted_content": token,
        }
        text = json.dumps(body.get("input", ""))
        payload = {
            "id": f"resp_{uuid.uuid4().hex[:24]}",
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*kept, compaction],
            "usage": self._usage_responses(body, text[: len(text) // 10]),
        }
        self._validate_compacted(payload)
        self._send_json_bytes(h, 200, json.dumps(payload).encode())

    def _validate_compacted(self, payload: dict[str, Any]) -> None:
        v = self._validators
        envelope = {
            **payload,
            "output": [item for item in payload["output"] if not _is_input_message(item)],
        }
        self._validate_model("responses.compact", v.compacted, envelope)
        for item in payload["output"]:
            if _is_input_message(item):
                self._validate_model("responses.compact", v.input_message_item, item)
        if not payload["output"] or payload["output"][-1].get("type") != "compaction":
            self._issue(
                "response",
                "responses.compact",
                "CompactedResponse",
                "output must end with exactly one compaction item",
            )
        if sum(1 for item in payload["output"] if item.get("type") == "compaction") != 1:
            self._issue(
                "response",
                "responses.compact",
                "CompactedResponse",
                "output must hold exactly one compaction item",
            )


def _is_input_message(item: Mapping[str, Any]) -> bool:
    return item.get("type") == "message" and item.get("role") in ("user", "system", "developer")


def _kept_user_messages(items: Any) -> list[dict[str, Any]]:
    """The request's user messages, shaped as stored input message items."""
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    kept: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        if item.get("type", "message") != "message":
            continue
        content = item.get("content")
        if isinstance(content, str):
            content = [{"type": "input_text", "text": content}]
        kept.append(
            {
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "role": "user",
                "status": "completed",
                "content": content,
            }
        )
    return kept


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


def fake_openai_fixture(**kwargs: Any) -> Iterator[FakeOpenAIServer]:
    """Generator for a pytest fixture: ``yield from fake_openai_fixture()``.

    The server is stopped after the test and :meth:`FakeOpenAIServer.check`
    raises at teardown if any validation issue was recorded.
    """
    with FakeOpenAIServer(**kwargs) as server:
        yield server
