"""Conformance suite for summarizers.

Subclass :class:`SummarizerSuite` and provide a ``summarizer`` fixture (for
a summarizer that calls a model, point it at the ``fake_openai`` fixture's
loopback server)::

    class TestAcmeSummarizer(SummarizerSuite):
        @pytest.fixture
        def summarizer(self):
            return AcmeSummarizer()

It checks the contract of :class:`hermes_hookspecs.Summarizer`: a named
summarizer that answers a request with a :class:`~hermes_hookspecs.SummaryResult`
carrying its own name, a handoff that renders to text, an iterative request
(``previous_summary``) and a ``focus`` accepted, a window that is unbounded
or positive, and failures only as
:class:`~hermes_hookspecs.errors.SummarizerError`.
"""

from __future__ import annotations

import contextlib

from hermes_hookspecs import (
    HandoffSummary,
    Summarizer,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
)

from .engine_suite import synthetic_session


def summary_request(turns: int = 8, **extra: object) -> SummaryRequest:
    """The middle of the synthetic session as a summary request."""
    messages = [r.message for r in synthetic_session(turns=turns, tool_output_chars=300)]
    return SummaryRequest(session_id="suite", messages=messages, **extra)  # type: ignore[arg-type]


class SummarizerSuite:
    """Subclass and provide a ``summarizer`` fixture."""

    def _summarize(self, summarizer: Summarizer, request: SummaryRequest) -> SummaryResult:
        try:
            result = summarizer.summarize(request)
        except SummarizerError:
            raise
        except Exception as exc:  # the engine's failure policy only knows SummarizerError
            raise AssertionError(
                f"expected a SummaryResult or a SummarizerError, got {type(exc).__name__}: {exc}"
            ) from exc
        assert isinstance(result, SummaryResult), (
            f"expected a SummaryResult, got {type(result).__name__}"
        )
        return result

    def test_summarizer_has_a_name_and_a_sane_window(self, summarizer: Summarizer) -> None:
        assert isinstance(summarizer.name, str) and summarizer.name, (
            f"expected a non-empty name on {type(summarizer).__name__}, got {summarizer.name!r}"
        )
        window = summarizer.context_length
        assert window is None or window > 0, f"expected context_length None or > 0, got {window}"

    def test_summary_renders_and_names_its_summarizer(self, summarizer: Summarizer) -> None:
        result = self._summarize(summarizer, summary_request())
        assert result.summarizer == summarizer.name, (
            f"expected SummaryResult.summarizer == {summarizer.name!r}, got {result.summarizer!r}"
        )
        assert isinstance(result.summary, HandoffSummary)
        text = result.summary.render()
        assert text.strip(), "expected the handoff to render to some text, got an empty one"

    def test_an_iterative_request_with_focus_is_answered(self, summarizer: Summarizer) -> None:
        first = self._summarize(summarizer, summary_request())
        again = self._summarize(
            summarizer,
            summary_request(turns=4, previous_summary=first.summary, focus="the failing tests"),
        )
        assert again.summary.render().strip(), (
            "expected a non-empty handoff when a previous summary and a focus are given"
        )

    def test_an_empty_middle_is_answered_or_refused_cleanly(self, summarizer: Summarizer) -> None:
        with contextlib.suppress(SummarizerError):  # refusing is allowed, as a SummarizerError
            self._summarize(summarizer, SummaryRequest(session_id="suite", messages=[]))


__all__ = ["SummarizerSuite", "summary_request"]
