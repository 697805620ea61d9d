"""hermes-core default plugin: recall tools, so the agent can find what compaction dropped.

Registers two framework tools through ``register_tools`` (their schemas are
frozen with every new session's prompt, and the turn runtime answers their
calls in :meth:`hermes_core.runtime.Turn.run_framework_tools`):

* ``session_search(query, limit)`` - search this session's whole history
  (active and compacted rows, and the sessions it continues after a
  rotation) and show each place found with its neighbouring messages;
* ``session_open(message_id, before, after, offset)`` - open one stored
  message, and the messages around it, by the id that placeholders, repair
  stubs and the handoff's recovery pointers name.

Settings, in ``[extensions.recall]``: ``budget_tokens`` (the most one result
takes, default 3,000; never more than the host allows one tool result, an
eighth of the model's usable window), ``default_limit`` (5), ``max_limit`` (20),
``max_query_chars`` (2,000). Block the plugin (``recall``) to withdraw the tools.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import AgentTool, Settings, SettingsSection, hookimpl

from .settings import RecallSettings
from .tools import SessionOpenTool, SessionSearchTool

__all__ = [
    "RecallSettings",
    "SessionOpenTool",
    "SessionSearchTool",
    "register_settings",
    "register_tools",
]


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare ``[extensions.recall]``."""
    register(RecallSettings)


@hookimpl
def register_tools(register: Callable[[AgentTool], None], settings: Settings | None) -> None:
    options = RecallSettings.from_settings(settings)
    register(SessionSearchTool(options))
    register(SessionOpenTool(options))
