"""A turn's draft: the messages it recorded and has not stored (nothing is before commit).

The draft keeps each pending message with its wire dict, the tool calls still
open, and, after a compression due in the middle of the turn, the compressed
view (:class:`DraftView`) the rest of the turn is sent over. The request a
turn prepares is the session's active view (or that compressed view)
followed by the pending messages (:meth:`TurnDraft.parts`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from hermes_hookspecs import Message, NewMessage, StoredMessage, ToolCall, ValidationError

from .ledger import RequestChain, segment_hash
from .view import ActiveView


@dataclass(frozen=True)
class DraftView:
    """A compressed view over the history and a turn's draft, sent but never stored.

    ``upto`` pending messages are covered by ``rows``; later ones follow them.
    """

    rows: tuple[StoredMessage, ...]
    apis: tuple[dict[str, Any], ...]
    upto: int


class TurnDraft:
    """The pending messages of one turn, with their wire dicts and open tool calls."""

    def __init__(self) -> None:
        self.pending: list[NewMessage] = []
        self.apis: list[dict[str, Any]] = []
        self.open_calls: list[str] = []
        self.calls: dict[str, ToolCall] = {}
        self.answered: set[str] = set()
        self.view: DraftView | None = None
        self._draft_ids = 0

    def add(self, item: NewMessage, api: dict[str, Any]) -> None:
        self.pending.append(item)
        self.apis.append(api)

    def open(self, message: Message) -> None:
        """Open the tool calls of an assistant message (already added)."""
        for call in message.tool_calls or []:
            if call.id in self.open_calls or call.id in self.answered:
                raise ValidationError(f"tool call id {call.id!r} is used twice in this turn")
            self.open_calls.append(call.id)
            self.calls[call.id] = call

    def answer(self, tool_call_id: str) -> None:
        self.open_calls.remove(tool_call_id)
        self.answered.add(tool_call_id)

    def tokens(self) -> int:
        return sum(m.token_count or 0 for m in self.pending)

    def has_reply(self) -> bool:
        """The model answered already in this turn (anything beyond user messages)."""
        return any(m.message.role != "user" for m in self.pending)

    def clear(self) -> None:
        self.pending = []
        self.apis = []

    def move_last_to(self, at: int) -> None:
        """Move the last pending message to position ``at``."""
        self.pending.insert(at, self.pending.pop())
        self.apis.insert(at, self.apis.pop())

    # -- the request ----------------------------------------------------------------
    def parts(self, view: ActiveView) -> tuple[list[dict[str, Any]], RequestChain]:
        """The next request's wire messages after the system prompt, and its ledger chain."""
        if self.view is None:
            upto = 0
            apis = view.apis.to_list()
            chain = view.chain()
        else:
            upto = self.view.upto
            apis = [*self.view.apis]
            chain = view.prefix.copy()
            for api, row in zip(self.view.apis, self.view.rows, strict=True):
                chain.extend(segment_hash(api), row.token_count or 0)
        for api, pending in zip(self.apis[upto:], self.pending[upto:], strict=True):
            apis.append(api)
            chain.extend(segment_hash(api), pending.token_count or 0)
        return apis, chain

    def messages(self, view: ActiveView) -> list[Message]:
        """The messages behind :meth:`parts`' wire dicts (built only when asked: O(n))."""
        upto = self.view.upto if self.view is not None else 0
        rows = view.rows if self.view is None else self.view.rows
        return [row.message for row in rows] + [p.message for p in self.pending[upto:]]

    def rows(self, view: ActiveView, session_id: str) -> list[StoredMessage]:
        """The history (or the compressed view) and the uncovered draft, as engine rows."""
        upto = self.view.upto if self.view is not None else 0
        now = time.time()
        rows = list(self.view.rows if self.view is not None else view.rows)
        rows.extend(self.row(pending, session_id, now) for pending in self.pending[upto:])
        return rows

    def cover(self, messages: list[NewMessage], session_id: str) -> None:
        """From now on, send ``messages`` in place of the history and the whole draft so far."""
        now = time.time()
        rows = tuple(self.row(item, session_id, now) for item in messages)
        self.view = DraftView(rows, tuple(row.to_api() for row in rows), len(self.pending))

    def row(self, item: NewMessage, session_id: str, now: float) -> StoredMessage:
        """A message of the draft or its view as the engine reads it (a negative id)."""
        self._draft_ids += 1
        return StoredMessage(
            id=-self._draft_ids,
            session_id=session_id,
            position=0,
            message=item.message,
            api_content=item.api_content,
            token_count=item.token_count,
            turn_id=item.turn_id,
            origin_id=item.origin_id,
            annotations=item.annotations,
            created_at=now,
        )
