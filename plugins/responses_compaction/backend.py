"""``ResponsesCompactionBackend``: OpenAI Responses compaction, standalone or in-line.

See :mod:`.settings` for the keys and routes. In short:

* :meth:`eligible` is True only for an explicitly configured endpoint, model
  and provider (``base_url`` set, model in ``models``, session provider equal
  to ``provider``); everything else uses the local engine.
* :meth:`request_options` adds ``context_management`` to normal requests on
  the in-line route.
* :meth:`compact` returns the new active view: the kept items (matched back
  to their rows) followed by the opaque compaction record; or, in-line, the
  newest recorded compaction item and what follows it. Every failure raises
  :class:`~.errors.ResponsesCompactionError`, a ``CompactionBackendError``,
  before anything is written, so the core falls back to the local engine with
  the session as it was. Replaced rows are archived by the store, never
  deleted, so session search still finds them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Any

from hermes_core.config import Settings
from hermes_core.thresholds import effective_threshold
from hermes_hookspecs import (
    CompactionBackend,
    NewMessage,
    ProviderCompactionRequest,
    ProviderCompactionResult,
    SessionRecord,
    StoredMessage,
)
from hermes_plugin_summarizer_openai.settings import OpenAISummarizerSettings

from .client import post_compact
from .errors import ResponsesCompactionError
from .items import input_items, latest_compaction, window_messages
from .settings import SECTION, ResponsesCompactionSettings, parse_settings

BACKEND_NAME = "responses"
ROUTING_PREVIOUS_RESPONSE = "previous_response_id"
ROUTING_LAST_COMPACTION = "responses_compaction"

LocalTrigger = Callable[[str], int]


def local_trigger_from(settings: Settings) -> LocalTrigger:
    """The core's local compression trigger for a model, from the host settings.

    Mirrors :meth:`hermes_core.Hermes.threshold`: the ``openai`` summarizer's
    window clamps the trigger when that summarizer is selected.
    """

    def trigger(model: str) -> int:
        window: int | None = None
        output = 4_000
        openai = settings.section(OpenAISummarizerSettings)
        chosen = settings.compression.summarizer
        if chosen == "openai" or (not chosen and openai.base_url and openai.model):
            window = openai.context_length
            output = openai.max_output_tokens
        report = effective_threshold(
            settings, model=model or None, summarizer_window=window, summarizer_output=output
        )
        return report.threshold_tokens

    return trigger


def ineligibility_reason(
    session: SessionRecord, model: str, settings: ResponsesCompactionSettings
) -> str | None:
    """Why ``session`` may not use this backend (None: it may)."""
    model = model or session.model
    if not settings.base_url:
        return f"{SECTION}.base_url is not set"
    if not settings.models:
        return f"{SECTION}.models is empty"
    if not any(fnmatch.fnmatchcase(model, pattern) for pattern in settings.models):
        return f"model {model!r} is not in {SECTION}.models {settings.models}"
    if session.provider.lower() != settings.provider.lower():
        return f"session provider {session.provider!r} is not {settings.provider!r}"
    return None


def _carry(rows: list[StoredMessage]) -> list[NewMessage]:
    return [NewMessage.carried_from(row) for row in rows]


class ResponsesCompactionBackend(CompactionBackend):
    """Provider-side compaction through the OpenAI Responses API (name ``responses``)."""

    name = BACKEND_NAME

    def __init__(self, local_trigger: LocalTrigger | None = None) -> None:
        """:param local_trigger: the core's trigger for a model, in tokens (default: from
        default settings); the in-line threshold defaults to it minus a margin."""
        self.local_trigger: LocalTrigger = local_trigger or local_trigger_from(Settings())

    # -- contract ---------------------------------------------------------------
    def eligible(self, session: SessionRecord, model: str, settings: dict[str, Any]) -> bool:
        """True only when endpoint, model and provider are configured for this session.

        :raises ConfigError: when ``settings`` holds an unknown key or a bad value.
        """
        return ineligibility_reason(session, model, parse_settings(settings)) is None

    def request_options(
        self, session: SessionRecord, model: str, settings: dict[str, Any]
    ) -> dict[str, Any]:
        """``context_management`` for normal requests on the in-line route (else nothing)."""
        cfg = parse_settings(settings)
        if cfg.route != "inline" or ineligibility_reason(session, model, cfg) is not None:
            return {}
        return {
            "context_management": [
                {"type": "compaction", "compact_threshold": self.threshold(model, cfg)}
            ]
        }

    def compact(self, request: ProviderCompactionRequest) -> ProviderCompactionResult:
        cfg = parse_settings(request.settings)
        session = request.session
        model = request.model or session.model
        reason = ineligibility_reason(session, model, cfg)
        if reason is not None:
            raise ResponsesCompactionError(
                "config", f"session {session.id} is not eligible: {reason}"
            )
        rows = list(request.messages)
        if not rows:
            raise ResponsesCompactionError(
                "unsupported", f"session {session.id} has no messages to compact"
            )
        if cfg.route == "inline":
            pruned = self._prune_inline(rows, cfg)
            if pruned is not None:
                return pruned
        return self._compact_standalone(session, model, rows, cfg)

    # -- helpers -------------------------------------------------------------------
    def threshold(self, model: str, settings: ResponsesCompactionSettings) -> int:
        """The in-line ``compact_threshold`` for ``model`` (see :mod:`.settings`)."""
        if settings.compact_threshold is not None:
            return settings.compact_threshold
        return settings.threshold_for(self.local_trigger(model))

    def _prune_inline(
        self, rows: list[StoredMessage], cfg: ResponsesCompactionSettings
    ) -> ProviderCompactionResult | None:
        """Archive what precedes the newest recorded compaction item (no network call)."""
        index = latest_compaction(rows)
        if index is not None and index > 0:
            kept = rows[index:]
            return ProviderCompactionResult(
                backend=BACKEND_NAME,
                messages=_carry(kept),
                tokens_before=sum(row.token_count or 0 for row in rows),
                tokens_after=sum(row.token_count or 0 for row in kept),
                detail={
                    "route": "inline",
                    "action": "pruned",
                    "archived": index,
                    "kept": len(kept),
                },
            )
        if not cfg.inline_backstop:
            where = "no compaction item is recorded" if index is None else "nothing precedes it"
            raise ResponsesCompactionError(
                "unsupported",
                f"in-line route: {where} and {SECTION}.inline_backstop is false",
            )
        return None

    def _compact_standalone(
        self,
        session: SessionRecord,
        model: str,
        rows: list[StoredMessage],
        cfg: ResponsesCompactionSettings,
    ) -> ProviderCompactionResult:
        body: dict[str, Any] = {"model": model}
        previous = session.routing.get(ROUTING_PREVIOUS_RESPONSE)
        source = "input"
        if (
            cfg.source in ("previous_response_id", "auto")
            and isinstance(previous, str)
            and previous
        ):
            body["previous_response_id"] = previous
            source = "previous_response_id"
        elif cfg.source == "previous_response_id":
            raise ResponsesCompactionError(
                "config",
                f"{SECTION}.source is 'previous_response_id' but session {session.id} has no "
                f"routing[{ROUTING_PREVIOUS_RESPONSE!r}]",
            )
        else:
            body["input"] = input_items(rows)
        window = post_compact(cfg, body)
        messages, carried = window_messages(window.output, rows)
        routing: dict[str, Any] = {
            ROUTING_LAST_COMPACTION: {"id": window.id, "created_at": window.created_at}
        }
        if ROUTING_PREVIOUS_RESPONSE in session.routing:
            # the compacted window replaces the server-side chain: the next request sends it
            routing[ROUTING_PREVIOUS_RESPONSE] = None
        return ProviderCompactionResult(
            backend=BACKEND_NAME,
            messages=messages,
            routing=routing,
            tokens_before=sum(row.token_count or 0 for row in rows),
            detail={
                "route": cfg.route,
                "action": "compacted",
                "source": source,
                "response_id": window.id,
                "kept_items": len(window.kept_items),
                "carried_rows": carried,
                "usage": window.usage,
            },
        )
