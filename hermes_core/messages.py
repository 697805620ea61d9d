"""The messages an integrator hands a turn: validation, limits and the texts the runtime adds.

Everything here is a pure function of its input; the turn module
(:mod:`hermes_core.turn`) calls it before anything joins the turn's draft.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from hermes_hookspecs import Message, StoredMessage, ValidationError

RECALL_HEADER = "[Recalled context for this turn; reference only, not from the user]"
#: the tool result :meth:`Turn.commit` stores for a call the turn never answered
UNANSWERED_RESULT = "[no result: the turn was committed before this tool call was answered]"
#: the deepest JSON nesting accepted in tool-call arguments (deeper is a ValidationError)
MAX_ARGUMENT_DEPTH = 64


def json_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of JSON text, scanned without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def validation_error(what: str, exc: PydanticValidationError) -> ValidationError:
    """A :class:`ValidationError` naming ``what`` and every field pydantic rejected."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or what}: {e['msg']}" for e in exc.errors()
    )
    return ValidationError(f"invalid {what}: {problems}")


def to_message(value: Any, role: str, what: str) -> Message:
    """Validate a user/assistant/tool message given as str, parts list, dict or Message."""
    if isinstance(value, Message):
        message = value
    elif isinstance(value, str) or (isinstance(value, list) and role == "user"):
        try:
            message = Message(role=role, content=value)  # type: ignore[arg-type]
        except PydanticValidationError as exc:
            raise validation_error(what, exc) from None
    elif isinstance(value, dict):
        try:
            message = Message.from_api({"role": role, **value})
        except PydanticValidationError as exc:
            raise validation_error(what, exc) from None
    else:
        raise ValidationError(
            f"invalid {what}: expected a string, a list of content parts, a dict or a Message, "
            f"got {type(value).__name__}"
        )
    if message.role != role:
        raise ValidationError(f"invalid {what}: role is {message.role!r}, expected {role!r}")
    return message


def check_arguments_depth(message: Message) -> None:
    """Reject an assistant message whose tool-call arguments nest too deep."""
    for call in message.tool_calls or []:
        depth = json_depth(call.function.arguments or "")
        if depth > MAX_ARGUMENT_DEPTH:
            raise ValidationError(
                f"invalid assistant message: tool call {call.id!r} ({call.function.name}) "
                f"has arguments nested {depth} deep; at most {MAX_ARGUMENT_DEPTH} are accepted"
            )


def with_recall(message: Message, pieces: Sequence[str]) -> Any:
    """The API content of ``message`` with the per-turn context appended (None: none)."""
    if not pieces:
        return None
    extra = RECALL_HEADER + "\n" + "\n\n".join(pieces)
    if isinstance(message.content, list):
        return [*message.content, {"type": "text", "text": extra}]
    return f"{message.content or ''}\n\n{extra}"


class MessagesView(Sequence[Message]):
    """A read-only view of stored rows as messages (no copy per hook call)."""

    def __init__(self, rows: Sequence[StoredMessage]) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [row.message for row in self._rows[index]]
        return self._rows[index].message
