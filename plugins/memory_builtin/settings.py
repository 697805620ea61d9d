"""The builtin provider's keys, in the ``[memory]`` table beside the core's."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import SettingsSection


class BuiltinMemorySettings(SettingsSection):
    """The size caps of ``MEMORY.md`` and ``USER.md``."""

    config_section: ClassVar[str] = "memory"

    memory_char_limit: int = Field(default=8_000, gt=0, description="MEMORY.md cap, characters.")
    user_char_limit: int = Field(default=4_000, gt=0, description="USER.md cap, characters.")
