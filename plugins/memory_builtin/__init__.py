"""hermes-core default plugin: memory_builtin.

Registers the ``builtin`` memory provider (``MEMORY.md`` / ``USER.md`` under
``memory.home``; see :mod:`hermes_plugin_memory_builtin.provider`). The core
keeps it active in every session, beside at most one external provider.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_hookspecs import MemoryProvider, hookimpl

from .entries import DELIMITER
from .provider import BuiltinMemoryProvider, MemoryWriteRefused

__all__ = [
    "DELIMITER",
    "BuiltinMemoryProvider",
    "MemoryWriteRefused",
    "register_memory_providers",
]


@hookimpl
def register_memory_providers(register: Callable[[MemoryProvider], None], settings: Any) -> None:
    """Register a fresh :class:`BuiltinMemoryProvider` for ``settings.memory``."""
    register(BuiltinMemoryProvider(settings.memory))
