"""Input checks done before anything is written: message shape and tool pairing."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pydantic

from hermes_hookspecs.errors import ValidationError
from hermes_hookspecs.records import NewMessage

_ROLES = frozenset({"system", "user", "assistant", "tool"})


def _describe(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(piece) for piece in error["loc"]) or "(message)"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def coerce_messages(items: Any, what: str = "messages") -> list[NewMessage]:
    """Validate a list of :class:`NewMessage` (wire dicts are accepted and validated).

    A dict with a top-level ``role`` is taken as a bare chat message.

    :raises ValidationError: naming the index and field that is wrong.
    """
    if not isinstance(items, list | tuple):
        raise ValidationError(f"{what} must be a list of NewMessage, got {type(items).__name__}")
    out: list[NewMessage] = []
    for index, item in enumerate(items):
        if isinstance(item, NewMessage):
            role = getattr(item.message, "role", None)
            if role not in _ROLES:
                raise ValidationError(f"{what}[{index}].message.role: invalid role {role!r}")
            out.append(item)
            continue
        if isinstance(item, dict):
            data = item if "message" in item else {"message": item}
            try:
                out.append(NewMessage.model_validate(data))
            except pydantic.ValidationError as exc:
                raise ValidationError(f"{what}[{index}] is invalid: {_describe(exc)}") from None
            continue
        raise ValidationError(
            f"{what}[{index}] must be a NewMessage or a dict, got {type(item).__name__}"
        )
    return out


def check_tool_pairing(
    batch: Iterable[tuple[str, list[str], str | None]],
    known_call: Callable[[str], bool],
    what: str = "messages",
) -> None:
    """Each tool result must answer a call made earlier (in the batch or before it).

    :param batch: ``(role, call ids made, tool_call_id answered)`` per message.
    :param known_call: whether a call id was made by an assistant message
        already in the active view.
    :raises ValidationError: naming the message index and the unknown call id.
    """
    made: set[str] = set()
    for index, (role, calls, answered) in enumerate(batch):
        if role == "tool":
            if answered is None:
                raise ValidationError(f"{what}[{index}]: a tool message needs 'tool_call_id'")
            if answered not in made and not known_call(answered):
                raise ValidationError(
                    f"{what}[{index}]: tool result answers call id {answered!r}, which no "
                    "earlier assistant message in the active view made"
                )
        made.update(calls)


def pairing_rows(messages: list[NewMessage]) -> list[tuple[str, list[str], str | None]]:
    """The ``batch`` argument of :func:`check_tool_pairing` for new messages."""
    return [
        (
            new.message.role,
            [call.id for call in new.message.tool_calls or []],
            new.message.tool_call_id,
        )
        for new in messages
    ]
