"""When compression fires: the effective trigger for a model and window.

The rule, step by step (each step is reported so ``hermes-core config show
--model NAME --context-length N`` can explain the number):

1. ``usable = context_length - model.max_output_tokens`` (the response's
   reserved tokens come off the window); ``max_output_tokens >= context_length``
   is a :class:`ConfigError` (it would make a 1-token trigger).
2. ``ratio = compression.threshold`` (default 0.50), replaced by the value of
   the longest ``compression.model_thresholds`` key found in the model name.
3. For windows under 512K tokens the ratio is raised (never lowered) to
   ``compression.small_window_floor`` (default 0.75).
4. ``tokens = floor(usable * ratio)``, capped by ``compression.threshold_tokens``.
5. Clamped to what the summarizer can read: its window minus its output and a
   fixed prompt overhead. A summarizer window too small to summarise anything
   (under :data:`MIN_SUMMARIZER_INPUT` tokens of input) is a configuration error.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from hermes_hookspecs import ConfigError

from .config import Settings

SMALL_WINDOW_LIMIT = 512_000
SUMMARY_PROMPT_OVERHEAD = 2_000
MIN_SUMMARIZER_INPUT = 4_000
HYGIENE_RATIO = 0.85


class ThresholdReport(BaseModel):
    """The effective trigger and how it was reached."""

    model_config = ConfigDict(extra="forbid")

    model: str
    context_length: int
    usable_window: int
    base_ratio: float
    matched_model_key: str | None
    floor_applied: bool
    ratio: float
    tokens_from_ratio: int
    capped_by_threshold_tokens: bool
    summarizer_window: int | None
    clamped_by_summarizer: bool
    threshold_tokens: int
    hygiene_tokens: int


def effective_threshold(
    settings: Settings,
    *,
    model: str | None = None,
    context_length: int | None = None,
    summarizer_window: int | None = None,
    summarizer_output: int = 4_000,
) -> ThresholdReport:
    """Compute the compression trigger in tokens (see the module docstring)."""
    c = settings.compression
    name = model if model is not None else settings.model.name
    window = context_length if context_length is not None else settings.model.context_length
    if window <= 0:
        raise ConfigError(f"context length {window!r} must be positive")
    reserved = settings.model.max_output_tokens
    if reserved >= window:
        raise ConfigError(
            f"model.max_output_tokens ({reserved}) must be smaller than the context length "
            f"({window}) of {name!r}: it leaves no room for the prompt, so every request "
            "would compress"
        )
    usable = window - reserved

    ratio = c.threshold
    matched: str | None = None
    lowered = name.lower()
    for key in sorted(c.model_thresholds, key=len, reverse=True):
        if key.lower() in lowered:
            matched = key
            ratio = c.model_thresholds[key]
            break
    base_ratio = ratio
    floor_applied = False
    if window < SMALL_WINDOW_LIMIT and ratio < c.small_window_floor:
        ratio = c.small_window_floor
        floor_applied = True

    tokens = int(usable * ratio)
    from_ratio = tokens
    capped = False
    if c.threshold_tokens is not None and c.threshold_tokens < tokens:
        tokens = c.threshold_tokens
        capped = True

    clamped = False
    if summarizer_window is not None:
        readable = summarizer_window - summarizer_output - SUMMARY_PROMPT_OVERHEAD
        if readable < MIN_SUMMARIZER_INPUT:
            raise ConfigError(
                f"summarizer window {summarizer_window} is too small: it leaves {readable} "
                f"tokens of input after {summarizer_output} output and "
                f"{SUMMARY_PROMPT_OVERHEAD} prompt tokens; expected at least {MIN_SUMMARIZER_INPUT}"
            )
        if readable < tokens:
            tokens = readable
            clamped = True

    return ThresholdReport(
        model=name,
        context_length=window,
        usable_window=usable,
        base_ratio=base_ratio,
        matched_model_key=matched,
        floor_applied=floor_applied,
        ratio=ratio,
        tokens_from_ratio=from_ratio,
        capped_by_threshold_tokens=capped,
        summarizer_window=summarizer_window,
        clamped_by_summarizer=clamped,
        threshold_tokens=max(1, tokens),
        hygiene_tokens=int(window * c.hygiene_ratio),
    )
