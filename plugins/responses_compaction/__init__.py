"""hermes-core default plugin: responses_compaction (compaction backend ``responses``).

Provider-side compaction through the OpenAI Responses API, selected with
``compaction.backend = "responses"`` and configured in ``[compaction.responses]``
(keys documented in :mod:`.settings`):

* ``settings.py``: the validated settings, routes and the default in-line threshold;
* ``client.py``: ``POST /v1/responses/compact`` over httpx and the checks on its answer;
* ``items.py``: stored messages <-> Responses items, the opaque compaction record;
* ``backend.py``: :class:`ResponsesCompactionBackend` (eligibility, request options, compact);
* ``errors.py``: :class:`ResponsesCompactionError` (a ``CompactionBackendError``).
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_core.config import Settings
from hermes_hookspecs import CompactionBackend, SettingsSection, hookimpl

from .backend import (
    BACKEND_NAME,
    ResponsesCompactionBackend,
    ineligibility_reason,
    local_trigger_from,
)
from .client import CompactedWindow, parse_compacted, post_compact
from .errors import ResponsesCompactionError
from .items import compaction_message, compaction_messages, input_items, window_messages
from .settings import ResponsesCompactionSettings, parse_settings

__all__ = [
    "BACKEND_NAME",
    "CompactedWindow",
    "ResponsesCompactionBackend",
    "ResponsesCompactionError",
    "ResponsesCompactionSettings",
    "compaction_message",
    "compaction_messages",
    "ineligibility_reason",
    "input_items",
    "local_trigger_from",
    "parse_compacted",
    "parse_settings",
    "post_compact",
    "register_compaction_backends",
    "register_settings",
    "window_messages",
]


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare ``[compaction.responses]`` (validated when the host loads the plugins)."""
    register(ResponsesCompactionSettings)


@hookimpl
def register_compaction_backends(
    register: Callable[[CompactionBackend], None], settings: Settings | None
) -> None:
    """Register the ``responses`` backend."""
    host = settings if isinstance(settings, Settings) else Settings()
    if host.compaction.backend == BACKEND_NAME:
        host.section(ResponsesCompactionSettings)  # a ConfigError names every bad key
    register(ResponsesCompactionBackend(local_trigger=local_trigger_from(host)))
