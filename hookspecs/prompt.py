"""Prompt layers: the blocks plugins contribute to the frozen system prompt.

The system prompt is built once per session from three ordered layers,
``stable`` → ``context`` → ``volatile``, then frozen and stored by hash.
Inside a layer, blocks are ordered by ``(order, key)``: never by plugin load
order. Blocks must not carry a clock time finer than the session's start
date (``PromptContext.started_date``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

LAYER_ORDER = ("stable", "context", "volatile")


class Layer(StrEnum):
    """The three prompt layers, in render order."""

    STABLE = "stable"
    CONTEXT = "context"
    VOLATILE = "volatile"

    @property
    def rank(self) -> int:
        return LAYER_ORDER.index(self.value)


class PromptBlock(BaseModel):
    """A piece of the system prompt.

    :param key: unique within the prompt (a duplicate key is an error naming
        both plugins); also the tie-breaker for ordering.
    :param order: position within the layer, ascending (default 500).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    layer: Layer
    key: str = Field(min_length=1)
    text: str
    order: int = 500


class PromptContext(BaseModel):
    """What prompt-block hooks may look at when the prompt is (re)built."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    cwd: str = ""
    model: str = ""
    provider: str = ""
    platform: str = ""
    caller_message: str = ""
    started_date: str = ""
    title: str = ""
    goal: str = ""
    options: dict[str, Any] = Field(default_factory=dict)
