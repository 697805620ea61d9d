"""The frozen layered system prompt and the frozen tool schemas.

Built once per session from the ``prompt_blocks`` hook (plus the memory
manager's volatile blocks), rendered layer by layer (stable → context →
volatile; inside a layer by ``(order, key)``), then stored by SHA-256 in the
session store. Tool schemas from the ``tool_schemas`` hook and the integrator
are sorted by function name and serialised canonically, frozen with it.
A rebuild happens only at a new session or a compaction boundary; when the
rebuilt bytes equal the old ones the old hash is kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pluggy
from pydantic import BaseModel, ConfigDict, ValidationError

from hermes_hookspecs import Layer, PluginError, PromptBlock, PromptContext

from .config import Settings
from .plugins import call_each


class FrozenPrompt(BaseModel):
    """A session's frozen system prompt and tool schemas."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    prompt_hash: str
    tools: list[dict[str, Any]]
    tools_json: str
    tools_hash: str


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_tools(tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """Tools sorted by function name, and their canonical JSON bytes."""

    def key(tool: dict[str, Any]) -> str:
        function = tool.get("function") or {}
        return str(function.get("name") or tool.get("name") or "")

    names: dict[str, int] = {}
    for tool in tools:
        if not key(tool):
            raise PluginError(f"tool schema without a function name: {tool!r:.120}")
        names[key(tool)] = names.get(key(tool), 0) + 1
    duplicates = sorted(n for n, c in names.items() if c > 1)
    if duplicates:
        raise PluginError(f"tool names contributed more than once: {', '.join(duplicates)}")
    ordered = sorted(tools, key=key)
    text = json.dumps(ordered, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # the schemas sent are the canonical bytes parsed back (keys sorted), so the process that
    # froze the prompt sends exactly what a resumed process reads from the blob
    return json.loads(text), text


def collect_blocks(
    pm: pluggy.PluginManager,
    context: PromptContext,
    settings: Settings,
    extra: Sequence[tuple[str, PromptBlock]] = (),
) -> list[tuple[str, PromptBlock]]:
    """Every block with the plugin that contributed it; duplicate keys are errors."""
    found: list[tuple[str, PromptBlock]] = []
    for owner, result in call_each(pm, "prompt_blocks", context=context, settings=settings):
        if not isinstance(result, list):
            raise PluginError(f"plugin {owner!r}: prompt_blocks must return a list of PromptBlock")
        for item in result:
            try:
                block = item if isinstance(item, PromptBlock) else PromptBlock.model_validate(item)
            except ValidationError as exc:
                raise PluginError(
                    f"plugin {owner!r} returned an invalid prompt block: {exc}"
                ) from None
            found.append((owner, block))
    found.extend(extra)
    owners: dict[str, str] = {}
    for owner, block in found:
        if block.key in owners:
            raise PluginError(
                f"prompt block key {block.key!r} contributed by both plugin "
                f"{owners[block.key]!r} and plugin {owner!r}"
            )
        owners[block.key] = owner
    return found


def render_blocks(blocks: list[PromptBlock]) -> str:
    """Render blocks in layer order, then ``(order, key)``; empty blocks are skipped."""
    ordered = sorted(blocks, key=lambda b: (Layer(b.layer).rank, b.order, b.key))
    return "\n\n".join(b.text.strip() for b in ordered if b.text.strip())


def collect_tools(
    pm: pluggy.PluginManager, context: PromptContext, settings: Settings
) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for owner, result in call_each(pm, "tool_schemas", context=context, settings=settings):
        if not isinstance(result, list):
            raise PluginError(f"plugin {owner!r}: tool_schemas must return a list of dicts")
        tools.extend(result)
    return tools


def build_prompt(
    pm: pluggy.PluginManager,
    context: PromptContext,
    settings: Settings,
    *,
    extra_blocks: Sequence[tuple[str, PromptBlock]] = (),
    extra_tools: Sequence[dict[str, Any]] = (),
) -> FrozenPrompt:
    """Build (not store) the prompt and tools for ``context``."""
    blocks = collect_blocks(pm, context, settings, extra_blocks)
    text = render_blocks([block for _, block in blocks])
    tools, tools_json = canonical_tools(collect_tools(pm, context, settings) + list(extra_tools))
    return FrozenPrompt(
        text=text,
        prompt_hash=sha256(text),
        tools=tools,
        tools_json=tools_json,
        tools_hash=sha256(tools_json),
    )
