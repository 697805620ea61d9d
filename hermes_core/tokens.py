"""Token counting for the core: the selected counter, message framing, and the estimator.

The default counter is the ``tiktoken`` plugin (exact, offline). When no
registered counter supports the model, :class:`CharEstimator` counts
``ceil(chars / 4)`` and every count it produced is flagged as an estimate
(``Tokens.exact`` is False).
"""

from __future__ import annotations

import json
import math

from hermes_hookspecs import Message, TokenCounter

#: tokens of framing per chat message (role and separators), as OpenAI documents for chat models
MESSAGE_OVERHEAD = 3
#: tokens that prime the assistant's reply
REPLY_PRIMING = 3


class CharEstimator:
    """A rough estimator: one token per four characters, rounded up. Never exact."""

    name = "estimate"
    exact = False

    def supports(self, model: str | None) -> bool:
        return True

    def count(self, text: str, model: str | None = None) -> int:
        return math.ceil(len(text) / 4)

    def count_many(self, texts: list[str], model: str | None = None) -> list[int]:
        return [self.count(text) for text in texts]


class Tokens:
    """Counts for one model with one counter (exact, or the estimator as a fallback)."""

    def __init__(self, counter: TokenCounter | None, model: str) -> None:
        self.model = model
        if counter is None or not counter.supports(model):
            counter = CharEstimator()
        self.counter: TokenCounter = counter

    @property
    def exact(self) -> bool:
        return bool(self.counter.exact)

    def count_text(self, text: str) -> int:
        return self.counter.count(text, self.model) if text else 0

    def message_text(self, message: Message, api_content: object = None) -> str:
        """The text of a message that costs tokens: content, name, tool calls, provider items."""
        parts: list[str] = []
        content = message.content if api_content is None else api_content
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.append(json.dumps(content, ensure_ascii=False, sort_keys=True))
        if message.name:
            parts.append(message.name)
        for call in message.tool_calls or []:
            parts.append(call.function.name)
            parts.append(call.function.arguments)
        if message.provider_item is not None:
            parts.append(json.dumps(message.provider_item, sort_keys=True))
        return "\n".join(parts)

    def count_message(self, message: Message, api_content: object = None) -> int:
        """Tokens one message costs in a request, framing included."""
        return MESSAGE_OVERHEAD + self.count_text(self.message_text(message, api_content))

    def count_messages(self, messages: list[Message]) -> list[int]:
        texts = [self.message_text(m) for m in messages]
        counts = self.counter.count_many(texts, self.model) if texts else []
        return [MESSAGE_OVERHEAD + c for c in counts]
