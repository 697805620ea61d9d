"""Tools the framework answers itself: the agent-tool contract.

Most tools in an agent loop belong to the integrator (run a shell command,
edit a file); the integrator's loop runs them and hands their results to
:meth:`hermes_core.runtime.Turn.add_tool_result`. Some tools belong to the
framework, because only it can answer them: searching and opening the
session's own compacted history, the memory provider's tools. Such a tool is
an :class:`AgentTool`, contributed through the ``register_tools`` hook. Its
schema is frozen with the session's prompt (canonical bytes, like every tool)
and :meth:`hermes_core.runtime.Turn.run_framework_tools` executes its calls
and records their results, returning the calls the integrator must run.

A tool never raises for a bad call: unknown arguments, a message id that does
not exist or belongs to another session, an empty query - each is answered
with a result text that says what was wrong, so the model can correct itself
and the turn goes on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from .store import SessionStore
from .tokens import TokenCounter


@dataclass(frozen=True)
class ToolContext:
    """What a framework tool may use to answer one call.

    :param session_id: the session whose turn made the call.
    :param session_ids: the sessions the tool may read: ``session_id`` first,
        then its rotation ancestors (a rotated session continues its parent's
        history). A tool must never return a row of any other session.
    :param store: the session store.
    :param tokens: the token counter for ``model``, to budget results.
    :param model: the session's model.
    :param budget_tokens: the most tokens one result should take: the host's ceiling
        (an eighth of the model's usable window, at least 1,000); a tool's own
        budget applies beneath it.
    """

    session_id: str
    session_ids: tuple[str, ...]
    store: SessionStore
    tokens: TokenCounter
    model: str | None = None
    budget_tokens: int = 2000
    #: host-specific values (empty by default)
    extra: dict[str, Any] = field(default_factory=dict)


class AgentTool(ABC):
    """A tool whose calls the framework executes (see the module docstring).

    :attr name: the function name the model calls; unique across plugins.
    """

    name: str = ""

    @abstractmethod
    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema: ``{"type": "function", "function": {...}}``.

        Must be deterministic: it is frozen with the session's prompt.
        """

    @abstractmethod
    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Answer one call and return the result text for the model.

        :param arguments: the call's decoded JSON arguments (any shape: check it).
        :return: the result, within ``context.budget_tokens``; a call that
            cannot be answered returns text saying why, never an exception.
        """
