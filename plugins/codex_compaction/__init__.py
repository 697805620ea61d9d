"""hermes-core default plugin: codex_compaction.

Compacts a session's Codex app-server thread with ``thread/compact/start``
(see ``backend.py`` for settings and ``PROTOCOL.md`` for the wire protocol).
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import CompactionBackend, Settings, SettingsSection, hookimpl

from .backend import (
    CodexBackendSettings,
    CodexCompactionBackend,
    CodexCompactionFailed,
    codex_thread_id,
)
from .binary import PINNED_CODEX_VERSION, find_codex_binary
from .client import CodexAppServer
from .config import CodexLaunchSettings, CodexProcessFields, CodexProvider, CodexRuntimeConfig
from .errors import (
    CodexAppServerError,
    CodexBinaryNotFoundError,
    CodexProcessExitedError,
    CodexProtocolError,
    CodexRpcError,
    CodexThreadNotFoundError,
    CodexTimeoutError,
)
from .protocol import CompactionOutcome, ThreadInfo, TurnOutcome

__all__ = [
    "PINNED_CODEX_VERSION",
    "CodexAppServer",
    "CodexAppServerError",
    "CodexBackendSettings",
    "CodexBinaryNotFoundError",
    "CodexCompactionBackend",
    "CodexCompactionFailed",
    "CodexLaunchSettings",
    "CodexProcessExitedError",
    "CodexProcessFields",
    "CodexProtocolError",
    "CodexProvider",
    "CodexRpcError",
    "CodexRuntimeConfig",
    "CodexThreadNotFoundError",
    "CodexTimeoutError",
    "CompactionOutcome",
    "ThreadInfo",
    "TurnOutcome",
    "codex_thread_id",
    "find_codex_binary",
    "register_compaction_backends",
    "register_settings",
]


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare ``[compaction.codex]`` (validated when the host loads the plugins)."""
    register(CodexBackendSettings)


@hookimpl
def register_compaction_backends(
    register: Callable[[CompactionBackend], None], settings: Settings | None
) -> None:
    """Register the ``codex`` backend (it reads ``[compaction.codex]`` per call)."""
    register(CodexCompactionBackend())
