"""hermes-core default plugin ``summarizer_openai``: the ``openai`` summarizer.

Configured from ``[summarizer.openai]`` (and ``[model]`` for the fallback to
the main model's endpoint); see :mod:`.summarizer`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_hookspecs import Summarizer, hookimpl

from .client import Endpoint
from .summarizer import OpenAISummarizer

__all__ = ["Endpoint", "OpenAISummarizer", "register_summarizers"]


@hookimpl
def register_summarizers(register: Callable[[Summarizer], None], settings: Any) -> None:
    """Contribute the ``openai`` summarizer configured from ``settings``."""
    if settings is None:
        from hermes_core.config import Settings

        settings = Settings()
    register(OpenAISummarizer.from_settings(settings))
