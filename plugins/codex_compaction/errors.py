"""Errors raised by the Codex app-server client; each message names what went wrong."""

from __future__ import annotations

from hermes_hookspecs import HermesError


class CodexAppServerError(HermesError):
    """Base class of the Codex app-server client's errors."""


class CodexBinaryNotFoundError(CodexAppServerError):
    """The ``codex`` executable could not be found or started."""


class CodexProcessExitedError(CodexAppServerError):
    """The app-server process ended (EOF on stdout) while a reply was awaited.

    :param returncode: the exit status when known (``None`` if it is still closing).
    :param stderr_tail: the last lines the process wrote to stderr.
    """

    def __init__(self, message: str, *, returncode: int | None, stderr_tail: str) -> None:
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        detail = f"; stderr tail: {stderr_tail!r}" if stderr_tail else ""
        super().__init__(f"{message} (exit status {returncode}){detail}")


class CodexRpcError(CodexAppServerError):
    """The app-server answered a request with a JSON-RPC error object."""

    def __init__(self, method: str, code: int, message: str) -> None:
        self.method = method
        self.code = code
        self.server_message = message
        super().__init__(f"codex app-server rejected {method!r}: {message} (code {code})")


class CodexThreadNotFoundError(CodexRpcError):
    """The app-server does not know the thread id (not loaded and no rollout on disk)."""

    def __init__(self, method: str, code: int, message: str, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(method, code, message)


class CodexTimeoutError(CodexAppServerError):
    """No reply (or no end of turn) within the allowed time."""


class CodexProtocolError(CodexAppServerError):
    """The app-server sent something the protocol does not allow (a reply of the wrong shape)."""
