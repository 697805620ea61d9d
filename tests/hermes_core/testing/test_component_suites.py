"""The tail, summarizer and importer conformance suites, run against the default plugins.

Plugin authors subclass the same suites (the ``hermes-core new`` templates do);
running them against our own defaults shows every rule they check is one a
real implementation meets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_core.testing.importer_suite import ImporterSuite
from hermes_core.testing.summarizer_suite import SummarizerSuite
from hermes_core.testing.tail_suite import TailStrategySuite
from hermes_hookspecs import TailPlan, TailRequest, TailStrategy
from hermes_plugin_importers.openai_chat import OpenAIChatImporter
from hermes_plugin_summarizer_deterministic import DeterministicSummarizer
from hermes_plugin_tail_lean import LeanTail
from hermes_plugin_tail_legacy import LegacyTail


class TestLeanTail(TailStrategySuite):
    @pytest.fixture
    def strategy(self) -> LeanTail:
        return LeanTail()


class TestLegacyTail(TailStrategySuite):
    @pytest.fixture
    def strategy(self) -> LegacyTail:
        return LegacyTail()


class TestDeterministicSummarizer(SummarizerSuite):
    @pytest.fixture
    def summarizer(self) -> DeterministicSummarizer:
        return DeterministicSummarizer()


class TestOpenAIChatImporter(ImporterSuite):
    @pytest.fixture
    def importer(self) -> OpenAIChatImporter:
        return OpenAIChatImporter()

    @pytest.fixture
    def sample_files(self, tmp_path: Path) -> list[Path]:
        path = tmp_path / "chat.json"
        call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        messages = [
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py b.py"},
            {"role": "assistant", "content": "two files"},
        ]
        path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
        return [path]


class GreedyTail(TailStrategy):
    """Keeps everything verbatim: the room rule must catch it."""

    name = "greedy"

    def plan(self, request: TailRequest) -> TailPlan:
        return TailPlan(tail_start=0)


def test_the_tail_suite_fails_a_tail_that_ignores_the_room() -> None:
    with pytest.raises(AssertionError, match="expected the verbatim tail to fit"):
        TailStrategySuite().test_the_verbatim_tail_fits_the_room(GreedyTail())
