"""The recall MCP server's settings, ``[extensions.mcp]``: a section the core declares.

The core's :class:`~hermes_core.host.CorePlugin` registers :class:`McpSettings`
through ``register_settings``, so the host checks the table when it loads, like
every plugin's: a mistyped key or a wrong value in ``[extensions.mcp]`` is a
:class:`~hermes_hookspecs.ConfigError` at start-up, not when ``hermes-core mcp``
runs.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError

from hermes_hookspecs import ConfigError, Settings, SettingsSection

from ..config import describe_validation_error

SECTION = "mcp"


class McpSettings(SettingsSection):
    """What the recall MCP server exposes."""

    config_section: ClassVar[str] = f"extensions.{SECTION}"

    sessions: Literal["all"] | list[str] = Field(
        default="all",
        description='Session ids clients may read (with their rotation ancestors), or "all".',
    )
    tools: list[str] = Field(
        default_factory=lambda: ["session_search", "session_open"],
        description="Registered framework tools to expose (read-only ones only).",
    )
    budget_tokens: int = Field(default=2_000, ge=100, description="Most tokens of one result.")
    max_query_chars: int = Field(default=2_000, ge=1, description="Longest search query accepted.")
    list_limit: int = Field(default=50, ge=1, description="Most sessions one list call returns.")

    @classmethod
    def from_settings(cls, settings: Settings | None, **overrides: Any) -> McpSettings:
        """The section of ``settings`` (defaults without), with the ``overrides`` that are
        not None (the command line's options) applied and validated.

        :raises ConfigError: a value is wrong; the message names the key.
        """
        base = settings.section(cls) if settings is not None else cls()
        given = {key: value for key, value in overrides.items() if value is not None}
        if not given:
            return base
        try:
            return cls.model_validate({**base.model_dump(), **given})
        except ValidationError as exc:
            problems = "; ".join(describe_validation_error(exc, prefix=f"{cls.config_section}."))
            raise ConfigError(f"invalid MCP server settings: {problems}") from None
