"""An asyncio face of :class:`~hermes_core.turn.Turn`: each step runs in a worker thread."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from hermes_hookspecs import Message, StoredMessage, ToolCall

from .requests import PreparedRequest
from .turn import Turn

if TYPE_CHECKING:
    from .session import Session


class AsyncTurn:
    """An asyncio face of :class:`Turn`: each step runs in a worker thread."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn

    @classmethod
    async def begin(cls, session: Session, holder: str = "hermes", **kwargs: Any) -> AsyncTurn:
        return cls(await asyncio.to_thread(session.turn, holder, **kwargs))

    async def prepare(self, user_message: Any = None) -> PreparedRequest:
        return await asyncio.to_thread(self.turn.prepare, user_message)

    async def record_response(self, message: Any, usage: Any = None) -> Message:
        return await asyncio.to_thread(self.turn.record_response, message, usage)

    async def add_tool_result(self, tool_call_id: str, content: Any) -> None:
        await asyncio.to_thread(self.turn.add_tool_result, tool_call_id, content)

    async def run_framework_tools(self) -> list[ToolCall]:
        return await asyncio.to_thread(self.turn.run_framework_tools)

    async def commit(self) -> list[StoredMessage]:
        return await asyncio.to_thread(self.turn.commit)

    async def abort(self) -> None:
        await asyncio.to_thread(self.turn.abort)

    async def __aenter__(self) -> AsyncTurn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self.turn.done:
            await self.abort()
