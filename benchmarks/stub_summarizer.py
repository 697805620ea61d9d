"""The fixed stub summary both sides use, and a host wired to it.

Compression benchmarks compare mechanical work only: on our side the
``stub`` summarizer (registered as a real plugin through
``register_summarizers``) returns the same handoff every time; on the
reference side ``benchmarks/theirs`` replaces the LLM call with the same text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_core.config import settings_from
from hermes_core.host import Hermes
from hermes_hookspecs import (
    HandoffSummary,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    hookimpl,
)

STUB_SUMMARY = (
    "Summary of earlier work: the agent investigated the task, ran commands and edited files. "
    "Continue from the recent messages."
)
STUB_NAME = "stub"


class StubSummarizer(Summarizer):
    """Returns the same fixed handoff for every request."""

    name = STUB_NAME

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        return SummaryResult(summary=HandoffSummary(progress=STUB_SUMMARY), summarizer=self.name)


class InProcessStubSummarizer(StubSummarizer):
    """The stub declared ``in_process``: the host hands it its input unredacted, as it
    does the default deterministic summarizer (it sends nothing anywhere)."""

    in_process = True


class StubSummarizerPlugin:
    """Registers :class:`StubSummarizer` (or the in-process one) under the name ``stub``."""

    def __init__(self, in_process: bool = False) -> None:
        self.in_process = in_process

    @hookimpl
    def register_summarizers(self, register: Callable[[Summarizer], None]) -> None:
        register(InProcessStubSummarizer() if self.in_process else StubSummarizer())


def bench_hermes(
    folder: Path, overrides: dict[str, Any] | None = None, *, in_process: bool = False
) -> Hermes:
    """A host on a SQLite file in ``folder`` with the stub summarizer selected.

    ``overrides`` are merged section by section over the defaults used here
    (no memory files outside ``folder``, the stub summarizer). ``in_process``:
    the stub is declared in process, so its input is not redacted (see
    :class:`InProcessStubSummarizer`).
    """
    data: dict[str, dict[str, Any]] = {
        "session": {"path": str(folder / "sessions.db")},
        "memory": {"home": str(folder / "memory")},
        "compression": {"summarizer": STUB_NAME},
    }
    for section, values in (overrides or {}).items():
        data.setdefault(section, {}).update(values)
    return Hermes(settings_from(data), plugins=[StubSummarizerPlugin(in_process)])
