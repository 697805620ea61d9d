"""The redaction step: applies :class:`~hermes_hookspecs.RedactionRule` s to text bound for memory.

Rules come from the ``redaction_rules`` hook (the ``redaction`` plugin ships
the defaults) and are applied one after another in ``name`` order, so the
outcome never depends on plugin load order. A :class:`Redactor` is immutable
after construction and safe to share between threads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from hermes_hookspecs import (
    HandoffSummary,
    Message,
    RedactionRule,
    RegistrationError,
    ToolCall,
    ToolFunction,
    TurnRecord,
)


class Redactor:
    """Apply redaction rules to text, messages, nested values and turn records.

    :param rules: the rules to apply; sorted by ``name`` here. Two rules with
        the same name are a :class:`~hermes_hookspecs.RegistrationError`
        (the order between them would be undefined).
    """

    def __init__(self, rules: Iterable[RedactionRule]) -> None:
        ordered = sorted(rules, key=lambda rule: rule.name)
        seen: set[str] = set()
        for rule in ordered:
            if rule.name in seen:
                raise RegistrationError(
                    f"redaction rule name {rule.name!r} is contributed twice; rule names "
                    "must be unique (block one plugin or rename the rule)"
                )
            seen.add(rule.name)
        self._rules: tuple[RedactionRule, ...] = tuple(ordered)
        self._compiled: tuple[tuple[re.Pattern[str], str], ...] = tuple(
            (re.compile(rule.pattern), rule.replacement) for rule in ordered
        )

    @classmethod
    def from_hook(cls, hook: Any) -> Redactor:
        """Collect rules from a pluggy hook relay (``plugin_manager.hook``).

        Every ``redaction_rules`` implementation is called; ``None`` results are
        skipped; anything that is not a :class:`RedactionRule` is a
        :class:`~hermes_hookspecs.RegistrationError` naming the offending value.
        """
        rules: list[RedactionRule] = []
        for result in hook.redaction_rules():
            if result is None:
                continue
            for rule in result:
                if not isinstance(rule, RedactionRule):
                    raise RegistrationError(
                        f"redaction_rules returned {rule!r:.80}; expected RedactionRule objects"
                    )
                rules.append(rule)
        return cls(rules)

    @property
    def rules(self) -> tuple[RedactionRule, ...]:
        """The rules in the order they are applied."""
        return self._rules

    # -- text ---------------------------------------------------------------
    def redact(self, text: str) -> str:
        """``text`` with every rule applied in name order."""
        if not text:
            return text
        for pattern, replacement in self._compiled:
            text = pattern.sub(replacement, text)
        return text

    def redact_value(self, value: Any) -> Any:
        """A copy of a JSON-like value (dicts, lists, tuples) with every string redacted.

        Dict keys are kept as they are; non-string scalars pass unchanged.
        """
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {key: self.redact_value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_value(item) for item in value]
        return value

    # -- structured ---------------------------------------------------------
    def redact_message(self, message: Message) -> Message:
        """A redacted copy of ``message``.

        Covered: text content (a string, or the ``text`` of content parts),
        tool-call arguments (parsed, every string value redacted, re-encoded so
        they stay valid JSON) and the fields of a handoff ``summary``. The
        opaque ``provider_item`` of a compaction message is provider-encrypted
        state, not text, and is passed unchanged.
        """
        update: dict[str, Any] = {}
        if isinstance(message.content, str):
            update["content"] = self.redact(message.content)
        elif isinstance(message.content, list):
            update["content"] = [self._redact_part(part) for part in message.content]
        if message.tool_calls:
            update["tool_calls"] = [self._redact_call(call) for call in message.tool_calls]
        if message.summary is not None:
            update["summary"] = self._redact_summary(message.summary)
        return message.model_copy(update=update)

    def redact_messages(self, messages: Iterable[Message]) -> list[Message]:
        """:meth:`redact_message` applied to each message."""
        return [self.redact_message(message) for message in messages]

    def redact_turn(self, turn: TurnRecord) -> TurnRecord:
        """A redacted copy of a committed turn (texts and messages)."""
        return turn.model_copy(
            update={
                "user_text": self.redact(turn.user_text),
                "assistant_text": self.redact(turn.assistant_text),
                "messages": self.redact_messages(turn.messages),
            }
        )

    def _redact_part(self, part: dict[str, Any]) -> dict[str, Any]:
        if isinstance(part.get("text"), str):
            return {**part, "text": self.redact(part["text"])}
        return dict(part)

    def _redact_call(self, call: ToolCall) -> ToolCall:
        parsed = json.loads(call.function.arguments)  # valid JSON: checked by ToolFunction
        redacted = self.redact_value(parsed)
        if redacted == parsed:
            return call  # keep the original bytes
        arguments = json.dumps(redacted, ensure_ascii=False)
        return call.model_copy(
            update={"function": ToolFunction(name=call.function.name, arguments=arguments)}
        )

    def _redact_summary(self, summary: HandoffSummary) -> HandoffSummary:
        update: dict[str, Any] = {
            attr: self.redact(str(getattr(summary, attr)))
            for attr, _title in HandoffSummary.STANDARD_TITLES
        }
        update["extra"] = [
            section.model_copy(
                update={"title": self.redact(section.title), "body": self.redact(section.body)}
            )
            for section in summary.extra
        ]
        return summary.model_copy(update=update)
