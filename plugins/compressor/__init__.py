"""hermes-core default plugin ``compressor``: the default context engine.

Registers :class:`~hermes_plugin_compressor.engine.ContextCompressor` under
the name ``compressor``. The pure helpers it is built from (tool-pair-safe
cuts in :mod:`.groups`, sequence repair in :mod:`.repair`, identifier
extraction in :mod:`.identifiers`) are public so tail strategies and
summarizers can reuse them.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import ContextEngine, hookimpl

from .engine import ContextCompressor

__all__ = ["ContextCompressor", "register_context_engines"]


@hookimpl
def register_context_engines(register: Callable[[ContextEngine], None]) -> None:
    """Contribute the ``compressor`` engine."""
    register(ContextCompressor())
