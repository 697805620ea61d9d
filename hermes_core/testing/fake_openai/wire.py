"""HTTP plumbing shared by the endpoints: the server, JSON and SSE framing, issues."""

from __future__ import annotations

import json
import sys
import threading
import traceback
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from .behaviours import ErrorReply
from .validation import ValidationIssue, _model_extras, _summarize, _Validators

if TYPE_CHECKING:
    from .server import FakeOpenAIServer


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, fake: FakeOpenAIServer) -> None:
        self.fake = fake
        super().__init__((fake.host, fake.requested_port), _Handler)

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


class _Wire:
    """Sending answers and recording issues (the endpoints build on it)."""

    _lock: threading.Lock
    _issues: list[ValidationIssue]
    _validators: _Validators
    #: characters of request JSON per reported token (usage is computed from it)
    chars_per_token: float = 4.0

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
