"""hermes-core default plugin: recognise text an agent harness injected.

Implements ``detect_harness`` for the wrappers Claude Code and Codex put
around (or instead of) what a person typed, so messages an integrator
records from such a harness get :attr:`~hermes_hookspecs.Message.harness`
set, and the compressor's handoff never quotes them as the user's words.
Importers mark the same constructs from the transcript's structure; this
plugin covers messages recorded live through the turn runtime, where only
the text is known (see :mod:`hermes_plugin_harness.rules`).
"""

from __future__ import annotations

from hermes_hookspecs import Message, hookimpl

from .rules import classify

__all__ = ["classify", "detect_harness"]


@hookimpl
def detect_harness(message: Message) -> str | None:
    if message.role not in ("user", "system", "tool") or message.kind != "message":
        return None
    if message.role == "tool":
        return None
    return classify(message.text())
