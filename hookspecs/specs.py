"""The hook specifications: the whole contract between hermes-core and its plugins.

Plugins implement any subset of these with ``@hookimpl`` and declare only the
arguments they use (pluggy passes arguments by name). Hooks evolve only by
gaining arguments. This module is the API reference; ``docs/hooks.md`` lists
every hook with its exact signature (a test keeps the two in step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .compaction import CompactionBackend
from .compression import (
    CompressionRequest,
    CompressionResult,
    ContextEngine,
    SelectRequest,
    Summarizer,
    TailStrategy,
)
from .importers import Importer
from .markers import hookspec
from .memory import MemoryProvider
from .messages import Message, Usage
from .prompt import PromptBlock, PromptContext
from .records import SessionRecord
from .redaction import RedactionRule
from .settings import Settings, SettingsSection
from .store import SessionStore
from .tokens import TokenCounter
from .tools import AgentTool

StoreFactory = Callable[[Settings], SessionStore]

# ---------------------------------------------------------------------------
# registration: contributions of swappable parts, by name
# ---------------------------------------------------------------------------


@hookspec
def register_context_engines(register: Callable[[ContextEngine], None], settings: Settings) -> None:
    """Contribute context engines.

    :param register: call ``register(engine)`` once per engine; the engine's
        ``name`` is what ``compression.engine`` selects. A name already
        registered by another plugin is an error naming both plugins.
    :param settings: the validated core :class:`~hermes_hookspecs.settings.Settings`
        (every ``register_*`` hook receives it; declare it only if needed); a
        plugin reads its own section with ``settings.section(Model)``.
    :return: nothing; all implementations are called.
    """


@hookspec
def register_tail_strategies(register: Callable[[TailStrategy], None], settings: Settings) -> None:
    """Contribute tail strategies, selected by ``compression.tail``.

    :param register: call ``register(strategy)`` once per strategy.
    """


@hookspec
def register_summarizers(register: Callable[[Summarizer], None], settings: Settings) -> None:
    """Contribute summarizers, selected by ``compression.summarizer``.

    :param register: call ``register(summarizer)``; build it from the
        plugin's own section (``settings.section(Model)``, see
        :func:`register_settings`).
    """


@hookspec
def register_memory_providers(
    register: Callable[[MemoryProvider], None], settings: Settings
) -> None:
    """Contribute memory providers, selected by ``memory.provider``.

    :param register: call ``register(provider)`` once per provider.
    """


@hookspec
def register_session_stores(
    register: Callable[[str, StoreFactory], None], settings: Settings
) -> None:
    """Contribute session-store backends, selected by ``session.store``.

    :param register: call ``register(name, factory)``; the host calls
        ``factory(settings)`` with the validated
        :class:`~hermes_hookspecs.settings.Settings` when the store is first needed,
        so nothing is opened at load time.
    """


@hookspec
def register_compaction_backends(
    register: Callable[[CompactionBackend], None], settings: Settings
) -> None:
    """Contribute provider-side compaction backends, selected by ``compaction.backend``.

    :param register: call ``register(backend)`` once per backend.
    """


@hookspec
def register_token_counters(register: Callable[[TokenCounter], None], settings: Settings) -> None:
    """Contribute token counters, selected by ``tokens.counter``.

    :param register: call ``register(counter)``; a counter whose ``exact`` is
        False is an estimator and its counts are flagged as estimates.
    """


@hookspec
def register_importers(register: Callable[[Importer], None], settings: Settings) -> None:
    """Contribute transcript importers (one per format).

    :param register: call ``register(importer)``; ``importer.name`` is the
        format name accepted by ``hermes-core replay --format``.
    """


@hookspec
def register_tools(register: Callable[[AgentTool], None], settings: Settings) -> None:
    """Contribute tools the framework executes itself (see :mod:`hermes_hookspecs.tools`).

    Every registered tool's schema is frozen with each new session's prompt,
    and :meth:`hermes_core.runtime.Turn.run_framework_tools` answers its
    calls. Block the plugin to withdraw its tools.

    :param register: call ``register(tool)`` once per tool; ``tool.name`` is
        the function name and must be unique (a name registered twice is an
        error naming both plugins).
    """


# ---------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------


@hookspec
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare the plugin's own settings: one pydantic model per configuration table.

    Called once when the host is built, before any other ``register_*``
    hook. The host validates the configured keys of every declared table
    (an unknown key or a bad value is a
    :class:`~hermes_hookspecs.errors.ConfigError` naming the key, the value
    and the plugin), shows them in ``hermes-core config show`` and documents
    them in ``docs/configuration.md``. Read the validated values with
    ``settings.section(Model)`` in the other hooks.

    :param register: call ``register(Model)`` with a subclass of
        :class:`~hermes_hookspecs.settings.SettingsSection`; its
        ``config_section`` names the table (``"summarizer.openai"``, or a
        core section such as ``"compression"`` to add keys there). A key
        declared twice in one table (by the core or another plugin) is an
        error naming both.
    :return: nothing; all implementations are called.
    """


