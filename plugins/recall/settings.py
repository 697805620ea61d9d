"""The recall plugin's settings (``[extensions.recall]``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hermes_hookspecs import ConfigError

SECTION = "recall"


class RecallSettings(BaseModel):
    """How much the recall tools return."""

    model_config = ConfigDict(extra="forbid")

    budget_tokens: int = Field(default=2_000, ge=200, description="Most tokens of one result.")
    default_limit: int = Field(default=5, ge=1, description="Places a search shows by default.")
    max_limit: int = Field(default=20, ge=1, description="Most places one search may ask for.")
    max_query_chars: int = Field(default=2_000, ge=16, description="Longest query accepted.")
    max_open_span: int = Field(
        default=20, ge=0, description="Most neighbours session_open shows on each side."
    )

    @classmethod
    def from_settings(cls, settings: Any) -> RecallSettings:
        options = settings.plugin_options(SECTION) if settings is not None else {}
        try:
            return cls.model_validate(options)
        except ValidationError as exc:
            problems = "; ".join(
                f"extensions.{SECTION}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors()
            )
            raise ConfigError(f"invalid recall settings: {problems}") from None
