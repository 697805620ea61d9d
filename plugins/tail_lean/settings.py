"""The ``lean`` tail's keys, in the ``[compression]`` table beside the core's."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import SettingsSection


class LeanTailSettings(SettingsSection):
    """The ``lean`` tail strategy's band and sections."""

    config_section: ClassVar[str] = "compression"

    lean_tail_min_tokens: int = Field(default=10_000, gt=0, description="Lean tail band low.")
    lean_tail_max_tokens: int = Field(default=25_000, gt=0, description="Lean tail band high.")
    identifier_budget_tokens: int = Field(default=2_000, ge=0, description="Identifier index.")
    user_quote_budget_tokens: int = Field(
        default=0, ge=0, description="Lean-tail user quotes (0: the handoff quotes requests)."
    )
