"""hermes-core default plugins: transcript importers, one plugin module per format.

Each module registers one :class:`~hermes_hookspecs.Importer` through its own
``register_importers`` hookimpl (entry points ``importer_*`` in
``pyproject.toml``):

========================  ======================================================
``openai-chat``           :mod:`.openai_chat` (JSON list or ``{"messages": ...}``)
``claude-code``           :mod:`.claude_code` (Claude Code session JSONL)
``codex-rollout``         :mod:`.codex_rollout` (Codex CLI rollout JSONL)
``openhands-events``      :mod:`.openhands_events` (OpenHands ``output.jsonl``)
``swe-agent``             :mod:`.swe_agent` (SWE-agent ``.traj``)
``aider-chat``            :mod:`.aider_chat` (aider ``.aider.chat.history.md``)
``adp``                   :mod:`.adp` (Agent Data Protocol trajectories)
``gemini-cli``            :mod:`.gemini_cli` (Gemini CLI session JSON)
========================  ======================================================

This package module holds only pure helpers: :func:`detect_importer` picks
the importer whose ``sniff`` accepts a file, :func:`load_transcript` loads
a file with a named or detected importer, :func:`builtin_importers` makes
fresh instances of the eight importers (for tests and tools that do not run
the plugin manager).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from hermes_core.detection import detect_importer as _detect
from hermes_core.detection import read_sample
from hermes_hookspecs import ImportedConversation, Importer, ImportFormatError

from .sequence import check_sequence

__all__ = [
    "builtin_importers",
    "check_sequence",
    "detect_importer",
    "load_transcript",
    "matching_importers",
]


def builtin_importers() -> list[Importer]:
    """New instances of the eight bundled importers, in a fixed order."""
    from .adp import AdpImporter
    from .aider_chat import AiderChatImporter
    from .claude_code import ClaudeCodeImporter
    from .codex_rollout import CodexRolloutImporter
    from .gemini_cli import GeminiCliImporter
    from .openai_chat import OpenAIChatImporter
    from .openhands_events import OpenHandsEventsImporter
    from .swe_agent import SweAgentImporter

    return [
        OpenAIChatImporter(),
        ClaudeCodeImporter(),
        CodexRolloutImporter(),
        OpenHandsEventsImporter(),
        SweAgentImporter(),
        AiderChatImporter(),
        AdpImporter(),
        GeminiCliImporter(),
    ]


def matching_importers(
    path: Path, importers: Iterable[Importer], head: bytes | None = None
) -> list[Importer]:
    """Every importer whose ``sniff`` accepts ``path``.

    :param head: the file's first bytes; a sample of several records is read
        (and un-gzipped) from ``path`` when omitted.
    """
    if head is None:
        try:
            head = read_sample(path)
        except OSError as exc:
            raise ImportFormatError(f"{path}: cannot read transcript: {exc}") from None
    return [importer for importer in importers if importer.sniff(path, head)]


def detect_importer(path: Path, importers: Sequence[Importer]) -> Importer:
    """The one importer that recognises ``path`` (:func:`hermes_core.detection.detect_importer`).

    :raises ImportFormatError: when no importer accepts it (naming the
        closest format and why it did not match), or several do equally.
    """
    return _detect(Path(path), importers)


def load_transcript(
    path: Path, importers: Sequence[Importer], format_name: str | None = None
) -> list[ImportedConversation]:
    """Load ``path`` with the importer named ``format_name`` or the detected one."""
    path = Path(path)
    if format_name:
        chosen = next((i for i in importers if i.name == format_name), None)
        if chosen is None:
            known = ", ".join(sorted(importer.name for importer in importers))
            raise ImportFormatError(f"unknown transcript format {format_name!r}; known: {known}")
    else:
        chosen = _detect(path, importers)
    return chosen.load(path)
