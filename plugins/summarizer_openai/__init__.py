"""hermes-core default plugin ``summarizer_openai``: the ``openai`` summarizer.

Configured from ``[summarizer.openai]`` (and ``[model]`` for the fallback to
the main model's endpoint); see :mod:`.summarizer`.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import Settings, SettingsSection, Summarizer, hookimpl

from .client import Endpoint
from .settings import OpenAISummarizerSettings
from .summarizer import OpenAISummarizer

__all__ = [
    "Endpoint",
    "OpenAISummarizer",
    "OpenAISummarizerSettings",
    "register_settings",
    "register_summarizers",
]


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare ``[summarizer.openai]``."""
    register(OpenAISummarizerSettings)


@hookimpl
def register_summarizers(register: Callable[[Summarizer], None], settings: Settings | None) -> None:
    """Contribute the ``openai`` summarizer configured from ``settings``."""
    register(OpenAISummarizer.from_settings(settings if settings is not None else Settings()))
