"""The recall plugin's settings (``[extensions.recall]``, where they have always been)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import Settings, SettingsSection

SECTION = "recall"


class RecallSettings(SettingsSection):
    """How much the recall tools return."""

    config_section: ClassVar[str] = f"extensions.{SECTION}"

    budget_tokens: int = Field(default=3_000, ge=200, description="Most tokens of one result.")
    default_limit: int = Field(default=5, ge=1, description="Places a search shows by default.")
    max_limit: int = Field(default=20, ge=1, description="Most places one search may ask for.")
    max_query_chars: int = Field(default=2_000, ge=16, description="Longest query accepted.")
    max_open_span: int = Field(
        default=20, ge=0, description="Most neighbours session_open shows on each side."
    )

    @classmethod
    def from_settings(cls, settings: Settings | None) -> RecallSettings:
        """The validated section of ``settings`` (defaults without settings)."""
        return settings.section(cls) if settings is not None else cls()
