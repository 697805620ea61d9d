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

    Only what the core resolves for every engine: the trigger, the window
    and the general compression knobs. A plugin's own keys (the tails' bands,
    the default engine's cooldown and breaker) live in its own
    :class:`~hermes_hookspecs.settings.SettingsSection`, read with
    ``settings.section(Model)`` when it registers its parts.
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

    session_id: str
    messages: list[StoredMessage]
    model: str = ""
    settings: CompressionSettings
    insights: list[str] = Field(default_factory=list)
    focus: str | None = None
    manual: bool = False
    previous_summary: HandoffSummary | None = None
    compression_index: int = 1
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

    status: CompressionStatus
    engine: str
    messages: list[NewMessage] = Field(default_factory=list)
    summary: HandoffSummary | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    summarizer: str = ""
    fallback_used: bool = False
    reason: str = ""
    notes: list[str] = Field(default_factory=list)
    summary_usage: Usage | None = None


class SelectRequest(BaseModel):
    """Input of ``select_context``: the messages about to be sent once."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    messages: list[Message]
    model: str = ""
    settings: CompressionSettings


class EngineStatus(BaseModel):
    """What an engine reports about one session (``hermes-core`` shows it)."""

    model_config = ConfigDict(extra="forbid")

    engine: str
    threshold_tokens: int
    last_prompt_tokens: int = 0
    last_tokens_before: int = 0
    last_tokens_after: int = 0
    compressions: int = 0
    failures: int = 0
    cooldown_until: float | None = None
    circuit_open: bool = False
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

    messages: list[StoredMessage]
    token_counts: list[int]
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

    tail_start: int
    extra_sections: list[SummarySection] = Field(default_factory=list)
    digest_chunks: int | None = None
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

    session_id: str
    messages: list[Message]
    previous_summary: HandoffSummary | None = None
    insights: list[str] = Field(default_factory=list)
    focus: str | None = None
    model: str = ""
    max_output_tokens: int = 4000
    prefix_messages: list[Message] | None = None
    #: tool schemas sent with ``prefix_messages`` (part of the cached prefix)
    prefix_tools: list[dict[str, Any]] | None = None
    recovery_ids: list[int | None] = Field(default_factory=list)
    #: facts of these messages, extracted by the engine from their original rows (keep them
    #: verbatim); None when the caller extracted none (a summarizer may derive its own)
    facts: list[HandoffFact] | None = None


class SummaryResult(BaseModel):
    """A summarizer's answer."""

    model_config = ConfigDict(extra="forbid")

    summary: HandoffSummary
    summarizer: str
    usage: Usage | None = None
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
    #: since nothing leaves. Every other summarizer sees redacted input.
    in_process: bool = False
    #: True when this summarizer asks to be used while ``compression.summarizer`` is empty
    #: (the ``openai`` one does once its endpoint and model are configured); the first such
    #: by name wins, else ``deterministic``
    preferred: bool = False

    @abstractmethod
    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Return the handoff for ``request.messages``."""
