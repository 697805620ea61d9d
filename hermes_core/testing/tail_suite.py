"""Conformance suite for tail strategies.

Subclass :class:`TailStrategySuite` and provide a ``strategy`` fixture::

    class TestAcmeTail(TailStrategySuite):
        @pytest.fixture
        def strategy(self):
            return AcmeTail()

It checks the contract of :class:`hermes_hookspecs.TailStrategy`: a named
strategy whose :class:`~hermes_hookspecs.TailPlan` indexes the request
(``0 <= tail_start <= len(messages)``), keeps a verbatim tail that fits the
room the request gives (``settings.threshold_tokens``), asks for digest
chunks only of a positive size, returns well-formed extra sections, and
answers the same request the same way.
"""

from __future__ import annotations

from hermes_hookspecs import (
    CompressionSettings,
    SummarySection,
    TailPlan,
    TailRequest,
    TailStrategy,
)

from .engine_suite import synthetic_session


def tail_request(turns: int = 30, room: int = 8_000) -> TailRequest:
    """The synthetic session (minus its first user turn) as a tail request with ``room`` tokens."""
    rows = synthetic_session(turns=turns)[1:]
    counts = [3 + (len(r.message.text()) + 3) // 4 for r in rows]
    settings = CompressionSettings(threshold_tokens=room, context_length=room * 2)
    return TailRequest(messages=rows, token_counts=counts, settings=settings)


class TailStrategySuite:
    """Subclass and provide a ``strategy`` fixture."""

    def test_strategy_has_a_name(self, strategy: TailStrategy) -> None:
        assert isinstance(strategy.name, str) and strategy.name, (
            f"expected a non-empty name on {type(strategy).__name__}, got {strategy.name!r}"
        )

    def test_plan_indexes_the_request(self, strategy: TailStrategy) -> None:
        request = tail_request()
        plan = strategy.plan(request)
        assert isinstance(plan, TailPlan), f"expected a TailPlan, got {type(plan).__name__}"
        assert 0 <= plan.tail_start <= len(request.messages), (
            f"expected 0 <= tail_start <= {len(request.messages)}, got {plan.tail_start}"
        )

    def test_the_verbatim_tail_fits_the_room(self, strategy: TailStrategy) -> None:
        request = tail_request(room=6_000)
        plan = strategy.plan(request)
        kept = sum(request.token_counts[plan.tail_start :])
        room = request.settings.threshold_tokens
        assert kept <= room, (
            f"expected the verbatim tail to fit the {room} tokens of room, "
            f"but messages {plan.tail_start}.. hold {kept} tokens"
        )

    def test_sections_and_chunks_are_well_formed(self, strategy: TailStrategy) -> None:
        plan = strategy.plan(tail_request())
        for section in plan.extra_sections:
            assert isinstance(section, SummarySection) and section.title, (
                f"expected titled SummarySection objects, got {section!r}"
            )
        assert plan.digest_chunks is None or plan.digest_chunks > 0, (
            f"expected digest_chunks None or > 0, got {plan.digest_chunks}"
        )

    def test_a_short_request_is_answered(self, strategy: TailStrategy) -> None:
        request = tail_request(turns=1)
        plan = strategy.plan(request)
        assert 0 <= plan.tail_start <= len(request.messages), (
            f"expected 0 <= tail_start <= {len(request.messages)} on a short request, "
            f"got {plan.tail_start}"
        )

    def test_the_same_request_gets_the_same_plan(self, strategy: TailStrategy) -> None:
        first = strategy.plan(tail_request())
        again = strategy.plan(tail_request())
        assert first == again, f"expected the same plan twice, got {first!r} then {again!r}"


__all__ = ["TailStrategySuite", "tail_request"]
