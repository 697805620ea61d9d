"""Usage records and the prefix ledger."""

from __future__ import annotations

import pytest

from hermes_hookspecs import (
    PrefixEntry,
    SessionStore,
    Usage,
    UsageRecord,
    ValidationError,
)

from .base import SuiteBase


class LedgerChecks(SuiteBase):
    """Usage records and the prefix ledger."""

    def test_usage_round_trip(self, store: SessionStore, session_id: str) -> None:
        first = Usage(
            input_tokens=100,
            output_tokens=20,
            cache_read_tokens=80,
            cache_write_tokens=5,
            reasoning_tokens=3,
            model="gpt-x",
        )
        store.record_usage(UsageRecord(session_id=session_id, turn_id="t1", usage=first))
        store.record_usage(
            UsageRecord(session_id=session_id, turn_id="t2", usage=Usage(input_tokens=1))
        )
        got = store.usage(session_id)
        assert [u.turn_id for u in got] == ["t1", "t2"]
        assert got[0].usage == first and got[0].created_at is not None

    def test_prefix_ledger_round_trip(self, store: SessionStore, session_id: str) -> None:
        for i, reason in enumerate(["first", None, "compaction"]):
            store.record_prefix(
                PrefixEntry(
                    session_id=session_id,
                    request_index=i,
                    request_hash=f"h{i}",
                    request_tokens=100 + i,
                    shared_prefix_hash=f"p{i}",
                    shared_prefix_tokens=90,
                    previous_tokens=95,
                    break_reason=reason,
                    provider_cached_tokens=64 if i else None,
                )
            )
        got = store.prefix_entries(session_id)
        assert [(e.request_index, e.break_reason) for e in got] == [
            (0, "first"),
            (1, None),
            (2, "compaction"),
        ]
        assert got[1].provider_cached_tokens == 64 and got[0].provider_cached_tokens is None

    def test_records_must_be_records(self, store: SessionStore, session_id: str) -> None:
        with pytest.raises(ValidationError, match="record_usage"):
            store.record_usage("100 tokens")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="record_prefix"):
            store.record_prefix(object())  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="turn_id"):
            store.record_usage(
                UsageRecord(session_id=session_id, turn_id="t\x00", usage=Usage(input_tokens=1))
            )
        with pytest.raises(ValidationError, match="model"):
            store.record_usage(
                UsageRecord(session_id=session_id, usage=Usage(input_tokens=1, model="m\x00"))
            )
        assert store.usage(session_id) == [] and store.prefix_entries(session_id) == []
