"""Session recall for outside clients: scope, tools and budgets, independent of the transport.

:class:`RecallService` answers the calls the MCP server
(:mod:`hermes_core.integrations.mcp_server`) receives: ``sessions_list``, and
the registered framework tools it is told to expose (``session_search`` and
``session_open``, contributed by the ``recall`` plugin through
``register_tools``). The core imports no plugin: the tools come from the
registry, and their own ``run(arguments, ToolContext)`` does the work, with
the context's ``session_ids`` set to the configured scope.

It only reads: it takes no lease and writes no row.

Settings, in ``[extensions.mcp]`` (see :class:`~hermes_core.integrations.mcp_settings.McpSettings`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from hermes_hookspecs import AgentTool, ConfigError, NotFoundError, SessionRecord, ToolContext

from ..tools import session_lineage
from .mcp_settings import SECTION, McpSettings

if TYPE_CHECKING:
    from ..host import Hermes

LIST_NAME = "sessions_list"


class ToolSpec(BaseModel):
    """One tool as an MCP client sees it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    input_schema: dict[str, Any]


class RecallService:
    """Answers recall calls within the configured scope (see the module docstring).

    :raises ConfigError: a configured tool is not registered.
    """

    def __init__(self, hermes: Hermes, settings: McpSettings) -> None:
        self.hermes = hermes
        self.settings = settings
        registered = {n: hermes.registry.get("tools", n) for n in hermes.registry.names("tools")}
        missing = [name for name in settings.tools if name not in registered]
        if missing:
            raise ConfigError(
                f"extensions.{SECTION}.tools names {missing}, not registered tools "
                f"(registered: {sorted(registered) or 'none'}; is the recall plugin blocked?)"
            )
        if LIST_NAME in settings.tools:
            raise ConfigError(f"extensions.{SECTION}.tools: {LIST_NAME!r} is the server's own")
        self.tools: dict[str, AgentTool] = {name: registered[name] for name in settings.tools}

    # -- scope --------------------------------------------------------------------
    def _all_sessions(self) -> list[SessionRecord]:
        store = self.hermes.store()
        out: list[SessionRecord] = []
        while True:
            page = store.list_sessions(limit=500, offset=len(out))
            out.extend(page)
            if len(page) < 500:
                return out

    def scope(self) -> tuple[str, ...]:
        """The session ids clients may read now: the named ones and their rotation ancestors."""
        if self.settings.sessions == "all":
            return tuple(record.id for record in self._all_sessions())
        store = self.hermes.store()
        out: list[str] = []
        for sid in self.settings.sessions:
            try:
                store.get_session(sid)
            except NotFoundError:
                continue
            out.extend(s for s in session_lineage(store, sid) if s not in out)
        return tuple(out)

    # -- tools ----------------------------------------------------------------------
    def specs(self) -> list[ToolSpec]:
        """The tools to list: ``sessions_list``, then the exposed framework tools."""
        specs = [
            ToolSpec(
                name=LIST_NAME,
                description=(
                    "List the stored agent sessions you may search, newest first: id, title, "
                    "working directory, model, created/updated times, parent (rotation) and "
                    "end reason."
                ),
                input_schema={
                    "type": "object",
                    "properties": {
                        "limit": {"type": "integer", "minimum": 1, "description": "At most."},
                        "offset": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "Skip this many.",
                        },
                    },
                    "additionalProperties": False,
                },
            )
        ]
        for name, tool in self.tools.items():
            function = tool.schema().get("function", {})
            schema = json.loads(json.dumps(function.get("parameters") or {"type": "object"}))
            schema.setdefault("type", "object")
            schema.setdefault("properties", {})["session_id"] = {
                "type": "string",
                "description": "Only this session (and the sessions it continues); default: all "
                "sessions in scope.",
            }
            specs.append(
                ToolSpec(
                    name=name, description=str(function.get("description", "")), input_schema=schema
                )
            )
        return specs

    def call(self, name: str, arguments: dict[str, Any] | None) -> tuple[str, bool]:
        """Answer one call: ``(text, is_error)``. Never raises for a bad call."""
        arguments = dict(arguments or {})
        if name == LIST_NAME:
            return self._list(arguments)
        tool = self.tools.get(name)
        if tool is None:
            known = [LIST_NAME, *self.tools]
            return f"Error: no tool {name!r}; this server has {known}.", True
        query = arguments.get("query")
        if isinstance(query, str) and len(query) > self.settings.max_query_chars:
            return (
                f"Error: the query is {len(query):,} characters; the most this server accepts "
                f"is {self.settings.max_query_chars:,}. Search for a few distinctive words.",
                True,
            )
        scope = self.scope()
        narrowed = arguments.pop("session_id", None)
        if narrowed is not None:
            if not isinstance(narrowed, str) or narrowed not in scope:
                return (
                    f"Error: session {narrowed!r:.80} is not a session this server may read "
                    f"(call {LIST_NAME} to see them).",
                    True,
                )
            scope = session_lineage(self.hermes.store(), narrowed)
        if not scope:
            return "Error: no stored session is in this server's scope.", True
        tokens = self.hermes.tokens()
        context = ToolContext(
            session_id=scope[0],
            session_ids=scope,
            store=self.hermes.store(),
            tokens=tokens.counter,
            model=tokens.model,
            budget_tokens=self.settings.budget_tokens,
        )
        try:
            text = str(tool.run(arguments, context))
        except Exception as exc:  # a tool fault is a result, not a dead server
            return f"Error: {name} failed ({type(exc).__name__}: {exc}).", True
        return self._fit(text), text.startswith("Error:")

    def _list(self, arguments: dict[str, Any]) -> tuple[str, bool]:
        unknown = sorted(set(arguments) - {"limit", "offset"})
        if unknown:
            return f"Error: {LIST_NAME} takes only limit and offset, not {unknown}.", True
        limit = arguments.get("limit", self.settings.list_limit)
        offset = arguments.get("offset", 0)
        for key, value in (("limit", limit), ("offset", offset)):
            if isinstance(value, bool) or not isinstance(value, int) or value < (key == "limit"):
                return f"Error: {key} must be a whole number >= {int(key == 'limit')}.", True
        limit = min(limit, self.settings.list_limit)
        if self.settings.sessions == "all":
            records = self._all_sessions()
        else:
            store = self.hermes.store()
            records = [store.get_session(sid) for sid in self.scope()]
            records.sort(key=lambda r: r.updated_at, reverse=True)
        total = len(records)
        rows = [
            {
                "id": r.id,
                "title": r.title,
                "cwd": r.cwd,
                "model": r.model,
                "created_at": r.created_at,
                "updated_at": r.updated_at,
                "parent_id": r.parent_id,
                "end_reason": r.end_reason,
                "compressions": r.compression_count,
            }
            for r in records[offset : offset + limit]
        ]
        while True:
            text = json.dumps(
                {"total": total, "offset": offset, "sessions": rows}, ensure_ascii=False
            )
            if len(rows) <= 1 or self._tokens(text) <= self.settings.budget_tokens:
                return text, False
            rows = rows[: len(rows) // 2]

    # -- budget -----------------------------------------------------------------------
    def _tokens(self, text: str) -> int:
        tokens = self.hermes.tokens()
        return int(tokens.counter.count(text, tokens.model))

    def _fit(self, text: str) -> str:
        """``text`` within the budget (the tools budget themselves; this is the server's cap)."""
        budget = self.settings.budget_tokens
        if self._tokens(text) <= budget:
            return text
        limit = budget * 4
        while limit > 200 and self._tokens(text[:limit]) > budget:
            limit = limit * 3 // 4
        return text[:limit] + f"\n…[cut to the server's budget of {budget} tokens]"
