"""Default prompt blocks: identity, tool guidance and model hints (stable), the caller's
message and the project rule file (context), and session info (volatile).

Block keys and orders (inside a layer, blocks sort by ``(order, key)``):

==========  =====================  =====
layer       key                    order
==========  =====================  =====
stable      ``identity``           100
stable      ``tool_guidance``      200
stable      ``model_hints``        300
context     ``caller_message``     100
context     ``project_rules``      200
volatile    ``session_info``       900
==========  =====================  =====
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import (
    Layer,
    PromptBlock,
    PromptContext,
    Settings,
    SettingsSection,
    hookimpl,
)

from .rules import find_rule_file, log, read_rule_file
from .settings import PromptDefaultsSettings

__all__ = [
    "PromptDefaultsSettings",
    "find_rule_file",
    "prompt_blocks",
    "read_rule_file",
    "register_settings",
]


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare the default blocks' keys of ``[prompt]``."""
    register(PromptDefaultsSettings)


@hookimpl
def prompt_blocks(context: PromptContext, settings: Settings) -> list[PromptBlock]:
    """Contribute the default blocks of all three layers."""
    p = settings.section(PromptDefaultsSettings)
    blocks = [PromptBlock(layer=Layer.STABLE, key="identity", text=p.identity, order=100)]
    if p.tool_guidance:
        blocks.append(
            PromptBlock(layer=Layer.STABLE, key="tool_guidance", text=p.tool_guidance, order=200)
        )
    hints = []
    if context.model:
        hints.append(f"Model: {context.model}.")
    if context.platform:
        hints.append(f"Platform: {context.platform}.")
    if hints:
        blocks.append(
            PromptBlock(layer=Layer.STABLE, key="model_hints", text=" ".join(hints), order=300)
        )
    if context.caller_message:
        blocks.append(
            PromptBlock(
                layer=Layer.CONTEXT, key="caller_message", text=context.caller_message, order=100
            )
        )
    if context.cwd:
        found = find_rule_file(context.cwd, p.rule_files)
        text = None
        if found is not None:
            try:
                text = read_rule_file(found, p.rule_file_max_chars)
            except OSError as exc:  # vanished or swapped since it was found
                log.warning("project rule file %s skipped: %s", found, exc)
        if found is not None and text is not None:
            blocks.append(
                PromptBlock(
                    layer=Layer.CONTEXT,
                    key="project_rules",
                    text=f"# Project rules ({found.name})\n{text}",
                    order=200,
                )
            )
    info = [f"Session: {context.session_id}"]
    if context.started_date:
        info.append(f"Started: {context.started_date}")
    if context.cwd:
        info.append(f"Working directory: {context.cwd}")
    if context.title:
        info.append(f"Title: {context.title}")
    if context.goal:
        info.append(f"Goal: {context.goal}")
    blocks.append(
        PromptBlock(layer=Layer.VOLATILE, key="session_info", text="\n".join(info), order=900)
    )
    return blocks
