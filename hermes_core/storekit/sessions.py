"""Session rules every store applies: the first end wins, a rotated session is closed,
and what a rotation's child session inherits from its parent."""

from __future__ import annotations

import uuid
from typing import Any

from hermes_hookspecs.errors import SessionRotated, ValidationError
from hermes_hookspecs.records import NewSession, SessionRecord

from .checks import check_new_session

#: the end reason a rotation writes on the parent (``archive_and_compact(in_place=False)``)
ROTATION_END_REASON = "compression"
#: SQL both stores use to find the session continuing a rotated one (newest child first)
SUCCESSOR_SQL = "SELECT id FROM sessions WHERE parent_id = {p} ORDER BY created_at DESC, id LIMIT 1"
#: SQL both stores list sessions with: most recently updated first; sessions updated at the
#: same instant, the most recently created first, then by id
LIST_SESSIONS_SQL = (
    "SELECT {columns} FROM sessions ORDER BY updated_at DESC, created_at DESC, id "
    "LIMIT {p} OFFSET {p}"
)
#: the first end of a session wins: later ``end_session`` calls change nothing
END_ONCE_SQL = "end_reason IS NULL"
#: the fields a rotation's child takes from its parent when the caller leaves them empty
INHERITED_FIELDS = ("title", "cwd", "goal", "routing", "model", "provider")


def refuse_if_rotated(
    session_id: str, end_reason: str | None, successor_id: str | None, action: str
) -> None:
    """The rule for a session ended by a rotation: it takes no more writes or leases.

    A stale process still holding the parent must not append a turn to it (its
    history lives on in the child), nor take its lease. Every store calls this
    inside the write's transaction with the session's ``end_reason`` and its
    newest child's id; the error names the session to continue in.

    :raises SessionRotated: ``end_reason`` is the rotation's.
    """
    if end_reason != ROTATION_END_REASON:
        return
    where = f"; it continues as {successor_id!r}" if successor_id else ""
    raise SessionRotated(
        f"cannot {action} session {session_id!r}: it was ended by compression (rotation){where}",
        session_id=session_id,
        successor_id=successor_id,
    )


def rotation_child(parent: SessionRecord, child: Any) -> NewSession:
    """The session a rotation of ``parent`` creates, from the caller's ``child`` (or None).

    The rule: the child continues the parent's conversation, so each of
    :data:`INHERITED_FIELDS` the caller left empty (``""``, ``{}``, or no
    ``child`` at all) is the parent's; a field the caller set is kept. Its
    ``parent_id`` is the parent: a ``child.parent_id`` naming another session
    is refused. Its id is ``child.id`` or a fresh uuid4 hex. (The prompt
    hashes come from the parent unless the compaction's ``update`` sets them,
    and ``compression_count`` is the parent's plus one; see
    :func:`hermes_core.storekit.compaction.plan_compaction`.)

    :raises ValidationError: ``child`` is invalid or names a foreign parent.
    """
    spec = check_new_session(child, "child") if child is not None else NewSession()
    if spec.parent_id not in (None, parent.id):
        raise ValidationError(
            f"child.parent_id = {spec.parent_id!r}; a rotated child's parent is {parent.id!r}"
        )
    filled: dict[str, Any] = {
        name: getattr(parent, name) for name in INHERITED_FIELDS if not getattr(spec, name)
    }
    return spec.model_copy(
        update={**filled, "id": spec.id or uuid.uuid4().hex, "parent_id": parent.id}
    )
