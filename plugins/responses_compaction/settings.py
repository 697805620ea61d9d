"""``[compaction.responses]``: the settings of the OpenAI Responses compaction backend.

Every key is optional; an unknown key or a bad value is a
:class:`~hermes_hookspecs.ConfigError` naming it. A session is eligible only
when ``base_url`` is set, the session's model matches ``models`` and the
session's provider equals ``provider`` (nothing is guessed)::

    [compaction]
    backend = "responses"

    [compaction.responses]
    base_url = "https://api.openai.com/v1"   # the /v1 root, as the openai client takes it
    api_key_env = "OPENAI_API_KEY"
    provider = "openai"                      # sessions created with provider="openai"
    models = ["gpt-5.5", "gpt-5.4*"]         # exact names or fnmatch patterns
    route = "standalone"                     # or "inline"
    timeout = 120.0

Routes:

``standalone``
    When the core's local trigger fires, ``POST {base_url}/responses/compact``
    with the active view as input items (or ``previous_response_id``, see
    ``source``); the returned window (kept items plus one opaque ``compaction``
    item) becomes the new active view.
``inline``
    Normal requests carry ``context_management=[{"type": "compaction",
    "compact_threshold": N}]`` so the provider compacts inside a response and
    returns a ``compaction`` output item, which the integrator records (see
    :func:`~hermes_plugin_responses_compaction.items.compaction_message`).
    When the core's local trigger fires, everything before the newest recorded
    compaction item is archived without a network call; with no such item,
    the standalone call runs as a backstop (``inline_backstop``).

Default threshold: ``compact_threshold`` unset means *the local trigger minus
a safety margin*, where the margin is ``max(safety_margin_tokens,
safety_margin_ratio * trigger)`` (defaults: 4,096 tokens or 5 %). The provider
counts tokens differently from our tokenizer (tool schemas, item framing), so
the margin makes the provider compact first; the local engine stays armed as
the fallback. Should the margin swallow the trigger, half the trigger is used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, ValidationError, field_validator

from hermes_core.config import shown_value
from hermes_hookspecs import ConfigError, SettingsSection

SECTION = "compaction.responses"


class ResponsesCompactionSettings(SettingsSection):
    """The validated ``[compaction.responses]`` table (declared through ``register_settings``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    config_section: ClassVar[str] = SECTION

    base_url: str = Field(
        default="",
        description="API root including /v1 (e.g. https://api.openai.com/v1); empty: ineligible.",
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Env var holding the API key; empty: send no Authorization header.",
    )
    provider: str = Field(
        default="openai",
        min_length=1,
        description="Sessions are eligible only when their provider equals this (any case).",
    )
    models: list[str] = Field(
        default_factory=list,
        description="Model allowlist: exact names or fnmatch patterns; empty: ineligible.",
    )
    route: Literal["standalone", "inline"] = Field(
        default="standalone", description="standalone /responses/compact, or inline."
    )
    source: Literal["input", "previous_response_id", "auto"] = Field(
        default="input",
        description=(
            "What /responses/compact receives: the active view as input items, the "
            "session's routing['previous_response_id'], or that id when present (auto)."
        ),
    )
    compact_threshold: int | None = Field(
        default=None, gt=0, description="Inline threshold, tokens; unset: local trigger - margin."
    )
    safety_margin_tokens: int = Field(
        default=4_096, ge=0, description="Minimum margin below the local trigger, tokens."
    )
    safety_margin_ratio: float = Field(
        default=0.05, ge=0, lt=1, description="Margin as a fraction of the local trigger."
    )
    inline_backstop: bool = Field(
        default=True,
        description="Inline route: call /responses/compact when no compaction item was recorded.",
    )
    timeout: float = Field(default=120.0, gt=0, description="HTTP timeout, seconds.")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip()
        if not value:
            return ""
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"expected an http(s) URL such as https://api.openai.com/v1, got {value!r}"
            )
        return value.rstrip("/")

    @field_validator("models")
    @classmethod
    def _no_blank_models(cls, value: list[str]) -> list[str]:
        for index, name in enumerate(value):
            if not name.strip():
                raise ValueError(f"models[{index}] is blank")
        return value

    def compact_url(self) -> str:
        """``POST`` target of the standalone route."""
        return f"{self.base_url}/responses/compact"

    def threshold_for(self, local_trigger: int) -> int:
        """The inline ``compact_threshold``: explicit, else the trigger minus the margin."""
        if self.compact_threshold is not None:
            return self.compact_threshold
        margin = max(self.safety_margin_tokens, math.ceil(local_trigger * self.safety_margin_ratio))
        threshold = local_trigger - margin
        return threshold if threshold > 0 else max(1, local_trigger // 2)


def _describe(error: ValidationError) -> str:
    problems: list[str] = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"]) or "(table)"
        value = shown_value(f"{SECTION}.{key}", item["input"])  # secrets are not echoed
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown key {SECTION}.{key} (value {value})")
        else:
            problems.append(f"{SECTION}.{key} = {value}: {item['msg']}")
    known = ", ".join(ResponsesCompactionSettings.model_fields)
    return f"invalid [{SECTION}] settings: " + "; ".join(problems) + f" (known keys: {known})"


def parse_settings(
    data: Mapping[str, Any] | ResponsesCompactionSettings | None,
) -> ResponsesCompactionSettings:
    """Validate the ``[compaction.responses]`` table (a ConfigError names every bad key)."""
    if isinstance(data, ResponsesCompactionSettings):
        return data
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"[{SECTION}] must be a table, got {type(data).__name__}")
    try:
        return ResponsesCompactionSettings.model_validate(dict(data or {}))
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None
