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
        """The layer's place in render order: 0 for ``stable``, 1, then 2 for ``volatile``."""
        return LAYER_ORDER.index(self.value)


class PromptBlock(BaseModel):
    """A piece of the system prompt.

    :param key: unique within the prompt (a duplicate key is an error naming
        both plugins); also the tie-breaker for ordering.
    :param order: position within the layer, ascending (default 500).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the layer it renders in
    layer: Layer
    key: str = Field(min_length=1)
    #: the block's text, rendered as is
    text: str
    order: int = 500


class PromptContext(BaseModel):
    """What prompt-block hooks may look at when the prompt is (re)built."""

    model_config = ConfigDict(extra="forbid")

    #: the session
    session_id: str
    #: its working directory (rule files are found from here upwards)
    cwd: str = ""
    #: its model
    model: str = ""
    #: its provider name, if given
    provider: str = ""
    #: where the agent runs (``cli``, ``chat``...), from ``prompt.platform`` or the caller
    platform: str = ""
    #: the integrator's message for the context layer
    caller_message: str = ""
    #: the session's start date, ``YYYY-MM-DD``: the finest clock a block may show
    started_date: str = ""
    #: the session's title
    title: str = ""
    #: the session's goal
    goal: str = ""
    #: host-specific values (empty by default)
    options: dict[str, Any] = Field(default_factory=dict)
