"""An example context engine: user turns plus the last N tool rounds."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    ContextEngine,
    NewMessage,
    Settings,
    SettingsSection,
    hookimpl,
)

#: the hermes hook-contract versions this plugin is written for (checked when it loads)
hermes_contract = ">=1,<2"


class UserTurnsEngine(ContextEngine):
    """Keeps every user message and the last ``rounds`` assistant rounds with their results."""

    name = "user-turns"

    def __init__(self, rounds: int = 4) -> None:
        self.rounds = rounds

    def compress(self, request: CompressionRequest) -> CompressionResult:
        rows = request.messages
        starts = [i for i, r in enumerate(rows) if r.message.role == "assistant"]
        keep_from = starts[-self.rounds] if len(starts) >= self.rounds else 0
        kept: list[NewMessage] = []
        for index, row in enumerate(rows):
            if row.message.role == "system":
                continue
            if index >= keep_from or (row.message.role == "user" and row.message.kind == "message"):
                # carried forward unchanged: origin, annotations, api_content and turn id
                kept.append(NewMessage.carried_from(row))
        # an assistant round kept from keep_from starts after a cut: never begin with a tool result
        while kept and kept[0].message.role == "tool":
            kept.pop(0)
        if len(kept) >= len([r for r in rows if r.message.role != "system"]):
            return CompressionResult(status="aborted", engine=self.name, reason="nothing to drop")
        return CompressionResult(status="compressed", engine=self.name, messages=kept)


class ExampleEngineSettings(SettingsSection):
    """The engine's options, in ``[extensions.example_engine]``."""

    config_section: ClassVar[str] = "extensions.example_engine"

    rounds: int = Field(default=4, ge=1, description="Assistant rounds kept verbatim.")


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    register(ExampleEngineSettings)


@hookimpl
def register_context_engines(
    register: Callable[[ContextEngine], None], settings: Settings | None
) -> None:
    own = settings.section(ExampleEngineSettings) if settings is not None else None
    register(UserTurnsEngine(rounds=own.rounds if own is not None else 4))
