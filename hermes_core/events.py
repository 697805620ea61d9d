"""The runtime's events: one call per event reaches the hooks and the memory manager.

Each lifecycle event the runtime emits has one method here. It calls the
matching hook on the host's plugin manager and then the memory manager's
matching method, so the runtime makes ONE call per event and both listeners
see the same events in the same order: hook implementations first, memory
providers last (their recall joins the per-turn context after the hooks',
their insights follow the hooks'). The memory manager is not registered as a
plugin because a plugin manager can be shared by several hosts, each with its
own memory manager: registered there, one host's providers would hear
another host's sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hermes_hookspecs import (
    CompressionResult,
    MemorySession,
    Message,
    PromptBlock,
    SessionRecord,
    TurnRecord,
    Usage,
)

if TYPE_CHECKING:
    from .memory import MemoryManager


class RuntimeEvents:
    """Emits the runtime's events to ``hook`` (a pluggy hook relay) and the memory manager.

    :param hook: the host's ``pm.hook``.
    :param memory: returns the host's memory manager (built on first use), or None.
    :param memory_home: returns the directory memory providers keep their files in.
    """

    def __init__(
        self,
        hook: Any,
        memory: Callable[[], MemoryManager | None],
        memory_home: Callable[[], str],
    ) -> None:
        self._hook = hook
        self._memory = memory
        self._memory_home = memory_home

    # -- session lifecycle ----------------------------------------------------
    def session_activated(self, record: SessionRecord) -> None:
        """Memory providers now serve ``record`` (before its prompt is built, or on resume)."""
        memory = self._memory()
        if memory is not None:
            memory.initialize(
                MemorySession(
                    session_id=record.id,
                    cwd=record.cwd,
                    model=record.model,
                    home=self._memory_home(),
                )
            )

    def prompt_extras(
        self, record: SessionRecord
    ) -> tuple[list[tuple[str, PromptBlock]], list[dict[str, Any]]]:
        """Memory's prompt blocks (owned by ``"memory"``) and tool schemas for ``record``.

        The ``prompt_blocks``/``tool_schemas`` hooks are called by the prompt
        builder itself; these join them. Activates memory for ``record`` first.
        """
        self.session_activated(record)
        memory = self._memory()
        if memory is None:
            return [], []
        return [("memory", block) for block in memory.prompt_blocks(record.id)], list(
            memory.tool_schemas()
        )

    def session_started(self, record: SessionRecord, *, resumed: bool) -> None:
        """``on_session_start``, then memory's ``on_session_switch`` (``new``/``resume``)."""
        self._hook.on_session_start(session=record, resumed=resumed)
        memory = self._memory()
        if memory is not None:
            if resumed:
                memory.on_session_switch(record.id, record.id, "resume")
            else:
                memory.on_session_switch("", record.id, "new")

    def session_switched(self, old_session_id: str, new_session_id: str, reason: str) -> None:
        """``on_session_switch`` on the hooks, then on the memory providers."""
        self._hook.on_session_switch(
            old_session_id=old_session_id, new_session_id=new_session_id, reason=reason
        )
        memory = self._memory()
        if memory is not None:
            memory.on_session_switch(old_session_id, new_session_id, reason)

    def session_ended(self, record: SessionRecord, reason: str) -> None:
        """``on_session_end`` on the hooks, then queued for the memory providers."""
        self._hook.on_session_end(session=record, reason=reason)
        memory = self._memory()
        if memory is not None:
            memory.on_session_end(record.id, reason)

    # -- per turn ------------------------------------------------------------------
    def turn_context(
        self, record: SessionRecord, messages: Sequence[Message], user_message: Message
    ) -> list[str]:
        """Per-turn context for ``user_message``: ``pre_llm_call`` results, then memory recall."""
        pieces = [
            str(result)
            for result in self._hook.pre_llm_call(
                session=record, messages=messages, user_message=user_message
            )
            if result
        ]
        memory = self._memory()
        if memory is not None:
            recalled = memory.prefetch(user_message.text(), record.id)
            if recalled:
                pieces.append(recalled)
        return pieces

    def response_recorded(
        self, record: SessionRecord, response: Message, usage: Usage | None
    ) -> None:
        self._hook.post_llm_call(session=record, response=response, usage=usage)

    def turn_committed(
        self, record: SessionRecord, turn_id: str, messages: list[Message], user_text: str
    ) -> None:
        """``on_turn_committed``, then the turn handed to memory (``sync_turn``, queued).

        The memory record's assistant text is the last assistant message's.
        """
        self._hook.on_turn_committed(session=record, turn_id=turn_id, messages=messages)
        memory = self._memory()
        if memory is not None:
            assistant = next((m.text() for m in reversed(messages) if m.role == "assistant"), "")
            memory.sync_turn(
                TurnRecord(
                    session_id=record.id,
                    turn_id=turn_id,
                    user_text=user_text,
                    assistant_text=assistant,
                    messages=messages,
                )
            )

    # -- compression -------------------------------------------------------------
    def pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
        """Insights the summary must keep: ``on_pre_compress`` results, then memory's."""
        out: list[str] = []
        for result in self._hook.on_pre_compress(session_id=session_id, messages=messages):
            if isinstance(result, str):
                out.append(result)
            elif result:
                out.extend(str(item) for item in result)
        memory = self._memory()
        if memory is not None:
            out.extend(memory.on_pre_compress(session_id, messages))
        return out

    def compressed(self, session_id: str, result: CompressionResult) -> None:
        self._hook.on_compressed(session_id=session_id, result=result)
