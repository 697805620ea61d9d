"""hermes-core default plugin ``tail_lean``: the ``lean`` tail strategy (the default)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_hookspecs import Message, Settings, SettingsSection, TailStrategy, hookimpl

from .annotations import annotation
from .settings import LeanTailSettings
from .strategy import LeanTail

__all__ = [
    "LeanTail",
    "LeanTailSettings",
    "annotate_message",
    "register_settings",
    "register_tail_strategies",
]


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare the lean tail's keys of ``[compression]``."""
    register(LeanTailSettings)


@hookimpl
def register_tail_strategies(
    register: Callable[[TailStrategy], None], settings: Settings | None
) -> None:
    """Contribute the ``lean`` tail strategy, configured from its keys."""
    own = settings.section(LeanTailSettings) if settings is not None else None
    register(LeanTail(own))


@hookimpl
def annotate_message(message: Message, settings: Settings) -> dict[str, Any] | None:
    """Extract the identifiers of a conversation message once, while ``lean`` is the tail."""
    if message.kind != "message" or settings.compression.tail != LeanTail.name:
        return None
    return annotation(message)
