"""Input checks every session store makes before it writes anything.

The store contract (:mod:`hermes_hookspecs.store`) says bad input is refused
whole, with an error naming what was wrong. These pure functions are those
checks, shared by the SQLite and PostgreSQL stores and offered to third-party
stores so every backend refuses the same inputs with the same messages.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import pydantic

from hermes_hookspecs.errors import SessionRotated, ValidationError
from hermes_hookspecs.messages import Usage
from hermes_hookspecs.records import (
    CompactionEvent,
    ContinuationUpdate,
    LeaseHolder,
    NewMessage,
    NewSession,
    PrefixEntry,
    SessionRecord,
    UsageRecord,
)

#: session fields :meth:`SessionStore.update_session` may change, with their types
UPDATABLE: dict[str, tuple[type, ...]] = {
    "title": (str,),
    "goal": (str,),
    "routing": (dict,),
    "model": (str,),
    "provider": (str,),
    "system_prompt_hash": (str, type(None)),
    "tools_hash": (str, type(None)),
}
BLOB_KINDS = ("system_prompt", "tools")
#: the end reason a rotation writes on the parent (``archive_and_compact(in_place=False)``)
ROTATION_END_REASON = "compression"
#: SQL both stores use to find the session continuing a rotated one (newest child first)
SUCCESSOR_SQL = "SELECT id FROM sessions WHERE parent_id = {p} ORDER BY created_at DESC, id LIMIT 1"


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


#: the first end of a session wins: later ``end_session`` calls change nothing
END_ONCE_SQL = "end_reason IS NULL"


def _describe(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(message)'}: {err['msg']}"
        for err in exc.errors()
    )


def coerce_messages(items: Any, what: str = "messages") -> list[NewMessage]:
    """Validate a list of :class:`NewMessage`; plain dicts are validated into one.

    Instances are validated again from their fields: a model built with
    ``model_construct`` (no validation) must not reach the database, where it
    would be written and then fail to read back.

    :raises ValidationError: naming the index and field that is wrong.
    """
    if not isinstance(items, list | tuple):
        raise ValidationError(f"{what} must be a list of NewMessage, got {type(items).__name__}")
    out: list[NewMessage] = []
    for index, item in enumerate(items):
        if isinstance(item, NewMessage):
            try:
                data: Any = item.model_dump(mode="python", round_trip=True, warnings=False)
            except Exception as exc:  # a constructed model missing required fields
                raise ValidationError(
                    f"{what}[{index}] is invalid: {type(exc).__name__}: {exc}"
                ) from None
        elif isinstance(item, dict):
            data = item if "message" in item else {"message": item}
        else:
            raise ValidationError(
                f"{what}[{index}] must be a NewMessage or a dict, got {type(item).__name__}"
            )
        try:
            out.append(NewMessage.model_validate(data))
        except pydantic.ValidationError as exc:
            raise ValidationError(f"{what}[{index}] is invalid: {_describe(exc)}") from None
        except (AttributeError, TypeError, ValueError) as exc:
            raise ValidationError(f"{what}[{index}] is invalid: {exc}") from None
    return out


PairingRow = tuple[str, list[str], str | None]


def pairing_rows(messages: Iterable[NewMessage]) -> list[PairingRow]:
    """``(role, call ids made, tool_call_id answered)`` per message (see check_tool_pairing)."""
    return [
        (
            new.message.role,
            [call.id for call in new.message.tool_calls or []],
            new.message.tool_call_id,
        )
        for new in messages
    ]


def check_tool_pairing(
    rows: Iterable[PairingRow],
    known_calls: Callable[[set[str]], set[str]],
    what: str = "messages",
) -> None:
    """Each tool result answers a call made earlier (in the batch, or before it).

    :param rows: :func:`pairing_rows` of the batch (plus any rows carried with it).
    :param known_calls: given the call ids answered but not made in the batch,
        returns those an assistant message of the active view already made
        (one query for the whole batch).
    :raises ValidationError: naming the message index and the unknown call id.
    """
    batch = list(rows)
    made: set[str] = set()
    outside: set[str] = set()
    for role, calls, answered in batch:
        if role == "tool" and answered and answered not in made:
            outside.add(answered)
        made.update(calls)
    known = known_calls(outside) if outside else set()
    made.clear()
    for index, (role, calls, answered) in enumerate(batch):
        if role == "tool":
            if answered is None:
                raise ValidationError(f"{what}[{index}]: a tool message needs 'tool_call_id'")
            if answered not in made and answered not in known:
                raise ValidationError(
                    f"{what}[{index}]: tool result answers call id {answered!r}, which no "
                    "earlier assistant message in the active view made"
                )
        made.update(calls)


def no_known_calls(ids: set[str]) -> set[str]:
    """``known_calls`` for a view that must pair up on its own (a new active view)."""
    return set()


def check_update_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of an ``update_session`` call, or a ValidationError naming the bad one."""
    for key, value in fields.items():
        if key not in UPDATABLE:
            raise ValidationError(
                f"update_session: field {key!r} cannot be updated; allowed: "
                f"{', '.join(sorted(UPDATABLE))}"
            )
        if not isinstance(value, UPDATABLE[key]):
            raise ValidationError(
                f"update_session: field {key!r} = {value!r:.80} has type "
                f"{type(value).__name__}; expected "
                f"{' or '.join(t.__name__ for t in UPDATABLE[key])}"
            )
        if isinstance(value, str) and "\x00" in value:
            raise ValidationError(f"update_session: field {key!r} contains a NUL character")
    return fields


