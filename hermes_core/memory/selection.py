"""Which providers a host's memory manager calls, chosen from the registry.

Memory providers are contributed like every other part, through
``register_memory_providers`` into the host's
:class:`~hermes_core.registry.Registry` (which rejects nameless and
duplicate providers). ``builtin`` is always active; ``memory.provider``
selects at most one external provider.
"""

from __future__ import annotations

import logging

from hermes_hookspecs import MemoryProvider

from ..config import Settings
from ..redaction import Redactor
from ..registry import Registry
from .manager import BUILTIN_NAME, MemoryManager

logger = logging.getLogger("hermes_core.memory")


class NullProvider(MemoryProvider):
    """Stands in for ``builtin`` when the builtin plugin is blocked."""

    name = BUILTIN_NAME


def manager_from_registry(
    registry: Registry, settings: Settings, redactor: Redactor
) -> MemoryManager:
    """The memory manager of the providers registered in ``registry``.

    When no ``builtin`` is registered (the plugin was blocked) a no-op
    provider stands in and that is logged (at INFO: blocking it is a
    choice). An unknown ``memory.provider`` is an
    :class:`~hermes_hookspecs.UnknownNameError` listing the registered ones.
    """
    names = registry.names("memory")
    if BUILTIN_NAME in names:
        builtin: MemoryProvider = registry.get("memory", BUILTIN_NAME)
    else:
        logger.info("no %r memory provider is registered; builtin memory is off", BUILTIN_NAME)
        builtin = NullProvider()
    wanted = settings.memory.provider
    external = registry.get("memory", wanted) if wanted and wanted != BUILTIN_NAME else None
    return MemoryManager(builtin, external, settings.memory, redactor)
