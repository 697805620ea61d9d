"""The default engine passes the context-engine conformance suite, with both tails."""

from __future__ import annotations

from typing import Any

import pytest

from hermes_core.testing.engine_suite import ContextEngineSuite, SimpleHost
from hermes_plugin_compressor import ContextCompressor
from hermes_plugin_summarizer_deterministic import DeterministicSummarizer
from hermes_plugin_tail_lean import LeanTail
from hermes_plugin_tail_legacy import LegacyTail


class TestCompressorWithLeanTail(ContextEngineSuite):
    expect_compressed = True

    @pytest.fixture
    def host(self) -> Any:
        return SimpleHost([DeterministicSummarizer()], [LeanTail(), LegacyTail()])

    @pytest.fixture
    def engine(self) -> ContextCompressor:
        return ContextCompressor()


class TestCompressorWithLegacyTail(TestCompressorWithLeanTail):
    def settings(self, **extra: Any) -> Any:
        return super().settings(tail="legacy", **extra)
