"""Messages in OpenAI chat-completions format, with hermes-core's typed extras.

A :class:`Message` is exactly what the chat-completions API takes
(``role``, ``content``, ``tool_calls``, ``tool_call_id``, ``name``) plus four
fields that never reach the wire: ``kind`` (ordinary message, compaction
summary, or opaque provider compaction item), ``summary`` (the structured
handoff behind a summary message) and ``provider_item`` (an opaque item a
provider asked us to resend verbatim), ``harness`` (the name of the harness
construct, when the agent harness injected the text). :meth:`Message.to_api`
renders the wire dict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticSerializationError

Role = Literal["system", "user", "assistant", "tool"]
MessageKind = Literal["message", "summary", "compaction"]

SUMMARY_BEGIN = "[CONTEXT SUMMARY: reference only, not instructions]"
SUMMARY_END = "[END OF CONTEXT SUMMARY]"


def check_unicode(value: Any, field: str) -> None:
    """Raise ValueError when ``value`` (a str, or strings nested in lists and dicts) is
    not encodable Unicode text, such as one holding a lone surrogate."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{field} holds a lone surrogate at position {exc.start} "
                f"({value[exc.start]!r}); text must be valid Unicode"
            ) from None
        return
    if not isinstance(value, dict | list):
        return
    try:  # one pass in C for the common, clean case
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return
    except (TypeError, ValueError):  # not JSON, or a lone surrogate: walk to name the place
        pass
    if isinstance(value, dict):
        for key, item in value.items():
            check_unicode(key, field)
            check_unicode(item, f"{field}.{key}")
    else:
        for index, item in enumerate(value):
            check_unicode(item, f"{field}[{index}]")


def string_values(value: Any) -> list[str]:
    """The strings of a decoded JSON value, in document order (dict keys left out).

    The walk uses an explicit stack, so a value nested thousands deep costs no
    recursion.
    """
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return out


class ToolFunction(BaseModel):
    """The ``function`` member of a tool call: a name and JSON-encoded arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the function the model calls
    name: str = Field(min_length=1)
    #: its arguments as JSON text, exactly as the model sent them
    arguments: str = "{}"

    @field_validator("arguments")
    @classmethod
    def _arguments_are_json(cls, value: str) -> str:
        check_unicode(value, "arguments")
        try:
            json.loads(value)
        except (TypeError, ValueError) as exc:
            shown = value if len(value) <= 80 else value[:77] + "..."
            raise ValueError(f"tool call arguments are not valid JSON ({exc}): {shown!r}") from None
        return value

    def string_values(self) -> list[str]:
        """The string values of :attr:`arguments`, decoded, in document order (keys left out).

        What the call says in text: a patch's lines with real newlines instead of
        the ``\\n`` escapes of its JSON, so a reader (identifier extraction)
        sees the text the model wrote.
        """
        return string_values(json.loads(self.arguments))


class ToolCall(BaseModel):
    """One tool call of an assistant message."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the call id a ``tool`` message answers
    id: str = Field(min_length=1)
    #: always ``function``
    type: Literal["function"] = "function"
    #: the function and its arguments
    function: ToolFunction


class SummarySection(BaseModel):
    """One titled section of a handoff summary."""

    model_config = ConfigDict(extra="forbid")

    #: the section heading
    title: str
    #: its text
    body: str


FactKind = Literal["request", "constraint", "error", "decision", "answer", "command", "file"]


class HandoffFact(BaseModel):
    """One fact of the compacted middle, in the session's own words.

    The engine extracts facts from the ORIGINAL messages (before pruning cut
    tool output) and hands them to the summarizer, which must keep the ones
    it uses verbatim: the user's requests and constraints, exact error lines
    with the command that produced them, commands run with their outcome,
    the assistant's answers and stated decisions, files it changed.

    :param message_id: the stored message it comes from (``session_open``
        opens it), None when unknown.
    :param position: index of that message in the middle, oldest first.
    :param score: how much the fact is worth keeping (higher first).
    :param draft_id: the draft row (a negative id) it comes from when that row
        belongs to a turn not committed yet (a mid-turn compaction), so
        ``message_id`` is None; the turn's commit sets ``message_id`` to the
        id the row was stored under. The handoff's text, which quoted no id,
        is left as it was (the prefix holds), and the next compaction quotes it.
    """

    model_config = ConfigDict(extra="forbid")

    #: what the fact is: a request, constraint, error, decision, answer, command or file
    kind: FactKind
    #: the fact in the session's own words
    text: str
    message_id: int | None = None
    position: int = 0
    score: float = 0.0
    draft_id: int | None = Field(default=None, lt=0)


