"""``OpenAISummarizer``: the handoff written by a model on any OpenAI-compatible endpoint.

Configuration comes from ``[summarizer.openai]`` (base URL, model, API-key
environment variable, timeout, window, output cap) and ``[model]`` (the main
model's endpoint, the fallback).

* **Fallback to the main model.** When the auxiliary endpoint is unavailable
  (``network``, ``timeout``, ``server``, ``rate_limit``, ``quota``, ``auth`` or
  ``config`` failures) the request is retried once on ``model.base_url`` with
  the main model, if one is configured and ``fallback_to_main`` is on. When
  no auxiliary endpoint is configured the main one is used directly. The
  error of the last attempt is raised, naming the first.
* **Prefix reuse.** When the request carries ``prefix_messages``
  (``compression.summary_prefix_reuse``), the body is the conversation's own
  messages (and tools, with ``tool_choice="none"``) plus one final user
  message asking for the handoff, sent to the main model - where the
  provider's prompt cache holds that prefix. The cached tokens it reports come
  back in ``SummaryResult.usage.cache_read_tokens``. A fallback attempt uses the
  ordinary bounded request.
"""

from __future__ import annotations

from typing import Any

from hermes_hookspecs import (
    Settings,
    Summarizer,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
)

from .client import NAME, Endpoint, chat_completion
from .prompt import SYSTEM_PROMPT, parse_sections, prefix_instruction, user_prompt
from .settings import OpenAISummarizerSettings

#: failure kinds that mean "this endpoint is unavailable": worth one retry elsewhere
UNAVAILABLE = frozenset({"network", "timeout", "server", "rate_limit", "quota", "auth", "config"})
#: output headroom over the requested summary length before the answer counts as truncated
OUTPUT_HEADROOM = 1.5


class OpenAISummarizer(Summarizer):
    """Summaries from an OpenAI-compatible chat-completions endpoint, over httpx."""

    name = NAME

    def __init__(
        self,
        auxiliary: Endpoint | None,
        main: Endpoint | None = None,
        *,
        context_length: int = 128_000,
        max_output_tokens: int = 4_000,
        fallback_to_main: bool = True,
    ) -> None:
        self.auxiliary = auxiliary
        self.main = main
        self.context_length = context_length
        self.max_output_tokens = max_output_tokens
        self.fallback_to_main = fallback_to_main

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAISummarizer:
        """Build from the host settings (``[summarizer.openai]`` and ``[model]``).

        The summarizer asks to be preferred (``compression.summarizer`` empty)
        once its own endpoint and model are configured.
        """
        cfg = settings.section(OpenAISummarizerSettings)
        auxiliary = None
        if cfg.base_url and cfg.model:
            auxiliary = Endpoint(
                label="auxiliary",
                base_url=cfg.base_url,
                model=cfg.model,
                api_key_env=cfg.api_key_env,
                timeout=cfg.timeout,
            )
        main = None
        if settings.model.base_url:
            main = Endpoint(
                label="main",
                base_url=settings.model.base_url,
                model=settings.model.name,
                api_key_env=settings.model.api_key_env,
                timeout=cfg.timeout,
            )
        made = cls(
            auxiliary,
            main,
            context_length=cfg.context_length,
            max_output_tokens=cfg.max_output_tokens,
            fallback_to_main=cfg.fallback_to_main,
        )
        made.preferred = auxiliary is not None
        return made

    # -- requests --------------------------------------------------------------------
    def _limit(self, request: SummaryRequest) -> int:
        return max(64, min(request.max_output_tokens, self.max_output_tokens))

    def _plain_body(self, endpoint: Endpoint, request: SummaryRequest) -> dict[str, Any]:
        limit = self._limit(request)
        asked = request.model_copy(update={"max_output_tokens": limit})
        return {
            "model": endpoint.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user_prompt(asked)},
            ],
            "max_tokens": int(limit * OUTPUT_HEADROOM),
        }

    def _prefix_body(self, endpoint: Endpoint, request: SummaryRequest) -> dict[str, Any]:
        limit = self._limit(request)
        asked = request.model_copy(update={"max_output_tokens": limit})
        messages = [m.to_api() for m in request.prefix_messages or []]
        messages.append({"role": "user", "content": prefix_instruction(asked)})
        body: dict[str, Any] = {
            "model": endpoint.model,
            "messages": messages,
            "max_tokens": int(limit * OUTPUT_HEADROOM),
        }
        if request.prefix_tools:
            body["tools"] = request.prefix_tools
            body["tool_choice"] = "none"
        return body

    def _attempts(self, request: SummaryRequest) -> list[tuple[Endpoint, dict[str, Any], bool]]:
        """(endpoint, body, is_main_fallback) in the order they are tried."""
        main = self.main
        if request.prefix_messages is not None:
            if main is not None and request.model:
                main = main.model_copy(update={"model": request.model})
            first = main or self.auxiliary
            if first is None:
                raise self._not_configured()
            attempts = [(first, self._prefix_body(first, request), False)]
            other = self.auxiliary if first is main else (main if self.fallback_to_main else None)
            if other is not None and other != first:
                attempts.append((other, self._plain_body(other, request), other is main))
            return attempts
        if self.auxiliary is None:
            if main is None:
                raise self._not_configured()
            return [(main, self._plain_body(main, request), True)]
        attempts = [(self.auxiliary, self._plain_body(self.auxiliary, request), False)]
        if self.fallback_to_main and main is not None and main != self.auxiliary:
            attempts.append((main, self._plain_body(main, request), True))
        return attempts

    @staticmethod
    def _not_configured() -> SummarizerError:
        return SummarizerError(
            "config",
            "no endpoint: set summarizer.openai.base_url and summarizer.openai.model "
            "(or model.base_url for the main model)",
            summarizer=NAME,
        )

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        attempts = self._attempts(request)
        first_error: SummarizerError | None = None
        for position, (endpoint, body, is_main) in enumerate(attempts):
            try:
                completion = chat_completion(endpoint, body)
            except SummarizerError as error:
                last = position == len(attempts) - 1
                if not last and error.kind in UNAVAILABLE:
                    first_error = error
                    continue
                if first_error is not None:
                    raise SummarizerError(
                        error.kind,
                        f"{error} (after the auxiliary endpoint failed: {first_error})",
                        summarizer=NAME,
                    ) from error
                raise
            summary = parse_sections(completion.text)
            if summary is None:
                raise SummarizerError(
                    "malformed",
                    f"{endpoint.label} endpoint answered without any of the seven section "
                    f"headings: {completion.text[:120]!r}",
                    summarizer=NAME,
                )
            summary.summarizer = NAME
            return SummaryResult(
                summary=summary,
                summarizer=NAME,
                usage=completion.usage,
                fell_back_to_main_model=is_main and first_error is not None,
            )
        raise self._not_configured()  # pragma: no cover - attempts is never empty
