"""The ``[summarizer.openai]`` section: the auxiliary endpoint the ``openai`` summarizer calls."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import SettingsSection


class OpenAISummarizerSettings(SettingsSection):
    """The ``openai`` summarizer: any OpenAI-compatible chat-completions endpoint."""

    config_section: ClassVar[str] = "summarizer.openai"

    base_url: str = Field(default="", description="Endpoint base URL, e.g. http://host/v1.")
    model: str = Field(default="", description="Auxiliary model name.")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Env var holding the key.")
    timeout: float = Field(default=60.0, gt=0, description="Request timeout, seconds.")
    context_length: int = Field(default=128_000, gt=0, description="Auxiliary model's window.")
    max_output_tokens: int = Field(default=4_000, gt=0, description="Summary length cap.")
    fallback_to_main: bool = Field(
        default=True, description="Retry once on the main model's endpoint when unavailable."
    )
