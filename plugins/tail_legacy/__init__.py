"""hermes-core default plugin ``tail_legacy``: the ``legacy`` tail strategy."""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import Settings, SettingsSection, TailStrategy, hookimpl

from .settings import LegacyTailSettings
from .strategy import LegacyTail

__all__ = ["LegacyTail", "LegacyTailSettings", "register_settings", "register_tail_strategies"]


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare the legacy tail's keys of ``[compression]``."""
    register(LegacyTailSettings)


@hookimpl
def register_tail_strategies(
    register: Callable[[TailStrategy], None], settings: Settings | None
) -> None:
    """Contribute the ``legacy`` tail strategy, configured from its keys."""
    own = settings.section(LegacyTailSettings) if settings is not None else None
    register(LegacyTail(own))
