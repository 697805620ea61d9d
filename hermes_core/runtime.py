"""The turn runtime, under its former single-module name (kept for imports).

The runtime lives in layers (see ``docs/architecture.md``):
:mod:`hermes_core.session` (create, resume, the frozen prompt, the active
view), :mod:`hermes_core.turn` (a turn's draft and steps),
:mod:`hermes_core.async_turn`, :mod:`hermes_core.lease` (the lease keeper),
:mod:`hermes_core.ledger` (the prefix ledger), :mod:`hermes_core.compression`
(the coordinator) and :mod:`hermes_core.services` (what they need from the
host). This module re-exports their public names.
"""

from __future__ import annotations

from .async_turn import AsyncTurn
from .messages import (
    MAX_ARGUMENT_DEPTH,
    RECALL_HEADER,
    UNANSWERED_RESULT,
    json_depth,
    to_message,
)
from .requests import PreparedRequest
from .session import MAX_ROTATION_HOPS, PROMPT_ROUTING_KEY, Session
from .turn import Turn

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "MAX_ROTATION_HOPS",
    "PROMPT_ROUTING_KEY",
    "RECALL_HEADER",
    "UNANSWERED_RESULT",
    "AsyncTurn",
    "PreparedRequest",
    "Session",
    "Turn",
    "json_depth",
    "to_message",
]
