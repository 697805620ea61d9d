"""Planning a compaction: what both stores compute before they write one.

``archive_and_compact`` is, for every store, the same three steps:

1. :func:`check_compaction` validates the arguments (before any connection);
2. inside the transaction the store locks the session, applies the rotation
   and fencing rules, reads the session record and the active rows after the
   watermark, and calls :func:`plan_compaction`, a pure function of those
   values: which rows to insert where, which carried rows move, the child
   session (rotation), the counts, and the checks of the new view;
3. the store executes the plan's SQL and returns :meth:`CompactionPlan.commit`.

Only step 3 is written in each SQL dialect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hermes_hookspecs.errors import ValidationError
from hermes_hookspecs.records import (
    CompactionCommit,
    CompactionEvent,
    ContinuationUpdate,
    NewMessage,
    NewSession,
    SessionRecord,
    StoredMessage,
)

from .checks import (
    as_model,
    check_continuation,
    check_count,
    check_new_session,
    check_tool_pairing,
    coerce_messages,
    json_text,
    no_known_calls,
    pairing_rows,
)
from .sessions import rotation_child


@dataclass(frozen=True)
class CompactionRequest:
    """The validated arguments of one ``archive_and_compact`` call."""

    messages: list[NewMessage]
    watermark: int
    in_place: bool
    child: NewSession | None
    event: CompactionEvent | None
    update: ContinuationUpdate | None


def check_compaction(
    new_active: Any,
    *,
    watermark: Any,
    in_place: Any,
    child: Any,
    event: Any,
    update: Any,
) -> CompactionRequest:
    """Validate the arguments of ``archive_and_compact`` (dicts accepted for the models).

    :raises ValidationError: naming the argument that is wrong; ``child`` is
        only accepted with ``in_place=False``.
    """
    batch = coerce_messages(new_active, "new_active")
    check_count(watermark, "watermark")
    checked_update = check_continuation(update)
    in_place = bool(in_place)
    if child is not None and in_place:
        raise ValidationError("child is only used with in_place=False (rotation)")
    checked_child = None if child is None else check_new_session(child, "child")
    checked_event = None if event is None else as_model(event, CompactionEvent, "event")
    if checked_event is not None:
        json_text(checked_event.detail, "event.detail")
    return CompactionRequest(
        messages=batch,
        watermark=watermark,
        in_place=in_place,
        child=checked_child,
        event=checked_event,
        update=checked_update,
    )


@dataclass(frozen=True)
class CompactionPlan:
    """What one compaction writes, computed before anything is written.

    ``inserts`` go to ``continuing_id`` at positions ``first_position,
    first_position + 1, ...``. In place, the active rows after the watermark
    stay and are renumbered by ``moves`` (``(message id, position)``); in a
    rotation they are copied into the child (the tail of ``inserts``) and the
    parent's rows, ``retire`` among them, all become inactive and compacted.
    """

    session_id: str
    in_place: bool
    continuing_id: str
    #: the child session's row (rotation only); its prompt hashes follow
    child: NewSession | None
    child_system_prompt_hash: str | None
    child_tools_hash: str | None
    #: the continuing session's ``compression_count`` after the commit
    compression_count: int
    inserts: list[NewMessage]
    first_position: int
    #: the continuing session's ``next_position`` after the commit
    next_position: int
    carried: int
    moves: list[tuple[int, int]] = field(default_factory=list)
    retire: list[int] = field(default_factory=list)
    event: CompactionEvent | None = None
    update: ContinuationUpdate | None = None

    @property
    def inserted(self) -> int:
        """How many rows of ``new_active`` the commit writes (carried copies not counted)."""
        return len(self.inserts) - (0 if self.in_place else self.carried)

    def commit(self, archived: int, inserted_ids: list[int]) -> CompactionCommit:
        """The result to return, given the archived count and the ids ``inserts`` got."""
        kept = [mid for mid, _ in self.moves]
        return CompactionCommit(
            session_id=self.session_id,
            archived=archived,
            inserted=self.inserted,
            carried_after_watermark=self.carried,
            child_session_id=None if self.in_place else self.continuing_id,
            active_ids=[*inserted_ids, *kept],
        )


def plan_compaction(
    parent: SessionRecord,
    next_position: int,
    request: CompactionRequest,
    late: list[StoredMessage],
    *,
    first_position: int,
) -> CompactionPlan:
    """Plan the compaction of ``parent`` (pure: the store only executes it).

    :param next_position: the session's next free position.
    :param late: its active rows with ``id > watermark``, by position.
    :param first_position: the position a new session's first row takes in
        this store (the rotation's child starts there).
    :raises ValidationError: a tool result of the new view (``new_active``
        and the rows after the watermark) answers no call in it; the child
        is refused (:func:`~hermes_core.storekit.sessions.rotation_child`);
        ``event.session_id`` names neither this session nor its child.
    """
    batch = request.messages
    check_tool_pairing(
        pairing_rows(batch)
        + [
            (m.message.role, [c.id for c in m.message.tool_calls or []], m.message.tool_call_id)
            for m in late
        ],
        no_known_calls,
        "new_active + carried messages",
    )
    count = parent.compression_count + 1
    if request.in_place:
        base = next_position + len(batch)
        plan = CompactionPlan(
            session_id=parent.id,
            in_place=True,
            continuing_id=parent.id,
            child=None,
            child_system_prompt_hash=None,
            child_tools_hash=None,
            compression_count=count,
            inserts=list(batch),
            first_position=next_position,
            next_position=base + len(late),
            carried=len(late),
            moves=[(row.id, base + i) for i, row in enumerate(late)],
            event=request.event,
            update=request.update,
        )
    else:
        child = rotation_child(parent, request.child)
        inserts = [*batch, *(NewMessage.carried_from(row) for row in late)]
        assert child.id is not None
        plan = CompactionPlan(
            session_id=parent.id,
            in_place=False,
            continuing_id=child.id,
            child=child,
            child_system_prompt_hash=parent.system_prompt_hash,
            child_tools_hash=parent.tools_hash,
            compression_count=count,
            inserts=inserts,
            first_position=first_position,
            next_position=first_position + len(inserts),
            carried=len(late),
            retire=[row.id for row in late],
            event=request.event,
            update=request.update,
        )
    if plan.event is not None:
        allowed = {plan.session_id, plan.continuing_id}
        if plan.event.session_id not in allowed:
            raise ValidationError(
                f"event.session_id = {plan.event.session_id!r}; expected one of {sorted(allowed)}"
            )
    return plan
