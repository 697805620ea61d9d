"""``hermes-core mcp``: session recall over the Model Context Protocol (stdio).

Any MCP client (Claude Code, Codex, an IDE, the ``mcp`` package's own
``Client``) can list the stored sessions, search them and open a message with
its neighbours: ``sessions_list``, ``session_search`` and ``session_open``.
The answers come from :class:`~hermes_core.integrations.recall_service.RecallService`;
this module only speaks the protocol. Every tool is marked read-only, and the
server takes no lease and writes nothing.

Needs the ``mcp`` extra: ``pip install 'hermes-core[mcp]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the hermes-core MCP server needs the Model Context Protocol SDK: "
        "pip install 'hermes-core[mcp]'"
    ) from exc

from .recall_service import RecallService

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

__all__ = ["build_server", "serve_stdio"]

SERVER_NAME = "hermes-core-recall"


def build_server(service: RecallService, version: str = "") -> Server[Any]:
    """An MCP server whose tools are the service's (list, search, open)."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        specs = await anyio.to_thread.run_sync(service.specs)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name,
                    description=spec.description,
                    input_schema=spec.input_schema,
                    annotations=types.ToolAnnotations(
                        read_only_hint=True, destructive_hint=False, idempotent_hint=True
                    ),
                )
                for spec in specs
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        text, is_error = await anyio.to_thread.run_sync(service.call, params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)

    return Server(
        SERVER_NAME,
        version=version,
        instructions=(
            "Read-only recall over stored agent sessions: sessions_list, then session_search "
            "for words you remember, then session_open on a message id a result names."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(service: RecallService, version: str = "") -> None:
    """Serve ``service`` over this process's stdin/stdout until the client hangs up."""
    server = build_server(service, version)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