def check_new_session(new: Any) -> NewSession:
    """A valid :class:`NewSession` (dicts accepted) without NUL characters in its text."""
    session = _as_model(new, NewSession, "new session")
    for key in ("id", "title", "cwd", "goal", "model", "provider", "parent_id"):
        value = getattr(session, key)
        if isinstance(value, str) and "\x00" in value:
            raise ValidationError(f"session field {key!r} contains a NUL character")
    if session.id is not None and not session.id.strip():
        raise ValidationError("session id must not be empty or blank")
    return session


def check_continuation(update: Any) -> ContinuationUpdate | None:
    """A valid :class:`ContinuationUpdate` for ``archive_and_compact`` (dicts accepted)."""
    if update is None:
        return None
    checked = _as_model(update, ContinuationUpdate, "update")
    try:
        json.dumps(checked.routing).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"update.routing is not JSON text: {exc}") from None
    return checked


def require_blobs(update: ContinuationUpdate | None, stored: Callable[[str, str], bool]) -> None:
    """Inside the compaction's transaction: each hash ``update`` sets names a stored blob.

    :param stored: ``stored(digest, kind)``, the backend's lookup.
    :raises ValidationError: naming the field, the digest and the kind.
    """
    if update is None:
        return
    for field, digest, kind in (
        ("system_prompt_hash", update.system_prompt_hash, "system_prompt"),
        ("tools_hash", update.tools_hash, "tools"),
    ):
        if digest is not None and not stored(digest, kind):
            raise ValidationError(
                f"update.{field} = {digest!r:.80} names no stored {kind!r} blob; put_blob it first"
            )


ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)


def _as_model(value: Any, model: type[ModelT], what: str) -> ModelT:
    """``value`` as a validated ``model`` (dicts accepted), or a ValidationError naming ``what``."""
    if isinstance(value, dict):
        try:
            return model.model_validate(value)
        except pydantic.ValidationError as exc:
            raise ValidationError(f"{what} is invalid: {_describe(exc)}") from None
    if not isinstance(value, model):
        raise ValidationError(f"{what} must be a {model.__name__}, got {type(value).__name__}")
    return value


def check_blob_kind(kind: Any) -> str:
    if kind not in BLOB_KINDS:
        raise ValidationError(f"blob kind {kind!r} is unknown; expected one of {BLOB_KINDS}")
    return str(kind)


def check_ttl(ttl: Any) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise ValidationError(f"lease ttl must be a positive number of seconds, got {ttl!r}")
    if ttl > 365 * 86400:
        raise ValidationError(f"lease ttl {ttl!r} is longer than a year")
    return float(ttl)


def check_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
        raise ValidationError(f"lease timeout must be None or seconds >= 0, got {timeout!r}")
    return float(timeout)


