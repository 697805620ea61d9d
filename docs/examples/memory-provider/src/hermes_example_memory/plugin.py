"""The plugin module named by the ``hermes_core`` entry point: registers the provider.

Configuration (``hermes.toml``)::

    [memory]
    provider = "example-memory"          # select it beside the builtin provider

    [extensions.example_memory]
    path = "/var/lib/agent/facts.json"    # default: <memory.home>/example-memory.json
    max_recall = 3                        # facts per recall

The table is declared through ``register_settings`` (:class:`ExampleMemorySettings`),
so the host validates it when it loads the plugins and documents it in
``hermes-core config show``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import MemoryProvider, Settings, SettingsSection, hookimpl

from .provider import KeywordMemoryProvider

EXTENSION_NAME = "example_memory"

#: the hermes hook-contract versions this plugin is written for (checked when it loads)
hermes_contract = ">=1,<2"


class ExampleMemorySettings(SettingsSection):
    """The keyword memory's file and recall size."""

    config_section: ClassVar[str] = f"extensions.{EXTENSION_NAME}"

    path: str = Field(
        default="", description="Facts file; empty: <memory.home>/example-memory.json."
    )
    max_recall: int = Field(default=3, ge=1, description="Facts per recall.")


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare ``[extensions.example_memory]``."""
    register(ExampleMemorySettings)


@hookimpl
def register_memory_providers(
    register: Callable[[MemoryProvider], None], settings: Settings
) -> None:
    """Register one :class:`KeywordMemoryProvider` configured from ``settings``."""
    own = settings.section(ExampleMemorySettings)
    path = own.path or settings.memory.home_path() / "example-memory.json"
    register(KeywordMemoryProvider(Path(path), max_recall=own.max_recall))
