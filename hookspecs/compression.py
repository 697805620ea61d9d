"""The compression contract: context engines, tail strategies and summarizers.

A **context engine** owns what the model sees once a session outgrows its
window. ``select_context`` returns a view for ONE request and changes nothing
stored; ``compress`` returns a new active context that the core commits
atomically. The default engine (``compressor``) delegates the choice of the
verbatim tail to a **tail strategy** and the handoff text to a
**summarizer**; both are chosen by name in configuration.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from .messages import HandoffFact, HandoffSummary, Message, SummarySection, Usage
from .records import NewMessage, StoredMessage

CompressionStatus = Literal["compressed", "aborted", "skipped"]


class CompressionSettings(BaseModel):
    """The resolved core ``[compression]`` settings handed to engines (read-only).

    Each field is the setting of the same name in docs/configuration.md, after
    defaults, file and environment were applied. Only what the core resolves
    for every engine: the trigger, the window and the general compression
    knobs. A plugin's own keys (the tails' bands, the default engine's
    cooldown and breaker) live in its own
    :class:`~hermes_hookspecs.settings.SettingsSection`, read with
    ``settings.section(Model)`` when it registers its parts.

    :param threshold_tokens: the effective trigger in tokens (``hermes-core config show``).
    :param context_length: the model's window in tokens.
    :param protect_first_n: head messages kept verbatim at the first compression (text a
        harness injected not counted).
    :param prune_min_chars: tool output longer than this is pruned to a placeholder.
    :param max_tool_args_chars: tool-call arguments longer than this are cut.
    :param summary_input_tokens: the most tokens handed to the summarizer at once.
    :param summary_prefix_reuse: send the summary request after the session's own prefix,
        so the provider's prompt cache serves it.
    :param abort_on_summary_failure: on any summarizer failure keep the session untouched
        instead of falling back.
    :param summarizer: the summarizer to use.
    :param tail: the tail strategy to use.
    """

    model_config = ConfigDict(extra="forbid")

    threshold_tokens: int
    context_length: int
    protect_first_n: int = 3
    prune_min_chars: int = 400
    max_tool_args_chars: int = 2000
    summary_input_tokens: int = 60_000
    summary_prefix_reuse: bool = False
    abort_on_summary_failure: bool = False
    summarizer: str = "deterministic"
    tail: str = "lean"


class EngineHost(Protocol):
    """What the core offers an engine (handed over once through :meth:`ContextEngine.bind`)."""

    def count_text(self, text: str) -> int:
        """Exact tokens of ``text`` for the session's model (estimate if no exact counter)."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens one message costs in a request, framing included."""
        ...

    def summarizer(self, name: str) -> Summarizer:
        """The registered summarizer called ``name`` (UnknownNameError lists the known ones)."""
        ...

    def tail_strategy(self, name: str) -> TailStrategy:
        """The registered tail strategy called ``name``."""
        ...


