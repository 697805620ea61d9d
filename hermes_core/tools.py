"""The framework's own tools: the registered agent tools and the memory provider's.

The turn runtime asks a :class:`Toolbox` which tool calls it answers and runs
them; everything else is the integrator's. A call is answered with text
whatever goes wrong (bad JSON, unknown arguments, a tool that raises), so a
framework tool never ends a turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from hermes_hookspecs import AgentTool, NotFoundError, SessionStore, ToolCall, ToolContext

from .tokens import Tokens

log = logging.getLogger("hermes_core.tools")

#: the most rotation ancestors a tool looks back through
MAX_ANCESTORS = 64


def session_lineage(store: SessionStore, session_id: str) -> tuple[str, ...]:
    """``session_id`` and its rotation ancestors, newest first (a cycle is cut)."""
    out = [session_id]
    current = session_id
    for _ in range(MAX_ANCESTORS):
        try:
            parent = store.get_session(current).parent_id
        except NotFoundError:
            break
        if not parent or parent in out:
            break
        out.append(parent)
        current = parent
    return tuple(out)


#: one framework tool result takes at most this share of the model's usable window ...
RESULT_SHARE = 1 / 8
#: ... and never less than this many tokens, however small the window
RESULT_FLOOR = 1_000


def result_ceiling(usable_window: int) -> int:
    """The most tokens the host lets one tool result take (:attr:`ToolContext.budget_tokens`).

    A tool's own budget (``[extensions.recall] budget_tokens``) applies beneath
    it: the ceiling only stops a setting from letting one result crowd a small
    window.
    """
    return max(RESULT_FLOOR, int(usable_window * RESULT_SHARE))


class Toolbox:
    """Which tool calls the framework answers, and answering them.

    :param tools: the registered :class:`AgentTool` objects.
    :param memory_call: ``(name, arguments, session_id) -> text or None`` of
        the memory manager (None when no provider declared the name).
    :param memory_names: the function names the memory providers declared.
    """

    def __init__(
        self,
        tools: list[AgentTool],
        memory_call: Callable[[str, dict[str, Any], str], str | None] | None = None,
        memory_names: set[str] | None = None,
        budget_tokens: int = 2000,
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.memory_call = memory_call
        self.memory_names = set(memory_names or ())
        self.budget_tokens = budget_tokens

    def schemas(self) -> list[dict[str, Any]]:
        """The registered tools' schemas (memory tools come with the memory manager)."""
        return [self.tools[name].schema() for name in sorted(self.tools)]

    def owns(self, name: str) -> bool:
        return name in self.tools or name in self.memory_names

    def run(self, call: ToolCall, *, session_id: str, store: SessionStore, tokens: Tokens) -> str:
        """Answer one call with result text (never raises for a bad call)."""
        name = call.function.name
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except ValueError as exc:
            return f"Error: the arguments of {name} are not valid JSON ({exc})."
        if not isinstance(arguments, dict):
            return f"Error: the arguments of {name} must be a JSON object, got {arguments!r:.80}."
        tool = self.tools.get(name)
        if tool is not None:
            context = ToolContext(
                session_id=session_id,
                session_ids=session_lineage(store, session_id),
                store=store,
                tokens=tokens.counter,
                model=tokens.model,
                budget_tokens=self.budget_tokens,
            )
            try:
                return str(tool.run(arguments, context))
            except Exception as exc:  # a tool fault must not end the turn
                log.warning("framework tool %s failed: %s: %s", name, type(exc).__name__, exc)
                return f"Error: {name} failed ({type(exc).__name__}: {exc})."
        if name in self.memory_names and self.memory_call is not None:
            result = self.memory_call(name, arguments, session_id)
            if result is not None:
                return result
        return f"Error: {name} is not a tool the framework answers."
