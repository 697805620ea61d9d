"""hermes-core default plugin ``tail_lean``: the ``lean`` tail strategy (the default)."""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import TailStrategy, hookimpl

from .strategy import LeanTail

__all__ = ["LeanTail", "register_tail_strategies"]


@hookimpl
def register_tail_strategies(register: Callable[[TailStrategy], None]) -> None:
    """Contribute the ``lean`` tail strategy."""
    register(LeanTail())
