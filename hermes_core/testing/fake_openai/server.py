"""The scriptable loopback server: lifecycle, scripting, inspection, routing."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from pydantic import BaseModel, ValidationError

from .behaviours import (
    _ENDPOINTS,
    _ROUTES,
    Behaviour,
    BehaviourSource,
    Compact,
    Drop,
    Endpoint,
    ErrorReply,
    Failed,
    Malformed,
    Reply,
)
from .chat import ChatCompletions
from .responses import ResponsesAPI
from .validation import (
    FakeOpenAIValidationError,
    RecordedRequest,
    ValidationIssue,
    _dropped_keys,
    _force,
    _strip_indexes,
    _summarize,
    _Validators,
)
from .wire import _Dropped, _Handler, _HTTPServer


class FakeOpenAIServer(ChatCompletions, ResponsesAPI):
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
        host: str = "127.0.0.1",
        port: int = 0,
        chars_per_token: float = 4.0,
    ) -> None:
        """``api_key``: when set, requests without ``Authorization: Bearer <api_key>`` get 401.

        ``strict_request_keys``: report request keys the SDK's TypedDicts do not know.
        ``allowed_unknown_request_keys``: dotted paths (list indexes removed, e.g.
        ``"input.foo"``) exempt from that check.
        ``host``/``port``: where to listen (port 0: an ephemeral port).
        ``chars_per_token``: reported usage counts this many characters of the
        request's messages (or input) as one token; lower reports more tokens.
        """
        if chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be positive, got {chars_per_token!r}")
        self.host = host
        self.requested_port = port
        self.chars_per_token = chars_per_token
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
        return f"http://{self.host}:{self.port}/v1"

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

    # ---- /v1/models

    def _send_models(self, h: _Handler) -> None:
        data = [
            {"id": m, "object": "model", "created": 1_700_000_000, "owned_by": "fake-openai"}
            for m in self.models
        ]
        for item in data:
            self._validate_model("models", self._validators.model, item)
        self._send_json_bytes(h, 200, json.dumps({"object": "list", "data": data}).encode())


def fake_openai_fixture(**kwargs: Any) -> Iterator[FakeOpenAIServer]:
    """Generator for a pytest fixture: ``yield from fake_openai_fixture()``.

    The server is stopped after the test and :meth:`FakeOpenAIServer.check`
    raises at teardown if any validation issue was recorded.
    """
    with FakeOpenAIServer(**kwargs) as server:
        yield server
