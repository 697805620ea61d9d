"""hermes-example-memory: a reference external memory provider for hermes-core.

It remembers facts the user states ("Remember that ...", "I prefer ...") in a
JSON file and recalls them by keyword overlap. See ``README.md`` for the
contract walk-through.
"""

from __future__ import annotations

from .provider import PROVIDER_NAME, KeywordMemoryProvider

__all__ = ["PROVIDER_NAME", "KeywordMemoryProvider"]
