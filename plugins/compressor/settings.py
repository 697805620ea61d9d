"""The ``compressor`` engine's failure policy keys, in the ``[compression]`` table."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import SettingsSection


class CompressorSettings(SettingsSection):
    """The default engine's cooldown and circuit breaker."""

    config_section: ClassVar[str] = "compression"

    cooldown_seconds: float = Field(default=60.0, ge=0, description="First failure cooldown.")
    max_cooldown_seconds: float = Field(default=3_600.0, ge=0, description="Cooldown cap.")
    breaker_after: int = Field(default=3, ge=1, description="Ineffective runs before the breaker.")
    min_savings_ratio: float = Field(default=0.10, ge=0, lt=1, description="Effective savings.")