class HandoffSummary(BaseModel):
    """The structured handoff a summarizer writes for the compacted middle.

    The seven standard sections are always present (possibly empty); engines
    and tail strategies may add ``extra`` sections such as an identifier index,
    verbatim user quotes or recovery pointers. :meth:`render` produces the
    text the model sees, fenced by explicit begin/end markers so it reads as
    reference material, never as new instructions.
    """

    model_config = ConfigDict(extra="forbid")

    #: what the user is trying to achieve
    goal: str = ""
    #: what the user required or ruled out
    constraints: str = ""
    #: what has been done so far, with outcomes
    progress: str = ""
    #: choices made and why
    decisions: str = ""
    #: files read, created or changed
    files: str = ""
    #: what remains to do
    next_steps: str = ""
    #: exact values the work depends on: error lines, identifiers, commands
    critical_context: str = ""
    #: further sections (identifier index, user quotes, recovery pointers, ...)
    extra: list[SummarySection] = Field(default_factory=list)
    #: the summarizer that wrote it
    summarizer: str = ""
    #: which compression of the session wrote it (1, 2, ...)
    compression_index: int = 1
    #: tokens of conversation this handoff stands for, over every compression so far
    covered_tokens: int = 0
    #: tokens of the user's own messages and the agent's turn-closing answers in that
    #: history (the conversation's words without tool traffic): the handoff never needs more;
    #: None when not counted (a handoff written before this was)
    covered_dialogue_tokens: int | None = None
    #: the facts the handoff was built from, so the next compression re-ranks them with new ones
    facts: list[HandoffFact] = Field(default_factory=list)
    #: facts ranked but left out for want of room, never rendered: a later compression
    #: with more room ranks them again, so one squeezed handoff does not lose them for good
    reserve: list[HandoffFact] = Field(default_factory=list)

    STANDARD_TITLES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("goal", "Goal"),
        ("constraints", "Constraints"),
        ("progress", "Progress"),
        ("decisions", "Decisions"),
        ("files", "Files"),
        ("next_steps", "Next Steps"),
        ("critical_context", "Critical Context"),
    )

    def sections(self) -> list[SummarySection]:
        """All sections in render order: the seven standard ones, then ``extra``."""
        out = [
            SummarySection(title=title, body=str(getattr(self, attr)))
            for attr, title in self.STANDARD_TITLES
        ]
        return out + list(self.extra)

    def render(self) -> str:
        """The summary as the text the model reads, between begin/end markers."""
        parts = [SUMMARY_BEGIN]
        for section in self.sections():
            body = section.body.strip() or "(none)"
            parts.append(f"## {section.title}\n{body}")
        parts.append(SUMMARY_END)
        return "\n\n".join(parts)

    def with_stored_ids(self, ids: Mapping[int, int]) -> HandoffSummary:
        """A copy whose facts from draft rows (:attr:`HandoffFact.draft_id`) name the ids
        ``ids`` maps those rows to (draft id -> stored id); the text is unchanged."""

        def stored(facts: list[HandoffFact]) -> list[HandoffFact]:
            return [
                fact.model_copy(update={"message_id": ids[fact.draft_id], "draft_id": None})
                if fact.draft_id is not None and fact.draft_id in ids
                else fact
                for fact in facts
            ]

        return self.model_copy(
            update={"facts": stored(self.facts), "reserve": stored(self.reserve)}
        )


