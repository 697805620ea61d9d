"""hermes-core default plugin ``compressor``: the default context engine.

Registers :class:`~hermes_plugin_compressor.engine.ContextCompressor` under
the name ``compressor``. The pure helpers it is built from (tool-pair-safe
cuts in :mod:`.groups`, sequence repair in :mod:`.repair`, identifier
extraction in :mod:`.identifiers`) are public so tail strategies and
summarizers can reuse them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_hookspecs import ContextEngine, Message, Settings, SettingsSection, hookimpl

from .engine import ContextCompressor
from .facts import annotation
from .settings import CompressorSettings

__all__ = [
    "CompressorSettings",
    "ContextCompressor",
    "annotate_message",
    "register_context_engines",
    "register_settings",
]


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare the engine's keys of ``[compression]`` (cooldown, breaker)."""
    register(CompressorSettings)


@hookimpl
def register_context_engines(
    register: Callable[[ContextEngine], None], settings: Settings | None
) -> None:
    """Contribute the ``compressor`` engine, configured from its keys."""
    own = settings.section(CompressorSettings) if settings is not None else None
    register(ContextCompressor(own))


@hookimpl
def annotate_message(message: Message, settings: Settings | None) -> dict[str, Any] | None:
    """The message's handoff facts (:func:`.facts.message_facts`), derived once when it is
    recorded so a compression only assembles them; only while this engine is selected."""
    if settings is not None and settings.compression.engine != ContextCompressor.name:
        return None
    return annotation(message)
