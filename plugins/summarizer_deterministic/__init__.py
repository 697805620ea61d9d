"""hermes-core default plugin ``summarizer_deterministic``: the offline summarizer.

It is the embedded default when no summary endpoint is configured and the
failure fallback of the ``compressor`` engine.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import Summarizer, hookimpl

from .handoff import DeterministicSummarizer

__all__ = ["DeterministicSummarizer", "register_summarizers"]


@hookimpl
def register_summarizers(register: Callable[[Summarizer], None]) -> None:
    """Contribute the ``deterministic`` summarizer."""
    register(DeterministicSummarizer())