class CompressionRequest(BaseModel):
    """Everything an engine needs to compress one session's active context.

    ``messages`` is the active view with store ids, so the engine can leave
    recovery pointers (``message id N``) that session search opens. The
    frozen system prompt is NOT among them (it always stays and is rebuilt by
    the core); ``system_tokens`` says what it costs. An engine that returns a
    leading system message has it dropped by the core.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    #: the session to compress
    session_id: str
    #: its active view, oldest first, without the system prompt
    messages: list[StoredMessage]
    #: the session's model (picks the tokenizer)
    model: str = ""
    #: the resolved compression settings, ``threshold_tokens`` included
    settings: CompressionSettings
    #: what the ``on_pre_compress`` hooks and memory providers asked the summary to keep
    insights: list[str] = Field(default_factory=list)
    #: a topic the summary should keep in focus (``hermes-core compress --focus``)
    focus: str | None = None
    #: asked for explicitly (``Session.compress``, the CLI): bypasses cooldowns and the breaker
    manual: bool = False
    #: the handoff of the previous compression, to update rather than restart
    previous_summary: HandoffSummary | None = None
    #: 1 for the session's first compression, then 2, 3, ...
    compression_index: int = 1
    #: tokens of the frozen system prompt and tool schemas, which stay
    system_tokens: int = 0
    #: the session's frozen tool schemas; sent with the summary request when
    #: ``summary_prefix_reuse`` is on so the provider's cached prefix matches
    tools: list[dict[str, Any]] | None = None
    #: the frozen system prompt text, likewise sent first with the prefix
    #: (None: not known; prefix reuse then starts at the first message)
    system_prompt: str | None = None


class CompressionResult(BaseModel):
    """An engine's answer.

    ``messages`` is the complete new active view (system message included);
    a message carried forward unchanged keeps its ``origin_id``. With status
    ``aborted`` or ``skipped`` the core changes nothing and reports ``reason``.
    """

    model_config = ConfigDict(extra="forbid")

    #: ``compressed``, or ``aborted``/``skipped`` (then nothing changes)
    status: CompressionStatus
    #: the answering engine's name
    engine: str
    #: the new active view (with ``compressed``)
    messages: list[NewMessage] = Field(default_factory=list)
    #: the handoff written into the new view, if any
    summary: HandoffSummary | None = None
    #: tokens of the view before
    tokens_before: int = 0
    #: tokens of the new view
    tokens_after: int = 0
    #: the summarizer that wrote ``summary``
    summarizer: str = ""
    #: the fallback summarizer wrote it (the configured one failed)
    fallback_used: bool = False
    #: why the engine aborted or skipped
    reason: str = ""
    #: remarks for the compaction event and the replay report
    notes: list[str] = Field(default_factory=list)
    #: the summarizer model's usage, when it called one
    summary_usage: Usage | None = None


class SelectRequest(BaseModel):
    """Input of ``select_context``: the messages about to be sent once."""

    model_config = ConfigDict(extra="forbid")

    #: the session the request belongs to
    session_id: str
    #: the request's messages, system prompt first
    messages: list[Message]
    #: the session's model
    model: str = ""
    #: the resolved compression settings
    settings: CompressionSettings


class EngineStatus(BaseModel):
    """What an engine reports about one session (``hermes-core`` shows it)."""

    model_config = ConfigDict(extra="forbid")

    #: the engine's name
    engine: str
    #: the compression trigger in force for the session
    threshold_tokens: int
    #: prompt tokens of the latest request seen
    last_prompt_tokens: int = 0
    #: view tokens before the latest compression
    last_tokens_before: int = 0
    #: view tokens after it
    last_tokens_after: int = 0
    #: compressions of the session by this engine, in this process
    compressions: int = 0
    #: failed compressions, likewise
    failures: int = 0
    #: Unix time before which automatic compression waits (None: no cooldown)
    cooldown_until: float | None = None
    #: the breaker is open: automatic compression is off after ineffective runs
    circuit_open: bool = False
    #: engine-specific state (JSON)
    detail: dict[str, Any] = Field(default_factory=dict)


class ContextEngine(ABC):
    """A context engine, registered through ``register_context_engines``.

    Engines keep per-session state (usage seen, cooldowns) on the instance,
    keyed by session id. One compression runs per session at a time: the
    core calls :meth:`compress` under the session's turn lease.
    """

    name: str = ""
    host: EngineHost | None = None

    def bind(self, host: EngineHost) -> None:
        """Receive the core's services before the first call (default: keep ``host``)."""
        self.host = host

    @abstractmethod
    def compress(self, request: CompressionRequest) -> CompressionResult:
        """Return the new active context, or an ``aborted``/``skipped`` result."""

    def select_context(self, request: SelectRequest) -> list[Message] | None:
        """Return a replacement message list for one request, or None to send as is."""
        return None

    def update_usage(self, session_id: str, usage: Usage) -> None:  # noqa: B027
        """Learn the provider's real usage after a model response."""

    def should_compress(self, session_id: str, prompt_tokens: int, threshold_tokens: int) -> bool:
        """Whether compression is due given the latest prompt size (default: at threshold)."""
        return prompt_tokens >= threshold_tokens

    def status(self, session_id: str, threshold_tokens: int) -> EngineStatus:
        """Report threshold, last savings, cooldown and breaker state."""
        return EngineStatus(engine=self.name, threshold_tokens=threshold_tokens)


class TailRequest(BaseModel):
    """Input of a tail strategy: the prunable part of the active view.

    ``messages`` excludes the system message and the protected head;
    ``token_counts`` is parallel to it. ``settings.threshold_tokens`` is the
    room the messages have: the default engine passes the compression
    threshold minus the system prompt's tokens, so a strategy that sizes its
    tail and sections as shares of it leaves the view under the threshold
    however large the system prompt is.
    """

    model_config = ConfigDict(extra="forbid")

    #: the prunable messages, oldest first
    messages: list[StoredMessage]
    #: tokens of each of ``messages``
    token_counts: list[int]
    #: the resolved settings; ``threshold_tokens`` is the room the messages have
    settings: CompressionSettings


