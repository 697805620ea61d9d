"""hermes-core default plugin ``tail_lean``: the ``lean`` tail strategy (the default)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_hookspecs import Message, TailStrategy, hookimpl

from .annotations import annotation
from .strategy import LeanTail

__all__ = ["LeanTail", "annotate_message", "register_tail_strategies"]


@hookimpl
def register_tail_strategies(register: Callable[[TailStrategy], None]) -> None:
    """Contribute the ``lean`` tail strategy."""
    register(LeanTail())


@hookimpl
def annotate_message(message: Message, settings: Any) -> dict[str, Any] | None:
    """Extract the identifiers of a conversation message once, while ``lean`` is the tail."""
    if message.kind != "message" or settings.compression.tail != LeanTail.name:
        return None
    return annotation(message)
