"""The one error this plugin raises on a failed provider compaction."""

from __future__ import annotations

from typing import Literal

from hermes_hookspecs import CompactionBackendError

FailureKind = Literal["network", "timeout", "auth", "http", "malformed", "unsupported", "config"]


class ResponsesCompactionError(CompactionBackendError):
    """``/v1/responses/compact`` (or the in-line route) failed; the session is unchanged.

    :param kind: the failure class: ``network`` (connection refused, reset),
        ``timeout``, ``auth`` (401/403 or a missing API key), ``http`` (any other
        4xx/5xx), ``malformed`` (a body that is not a compacted response, a bad or
        missing compaction item), ``unsupported`` (an item this backend cannot
        send or keep), ``config``.
    :param status: the HTTP status when the server answered.
    """

    def __init__(self, kind: FailureKind, message: str, *, status: int | None = None) -> None:
        self.kind: FailureKind = kind
        self.status = status
        super().__init__(f"responses compaction {kind}: {message}")
