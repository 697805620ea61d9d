"""Exact, offline token counting with tiktoken.

`counter.TiktokenCounter` counts tokens with OpenAI's BPE encodings
(`o200k_base`, `cl100k_base`, and `p50k_base`/`r50k_base` when their files
are supplied) without any network access: the BPE files come from an
installed wheel (or an explicit directory) and are checked against the
SHA-256 hashes that tiktoken itself publishes before they are used.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import TokenCounter, hookimpl

from .counter import TiktokenCounter

__all__ = ["TiktokenCounter"]


@hookimpl
def register_token_counters(register: Callable[[TokenCounter], None]) -> None:
    """Register the exact offline ``tiktoken`` counter."""
    register(TiktokenCounter())