@hookspec(historic=True)
def configure(settings: Settings) -> None:
    """Receive the validated settings once, after plugins are loaded.

    A historic hook: the host calls it with ``call_historic`` when it is
    built, and a plugin registered on the manager later is configured at
    registration with the same settings (once per host built on the manager,
    in order). A historic hook takes no ``wrapper`` implementations.

    :param settings: the :class:`~hermes_hookspecs.settings.Settings` in force.
        Plugins read their own section with ``settings.section(Model)``
        (see :func:`register_settings`).
    :return: nothing; all implementations are called.
    """


# ---------------------------------------------------------------------------
# session lifecycle
# ---------------------------------------------------------------------------


@hookspec
def on_session_start(session: SessionRecord, resumed: bool) -> None:
    """A session was created (``resumed=False``) or reopened in this process.

    :param session: the stored session record.
    :param resumed: True when an existing session was resumed.
    """


@hookspec
def on_session_end(session: SessionRecord, reason: str) -> None:
    """A session ended.

    :param reason: ``"user"``, ``"compression"`` (rotation), ``"error"``, ...
    """


@hookspec
def on_session_switch(old_session_id: str, new_session_id: str, reason: str) -> None:
    """The active session changed or was rewritten.

    :param reason: ``"compression"`` (after every compaction, in place or
        rotated; for in-place compaction both ids are equal), ``"new"``,
        ``"resume"`` or ``"branch"``.
    """


# ---------------------------------------------------------------------------
# per turn
# ---------------------------------------------------------------------------


@hookspec
def pre_llm_call(
    session: SessionRecord, messages: list[Message], user_message: Message
) -> str | None:
    """Contribute per-turn context for the request about to be prepared.

    The returned text goes ONLY into the API content of the current user
    message (stored as that message's ``api_content`` sidecar so later
    requests resend the same bytes), never into the system prompt.

    :param messages: the active view (read-only).
    :param user_message: the new user message.
    :return: text to inject, or None. All results are joined in hook order.
    """


@hookspec
def post_llm_call(session: SessionRecord, response: Message, usage: Usage | None) -> None:
    """A model response was recorded for the current turn.

    :param response: the assistant message.
    :param usage: provider-reported usage when given.
    """


@hookspec
def on_turn_committed(session: SessionRecord, turn_id: str, messages: list[Message]) -> None:
    """A turn's messages were committed atomically under its lease.

    :param messages: the turn's messages, in order.
    """


@hookspec
def annotate_message(message: Message, settings: Settings) -> dict[str, Any] | None:
    """Derive facts from a message once, when the turn runtime records it.

    The facts are stored with the row (:attr:`NewMessage.annotations`) and
    come back on every :class:`StoredMessage`, so work that would otherwise
    repeat on every compression (the lean tail's identifier index, for
    instance) is done once per message, off the compression path. They are
    never sent to a model. Readers must treat a missing or unknown-version
    entry as "not computed" and derive the fact themselves: rows written by
    other writers (importers, older versions) carry none.

    Called for every message a turn records, so keep it fast (it runs on
    the turn's thread) and deterministic in ``message``.

    :param message: the message as it will be stored.
    :param settings: the :class:`~hermes_hookspecs.settings.Settings` in force.
    :return: ``{key: JSON value}`` (or None); use a key named after your
        plugin. All results are merged; a key returned by two plugins is an
        error naming both.
    """


@hookspec(firstresult=True)
def detect_harness(message: Message) -> str | None:
    """Tell whether ``message`` is text an agent harness injected.

    Called when the turn runtime records a message whose ``harness`` field is
    not set (importers set it themselves from the transcript's structure).
    A harness wraps what the person typed and what tools returned in text of
    its own (reminders, caveats, command wrappers, interrupt markers,
    environment notices); the compressor must not quote it as the user's
    words. Keep it fast: it runs on the turn's thread for every message.

    :param message: the message as it will be stored.
    :return: the construct's name, ``"<harness>.<kind>"`` (for instance
        ``"claude_code.system_reminder"``), or None for ordinary text.
        First non-None result wins.
    """


# ---------------------------------------------------------------------------
# prompt
# ---------------------------------------------------------------------------


