"""Input checks every session store makes before it writes anything.

The store contract (:mod:`hermes_hookspecs.store`) says bad input is refused
whole, with an error naming what was wrong. These pure functions are those
checks; both built-in stores call them, and a third-party store that does
refuses the same inputs with the same messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import pydantic

from hermes_hookspecs.errors import NotFoundError, ValidationError
from hermes_hookspecs.records import (
    ContinuationUpdate,
    LeaseGrant,
    LeaseHolder,
    NewMessage,
    NewSession,
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
#: the blob kind each session hash field names
HASH_KINDS = {"system_prompt_hash": "system_prompt", "tools_hash": "tools"}

ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)


def _describe(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(message)'}: {err['msg']}"
        for err in exc.errors()
    )


def as_model(value: Any, model: type[ModelT], what: str) -> ModelT:
    """``value`` as a validated ``model`` (dicts accepted), or a ValidationError naming ``what``."""
    if isinstance(value, dict):
        try:
            return model.model_validate(value)
        except pydantic.ValidationError as exc:
            raise ValidationError(f"{what} is invalid: {_describe(exc)}") from None
    if not isinstance(value, model):
        raise ValidationError(f"{what} must be a {model.__name__}, got {type(value).__name__}")
    return value


def no_nul(value: Any, what: str) -> None:
    """Refuse a string holding a NUL character (no SQL text column can keep one)."""
    if isinstance(value, str) and "\x00" in value:
        raise ValidationError(f"{what} contains a NUL character")


def json_text(value: Any, what: str) -> str:
    """``value`` as compact JSON text (keys in their order), or a ValidationError.

    Refuses values JSON cannot encode and text that is not valid Unicode
    (lone surrogates), which no database column can hold.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{what} is not valid Unicode text ({exc.reason})") from None
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} is not JSON-serialisable: {exc}") from None
    return text


def coerce_messages(items: Any, what: str = "messages") -> list[NewMessage]:
    """Validate a list of :class:`NewMessage`; plain dicts are validated into one.

    Instances are validated again from their fields: a model built with
    ``model_construct`` (no validation) must not reach the database, where it
    would be written and then fail to read back. A ``turn_id`` holding a NUL
    character is refused (no SQL text column keeps it).

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
            new = NewMessage.model_validate(data)
        except pydantic.ValidationError as exc:
            raise ValidationError(f"{what}[{index}] is invalid: {_describe(exc)}") from None
        except (AttributeError, TypeError, ValueError) as exc:
            raise ValidationError(f"{what}[{index}] is invalid: {exc}") from None
        if new.turn_id is not None and "\x00" in new.turn_id:
            no_nul(new.turn_id, f"{what}[{index}].turn_id")
        out.append(new)
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


def origin_roots(
    batch: Sequence[NewMessage],
    lookup: Callable[[list[int]], dict[int, int]],
    what: str = "messages",
) -> list[int | None]:
    """The ``origin_root`` of each new message: the first row of its carried-forward chain.

    :param lookup: given the distinct ``origin_id`` values of the batch,
        returns ``{id: coalesce(origin_root, id)}`` for the stored ones (one query).
    :raises ValidationError: an ``origin_id`` names no stored message.
    """
    wanted = {new.origin_id for new in batch if new.origin_id is not None}
    if not wanted:
        return [None] * len(batch)
    roots = lookup(sorted(wanted))
    out: list[int | None] = []
    for index, new in enumerate(batch):
        if new.origin_id is not None and new.origin_id not in roots:
            raise ValidationError(
                f"{what}[{index}].origin_id {new.origin_id} matches no stored message"
            )
        out.append(None if new.origin_id is None else roots[new.origin_id])
    return out


def check_update_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of an ``update_session`` call, or a ValidationError naming the bad one.

    ``routing`` must be JSON text; the hashes are checked against the stored
    blobs by :func:`require_hashes` inside the write's transaction.
    """
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
        no_nul(value, f"update_session: field {key!r}")
        if key == "routing":
            json_text(value, "update_session: field 'routing'")
    return fields


def require_hashes(
    hashes: dict[str, str | None], stored: Callable[[str, str], bool], what: str
) -> None:
    """Inside the write's transaction: each hash set names a stored blob of its kind.

    :param hashes: ``{"system_prompt_hash": digest, "tools_hash": digest}`` (None: unset).
    :param stored: ``stored(digest, kind)``, the backend's lookup.
    :raises ValidationError: naming the field, the digest and the kind.
    """
    for field, digest in hashes.items():
        kind = HASH_KINDS.get(field)
        if kind is not None and digest is not None and not stored(digest, kind):
            raise ValidationError(
                f"{what}{field} = {digest!r:.80} names no stored {kind!r} blob; put_blob it first"
            )


def check_new_session(new: Any, what: str = "new session") -> NewSession:
    """A valid :class:`NewSession` (dicts accepted) without NUL characters in its text.

    ``routing`` must be JSON text; an ``id``, when given, must not be blank.
    """
    session = as_model(new, NewSession, what)
    for key in ("id", "title", "cwd", "goal", "model", "provider", "parent_id"):
        no_nul(getattr(session, key), f"{what}: session field {key!r}")
    if session.id is not None and not session.id.strip():
        raise ValidationError(f"{what}: session id must not be empty or blank")
    json_text(session.routing, f"{what}: routing")
    return session


