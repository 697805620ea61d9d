"""An OpenAI Agents SDK ``Session`` on the hermes-core session store.

::

    from agents import Agent, Runner
    from hermes_core import Hermes
    from hermes_core.integrations.agents_sdk import HermesSession

    hermes = Hermes.from_config()
    session = HermesSession("support-42", hermes)
    async with session.lease():                 # the run's turn lease (see below)
        result = await Runner.run(agent, "Why does test_login fail?", session=session)

:class:`HermesSession` implements the SDK's ``Session`` protocol
(``get_items``, ``add_items``, ``pop_item``, ``clear_session``). Items are
mapped to hermes-core messages by :mod:`hermes_core.integrations.agents_items`
(lossless; one assistant row per model response, so tool pairs stay together).

What hermes-core adds to a ``Runner`` run:

- **Compaction.** After each write, when the session's active context reaches
  the compression threshold, the configured engine compacts it under the
  lease; the next ``get_items`` (the next run) sees the summary and the tail.
  Compacted rows stay searchable (:meth:`HermesSession.search`, and the
  ``session_search`` / ``session_open`` tools through the MCP server).
- **Turn leases.** Every write is fenced by the session's turn lease. Inside
  ``async with session.lease():`` one lease covers the whole run: another
  process (or task) that opens the same session waits for it (up to
  ``session.lease_wait`` seconds, then :class:`~hermes_hookspecs.LeaseBusy`),
  and if this process stalls past ``session.lease_ttl`` and the lease is
  taken over, its next write raises :class:`~hermes_hookspecs.LeaseLost`
  and stores nothing. Without ``lease()``, each write takes the lease for
  itself: writes never interleave inside one ``add_items``, but two runs
  may interleave their turns.
- **Atomic writes.** One ``add_items`` is one transaction: a malformed item,
  or a tool output answering no call, is a
  :class:`~hermes_hookspecs.ValidationError` and nothing of the batch is stored.

``pop_item`` and ``clear_session`` rewrite the active view through the store's
``archive_and_compact`` (one transaction, counted as a compaction): the
removed items leave the context the SDK sees but stay searchable.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from hermes_hookspecs import (
    AgentTool,
    CompactionEvent,
    LeaseLost,
    Message,
    NewMessage,
    NotFoundError,
    SearchHit,
    ToolCall,
    ToolFunction,
)

from ..tools import session_lineage
from .agents_items import rows_to_items, to_messages

try:
    from agents import FunctionTool
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "hermes_core.integrations.agents_sdk needs the OpenAI Agents SDK: "
        "pip install 'hermes-session-core[agents]'"
    ) from exc

if TYPE_CHECKING:
    from ..host import Hermes
    from ..runtime import Session, Turn

__all__ = ["HermesSession"]


class HermesSession:
    """The Agents SDK ``Session`` protocol on a hermes-core session.

    :param session_id: the hermes-core session id (created when missing; a
        session that was rotated by compaction is followed to its newest child).
    :param hermes: the host (its store, compression settings, plugins).
    :param holder: the lease holder name written with each lease.
    :param session_settings: the SDK's session settings (``limit``).
    :param new_session: keyword arguments for
        :meth:`hermes_core.host.Hermes.new_session` when the session is created.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        hermes: Hermes,
        *,
        holder: str = "agents-sdk",
        session_settings: SessionSettings | None = None,
        new_session: dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.hermes = hermes
        self.holder = holder
        self.session_settings = session_settings or SessionSettings()
        # one lock for every step; steps run in worker threads, and a thread lock (unlike an
        # asyncio one) does not bind the session to the event loop that first waited on it
        self._sync = threading.RLock()
        self._turn: Turn | None = None
        self._session = self._open(session_id, new_session or {})

    # -- opening --------------------------------------------------------------
    def _open(self, session_id: str, new_session: dict[str, Any]) -> Session:
        store = self.hermes.store()
        try:
            store.get_session(session_id)
        except NotFoundError:
            return self.hermes.new_session(session_id=session_id, **new_session)
        return self.hermes.open_session(self._newest(session_id))

    def _newest(self, session_id: str) -> str:
        """Follow rotations (compression into a child session) to the session that continues."""
        store = self.hermes.store()
        current = session_id
        for _ in range(64):
            record = store.get_session(current)
            if record.end_reason != "compression":
                return current
            child = self._child_of(current)
            if child is None:
                return current
            current = child
        return current

    def _child_of(self, parent: str) -> str | None:
        store = self.hermes.store()
        offset = 0
        while True:
            page = store.list_sessions(limit=200, offset=offset)
            for record in page:
                if record.parent_id == parent:
                    return str(record.id)
            if len(page) < 200:
                return None
            offset += 200

    @property
    def hermes_session_id(self) -> str:
        """The hermes-core session written now (differs after a rotation)."""
        return self._session.id

    # -- the lease ----------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def lease(
        self, *, wait: float | None = None, ttl: float | None = None
    ) -> AsyncIterator[HermesSession]:
        """Hold the session's turn lease for a whole ``Runner`` run (see the module docstring).

        :raises LeaseBusy: another holder kept it for longer than ``wait``
            (default ``session.lease_wait``).
        """
        turn = await asyncio.to_thread(self._take_lease, wait, ttl)
        try:
            yield self
        finally:
            await asyncio.to_thread(self._give_back, turn)

    def _take_lease(self, wait: float | None, ttl: float | None) -> Turn:
        with self._sync:
            if self._turn is not None:
                raise RuntimeError("this HermesSession already holds its lease")
            self._turn = self._session.turn(self.holder, wait=wait, ttl=ttl)
            return self._turn

    def _give_back(self, turn: Turn) -> None:
        with self._sync:
            self._turn = None
            turn.abort()  # every write is already stored: this only gives the lease back

    # -- the Session protocol ----------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The active context as SDK items (after a compaction: the summary, then the tail)."""
        wanted = resolve_session_limit(limit, self.session_settings)
        items = await asyncio.to_thread(self._items)
        if wanted is None:
            return items
        return items[-wanted:] if wanted > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        """Append items in one fenced transaction (all or nothing), then compact when due."""
        if not items:
            return
        messages = to_messages(items)  # malformed input fails here, before any write
        await asyncio.to_thread(self._under_lease, self._append, messages)

    async def pop_item(self) -> Any | None:
        """Remove and return the newest item (it stays searchable as compacted history)."""
        return await asyncio.to_thread(self._under_lease, self._pop)

    async def clear_session(self) -> None:
        """Empty the active context (the history stays searchable as compacted rows)."""
        await asyncio.to_thread(self._under_lease, self._clear)

    # -- beyond the protocol -------------------------------------------------------
    async def search(self, query: str, *, limit: int = 10) -> list[SearchHit]:
        """Full-text search over this session and its rotation ancestors, compacted rows too."""
        return await asyncio.to_thread(self._search, query, limit)

    def _search(self, query: str, limit: int) -> list[SearchHit]:
        store = self.hermes.store()
        hits: list[SearchHit] = []
        for sid in session_lineage(store, self._session.id):
            hits.extend(store.search(query, session_id=sid, limit=limit))
        hits.sort(key=lambda hit: hit.score, reverse=True)
        return hits[:limit]

    def recall_tools(self) -> list[FunctionTool]:
        """The registered framework tools (``session_search``, ``session_open``) as SDK tools.

        Give them to the ``Agent`` so the model can follow the recovery
        pointers a compaction leaves (message ids to open with ``session_open``)::

            agent = Agent(name="helper", tools=[*my_tools, *session.recall_tools()])

        Each call is answered by the tool's own ``run`` over this session and
        the sessions it continues, within the toolbox's budget; a bad call is
        answered with text saying what was wrong.
        """
        toolbox = self.hermes.toolbox()
        return [self._function_tool(tool) for _, tool in sorted(toolbox.tools.items())]

    def _function_tool(self, tool: AgentTool) -> FunctionTool:
        function = tool.schema().get("function", {})

        async def invoke(ctx: Any, arguments: str) -> str:
            return await asyncio.to_thread(self._run_tool, tool.name, arguments or "{}")

        return FunctionTool(
            name=tool.name,
            description=str(function.get("description", "")),
            params_json_schema=dict(function.get("parameters") or {"type": "object"}),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    def _run_tool(self, name: str, arguments: str) -> str:
        try:
            call = ToolCall(id="agents-sdk", function=ToolFunction(name=name, arguments=arguments))
        except Exception as exc:  # the model's arguments are not JSON: tell it
            return f"Error: the arguments of {name} are not valid JSON ({exc})."
        return self.hermes.toolbox().run(
            call,
            session_id=self._session.id,
            store=self.hermes.store(),
            tokens=self.hermes.tokens(self._session.model),
        )

    # -- work, in a worker thread ---------------------------------------------------
    def _items(self) -> list[Any]:
        with self._sync:
            rows = self.hermes.store().active_messages(self._session.id)
        return rows_to_items([row.message for row in rows])

    def _under_lease(self, work: Any, *args: Any) -> Any:
        with self._sync:
            if self._turn is not None:
                return work(self._turn, *args)
            with self._session.turn(self.holder) as turn:
                result = work(turn, *args)
                turn.commit()
                return result

    def _rows(self, turn: Turn, messages: list[Message]) -> list[NewMessage]:
        tokens = self.hermes.tokens(self._session.model)
        rows = []
        for message in messages:
            message = self.hermes.harness(message)
            rows.append(
                NewMessage(
                    message=message,
                    token_count=tokens.count_message(message),
                    turn_id=turn.id,
                    annotations=self.hermes.annotate(message),
                )
            )
        return rows

    def _check(self, turn: Turn) -> None:
        if turn.lost is not None:
            raise LeaseLost(f"the run's lease was lost: {turn.lost}")

    def _append(self, turn: Turn, messages: list[Message]) -> None:
        self._check(turn)
        rows = self._rows(turn, messages)
        self.hermes.store().append_messages(self._session.id, rows, lease=turn.lease)
        self._session.reload(force=True)
        self._committed(turn, messages)
        threshold = self.hermes.threshold(self._session.model).threshold_tokens
        if self._session.active_tokens >= threshold:
            turn.compress(reason="post-response")

    def _committed(self, turn: Turn, messages: list[Message]) -> None:
        """The runtime's after-commit event: ``on_turn_committed`` and the memory sync."""
        user = next((m.text() for m in messages if m.role == "user"), "")
        self.hermes.events.turn_committed(self._session.record, turn.id, messages, user)

    def _rewrite(self, turn: Turn, keep: list[NewMessage], what: str, before: int) -> None:
        """Replace the active view with ``keep`` (one transaction, fenced by the lease)."""
        store = self.hermes.store()
        rows = store.active_messages(self._session.id)
        if not rows:
            return
        after = sum(row.token_count or 0 for row in keep)
        store.archive_and_compact(
            self._session.id,
            keep,
            watermark=max(row.id for row in rows),
            lease=turn.lease,
            event=CompactionEvent(
                session_id=self._session.id,
                engine=f"agents_sdk.{what}",
                tokens_before=before,
                tokens_after=after,
                detail={"reason": what},
            ),
        )
        self._session.reload(force=True)

    def _pop(self, turn: Turn) -> Any | None:
        self._check(turn)
        rows = self.hermes.store().active_messages(self._session.id)
        if not rows:
            return None
        items = rows_to_items([row.message for row in rows])
        popped = items[-1]
        own = rows_to_items([row.message for row in rows[:-1]])
        remainder = items[len(own) : -1]
        keep = [NewMessage.carried_from(row) for row in rows[:-1]]
        keep += self._rows(turn, to_messages(remainder)) if remainder else []
        before = sum(row.token_count or 0 for row in rows)
        self._rewrite(turn, keep, "pop_item", before)
        return popped

    def _clear(self, turn: Turn) -> None:
        self._check(turn)
        rows = self.hermes.store().active_messages(self._session.id)
        self._rewrite(turn, [], "clear_session", sum(row.token_count or 0 for row in rows))