@hookspec
def prompt_blocks(context: PromptContext, settings: Settings) -> list[PromptBlock] | None:
    """Contribute blocks to the stable, context or volatile layer.

    Called only when a session's prompt is built or rebuilt (new session,
    compaction boundary), never per turn. Blocks are sorted by layer, then
    ``(order, key)``; a duplicate key is an error naming both plugins.

    :param context: the session facts the prompt may use.
    :param settings: the :class:`~hermes_hookspecs.settings.Settings` in force.
    :return: a list of blocks (or None). All results are combined.
    """


@hookspec
def tool_schemas(context: PromptContext, settings: Settings) -> list[dict[str, Any]] | None:
    """Contribute OpenAI function-tool schemas, frozen with the prompt.

    Tools are sorted by function name and serialised canonically, so their
    bytes are stable for the session.

    :return: a list of ``{"type": "function", "function": {...}}`` dicts.
    """


# ---------------------------------------------------------------------------
# compression
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def select_context(request: SelectRequest, engine: ContextEngine | None) -> list[Message] | None:
    """Replace the messages of ONE request (nothing stored changes).

    The host that prepares the request calls this hook on its own plugin
    manager with the context engine IT selected (``compression.engine``), so
    several hosts may share one manager. The core answers last
    (``trylast``) with ``engine.select_context(request)``; replace the
    behaviour by registering an engine (``register_context_engines``) and
    selecting it. Implement this hook to observe or wrap the answer
    (``wrapper=True``), or to answer first for every engine.

    :param request: the messages about to be sent once.
    :param engine: the engine the calling host selected, bound to that
        host's services (None when no engine is registered).
    :return: the messages to send, or None to leave them as they are.
        First non-None result wins.
    """


@hookspec(firstresult=True)
def compress(request: CompressionRequest, engine: ContextEngine | None) -> CompressionResult | None:
    """Rewrite the session's active context.

    The host that compresses calls this hook on its own plugin manager with
    the context engine IT selected (``compression.engine``), so several
    hosts may share one manager. The core answers last (``trylast``) with
    ``engine.compress(request)``: replacing compression means registering
    an engine (``register_context_engines``) and selecting it by name.
    Implement this hook to observe or wrap compression (``wrapper=True``
    sees the engine's result), or to answer first for every engine.

    :param request: the session's active view and the resolved settings.
    :param engine: the engine the calling host selected, bound to that
        host's services (None when no engine of that name is registered:
        an implementation answering first still compresses, else the host
        reports the unknown name).
    :return: the engine's result. First non-None result wins.
    """


@hookspec
def on_pre_compress(session_id: str, messages: list[Message]) -> list[str] | None:
    """Return insights the summary must keep, before compaction runs.

    :param messages: the active view about to be compacted.
    :return: insight strings (or None). All results are combined, in order.
    """


@hookspec
def on_compressed(session_id: str, result: CompressionResult) -> None:
    """A compression was committed (after ``on_session_switch``).

    :param result: the engine's result, with tokens before and after.
    """


# ---------------------------------------------------------------------------
# redaction
# ---------------------------------------------------------------------------


@hookspec
def redaction_rules() -> list[RedactionRule] | None:
    """Contribute rules applied to every text that leaves for an auxiliary service.

    The rules scrub what memory providers and summarizers receive, and the
    records of the hermes-core loggers. The main model's requests are not
    redacted. A pattern is run over whole texts of any size, so it must take
    time linear in the text: start matches only where a token can start (a
    look-behind for the token's own characters), and use bounded or possessive
    quantifiers.

    :return: rules (or None). All results are combined; rules apply in
        ``name`` order so the outcome does not depend on plugin load order.
    """


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------


@hookspec
def register_commands(cli: Any) -> None:
    """Add commands to the ``hermes-core`` command line.

    Called once when the command line starts, with the plugins that the
    configuration selects (``--config``, ``HERMES_CORE_CONFIG``,
    ``./hermes.toml`` and the environment; block and load lists apply).

    :param cli: the top-level ``click.Group``; add commands with
        ``@cli.command()`` or groups with ``@cli.group()``. Such commands
        accept ``--traceback`` like the built-in ones, and a
        :class:`~hermes_hookspecs.errors.HermesError` they raise becomes one
        ``Error:`` line and exit code 1. Pick names that do not clash with
        the built-in commands (``plugins``, ``config``, ``sessions``,
        ``compress``, ``replay``, ``new``, ``mcp``): a plugin command that would
        replace one is dropped with a warning naming the plugin.
    :return: nothing; all implementations are called. An implementation that
        raises is reported on stderr and its commands are missing (strict
        mode: an error).
    """
