"""The default prompt blocks' keys, in the ``[prompt]`` table beside the core's."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import SettingsSection


class PromptDefaultsSettings(SettingsSection):
    """What the default stable and context blocks say."""

    config_section: ClassVar[str] = "prompt"

    identity: str = Field(
        default="You are a capable software agent working for the user.",
        description="Stable layer: who the agent is.",
    )
    tool_guidance: str = Field(default="", description="Stable layer: how to use the tools.")
    rule_files: list[str] = Field(
        default_factory=lambda: [".hermes.md", "AGENTS.md", "CLAUDE.md", ".cursorrules"],
        description=(
            "Project rule files; the nearest found from cwd upwards is used, searching no "
            "higher than the repository root (a folder with .git) or the home folder, and "
            "skipping files of other users and files in world-writable folders."
        ),
    )
    rule_file_max_chars: int = Field(
        default=20_000,
        gt=0,
        description="Rule file size cap (characters; at most 4 bytes each are read).",
    )
