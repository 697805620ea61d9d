"""The host: one object that owns the plugin manager, the settings and the parts they select.

``Hermes`` is what an integrator creates::

    from hermes_core import Hermes
    hermes = Hermes.from_config()          # hermes.toml + environment, entry points loaded
    session = hermes.new_session(cwd=".", caller_message="You review pull requests.")
    with session.turn() as turn:
        request = turn.prepare("Please review PR 42")
        ...                               # call your model with request.chat_body()
        turn.record_response(reply, usage)
        turn.commit()

Everything is created lazily on first use: nothing opens a database or loads
a tokenizer until it is needed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import Any

import pluggy

from hermes_hookspecs import (
    CompactionBackend,
    CompressionRequest,
    CompressionResult,
    CompressionSettings,
    ContextEngine,
    Importer,
    Message,
    PluginError,
    SelectRequest,
    SessionStore,
    SettingsSection,
    StoreError,
    Summarizer,
    TailStrategy,
    hookimpl,
)

from .config import Settings, compression_settings, load_settings
from .events import RuntimeEvents
from .integrations.mcp_settings import McpSettings
from .memory import MemoryManager, manager_from_registry
from .plugin_settings import bind_plugin_settings, declared_settings
from .plugins import call_each, get_plugin_manager
from .redaction import (
    RedactingSummarizer,
    Redactor,
    install_log_redaction,
    release_log_redaction,
)
from .registry import Registry
from .session import Session
from .thresholds import ThresholdReport, effective_threshold
from .tokens import Tokens
from .tools import Toolbox, result_ceiling

CORE_PLUGIN_NAME = "hermes_core.core"


class CorePlugin:
    """The core's own hook implementations: the engine the calling host selected answers
    last, and the settings of the core's own integrations (``[extensions.mcp]``).

    It keeps no host state: the host passes its engine with each call
    (:meth:`Hermes.call_compress`), so one instance serves every
    :class:`Hermes` built on a plugin manager.
    """

    @hookimpl
    def register_settings(self, register: Callable[[type[SettingsSection]], None]) -> None:
        register(McpSettings)

    @hookimpl(trylast=True)
    def compress(
        self, request: CompressionRequest, engine: ContextEngine | None
    ) -> CompressionResult | None:
        return engine.compress(request) if engine is not None else None

    @hookimpl(trylast=True)
    def select_context(
        self, request: SelectRequest, engine: ContextEngine | None
    ) -> list[Message] | None:
        return engine.select_context(request) if engine is not None else None


class EngineServices:
    """The :class:`~hermes_hookspecs.compression.EngineHost` the core hands to engines."""

    def __init__(self, hermes: Hermes) -> None:
        self.hermes = hermes

    def count_text(self, text: str) -> int:
        return self.hermes.tokens().count_text(text)

    def count_message(self, message: Message) -> int:
        return self.hermes.tokens().count_message(message)

    def summarizer(self, name: str) -> Summarizer:
        return self.hermes.summarizer(name)

    def tail_strategy(self, name: str) -> TailStrategy:
        return self.hermes.tail_strategy(name)


class Hermes:
    """The host object. Create one per process (or per test) and :meth:`close` it."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        pm: pluggy.PluginManager | None = None,
        plugins: Iterable[object] = (),
        load_entrypoints: bool | None = None,
        store: SessionStore | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.pm = pm or get_plugin_manager(
            self.settings, load_entrypoints=load_entrypoints, plugins=plugins
        )
        if self.pm.get_plugin(CORE_PLUGIN_NAME) is None:
            self.pm.register(CorePlugin(), name=CORE_PLUGIN_NAME)
        bind_plugin_settings(self.settings, declared_settings(self.pm))
        self.pm.hook.configure.call_historic(kwargs={"settings": self.settings})
        self._lock = threading.RLock()
        self._registry: Registry | None = None
        self._toolbox: Toolbox | None = None
        self._store = store
        self._owns_store = store is None
        self._engine: ContextEngine | None = None
        self._tokens: dict[str, Tokens] = {}
        self._memory: MemoryManager | None = None
        self._redactor: Redactor | None = None
        #: the runtime's lifecycle events, to the hooks and the memory manager in one call
        self.events = RuntimeEvents(
            self.pm.hook, self.memory, lambda: str(self.settings.memory.home_path())
        )
        install_log_redaction(self.redactor())

    @classmethod
    def from_config(
        cls,
        path: str | None = None,
        *,
        overrides: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Hermes:
        """Load settings (file, environment, overrides) and build the host."""
        return cls(load_settings(path, overrides=overrides), **kwargs)

    # -- registries ---------------------------------------------------------
    @property
    def registry(self) -> Registry:
        with self._lock:
            if self._registry is None:
                self._registry = Registry(self.pm, self.settings)
            return self._registry

    def store(self) -> SessionStore:
        """The session store chosen by ``session.store`` (opened on first use)."""
        with self._lock:
            if self._store is None:
                factory = self.registry.get("stores", self.settings.session.store)
                store = factory(self.settings)
                if not isinstance(store, SessionStore):
                    raise StoreError(
                        f"session store factory {self.settings.session.store!r} returned "
                        f"{type(store).__name__}, not a SessionStore"
                    )
                self._store = store
            return self._store

    def has_engine(self) -> bool:
        """Whether any context engine is registered (``register_context_engines``)."""
        return bool(self.registry.names("engines"))

    def engine(self) -> ContextEngine:
        """The context engine chosen by ``compression.engine``, bound to the core's services."""
        with self._lock:
            if self._engine is None:
                engine = self.registry.get("engines", self.settings.compression.engine)
                engine.bind(EngineServices(self))
                self._engine = engine
            return self._engine

    def selected_engine(self) -> ContextEngine | None:
        """:meth:`engine`, or None when no engine of the configured name is registered."""
        if self.settings.compression.engine not in self.registry.names("engines"):
            return None
        return self.engine()

    def call_compress(self, request: CompressionRequest) -> CompressionResult | None:
        """Run the ``compress`` hook on this host's manager with the engine it selected.

        A plugin answering first takes over; when nobody answers and the
        configured engine is not registered, the error lists the registered ones.
        """
        engine = self.selected_engine()
        result: CompressionResult | None = self.pm.hook.compress(request=request, engine=engine)
        if result is None and engine is None:
            self.engine()  # raises UnknownNameError naming the registered engines
        return result

    def redactor(self) -> Redactor:
        """The redaction rules of every plugin (``redaction_rules``), built once.

        Applied to everything that leaves for an auxiliary service (summarizers,
        memory providers) and to the hermes-core loggers' records; the main
        model's requests are not redacted (see docs/configuration.md).
        """
        with self._lock:
            if self._redactor is None:
                self._redactor = Redactor.from_hook(self.pm.hook)
            return self._redactor

    def summarizer(self, name: str | None = None) -> Summarizer:
        """The summarizer ``name`` (default: the configured one), wrapped to see redacted input.

        Every summarizer is handed out as a
        :class:`~hermes_core.redaction.RedactingSummarizer`: whichever plugin
        implements it, the messages, previous summary, insights and reused
        prefix it receives have passed through :meth:`redactor`. The one
        exception is a summarizer declaring ``in_process = True`` (it sends its
        input nowhere, so there is nothing to keep from leaving).
        """
        value: Summarizer = self.registry.get("summarizers", name or self.summarizer_name())
        if isinstance(value, RedactingSummarizer) or value.in_process:
            return value
        return RedactingSummarizer(value, self.redactor())

    def summarizer_name(self) -> str:
        """The summarizer in force: ``compression.summarizer`` when set, else the first
        registered summarizer (by name) that asks to be ``preferred`` (``openai`` once its
        endpoint and model are configured), else ``deterministic``."""
        if self.settings.compression.summarizer:
            return self.settings.compression.summarizer
        for name in self.registry.names("summarizers"):
            if self.registry.get("summarizers", name).preferred:
                return name
        return "deterministic"

    def compression_settings(
        self, threshold_tokens: int, context_length: int | None = None
    ) -> CompressionSettings:
        """The resolved core ``[compression]`` settings handed to engines."""
        return compression_settings(
            self.settings, threshold_tokens, context_length, self.summarizer_name()
        )

    def tail_strategy(self, name: str | None = None) -> TailStrategy:
        value: TailStrategy = self.registry.get("tails", name or self.settings.compression.tail)
        return value

    def compaction_backend(self, name: str | None = None) -> CompactionBackend | None:
        chosen = name if name is not None else self.settings.compaction.backend
        if not chosen:
            return None
        value: CompactionBackend = self.registry.get("compaction", chosen)
        return value

    def importers(self) -> list[Importer]:
        return [self.registry.get("importers", n) for n in self.registry.names("importers")]

    def annotate(self, message: Message) -> dict[str, Any]:
        """The merged ``annotate_message`` results for ``message`` (see the hookspec).

        :raises PluginError: a plugin raised, returned something other than a
            dict, or returned a key another plugin returned too.
        """
        merged: dict[str, Any] = {}
        owners: dict[str, str] = {}
        for owner, result in call_each(
            self.pm, "annotate_message", message=message, settings=self.settings
        ):
            if not isinstance(result, dict):
                raise PluginError(
                    f"plugin {owner!r} returned {type(result).__name__} from annotate_message; "
                    "expected a dict"
                )
            for key, value in result.items():
                if key in owners:
                    raise PluginError(
                        f"annotation key {key!r} is returned by both {owners[key]!r} and {owner!r}"
                    )
                owners[key] = owner
                merged[key] = value
        return merged

    def harness(self, message: Message) -> Message:
        """``message`` with its ``harness`` field set by ``detect_harness`` (when unset)."""
        if message.harness is not None or message.role == "assistant":
            return message
        found = self.pm.hook.detect_harness(message=message)
        if found is None:
            return message
        if not isinstance(found, str) or not found:
            raise PluginError(f"detect_harness returned {found!r}; expected a non-empty str")
        return message.model_copy(update={"harness": found})

    def toolbox(self) -> Toolbox:
        """The tools the framework answers: registered agent tools and memory tools."""
        with self._lock:
            if self._toolbox is None:
                memory = self.memory()
                names: set[str] = set()
                if memory is not None:
                    names = {
                        str(schema.get("function", {}).get("name", ""))
                        for schema in memory.tool_schemas()
                    }
                tools = [self.registry.get("tools", n) for n in self.registry.names("tools")]
                self._toolbox = Toolbox(
                    tools,
                    memory.handle_tool_call if memory is not None else None,
                    names - {""},
                    budget_tokens=result_ceiling(self.threshold().usable_window),
                )
            return self._toolbox

    def tokens(self, model: str | None = None) -> Tokens:
        """Token counting for ``model`` (default: ``model.name``)."""
        name = model or self.settings.model.name
        with self._lock:
            if name not in self._tokens:
                counter = None
                wanted = self.settings.tokens.counter
                if wanted in self.registry.names("tokens"):
                    counter = self.registry.get("tokens", wanted)
                self._tokens[name] = Tokens(counter, name)
            return self._tokens[name]

    def memory(self) -> MemoryManager | None:
        """The memory manager (builtin provider plus the selected external one)."""
        with self._lock:
            if self._memory is None:
                self._memory = manager_from_registry(self.registry, self.settings, self.redactor())
            return self._memory

    def threshold(
        self, model: str | None = None, context_length: int | None = None
    ) -> ThresholdReport:
        """The effective compression trigger (see :mod:`hermes_core.thresholds`)."""
        window: int | None = None
        output = 4_000
        with contextlib.suppress(Exception):
            summarizer = self.summarizer()
            window = summarizer.context_length
            output = int(getattr(summarizer, "max_output_tokens", output) or output)
        return effective_threshold(
            self.settings,
            model=model,
            context_length=context_length,
            summarizer_window=window,
            summarizer_output=output,
        )

    # -- sessions -----------------------------------------------------------
    def new_session(self, **kwargs: Any) -> Session:
        """Create a session and freeze its prompt (see :meth:`Session.create`)."""
        return Session.create(self, **kwargs)

    def open_session(self, session_id: str, **kwargs: Any) -> Session:
        """Resume a stored session with its frozen prompt, byte for byte."""
        return Session.resume(self, session_id, **kwargs)

    def close(self) -> None:
        """Shut down memory providers, compaction backends and the store (if we opened it)."""
        with self._lock:
            if self._memory is not None:
                self._memory.shutdown()
                self._memory = None
            self._toolbox = None
            if self._registry is not None:
                for name in self._registry.names("compaction"):
                    with contextlib.suppress(Exception):
                        self._registry.get("compaction", name).close()
            if self._store is not None and self._owns_store:
                self._store.close()
                self._store = None
            if self._redactor is not None:  # its rules leave the process's log filter
                release_log_redaction(self._redactor)

    def __enter__(self) -> Hermes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
