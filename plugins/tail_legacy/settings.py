"""The ``legacy`` tail's keys, in the ``[compression]`` table beside the core's."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import SettingsSection


class LegacyTailSettings(SettingsSection):
    """The ``legacy`` tail strategy's size."""

    config_section: ClassVar[str] = "compression"

    target_ratio: float = Field(default=0.20, gt=0, lt=1, description="Legacy tail size ratio.")
    tail_min_messages: int = Field(default=6, ge=1, description="Legacy tail minimum messages.")
