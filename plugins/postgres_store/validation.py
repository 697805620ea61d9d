"""Input checks made before anything is written (bad input is refused whole)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pydantic

from hermes_hookspecs.errors import ValidationError
from hermes_hookspecs.records import NewMessage, NewSession

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


def _describe(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(message)'}: {err['msg']}"
        for err in exc.errors()
    )


def coerce_messages(items: Any, what: str) -> list[NewMessage]:
    """Validate a list of :class:`NewMessage`; plain dicts are validated into one.

    :raises ValidationError: naming the index and field that is wrong.
    """
    if not isinstance(items, list | tuple):
        raise ValidationError(f"{what} must be a list of NewMessage, got {type(items).__name__}")
    out: list[NewMessage] = []
    for index, item in enumerate(items):
        if isinstance(item, NewMessage):
            out.append(item)
        elif isinstance(item, dict):
            data = item if "message" in item else {"message": item}
            try:
                out.append(NewMessage.model_validate(data))
            except pydantic.ValidationError as exc:
                raise ValidationError(f"{what}[{index}] is invalid: {_describe(exc)}") from None
        else:
            raise ValidationError(
                f"{what}[{index}] must be a NewMessage or a dict, got {type(item).__name__}"
            )
    return out


def check_tool_pairing(
    messages: Iterable[NewMessage],
    known_call: Callable[[set[str]], set[str]],
    what: str,
) -> None:
    """Each tool result answers a call made earlier (in the batch, or before it).

    :param known_call: given call ids, returns those already made by an
        assistant message of the active view (one query for the whole batch).
    :raises ValidationError: naming the message index and the unknown call id.
    """
    batch = list(messages)
    made: set[str] = set()
    outside: set[str] = set()
    for new in batch:
        msg = new.message
        if msg.role == "tool" and msg.tool_call_id and msg.tool_call_id not in made:
            outside.add(msg.tool_call_id)
        made.update(call.id for call in msg.tool_calls or [])
    known = known_call(outside) if outside else set()
    made.clear()
    for index, new in enumerate(batch):
        msg = new.message
        if msg.role == "tool":
            answered = msg.tool_call_id
            if answered is None:
                raise ValidationError(f"{what}[{index}]: a tool message needs 'tool_call_id'")
            if answered not in made and answered not in known:
                raise ValidationError(
                    f"{what}[{index}]: tool result answers call id {answered!r}, which no "
                    "earlier assistant message in the active view made"
                )
        made.update(call.id for call in msg.tool_calls or [])


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
    if isinstance(new, dict):
        try:
            new = NewSession.model_validate(new)
        except pydantic.ValidationError as exc:
            raise ValidationError(f"new session is invalid: {_describe(exc)}") from None
    if not isinstance(new, NewSession):
        raise ValidationError(f"expected a NewSession, got {type(new).__name__}")
    for key in ("id", "title", "cwd", "goal", "model", "provider", "parent_id"):
        value = getattr(new, key)
        if isinstance(value, str) and "\x00" in value:
            raise ValidationError(f"session field {key!r} contains a NUL character")
    if new.id is not None and not new.id.strip():
        raise ValidationError("session id must not be empty or blank")
    return new


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