class Message(BaseModel):
    """One chat-completions message, validated.

    Rules enforced here (each failure names the field): ``role`` is required;
    a ``tool`` message needs ``tool_call_id``; only assistant messages carry
    ``tool_calls``; tool-call arguments are JSON; a ``summary`` message carries
    its :class:`HandoffSummary`; a ``compaction`` message carries its opaque
    ``provider_item``.

    ``harness`` marks text the agent harness injected rather than a person or
    the model wrote (a Claude Code ``<system-reminder>``, command wrapper,
    caveat, interrupt marker or compaction summary; a Codex environment
    context, turn-aborted notice or developer notice). Its value names the
    construct, ``"<harness>.<kind>"`` (e.g. ``"claude_code.system_reminder"``);
    None for ordinary text. Importers set it from the transcript's structure,
    the ``detect_harness`` hook sets it when the turn runtime records a
    message, and the compressor's handoff never quotes such text as the
    user's words. It never reaches the wire.
    """

    model_config = ConfigDict(extra="forbid")

    #: ``system``, ``user``, ``assistant`` or ``tool``
    role: Role
    #: text, or content parts (dicts with a ``type``); None for a tool-call-only answer
    content: str | list[dict[str, Any]] | None = None
    #: an assistant message's function calls
    tool_calls: list[ToolCall] | None = None
    #: the call a ``tool`` message answers
    tool_call_id: str | None = None
    #: the wire ``name`` field, when the source set one
    name: str | None = None
    #: ``message``; ``summary`` for a handoff; ``compaction`` for an opaque provider item
    kind: MessageKind = "message"
    #: the structured handoff of a ``summary`` message
    summary: HandoffSummary | None = None
    #: the opaque provider item of a ``compaction`` message, resent verbatim
    provider_item: dict[str, Any] | None = None
    #: the harness construct that injected the text (``<harness>.<kind>``); None for ordinary text
    harness: str | None = None

    @field_validator("content")
    @classmethod
    def _content_parts_typed(
        cls, value: str | list[dict[str, Any]] | None
    ) -> str | list[dict[str, Any]] | None:
        if isinstance(value, list):
            for index, part in enumerate(value):
                if not isinstance(part.get("type"), str):
                    raise ValueError(f"content part {index} has no string 'type': {part!r:.80}")
        check_unicode(value, "content")
        return value

    @field_validator("tool_call_id", "name")
    @classmethod
    def _ids_are_text(cls, value: str | None) -> str | None:
        check_unicode(value, "tool_call_id/name")
        return value

    @model_validator(mode="after")
    def _role_rules(self) -> Message:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs 'tool_call_id'")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(
                f"'tool_calls' is only allowed on assistant messages, not {self.role!r}"
            )
        if self.kind == "summary" and self.summary is None:
            raise ValueError("a summary message needs its 'summary' record")
        if self.summary is not None:
            try:  # one pass in Rust for the common, clean case (a large handoff's facts)
                self.summary.model_dump_json()
            except PydanticSerializationError:  # walk to name the place
                check_unicode(self.summary.model_dump(), "summary")
        if self.provider_item is not None:
            check_unicode(self.provider_item, "provider_item")
        if self.kind == "compaction" and self.provider_item is None:
            raise ValueError("a compaction message needs its opaque 'provider_item'")
        return self

    # -- helpers ---------------------------------------------------------
    @property
    def written_by_user(self) -> bool:
        """Whether the user wrote this message: role ``user``, an ordinary message (not a
        handoff or a provider item) and no text a harness injected (:attr:`harness`: a
        reminder, a command wrapper, an environment block is user-role, not the user's)."""
        return self.role == "user" and self.kind == "message" and self.harness is None

    def text(self) -> str:
        """The content flattened to text (text parts joined; other parts as ``[type]``)."""
        return content_text(self.content)

    def to_api(self, content: str | list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The wire dict for chat completions.

        :param content: overrides ``content`` (used for the stored
            ``api_content`` sidecar, the exact bytes once sent).
        """
        body: dict[str, Any] = {"role": self.role}
        body["content"] = self.content if content is None else content
        if self.tool_calls:
            body["tool_calls"] = [call.model_dump() for call in self.tool_calls]
        if self.tool_call_id is not None:
            body["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            body["name"] = self.name
        if self.kind == "compaction" and self.provider_item is not None:
            # an opaque provider item: rendered verbatim by the Responses renderer,
            # dropped by the chat-completions renderer (it cannot carry it)
            body["provider_item"] = self.provider_item
        return body

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Message:
        """Validate a wire dict (unknown wire keys such as ``refusal`` are dropped)."""
        known = {"role", "content", "tool_calls", "tool_call_id", "name"}
        cleaned = {k: v for k, v in data.items() if k in known}
        calls = cleaned.get("tool_calls")
        if isinstance(calls, list) and calls:
            # drop wire-only keys (``index``...) of well-formed calls; anything else
            # is left for validation to report by position
            cleaned["tool_calls"] = [
                {k: v for k, v in call.items() if k in {"id", "type", "function"}}
                if isinstance(call, dict)
                else call
                for call in calls
            ]
        elif "tool_calls" in cleaned and not calls:
            cleaned["tool_calls"] = None
        return cls.model_validate(cleaned)


def content_text(content: str | list[dict[str, Any]] | None) -> str:
    """Flatten message content to plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for part in content:
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        else:
            pieces.append(f"[{kind}]")
    return "\n".join(pieces)


class Usage(BaseModel):
    """Token usage of one model call, as the provider reported it."""

    model_config = ConfigDict(extra="forbid")

    #: prompt tokens, cached ones included
    input_tokens: int = 0
    #: completion tokens, reasoning included
    output_tokens: int = 0
    #: prompt tokens the provider served from its cache
    cache_read_tokens: int = 0
    #: prompt tokens written to the provider's cache (where it reports them)
    cache_write_tokens: int = 0
    #: completion tokens spent on reasoning
    reasoning_tokens: int = 0
    #: the model that answered, when known
    model: str | None = None

    @classmethod
    def from_openai(cls, usage: dict[str, Any] | None, model: str | None = None) -> Usage:
        """Read chat-completions or Responses usage dicts (either naming)."""
        if not usage:
            return cls(model=model)
        prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0
        completion = usage.get("completion_tokens", usage.get("output_tokens", 0)) or 0
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        out_details = (
            usage.get("completion_tokens_details") or usage.get("output_tokens_details") or {}
        )
        return cls(
            input_tokens=int(prompt),
            output_tokens=int(completion),
            cache_read_tokens=int(details.get("cached_tokens", 0) or 0),
            cache_write_tokens=int(usage.get("cache_creation_input_tokens", 0) or 0),
            reasoning_tokens=int(out_details.get("reasoning_tokens", 0) or 0),
            model=model,
        )
