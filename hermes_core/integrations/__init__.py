"""Doors in for stacks built on other libraries; each module needs its optional extra.

- :mod:`.agents_sdk` (extra ``agents``): an OpenAI Agents SDK ``Session`` on the store;
  :mod:`.agents_items` maps the SDK's items to messages and back (no SDK import).
- :mod:`.mcp_server` (extra ``mcp``): ``hermes-core mcp``, session recall over MCP;
  :mod:`.recall_service` holds its scope, budgets and calls (no MCP import), and
  :mod:`.mcp_settings` its ``[extensions.mcp]`` section.

The rest of the core imports nothing from here but :mod:`.mcp_settings` (the
host declares that section, so it is checked at load); the ``mcp`` command
imports :mod:`.mcp_server` only when it runs.
"""
