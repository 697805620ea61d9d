"""What the runtime needs from its host, as one small typed protocol.

:class:`~hermes_core.session.Session`, :class:`~hermes_core.turn.Turn` and
the compression coordinator reach the store, the engine, token counting, the
framework tools, the hooks and the settings only through
:class:`RuntimeServices`. :class:`~hermes_core.host.Hermes` provides it (and
constructs the runtime objects), so the runtime never imports the host, and a
test or an embedding can hand the runtime any object with these members.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pluggy

    from hermes_hookspecs import (
        CompactionBackend,
        CompressionRequest,
        CompressionResult,
        CompressionSettings,
        ContextEngine,
        Message,
        SessionStore,
    )

    from .config import Settings
    from .events import RuntimeEvents
    from .thresholds import ThresholdReport
    from .tokens import Tokens
    from .tools import Toolbox


class RuntimeServices(Protocol):
    """The services of one host, as the runtime uses them."""

    #: the validated settings in force
    settings: Settings
    #: the host's plugin manager (the prompt builder and the ``select_context`` hook)
    pm: pluggy.PluginManager
    #: lifecycle events, delivered to the hooks and the memory manager in one call
    events: RuntimeEvents

    def store(self) -> SessionStore:
        """The session store (opened on first use)."""
        ...

    def has_engine(self) -> bool:
        """Whether any context engine is registered."""
        ...

    def engine(self) -> ContextEngine:
        """The selected context engine."""
        ...

    def call_compress(self, request: CompressionRequest) -> CompressionResult | None:
        """The ``compress`` hook on this host's plugin manager, with the engine it selected."""
        ...

    def compression_settings(
        self, threshold_tokens: int, context_length: int | None = None
    ) -> CompressionSettings:
        """The resolved core ``[compression]`` settings handed to engines."""
        ...

    def tokens(self, model: str | None = None) -> Tokens:
        """Token counting for ``model``."""
        ...

    def toolbox(self) -> Toolbox:
        """The tools the framework answers itself."""
        ...

    def threshold(
        self, model: str | None = None, context_length: int | None = None
    ) -> ThresholdReport:
        """The effective compression trigger for ``model``."""
        ...

    def compaction_backend(self, name: str | None = None) -> CompactionBackend | None:
        """The configured provider-side compaction backend, or None."""
        ...

    def harness(self, message: Message) -> Message:
        """``message`` with its ``harness`` field set by ``detect_harness``."""
        ...

    def annotate(self, message: Message) -> dict[str, Any]:
        """The merged ``annotate_message`` results for ``message``."""
        ...
