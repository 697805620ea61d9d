"""The store kit: every session-store rule that is not SQL dialect, written once.

Both built-in stores call it, and a third-party store should too; the store
conformance suite (:mod:`hermes_core.testing.store_suite`) pins each rule.

==================  ==========================================================
``checks``          input checks: messages, tool pairing, session fields,
                    blobs, counts, leases and TTLs, search scope
``sessions``        the first end wins, a rotated session is closed, what a
                    rotation's child inherits
``compaction``      ``archive_and_compact`` validated and planned as values
``leases``          the dead-holder rule, lease liveness and fencing
``rows``            column lists and row mappers shared by SQL stores
==================  ==========================================================

Every public name is importable from ``hermes_core.storekit`` itself.
"""

from __future__ import annotations

from .checks import (
    BLOB_KINDS,
    HASH_KINDS,
    UPDATABLE,
    PairingRow,
    as_model,
    check_blob_kind,
    check_blob_text,
    check_continuation,
    check_count,
    check_end_reason,
    check_grant,
    check_holder,
    check_lease,
    check_message_id,
    check_message_ids,
    check_new_session,
    check_record,
    check_search,
    check_search_scope,
    check_session_id,
    check_timeout,
    check_tool_pairing,
    check_ttl,
    check_update_fields,
    coerce_messages,
    duplicate_session,
    json_text,
    missing_messages,
    no_known_calls,
    no_nul,
    origin_roots,
    pairing_rows,
    require_blobs,
    require_hashes,
)
from .compaction import CompactionPlan, CompactionRequest, check_compaction, plan_compaction
from .leases import LeaseState, check_fence, holder_is_dead, process_state
from .rows import (
    EVENT_COLUMNS,
    PREFIX_COLUMNS,
    SESSION_COLUMNS,
    event_from_row,
    prefix_from_row,
    session_from_row,
    stored_row,
    usage_from_row,
)
from .sessions import (
    END_ONCE_SQL,
    INHERITED_FIELDS,
    LIST_SESSIONS_SQL,
    ROTATION_END_REASON,
    SUCCESSOR_SQL,
    refuse_if_rotated,
    rotation_child,
)

__all__ = [
    "BLOB_KINDS",
    "END_ONCE_SQL",
    "EVENT_COLUMNS",
    "HASH_KINDS",
    "INHERITED_FIELDS",
    "LIST_SESSIONS_SQL",
    "PREFIX_COLUMNS",
    "ROTATION_END_REASON",
    "SESSION_COLUMNS",
    "SUCCESSOR_SQL",
    "UPDATABLE",
    "CompactionPlan",
    "CompactionRequest",
    "LeaseState",
    "PairingRow",
    "as_model",
    "check_blob_kind",
    "check_blob_text",
    "check_compaction",
    "check_continuation",
    "check_count",
    "check_end_reason",
    "check_fence",
    "check_grant",
    "check_holder",
    "check_lease",
    "check_message_id",
    "check_message_ids",
    "check_new_session",
    "check_record",
    "check_search",
    "check_search_scope",
    "check_session_id",
    "check_timeout",
    "check_tool_pairing",
    "check_ttl",
    "check_update_fields",
    "coerce_messages",
    "duplicate_session",
    "event_from_row",
    "holder_is_dead",
    "json_text",
    "missing_messages",
    "no_known_calls",
    "no_nul",
    "origin_roots",
    "pairing_rows",
    "plan_compaction",
    "prefix_from_row",
    "process_state",
    "refuse_if_rotated",
    "require_blobs",
    "require_hashes",
    "rotation_child",
    "session_from_row",
    "stored_row",
    "usage_from_row",
]
