"""hermes-core default plugin: memory_builtin.

Registers the ``builtin`` memory provider (``MEMORY.md`` / ``USER.md`` under
``memory.home``; see :mod:`hermes_plugin_memory_builtin.provider`). The core
keeps it active in every session, beside at most one external provider.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import MemoryProvider, Settings, SettingsSection, hookimpl

from .entries import DELIMITER
from .provider import BuiltinMemoryProvider, MemoryWriteRefused
from .settings import BuiltinMemorySettings

__all__ = [
    "DELIMITER",
    "BuiltinMemoryProvider",
    "BuiltinMemorySettings",
    "MemoryWriteRefused",
    "register_memory_providers",
    "register_settings",
]


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare the builtin provider's keys of ``[memory]`` (the file caps)."""
    register(BuiltinMemorySettings)


@hookimpl
def register_memory_providers(
    register: Callable[[MemoryProvider], None], settings: Settings
) -> None:
    """Register a fresh :class:`BuiltinMemoryProvider` for ``settings.memory``."""
    register(BuiltinMemoryProvider(settings.memory, settings.section(BuiltinMemorySettings)))
