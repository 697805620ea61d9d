"""``CodexCompactionBackend``: compact a Codex app-server thread that a session is bound to.

A session is eligible when its routing metadata names a Codex thread
(``routing["codex_thread_id"]``, or ``routing["runtime"] == "codex"`` with
``routing["thread_id"]``) and ``compaction.codex.enabled`` is not false.

``compact`` resumes the thread in an app-server process (an injected
:class:`CodexAppServer`, or one this backend spawns from the settings and
keeps until :meth:`close`), calls ``thread/compact/start`` and waits for the
compaction turn. Success returns a new active view holding one opaque
``kind="compaction"`` marker (thread id, turn id, ``contextCompaction`` item
ids): the real context lives in the Codex thread, and the session's old rows
stay in the store, compacted but searchable. Any failure raises
:class:`CodexCompactionFailed` (a ``CompactionBackendError``) and changes
nothing, so the host can fall back to the local engine.

Settings (``[compaction.codex]``), all optional except ``codex_home`` when no
client is injected: ``enabled``, ``binary``, ``codex_home``, ``home``,
``cwd``, ``env``, ``config_overrides``, ``timeout_s``, ``start_timeout_s``, ``resume``,
``runtime`` (a :class:`CodexRuntimeConfig` table written to
``codex_home/config.toml`` before start; leave it out to use the config
already there).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field
from pydantic import ValidationError as PydanticValidationError

from hermes_hookspecs import (
    CompactionBackend,
    CompactionBackendError,
    ConfigError,
    Message,
    NewMessage,
    ProviderCompactionRequest,
    ProviderCompactionResult,
    SessionRecord,
    SettingsSection,
)

from .client import CodexAppServer
from .config import CodexLaunchSettings, CodexProcessFields, CodexRuntimeConfig
from .errors import CodexAppServerError, CodexThreadNotFoundError
from .protocol import CompactionOutcome

ROUTING_THREAD_ID = "codex_thread_id"
ROUTING_RUNTIME = "runtime"
RUNTIME_NAME = "codex"
MARKER_ITEM_TYPE = "codex.context_compaction"


class CodexBackendSettings(SettingsSection, CodexProcessFields):
    """``[compaction.codex]`` (declared through ``register_settings``): the launch fields
    of :class:`CodexProcessFields`, and these."""

    config_section: ClassVar[str] = "compaction.codex"

    enabled: bool = Field(default=True, description="False: never eligible.")
    codex_home: Path | None = Field(
        default=None, description="CODEX_HOME holding the session's thread (required to compact)."
    )
    timeout_s: float = Field(default=300.0, gt=0, description="One compaction's time limit, s.")
    resume: bool = Field(default=True, description="thread/resume before compacting")
    runtime: CodexRuntimeConfig | None = Field(
        default=None, description="The config.toml written into a private CODEX_HOME."
    )

    @classmethod
    def parse(cls, settings: dict[str, Any]) -> CodexBackendSettings:
        try:
            return cls.model_validate(settings or {})
        except PydanticValidationError as err:
            first = err.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            raise ConfigError(
                f"compaction.codex.{key}: {first['msg']} (got {first.get('input')!r:.80})"
            ) from err

    def launch(self) -> CodexLaunchSettings:
        if self.codex_home is None:
            raise ConfigError(
                "compaction.codex.codex_home is required to start codex app-server "
                "(the CODEX_HOME that holds the session's thread)"
            )
        shared = self.model_dump(include=set(CodexProcessFields.model_fields))
        return CodexLaunchSettings(codex_home=self.codex_home, **shared)


class CodexCompactionFailed(CompactionBackendError):
    """Codex could not compact the thread; the session is unchanged.

    :param outcome: the failed compaction turn, when it got that far.
    """

    def __init__(
        self, message: str, *, thread_id: str, outcome: CompactionOutcome | None = None
    ) -> None:
        self.thread_id = thread_id
        self.outcome = outcome
        super().__init__(message)


def codex_thread_id(session: SessionRecord) -> str | None:
    """The Codex thread a session is bound to, from its routing metadata."""
    routing = session.routing or {}
    runtime = routing.get(ROUTING_RUNTIME)
    if runtime not in (None, RUNTIME_NAME):
        return None
    thread_id = routing.get(ROUTING_THREAD_ID)
    if thread_id is None and runtime == RUNTIME_NAME:
        thread_id = routing.get("thread_id")
    return thread_id if isinstance(thread_id, str) and thread_id.strip() else None


class CodexCompactionBackend(CompactionBackend):
    """Compaction through ``thread/compact/start`` on the session's Codex thread."""

    name = "codex"

    def __init__(self, *, client: CodexAppServer | None = None) -> None:
        """``client``: an already started app-server to use (never closed by this backend)."""
        self._injected = client
        self._owned: CodexAppServer | None = None
        self._owned_key: str | None = None
        self._lock = threading.Lock()

    def eligible(self, session: SessionRecord, model: str, settings: dict[str, Any]) -> bool:
        if not CodexBackendSettings.parse(settings).enabled:
            return False
        return codex_thread_id(session) is not None

    def compact(self, request: ProviderCompactionRequest) -> ProviderCompactionResult:
        cfg = CodexBackendSettings.parse(request.settings)
        thread_id = codex_thread_id(request.session)
        if thread_id is None:
            raise CodexCompactionFailed(
                f"session {request.session.id} has no Codex thread id in "
                f"routing[{ROUTING_THREAD_ID!r}]",
                thread_id="",
            )
        try:
            client = self._client(cfg)
            if cfg.resume:
                client.resume_thread(thread_id)
            outcome = client.compact_thread(thread_id, timeout=cfg.timeout_s)
        except CodexThreadNotFoundError as err:
            raise CodexCompactionFailed(
                f"Codex thread {thread_id} of session {request.session.id} is unknown to the "
                f"app-server: {err.server_message}",
                thread_id=thread_id,
            ) from err
        except CodexAppServerError as err:
            raise CodexCompactionFailed(
                f"Codex compaction of thread {thread_id} failed: {err}", thread_id=thread_id
            ) from err
        if not outcome.ok:
            reason = outcome.error_message or (
                "no contextCompaction item was produced"
                if outcome.status == "completed"
                else f"turn ended with status {outcome.status!r}"
            )
            raise CodexCompactionFailed(
                f"Codex compaction of thread {thread_id} failed: {reason}",
                thread_id=thread_id,
                outcome=outcome,
            )
        return self._result(request, thread_id, outcome)

    def close(self) -> None:
        with self._lock:
            owned, self._owned, self._owned_key = self._owned, None, None
        if owned is not None:
            owned.close()

    # ------------------------------------------------------------------ internals

    def _client(self, cfg: CodexBackendSettings) -> CodexAppServer:
        if self._injected is not None:
            return self._injected
        key = cfg.model_dump_json(exclude={"enabled", "timeout_s", "start_timeout_s", "resume"})
        with self._lock:
            if self._owned is not None and (self._owned_key != key or not self._owned.alive):
                self._owned.close()
                self._owned = None
            if self._owned is None:
                client = CodexAppServer(cfg.launch(), runtime=cfg.runtime)
                client.start()
                self._owned, self._owned_key = client, key
            return self._owned

    def _result(
        self, request: ProviderCompactionRequest, thread_id: str, outcome: CompactionOutcome
    ) -> ProviderCompactionResult:
        marker_item = {
            "type": MARKER_ITEM_TYPE,
            "thread_id": thread_id,
            "turn_id": outcome.turn_id,
            "item_ids": outcome.item_ids,
        }
        text = f"[Codex thread {thread_id} compacted in turn {outcome.turn_id}]"
        marker = Message(role="user", content=text, kind="compaction", provider_item=marker_item)
        tokens_before = sum(
            m.token_count if m.token_count is not None else _estimate(m.message.text())
            for m in request.messages
        )
        tokens_after = _estimate(text)
        previous = request.session.routing.get("codex_compactions", 0)
        count = previous + 1 if isinstance(previous, int) else 1
        return ProviderCompactionResult(
            backend=self.name,
            messages=[NewMessage(message=marker, token_count=tokens_after)],
            routing={
                ROUTING_RUNTIME: RUNTIME_NAME,
                ROUTING_THREAD_ID: thread_id,
                "codex_last_compaction_turn_id": outcome.turn_id,
                "codex_last_compaction_item_ids": outcome.item_ids,
                "codex_compactions": count,
            },
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            detail={
                "thread_id": thread_id,
                "turn_id": outcome.turn_id,
                "item_ids": outcome.item_ids,
                "duration_ms": outcome.duration_ms,
                "codex_token_usage": outcome.token_usage,
            },
        )


def _estimate(text: str) -> int:
    """A rough token estimate (4 characters per token) for rows without a stored count."""
    return max(1, len(text) // 4)