def duplicate_session(session_id: str) -> ValidationError:
    """The error for a session id that is already taken (create, or a rotation's child)."""
    return ValidationError(f"session id {session_id!r} already exists")


def check_end_reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason or "\x00" in reason:
        raise ValidationError(
            f"end reason must be a non-empty string without NUL, got {reason!r:.80}"
        )
    return reason


def check_continuation(update: Any) -> ContinuationUpdate | None:
    """A valid :class:`ContinuationUpdate` for ``archive_and_compact`` (dicts accepted)."""
    if update is None:
        return None
    checked = as_model(update, ContinuationUpdate, "update")
    if checked.routing is not None:
        json_text(checked.routing, "update.routing")
    return checked


def require_blobs(update: ContinuationUpdate | None, stored: Callable[[str, str], bool]) -> None:
    """Inside the compaction's transaction: each hash ``update`` sets names a stored blob.

    :param stored: ``stored(digest, kind)``, the backend's lookup.
    :raises ValidationError: naming the field, the digest and the kind.
    """
    if update is None:
        return
    require_hashes(
        {"system_prompt_hash": update.system_prompt_hash, "tools_hash": update.tools_hash},
        stored,
        "update.",
    )


def check_blob_kind(kind: Any) -> str:
    if kind not in BLOB_KINDS:
        raise ValidationError(f"blob kind {kind!r} is unknown; expected one of {BLOB_KINDS}")
    return str(kind)


def check_blob_text(text: Any) -> bytes:
    """The UTF-8 bytes of a blob's text (what its SHA-256 digest is taken of)."""
    if not isinstance(text, str):
        raise ValidationError(f"blob text must be a str, got {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"blob text is not valid Unicode ({exc.reason})") from None


def check_record(value: Any, model: type[ModelT], what: str) -> ModelT:
    """A usage record or prefix entry (dicts accepted) whose text fields hold no NUL."""
    record = as_model(value, model, what)
    for key, field in record:
        no_nul(field, f"{what}.{key}")
        if isinstance(field, pydantic.BaseModel):
            for sub, inner in field:
                no_nul(inner, f"{what}.{key}.{sub}")
    return record


def check_session_id(value: Any) -> str:
    """A session id argument: a string (a misspelt type is bad input, not an unknown session)."""
    if not isinstance(value, str):
        raise ValidationError(
            f"session id must be a string, got {type(value).__name__}: {value!r:.80}"
        )
    return value


def check_message_id(value: Any, what: str = "message id") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{what} must be an integer, got {value!r:.80}")
    return value


def check_message_ids(ids: Any) -> list[int]:
    """The ids of a ``get_messages`` call (any order, repeats allowed)."""
    asked = list(ids)
    for value in asked:
        check_message_id(value, "message ids must be integers; one")
    return asked


def missing_messages(asked: Iterable[int], found: Iterable[int]) -> NotFoundError | None:
    """The error naming the asked ids no stored message has (None: all found)."""
    have = set(found)
    missing = sorted({i for i in asked if i not in have})
    if not missing:
        return None
    shown = ", ".join(map(str, missing[:20])) + (", ..." if len(missing) > 20 else "")
    return NotFoundError(f"no stored message with id(s) {shown}")


def check_holder(holder: Any) -> LeaseHolder:
    if not isinstance(holder, LeaseHolder):
        raise ValidationError(f"holder must be a LeaseHolder, got {type(holder).__name__}")
    return holder


def check_lease(lease: Any) -> LeaseGrant | None:
    """The ``lease`` argument of a write: None or a :class:`LeaseGrant`."""
    if lease is not None and not isinstance(lease, LeaseGrant):
        raise ValidationError(f"lease must be a LeaseGrant or None, got {type(lease).__name__}")
    return lease


def check_grant(lease: Any) -> LeaseGrant:
    """The ``lease`` of ``renew_lease``/``release_lease``: a :class:`LeaseGrant`."""
    if not isinstance(lease, LeaseGrant):
        raise ValidationError(f"lease must be a LeaseGrant, got {type(lease).__name__}")
    return lease


def check_ttl(ttl: Any) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise ValidationError(f"lease ttl must be a positive number of seconds, got {ttl!r}")
    if ttl > 365 * 86400:
        raise ValidationError(f"lease ttl {ttl!r} is longer than a year")
    return float(ttl)


def check_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise ValidationError(f"lease timeout must be None or seconds >= 0, got {timeout!r}")
    return float(timeout)


def check_count(value: Any, name: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValidationError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_search(query: Any, limit: Any, session_id: Any, session_ids: Any) -> list[str] | None:
    """Check a ``search`` call's arguments; return its scope (see :func:`check_search_scope`).

    The query must be a string (its FTS syntax is plain text, the stores' concern) and the
    limit an integer >= 0 (``True`` is not a limit).
    """
    if not isinstance(query, str):
        raise ValidationError(f"search query must be a string, got {type(query).__name__}")
    check_count(limit, "search limit")
    return check_search_scope(session_id, session_ids)


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