class TailPlan(BaseModel):
    """A tail strategy's answer.

    ``tail_start`` indexes ``TailRequest.messages``: everything from there on
    stays verbatim (the core's cut never splits a tool-call pair, so a
    strategy may return any index). ``extra_sections`` are appended to the
    handoff summary (identifier index, user quotes, recovery pointers, ...).
    ``digest_chunks`` asks the engine to summarise the middle in chunks of at
    most that many tokens (``None``: one pass).
    """

    model_config = ConfigDict(extra="forbid")

    #: index into ``TailRequest.messages`` where the verbatim tail begins
    tail_start: int
    #: sections appended to the handoff
    extra_sections: list[SummarySection] = Field(default_factory=list)
    #: summarise the middle in chunks of at most this many tokens (None: one pass)
    digest_chunks: int | None = None
    #: remarks for the compaction event
    notes: list[str] = Field(default_factory=list)


class TailStrategy(ABC):
    """Decides how much recent history stays verbatim; registered by name."""

    name: str = ""

    @abstractmethod
    def plan(self, request: TailRequest) -> TailPlan:
        """Choose the tail and any extra summary sections."""


class SummaryRequest(BaseModel):
    """Input of a summarizer: the middle to hand off, bounded by the engine.

    ``prefix_messages`` is set when ``summary_prefix_reuse`` is on: the
    conversation's own request prefix, so the provider's cache can serve it.
    """

    model_config = ConfigDict(extra="forbid")

    #: the session being compressed
    session_id: str
    #: the middle to summarise, oldest first
    messages: list[Message]
    #: the previous handoff, to update
    previous_summary: HandoffSummary | None = None
    #: the request's ``insights``: what the summary must keep
    insights: list[str] = Field(default_factory=list)
    #: a topic to keep in focus
    focus: str | None = None
    #: the session's model
    model: str = ""
    #: the most tokens the handoff may take
    max_output_tokens: int = 4000
    #: the conversation's own request prefix, sent first when ``summary_prefix_reuse`` is on
    prefix_messages: list[Message] | None = None
    #: tool schemas sent with ``prefix_messages`` (part of the cached prefix)
    prefix_tools: list[dict[str, Any]] | None = None
    #: the stored id of each of ``messages`` (None for one not stored), for pointers
    recovery_ids: list[int | None] = Field(default_factory=list)
    #: facts of these messages, extracted by the engine from their original rows (keep them
    #: verbatim); None when the caller extracted none (a summarizer may derive its own)
    facts: list[HandoffFact] | None = None
    #: the user's first real request among the messages kept verbatim before the handoff
    #: (the protected head), when it holds one: the session's task sits there until the
    #: head joins a middle. The handoff may name it as the goal without quoting it whole
    head_request: HandoffFact | None = None


class SummaryResult(BaseModel):
    """A summarizer's answer."""

    model_config = ConfigDict(extra="forbid")

    #: the handoff
    summary: HandoffSummary
    #: the name of the summarizer that wrote it
    summarizer: str
    #: the summarizer model's usage, if it called one
    usage: Usage | None = None
    #: the auxiliary model was unavailable and the main model wrote it
    fell_back_to_main_model: bool = False


class Summarizer(ABC):
    """Writes the structured handoff; registered through ``register_summarizers``.

    Raise :class:`~hermes_hookspecs.errors.SummarizerError` with the right
    ``kind`` on failure; the engine applies the failure policy.
    """

    name: str = ""
    #: the summarizer model's own window in tokens (``None``: unbounded)
    context_length: int | None = None
    #: True only for a summarizer that runs in this process and sends its input nowhere
    #: (the offline ``deterministic`` one): the host then hands it the input unredacted,
    #: since nothing leaves. Every other summarizer sees redacted input. The default engine
    #: may ask such a summarizer once more, with a smaller ``max_output_tokens``, when its
    #: handoff takes more real tokens than the window leaves (not when the result reports
    #: a model's ``usage``)
    in_process: bool = False
    #: True when this summarizer asks to be used while ``compression.summarizer`` is empty
    #: (the ``openai`` one does once its endpoint and model are configured); the first such
    #: by name wins, else ``deterministic``
    preferred: bool = False

    @abstractmethod
    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Return the handoff for ``request.messages``."""
