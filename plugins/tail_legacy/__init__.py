"""hermes-core default plugin ``tail_legacy``: the ``legacy`` tail strategy."""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import TailStrategy, hookimpl

from .strategy import LegacyTail

__all__ = ["LegacyTail", "register_tail_strategies"]


@hookimpl
def register_tail_strategies(register: Callable[[TailStrategy], None]) -> None:
    """Contribute the ``legacy`` tail strategy."""
    register(LegacyTail())
