"""Registries of named contributions (engines, stores, summarizers, ...).

Each ``register_*`` hook is called once per implementing plugin with a
``register`` callable bound to that plugin, so the registry knows who
contributed what. ``register()`` validates the object, and a name registered
twice is an error naming both plugins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pluggy

from hermes_hookspecs import (
    AgentTool,
    CompactionBackend,
    ConfigError,
    ContextEngine,
    Importer,
    MemoryProvider,
    RegistrationError,
    Summarizer,
    TailStrategy,
    TokenCounter,
    UnknownNameError,
)

from .config import Settings
from .plugins import each_implementation

T = TypeVar("T")


@dataclass
class Entry(Generic[T]):
    name: str
    value: T
    plugin: str


@dataclass
class Kind(Generic[T]):
    """One kind of contribution: its hook, its label and how to validate an item."""

    hook: str
    label: str
    check: Callable[[Any], bool]
    entries: dict[str, Entry[T]] = field(default_factory=dict)

    def names(self) -> list[str]:
        return sorted(self.entries)

    def get(self, name: str) -> T:
        try:
            return self.entries[name].value
        except KeyError:
            raise UnknownNameError(self.label, name, self.names()) from None


def _is_token_counter(obj: Any) -> bool:
    return isinstance(obj, TokenCounter)


KIND_SPECS: dict[str, tuple[str, str, Callable[[Any], bool]]] = {
    "engines": (
        "register_context_engines",
        "context engine",
        lambda o: isinstance(o, ContextEngine),
    ),
    "tails": ("register_tail_strategies", "tail strategy", lambda o: isinstance(o, TailStrategy)),
    "summarizers": ("register_summarizers", "summarizer", lambda o: isinstance(o, Summarizer)),
    "memory": (
        "register_memory_providers",
        "memory provider",
        lambda o: isinstance(o, MemoryProvider),
    ),
    "stores": ("register_session_stores", "session store", callable),
    "compaction": (
        "register_compaction_backends",
        "compaction backend",
        lambda o: isinstance(o, CompactionBackend),
    ),
    "tokens": ("register_token_counters", "token counter", _is_token_counter),
    "importers": ("register_importers", "importer", lambda o: isinstance(o, Importer)),
    "tools": ("register_tools", "agent tool", lambda o: isinstance(o, AgentTool)),
}


class Registry:
    """All contributions of the plugins registered on one manager."""

    def __init__(self, pm: pluggy.PluginManager, settings: Settings) -> None:
        self.kinds: dict[str, Kind[Any]] = {
            key: Kind(hook=hook, label=label, check=check)
            for key, (hook, label, check) in KIND_SPECS.items()
        }
        for kind in self.kinds.values():
            self._collect(pm, settings, kind)

    def _collect(self, pm: pluggy.PluginManager, settings: Settings, kind: Kind[Any]) -> None:
        for owner, caller in each_implementation(pm, kind.hook):

            def register(*args: Any, _owner: str = owner) -> None:
                self._add(kind, _owner, *args)

            try:
                caller(register=register, settings=settings)
            except (RegistrationError, ConfigError):
                raise
            except Exception as exc:
                raise RegistrationError(
                    f"plugin {owner!r} failed in {kind.hook}: {type(exc).__name__}: {exc}"
                ) from exc

    def _add(self, kind: Kind[Any], owner: str, *args: Any) -> None:
        if kind.hook == "register_session_stores":
            if len(args) != 2 or not isinstance(args[0], str):
                raise RegistrationError(
                    f"plugin {owner!r}: register_session_stores expects register(name, factory)"
                )
            name, value = args
        else:
            if len(args) != 1:
                raise RegistrationError(f"plugin {owner!r}: {kind.hook} expects register(obj)")
            value = args[0]
            name = getattr(value, "name", "")
        if not isinstance(name, str) or not name:
            raise RegistrationError(f"plugin {owner!r} registered a {kind.label} without a name")
        if not kind.check(value):
            raise RegistrationError(
                f"plugin {owner!r} registered {value!r} as {kind.label} {name!r}, "
                "which does not implement the interface"
            )
        if name in kind.entries:
            first = kind.entries[name].plugin
            raise RegistrationError(
                f"{kind.label} {name!r} is registered by both plugin {first!r} and plugin {owner!r}"
            )
        kind.entries[name] = Entry(name=name, value=value, plugin=owner)

    # -- accessors --------------------------------------------------------
    def get(self, kind: str, name: str) -> Any:
        return self.kinds[kind].get(name)

    def names(self, kind: str) -> list[str]:
        return self.kinds[kind].names()

    def contributions(self) -> dict[str, dict[str, list[str]]]:
        """plugin name → kind → names it registered."""
        out: dict[str, dict[str, list[str]]] = {}
        for key, kind in self.kinds.items():
            for entry in kind.entries.values():
                out.setdefault(entry.plugin, {}).setdefault(key, []).append(entry.name)
        return out
