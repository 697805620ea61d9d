"""A typed JSON-RPC client for ``codex app-server`` over stdio.

One process per :class:`CodexAppServer`. A reader thread parses stdout line by
line: replies are matched to requests by ``id``; notifications are fanned out
to the subscriptions open at that moment; server-initiated requests are
answered with a JSON-RPC error (this client runs with ``approval_policy =
"never"`` and handles none). A line that is not a JSON object is logged,
kept in :attr:`CodexAppServer.malformed_lines` and skipped; it never stops the
reader. End of stdout (the process died) wakes every waiter with
:class:`CodexProcessExitedError`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from pydantic import ValidationError

from .binary import find_codex_binary
from .config import CodexLaunchSettings, CodexRuntimeConfig
from .errors import (
    CodexBinaryNotFoundError,
    CodexProcessExitedError,
    CodexProtocolError,
    CodexRpcError,
    CodexThreadNotFoundError,
    CodexTimeoutError,
)
from .protocol import (
    ClientInfo,
    CompactionOutcome,
    ErrorNotice,
    InboundMessage,
    InitializeResult,
    ThreadInfo,
    TurnErrorInfo,
    TurnInfo,
    TurnOutcome,
)

logger = logging.getLogger(__name__)

#: Server error texts that mean "no such thread".
_THREAD_NOT_FOUND_MARKERS = (
    "thread not found",
    "no rollout found",
    "unknown thread",
    "invalid thread id",
)
_STDERR_TAIL_LINES = 40
_MALFORMED_KEEP = 50


class _Pending:
    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params
        self.done = threading.Event()
        self.message: InboundMessage | None = None


class _EndOfStream:
    """Sentinel pushed to subscriptions when stdout closes."""


class _Subscription:
    def __init__(self) -> None:
        self.queue: queue.Queue[InboundMessage | _EndOfStream] = queue.Queue()

    def next(self, deadline: float) -> InboundMessage | _EndOfStream | None:
        """The next notification, the end-of-stream sentinel, or ``None`` at the deadline."""
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            return self.queue.get(timeout=left)
        except queue.Empty:
            return None


class _TurnWatch:
    """What was seen of one turn while waiting for its ``turn/completed``."""

    def __init__(self, thread_id: str, turn_id: str | None) -> None:
        self.thread_id = thread_id
        self.turn_id = turn_id
        self.items: list[dict[str, Any]] = []
        self.errors: list[ErrorNotice] = []
        self.token_usage: dict[str, Any] | None = None
        self.final: TurnInfo | None = None


class CodexAppServer:
    """A running ``codex app-server`` and the JSON-RPC session with it."""

    def __init__(
        self, settings: CodexLaunchSettings, *, runtime: CodexRuntimeConfig | None = None
    ) -> None:
        """``runtime``, when given, is written to ``settings.codex_home/config.toml`` at start."""
        self.settings = settings
        self.runtime = runtime
        self._proc: subprocess.Popen[bytes] | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._subs: list[_Subscription] = []
        self._thread_locks: dict[str, threading.Lock] = {}
        self._eof = threading.Event()
        self._stderr: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        self._malformed: deque[str] = deque(maxlen=_MALFORMED_KEEP)
        self._readers: list[threading.Thread] = []
        self.initialize_result: InitializeResult | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> InitializeResult:
        """Spawn the process and run the ``initialize`` / ``initialized`` handshake.

        ``initialize`` waits up to ``start_timeout_s`` (a cold start of the binary
        can take far longer than any later request, ``request_timeout_s``); on any
        failure the process is closed again.
        """
        if self._proc is not None:
            raise CodexProtocolError("codex app-server client already started")
        binary = self._resolve_binary()
        s = self.settings
        if self.runtime is not None:
            self.runtime.write(s.codex_home)
        else:
            s.codex_home.mkdir(parents=True, exist_ok=True)
        s.effective_home.mkdir(parents=True, exist_ok=True)
        argv = [str(binary), "app-server"]
        for override in s.config_overrides:
            argv += ["-c", override]
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._child_env(),
                cwd=str(s.cwd or s.effective_home),
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as err:
            raise CodexBinaryNotFoundError(f"cannot run codex binary {binary}: {err}") from err
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._readers = [
            threading.Thread(
                target=self._read_stdout,
                args=(self._proc.stdout,),
                daemon=True,
                name=f"codex-stdout-{self._proc.pid}",
            ),
            threading.Thread(
                target=self._read_stderr,
                args=(self._proc.stderr,),
                daemon=True,
                name=f"codex-stderr-{self._proc.pid}",
            ),
        ]
        for reader in self._readers:
            reader.start()
        try:
            info = ClientInfo(name=s.client_name, version=s.client_version)
            result = self.request(
                "initialize",
                {"clientInfo": info.model_dump(by_alias=True)},
                timeout=s.start_timeout_s,
            )
            self.notify("initialized")
        except BaseException:
            self.close()
            raise
        self.initialize_result = InitializeResult.model_validate(result or {})
        return self.initialize_result

    def close(self, timeout: float = 5.0) -> int | None:
        """Close stdin, wait for the process, escalate to SIGTERM then SIGKILL of its group."""
        proc = self._proc
        if proc is None:
            return None
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
                try:
                    proc.wait(timeout=timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
        for reader in self._readers:
            reader.join(timeout=timeout)
        for stream in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        return proc.returncode

    def __enter__(self) -> CodexAppServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and not self._eof.is_set()

    @property
    def stderr_tail(self) -> str:
        with self._lock:
            return "\n".join(self._stderr)

    @property
    def malformed_lines(self) -> list[str]:
        """Lines from stdout that were not JSON-RPC objects (most recent last)."""
        with self._lock:
            return list(self._malformed)

    def _resolve_binary(self) -> Path:
        binary = self.settings.binary
        if binary is None:
            return find_codex_binary()
        if not binary.is_file():
            raise CodexBinaryNotFoundError(f"codex binary {binary} does not exist")
        if not os.access(binary, os.X_OK):
            raise CodexBinaryNotFoundError(f"codex binary {binary} is not executable")
        return binary

    def _child_env(self) -> dict[str, str]:
        s = self.settings
        env = {k: os.environ[k] for k in s.inherit_env if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env["HOME"] = str(s.effective_home)
        env["CODEX_HOME"] = str(s.codex_home)
        env.update(s.env)
        return env

    # ------------------------------------------------------------------ readers

    def _read_stdout(self, stream: IO[bytes]) -> None:
        try:
            for raw in stream:
                self._dispatch_line(raw)
        except (OSError, ValueError) as err:  # closed under us
            logger.debug("codex stdout reader stopped: %s", err)
        finally:
            self._on_eof()

    def _read_stderr(self, stream: IO[bytes]) -> None:
        try:
            for raw in stream:
                line = raw.decode("utf-8", errors="replace").rstrip()
                if line:
                    with self._lock:
                        self._stderr.append(line)
                    logger.debug("codex stderr: %s", line)
        except (OSError, ValueError):
            pass

    def _malformed_line(self, line: str, reason: str) -> None:
        logger.warning(
            "codex app-server wrote a malformed JSON-RPC line (%s): %.200r", reason, line
        )
        with self._lock:
            self._malformed.append(line)

    def _dispatch_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            return
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            self._malformed_line(line, f"not JSON: {err.msg} at column {err.colno}")
            return
        if not isinstance(data, dict):
            self._malformed_line(line, f"a JSON {type(data).__name__}, not an object")
            return
        try:
            msg = InboundMessage.model_validate(data)
        except ValidationError as err:
            self._malformed_line(line, f"bad field: {err.errors()[0]['loc']}")
            return
        kind = msg.kind
        if kind == "invalid":
            self._malformed_line(line, "neither 'id' nor 'method'")
        elif kind in ("response", "error"):
            self._resolve(msg, line)
        elif kind == "notification":
            with self._lock:
                subs = list(self._subs)
            for sub in subs:
                sub.queue.put(msg)
        else:
            self._refuse_server_request(msg)

    def _resolve(self, msg: InboundMessage, line: str) -> None:
        key = msg.id if isinstance(msg.id, int) else None
        if key is None and isinstance(msg.id, str) and msg.id.isdigit():
            key = int(msg.id)
        with self._lock:
            pending = self._pending.pop(key, None) if key is not None else None
        if pending is None:
            self._malformed_line(line, f"reply to unknown request id {msg.id!r}")
            return
        pending.message = msg
        pending.done.set()

    def _refuse_server_request(self, msg: InboundMessage) -> None:
        logger.warning("codex app-server sent request %r; this client declines it", msg.method)
        reply = {
            "id": msg.id,
            "error": {"code": -32601, "message": f"hermes-core does not handle {msg.method!r}"},
        }
        with contextlib.suppress(CodexProcessExitedError):
            self._write(reply)

    def _on_eof(self) -> None:
        self._eof.set()
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            subs = list(self._subs)
        for p in pending:
            p.done.set()
        for sub in subs:
            sub.queue.put(_EndOfStream())

    # ------------------------------------------------------------------ JSON-RPC

    def _exited(self, doing: str) -> CodexProcessExitedError:
        code: int | None = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
        for reader in self._readers:  # let the readers drain what the process wrote last
            if reader is not threading.current_thread():
                reader.join(timeout=1)
        malformed = self.malformed_lines
        extra = f"; last malformed stdout line: {malformed[-1]!r:.200}" if malformed else ""
        return CodexProcessExitedError(
            f"codex app-server exited {doing}{extra}",
            returncode=code,
            stderr_tail=self.stderr_tail[-2000:],
        )

    def _write(self, payload: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise CodexProtocolError("codex app-server client is not started")
        data = (json.dumps(payload, separators=(",", ":")) + "\n").encode()
        with self._write_lock:
            try:
                proc.stdin.write(data)
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as err:
                raise self._exited(f"before {payload.get('method', 'a reply')!r} was sent") from err

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        payload: dict[str, Any] = {"method": method}
        if params is not None:
            payload["params"] = params
        self._write(payload)

    def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        """Send a request and return its ``result``; raise on an error object, EOF or timeout."""
        if self._eof.is_set():
            raise self._exited(f"before {method!r} was sent")
        request_id = next(self._ids)
        pending = _Pending(method, params or {})
        with self._lock:
            self._pending[request_id] = pending
        payload: dict[str, Any] = {"id": request_id, "method": method, "params": params or {}}
        try:
            self._write(payload)
        except BaseException:
            with self._lock:
                self._pending.pop(request_id, None)
            raise
        wait = self.settings.request_timeout_s if timeout is None else timeout
        if not pending.done.wait(wait):
            with self._lock:
                self._pending.pop(request_id, None)
            raise CodexTimeoutError(f"no reply to {method!r} within {wait:g}s")
        msg = pending.message
        if msg is None:
            raise self._exited(f"while waiting for the reply to {method!r}")
        if msg.error is not None:
            raise self._rpc_error(method, pending.params, msg.error.code, msg.error.message)
        return msg.result

    @staticmethod
    def _rpc_error(method: str, params: dict[str, Any], code: int, message: str) -> CodexRpcError:
        thread_id = params.get("threadId")
        if isinstance(thread_id, str) and any(
            marker in message.lower() for marker in _THREAD_NOT_FOUND_MARKERS
        ):
            return CodexThreadNotFoundError(method, code, message, thread_id)
        return CodexRpcError(method, code, message)

    @contextlib.contextmanager
    def _subscribe(self) -> Iterator[_Subscription]:
        sub = _Subscription()
        with self._lock:
            self._subs.append(sub)
        try:
            yield sub
        finally:
            with self._lock:
                self._subs.remove(sub)

    def _thread_lock(self, thread_id: str) -> threading.Lock:
        with self._lock:
            return self._thread_locks.setdefault(thread_id, threading.Lock())

    # ------------------------------------------------------------------ threads and turns

    def start_thread(
        self,
        *,
        cwd: str | None = None,
        model: str | None = None,
        model_provider: str | None = None,
        ephemeral: bool | None = None,
        developer_instructions: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> ThreadInfo:
        """``thread/start``; returns the new thread (its ``id`` is the one to store)."""
        params = _drop_none(
            {
                "cwd": cwd,
                "model": model,
                "modelProvider": model_provider,
                "ephemeral": ephemeral,
                "developerInstructions": developer_instructions,
            }
        )
        params.update(extra or {})
        return self._thread_result("thread/start", params)

    def resume_thread(self, thread_id: str, *, extra: dict[str, Any] | None = None) -> ThreadInfo:
        """``thread/resume``: load a stored thread (or rejoin a running one) into this process."""
        params: dict[str, Any] = {"threadId": thread_id, **(extra or {})}
        return self._thread_result("thread/resume", params)

    def _thread_result(self, method: str, params: dict[str, Any]) -> ThreadInfo:
        result = self.request(method, params)
        try:
            return ThreadInfo.model_validate(result["thread"])
        except (TypeError, KeyError, ValidationError) as err:
            raise CodexProtocolError(
                f"reply to {method!r} has no valid 'thread': {str(result)[:200]}"
            ) from err

    def run_turn(self, thread_id: str, text: str, *, timeout: float = 120.0) -> TurnOutcome:
        """``turn/start`` with one text input; wait for ``turn/completed`` of that turn."""
        deadline = time.monotonic() + timeout
        with self._thread_lock(thread_id), self._subscribe() as sub:
            result = self.request(
                "turn/start",
                {"threadId": thread_id, "input": [{"type": "text", "text": text}]},
                timeout=timeout,
            )
            try:
                turn = TurnInfo.model_validate(result["turn"])
            except (TypeError, KeyError, ValidationError) as err:
                raise CodexProtocolError(
                    f"reply to 'turn/start' has no valid 'turn': {str(result)[:200]}"
                ) from err
            watch = self._await_turn(sub, _TurnWatch(thread_id, turn.id), deadline, "turn")
        final = watch.final
        assert final is not None
        return TurnOutcome(
            thread_id=thread_id,
            turn_id=final.id,
            status=final.status,
            error=final.error,
            errors=watch.errors,
            items=watch.items,
            duration_ms=final.duration_ms,
            agent_messages=[
                str(i.get("text", "")) for i in watch.items if i.get("type") == "agentMessage"
            ],
        )

    def compact_thread(self, thread_id: str, *, timeout: float = 120.0) -> CompactionOutcome:
        """``thread/compact/start``, then wait for the compaction turn to complete or fail.

        The request is answered with ``{}`` at once; the compaction runs as its
        own turn (``turn/started``, ``item/*`` with a ``contextCompaction``
        item, ``turn/completed``). A failed turn is returned, not raised.
        """
        deadline = time.monotonic() + timeout
        with self._thread_lock(thread_id), self._subscribe() as sub:
            result = self.request("thread/compact/start", {"threadId": thread_id}, timeout=timeout)
            if result not in ({}, None):
                logger.info("thread/compact/start answered %r (expected {})", result)
            watch = self._await_turn(sub, _TurnWatch(thread_id, None), deadline, "compaction")
        final = watch.final
        assert final is not None
        item_ids = [
            str(i["id"]) for i in watch.items if i.get("type") == "contextCompaction" and "id" in i
        ]
        return CompactionOutcome(
            thread_id=thread_id,
            turn_id=final.id,
            status=final.status,
            error=final.error,
            errors=watch.errors,
            item_ids=item_ids,
            duration_ms=final.duration_ms,
            token_usage=watch.token_usage,
        )

    def _await_turn(
        self, sub: _Subscription, watch: _TurnWatch, deadline: float, what: str
    ) -> _TurnWatch:
        while True:
            msg = sub.next(deadline)
            if msg is None:
                started = watch.turn_id or "not started"
                raise CodexTimeoutError(
                    f"{what} on thread {watch.thread_id} did not finish in time (turn {started})"
                )
            if isinstance(msg, _EndOfStream):
                raise self._exited(f"during the {what} on thread {watch.thread_id}")
            params = msg.params if isinstance(msg.params, dict) else {}
            if params.get("threadId") != watch.thread_id:
                continue
            if msg.method == "turn/started" and watch.turn_id is None:
                watch.turn_id = _turn_id(params)
                continue
            if watch.turn_id is None:
                continue
            if msg.method == "turn/completed" and _turn_id(params) == watch.turn_id:
                watch.final = self._turn_info(params)
                if watch.final.status == "failed" and watch.final.error is None and watch.errors:
                    watch.final.error = watch.errors[-1].error
                return watch
            if params.get("turnId") != watch.turn_id:
                continue
            if msg.method == "item/completed" and isinstance(params.get("item"), dict):
                watch.items.append(params["item"])
            elif msg.method == "error":
                watch.errors.append(self._error_notice(params))
            elif msg.method == "thread/tokenUsage/updated":
                usage = params.get("tokenUsage")
                watch.token_usage = usage if isinstance(usage, dict) else None

    @staticmethod
    def _turn_info(params: dict[str, Any]) -> TurnInfo:
        try:
            return TurnInfo.model_validate(params.get("turn"))
        except ValidationError as err:
            raise CodexProtocolError(
                f"'turn/completed' carries no valid turn: {str(params)[:200]}"
            ) from err

    @staticmethod
    def _error_notice(params: dict[str, Any]) -> ErrorNotice:
        try:
            return ErrorNotice.model_validate(params)
        except ValidationError:
            return ErrorNotice(
                thread_id=str(params.get("threadId", "")),
                turn_id=str(params.get("turnId", "")),
                error=TurnErrorInfo(message=str(params.get("error", params))[:500]),
            )


def _turn_id(params: dict[str, Any]) -> str | None:
    turn = params.get("turn")
    if isinstance(turn, dict) and isinstance(turn.get("id"), str):
        return str(turn["id"])
    return None


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
