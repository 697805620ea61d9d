"""hermes-core's memory-provider conformance suite, run against this provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hermes_example_memory import KeywordMemoryProvider

from hermes_core.testing.memory_suite import MemoryProviderSuite


class TestKeywordMemoryConformance(MemoryProviderSuite):
    @pytest.fixture
    def provider(self, tmp_path: Path) -> KeywordMemoryProvider:
        return KeywordMemoryProvider(tmp_path / "facts.json")

    def tool_arguments(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        if name == "example_memory_recall":
            return {"query": "tabs makefiles"}
        return super().tool_arguments(name, schema)
