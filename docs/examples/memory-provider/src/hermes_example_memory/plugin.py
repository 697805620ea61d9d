"""The plugin module named by the ``hermes_core`` entry point: registers the provider.

Configuration (``hermes.toml``)::

    [memory]
    provider = "example-memory"          # select it beside the builtin provider

    [extensions.example_memory]
    path = "/var/lib/agent/facts.json"    # default: <memory.home>/example-memory.json
    max_recall = 3                        # facts per recall
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_hookspecs import ConfigError, MemoryProvider, hookimpl

from .provider import KeywordMemoryProvider

EXTENSION_NAME = "example_memory"

#: the hermes hook-contract versions this plugin is written for (checked when it loads)
hermes_contract = ">=1,<2"


@hookimpl
def register_memory_providers(register: Callable[[MemoryProvider], None], settings: Any) -> None:
    """Register one :class:`KeywordMemoryProvider` configured from ``settings``."""
    options = settings.plugin_options(EXTENSION_NAME)
    path = options.get("path") or settings.memory.home_path() / "example-memory.json"
    max_recall = options.get("max_recall", 3)
    if not isinstance(max_recall, int) or max_recall < 1:
        raise ConfigError(
            f"extensions.{EXTENSION_NAME}.max_recall = {max_recall!r}: expected an integer >= 1"
        )
    register(KeywordMemoryProvider(Path(path), max_recall=max_recall))