def check_count(value: Any, name: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValidationError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_search_scope(session_id: Any, session_ids: Any) -> list[str] | None:
    """The sessions a search may return rows of (``None``: every session).

    ``session_id`` is one session, ``session_ids`` several (a session and its
    rotation ancestors); giving both is refused, as is anything but strings.
    """
    if session_id is not None and session_ids is not None:
        raise ValidationError(
            f"search takes session_id or session_ids, not both (got {session_id!r} and "
            f"{session_ids!r})"
        )
    if session_id is not None:
        if not isinstance(session_id, str):
            raise ValidationError(
                f"search session_id must be a string, got {type(session_id).__name__}"
            )
        return [session_id]
    if session_ids is None:
        return None
    if isinstance(session_ids, str | bytes) or not isinstance(session_ids, Sequence):
        raise ValidationError(
            "search session_ids must be a sequence of session id strings, got "
            f"{type(session_ids).__name__}"
        )
    for index, item in enumerate(session_ids):
        if not isinstance(item, str):
            raise ValidationError(
                f"search session_ids[{index}] must be a string, got {type(item).__name__}"
            )
    return list(dict.fromkeys(session_ids))


# -- row mappers shared by SQL stores (same column order in every backend) --------


SESSION_COLUMNS = (
    "id, title, cwd, goal, routing, model, provider, parent_id, end_reason, created_at, "
    "updated_at, ended_at, system_prompt_hash, tools_hash, compression_count"
)


def session_from_row(row: Sequence[Any]) -> SessionRecord:
    """A :class:`SessionRecord` from a row of :data:`SESSION_COLUMNS`."""
    (
        sid,
        title,
        cwd,
        goal,
        routing,
        model,
        provider,
        parent_id,
        end_reason,
        created_at,
        updated_at,
        ended_at,
        sp_hash,
        tools_hash,
        count,
    ) = row
    if not isinstance(routing, dict):  # JSON text (SQLite); PostgreSQL's jsonb arrives decoded
        routing = json.loads(routing or "{}")
    return SessionRecord(
        id=sid,
        title=title,
        cwd=cwd,
        goal=goal,
        routing=routing,
        model=model,
        provider=provider,
        parent_id=parent_id,
        end_reason=end_reason,
        created_at=created_at,
        updated_at=updated_at,
        ended_at=ended_at,
        system_prompt_hash=sp_hash,
        tools_hash=tools_hash,
        compression_count=count,
    )


def usage_from_row(row: Sequence[Any]) -> UsageRecord:
    sid, turn_id, inp, out, cread, cwrite, reasoning, model, created_at = row
    return UsageRecord(
        session_id=sid,
        turn_id=turn_id,
        usage=Usage(
            input_tokens=inp,
            output_tokens=out,
            cache_read_tokens=cread,
            cache_write_tokens=cwrite,
            reasoning_tokens=reasoning,
            model=model,
        ),
        created_at=created_at,
    )


PREFIX_COLUMNS = (
    "session_id, request_index, request_hash, request_tokens, shared_prefix_hash, "
    "shared_prefix_tokens, previous_tokens, break_reason, provider_cached_tokens, created_at"
)


def prefix_from_row(row: Sequence[Any]) -> PrefixEntry:
    names = [name.strip() for name in PREFIX_COLUMNS.split(",")]
    return PrefixEntry.model_validate(dict(zip(names, row, strict=True)))


EVENT_COLUMNS = (
    "session_id, engine, backend, tokens_before, tokens_after, summarizer, fallback, detail, "
    "created_at"
)


def event_from_row(row: Sequence[Any]) -> CompactionEvent:
    sid, engine, backend, before, after, summarizer, fallback, detail, created_at = row
    return CompactionEvent(
        session_id=sid,
        engine=engine,
        backend=backend,
        tokens_before=before,
        tokens_after=after,
        summarizer=summarizer,
        fallback=bool(fallback),
        detail=json.loads(detail),
        created_at=created_at,
    )


# ---------------------------------------------------------------------------
# leases: the one dead-holder rule both stores apply
# ---------------------------------------------------------------------------


def process_state(pid: int) -> str | None:
    """The one-letter state of process ``pid`` from ``/proc/PID/stat`` (None: unknown).

    The command name in field 2 may hold spaces and parentheses, so the state is
    read after the last ``)``.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields[0] if fields else None


def holder_is_dead(holder: LeaseHolder) -> bool:
    """True only when the lease holder's process provably runs no code on this host.

    Dead means: the holder names this host, a pid other than ours, and either
    no such process exists (``os.kill(pid, 0)`` says so) or it is a zombie
    (``Z``: exited, not yet reaped by its parent) or dying (``X``), by
    ``/proc/PID/stat``. A holder on another host, a pid we may not signal, or
    a process whose state cannot be read is *not* dead: its lease lasts until
    it expires. Both stores apply this rule (the conformance suite pins it).
    """
    if holder.host != socket.gethostname() or holder.pid <= 0 or holder.pid == os.getpid():
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return process_state(holder.pid) in ("Z", "X")
