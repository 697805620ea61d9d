"""The token-counter contract."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text for a model; registered through ``register_token_counters``.

    ``exact`` is False for estimators; results computed with one are flagged
    as estimates wherever they are reported.
    """

    name: str
    exact: bool

    def supports(self, model: str | None) -> bool:
        """Whether this counter can count for ``model`` (None: unknown model)."""
        ...

    def count(self, text: str, model: str | None = None) -> int:
        """Tokens in ``text``; special-token text is counted as ordinary text."""
        ...

    def count_many(self, texts: list[str], model: str | None = None) -> list[int]:
        """Batch form of :meth:`count`."""
        ...
