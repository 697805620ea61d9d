"""Settings as hooks see them: the core's sections, and the base of a plugin's own section.

:class:`Settings` holds only what the core itself uses; every hook that takes
``settings`` receives it (read it, do not change it). A plugin declares its
own settings as a :class:`SettingsSection` subclass through the
``register_settings`` hook, and reads them, validated, with
:meth:`Settings.section`::

    class AcmeSettings(SettingsSection):
        config_section: ClassVar[str] = "acme"      # the [acme] table
        url: str = Field(default="", description="Where acme lives.")

    @hookimpl
    def register_settings(register):
        register(AcmeSettings)

    @hookimpl
    def register_context_engines(register, settings):
        register(AcmeEngine(settings.section(AcmeSettings)))

The host loads the configuration (TOML file and ``HERMES_CORE__*``
environment variables, see ``docs/configuration.md``) in two steps: the core's
own keys when the settings are read, every plugin's keys once the plugins are
loaded. An unknown key or a bad value in a plugin's section is a
:class:`~hermes_hookspecs.errors.ConfigError` naming the key, the value and
the plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, TypeVar

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator
from pydantic import ValidationError as PydanticValidationError

from .errors import ConfigError

APP_NAME = "hermes-core"

_SectionT = TypeVar("_SectionT", bound="SettingsSection")


def _problem(table: str, error: Any) -> str:
    """``key = value: why``; only numbers and booleans are echoed (text may be a secret)."""
    key = f"{table}." + ".".join(str(part) for part in error["loc"])
    value = error.get("input")
    shown = repr(value) if isinstance(value, int | float | bool) else "<not shown>"
    return f"{key} = {shown}: {error['msg']}"


class SettingsSection(BaseModel):
    """A plugin's settings model, declared through ``register_settings``.

    ``config_section`` is the dotted name of the table its keys live in:
    a table of its own (``"summarizer.openai"``, ``"acme"``), or one of the
    core's sections (``"session"``, ``"compression"``, ``"memory"``,
    ``"prompt"``) to add keys beside the core's there (as tox plugins add
    keys to an environment's section). A plugin that read the legacy
    ``[extensions.NAME]`` table with ``plugin_options`` declares
    ``"extensions.NAME"`` to keep its users' files valid. A key belongs to one owner: a key
    the core or another plugin declares in the same table is an error naming
    both. Give every field a default and a ``description``: the
    configuration reference (``docs/configuration.md``) is generated from them.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    config_section: ClassVar[str] = ""
    #: key → environment variable that sets it (over the file) whenever it is set: for
    #: values set once for a whole machine or CI job, such as ``HERMES_CORE_POSTGRES_DSN``.
    #: Read only when this section's plugin is loaded, so the variable is harmless elsewhere.
    environment: ClassVar[dict[str, str]] = {}

    def resolved_values(self) -> dict[str, str]:
        """Values worked out at run time, shown by ``hermes-core config show`` (key → value).

        For instance the SQLite store resolves an empty ``session.path`` to
        the file it will open. The default resolves nothing.
        """
        return {}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class PluginSettings(_Section):
    """Which plugins load."""

    block: list[str] = Field(
        default_factory=list,
        description="Plugin (entry-point) or distribution names never loaded (defaults "
        "included); a name matching none is reported.",
    )
    load: list[str] | None = Field(
        default=None,
        description="Allowlist of plugin or distribution names: when set, only these load.",
    )
    strict: bool = Field(
        default=False,
        description="Raise when a plugin fails to load (import, contract range) or a "
        "block/load name matches no plugin.",
    )
    trace: bool = Field(default=False, description="Print every hook call to stderr.")
    autoload: bool = Field(default=True, description="Load plugins from entry points.")


class ModelSettings(_Section):
    """The main model the integrator talks to."""

    name: str = Field(
        default="gpt-4o-mini", description="Model name (picks tokenizer, thresholds)."
    )
    context_length: int = Field(default=128_000, gt=0, description="Context window in tokens.")
    max_output_tokens: int = Field(
        default=4_096, ge=0, description="Tokens reserved for the response; off the window."
    )
    base_url: str = Field(
        default="", description="OpenAI-compatible endpoint of the main model (summary fallback)."
    )
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Env var holding the API key.")


class SessionSettings(_Section):
    """The session store and turn leases (the stores add their own keys here)."""

    store: str = Field(default="sqlite", description="Registered session store to use.")
    lease_ttl: float = Field(default=60.0, gt=0, description="Turn-lease time to live, seconds.")
    lease_wait: float = Field(
        default=30.0, ge=0, description="How long a turn waits for the lease, seconds."
    )
    fts_index_cap: int = Field(
        default=32_768,
        gt=0,
        description="Characters of one message indexed for search (every store).",
    )


class CompressionConfig(_Section):
    """When and how the context is compressed (the engine and tails add their own keys here)."""

    engine: str = Field(default="compressor", description="Registered context engine.")
    tail: str = Field(default="lean", description="Tail strategy: lean or legacy.")
    summarizer: str = Field(
        default="",
        description="Summarizer; empty: one that asks to be preferred once configured "
        "(openai, when its endpoint and model are set), else deterministic.",
    )
    threshold: float = Field(default=0.50, gt=0, le=1, description="Fraction of the window.")
    small_window_floor: float = Field(
        default=0.75, gt=0, le=1, description="Raise-only floor for windows under 512K tokens."
    )
    model_thresholds: dict[str, float] = Field(
        default_factory=dict, description="Model-name substring → threshold; longest match wins."
    )
    threshold_tokens: int | None = Field(
        default=None, gt=0, description="Absolute cap on the trigger, tokens."
    )
    protect_first_n: int = Field(default=3, ge=0, description="Head messages protected at first.")
    prune_min_chars: int = Field(default=400, ge=0, description="Tool output pruned above this.")
    max_tool_args_chars: int = Field(default=2_000, ge=100, description="Tool args cut above this.")
    summary_input_tokens: int = Field(default=60_000, gt=0, description="Summarizer input bound.")
    summary_prefix_reuse: bool = Field(default=False, description="Reuse the cached prefix.")
    abort_on_summary_failure: bool = Field(
        default=False, description="Keep the session untouched on any summary failure."
    )
    in_place: bool = Field(default=True, description="Compact in place (False: rotate).")
    hygiene_ratio: float = Field(default=0.85, gt=0, le=1, description="Session hygiene line.")
    hygiene_max_messages: int = Field(default=5_000, gt=0, description="Hygiene message cap.")

    @field_validator("model_thresholds")
    @classmethod
    def _thresholds_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        for key, ratio in value.items():
            if not 0 < ratio <= 1:
                raise ValueError(f"model_thresholds[{key!r}] = {ratio!r}; expected 0 < x <= 1")
        return value


class MemorySettings(_Section):
    """Memory providers (the builtin provider adds its own keys here)."""

    provider: str = Field(default="", description="External provider beside builtin; empty: none.")
    home: str = Field(default="", description="Folder of MEMORY.md/USER.md; empty: user data dir.")
    prefetch_timeout: float = Field(default=3.0, gt=0, description="Prefetch cut-off, seconds.")
    call_timeout: float = Field(default=10.0, gt=0, description="Other provider calls, seconds.")

    def home_path(self) -> Path:
        """The memory folder in force (the user data dir when ``home`` is empty)."""
        if self.home:
            return Path(self.home).expanduser()
        return Path(platformdirs.user_data_dir(APP_NAME)) / "memory"


class PromptSettings(_Section):
    """The layered system prompt (the default prompt blocks add their own keys here)."""

    platform: str = Field(default="", description="Stable layer: platform hint (cli, chat...).")


class TokenSettings(_Section):
    """Token counting."""

    counter: str = Field(default="tiktoken", description="Registered token counter.")


class CompactionSettings(_Section):
    """Provider-side compaction backends (each declares its own ``[compaction.NAME]`` table)."""

    backend: str = Field(default="", description="responses, codex, or empty for local only.")


class Settings(_Section):
    """Every setting the core uses; plugins' sections are read with :meth:`section`."""

    plugins: PluginSettings = Field(
        default_factory=PluginSettings, description="[plugins]: which plugins load."
    )
    model: ModelSettings = Field(
        default_factory=ModelSettings, description="[model]: the main model."
    )
    session: SessionSettings = Field(
        default_factory=SessionSettings, description="[session]: the store and turn leases."
    )
    compression: CompressionConfig = Field(
        default_factory=CompressionConfig, description="[compression]: when and how."
    )
    memory: MemorySettings = Field(
        default_factory=MemorySettings, description="[memory]: the memory providers."
    )
    prompt: PromptSettings = Field(
        default_factory=PromptSettings, description="[prompt]: the layered system prompt."
    )
    tokens: TokenSettings = Field(
        default_factory=TokenSettings, description="[tokens]: the token counter."
    )
    compaction: CompactionSettings = Field(
        default_factory=CompactionSettings, description="[compaction]: provider-side backends."
    )
    extensions: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Legacy: untyped third-party tables, by plugin name (declare a "
        "SettingsSection through register_settings instead).",
    )

    #: the configured keys no core field holds (plugins' keys), as a nested table
    _plugin_data: dict[str, Any] = PrivateAttr(default_factory=dict)
    #: validated plugin sections, by model
    _sections: dict[type[SettingsSection], SettingsSection] = PrivateAttr(default_factory=dict)
    #: which plugin declared each model (set by the host when it validates them)
    _owners: dict[type[SettingsSection], str] = PrivateAttr(default_factory=dict)
    #: where the configured values came from (a file, "+ environment"...), for messages
    _source: str = PrivateAttr(default="defaults")
    #: the environment the settings were loaded from (for :attr:`SettingsSection.environment`)
    _environ: dict[str, str] = PrivateAttr(default_factory=dict)

    def section(self, model: type[_SectionT]) -> _SectionT:
        """The plugin section ``model`` declares, validated (its defaults where unset).

        The host validates every declared section when it loads the plugins,
        so this returns what it validated then; for a model the host was
        not told about, the configured keys are validated now.

        :raises ConfigError: a value of the section is wrong.
        """
        found = self._sections.get(model)
        if found is None:
            values = self.section_values(model)
            try:
                found = model.model_validate(values)
            except PydanticValidationError as exc:
                raise ConfigError(
                    f"invalid configuration in [{model.config_section}] ({model.__name__}): "
                    + "; ".join(_problem(model.config_section, e) for e in exc.errors())
                ) from None
            self._sections[model] = found
        if not isinstance(found, model):  # pragma: no cover - the dict is keyed by model
            raise TypeError(model)
        return found

    def table(self, path: str) -> dict[str, Any]:
        """The configured keys at the dotted table ``path`` that no core field holds.

        A table under ``extensions`` (``"extensions.acme"``) is read from the
        legacy :attr:`extensions` tables, so a plugin that used
        :meth:`plugin_options` can declare a typed section in the same place.
        """
        node: Any = self._plugin_data
        if path.startswith("extensions."):
            node = {"extensions": self.extensions}
        for part in path.split(".") if path else []:
            node = node.get(part) if isinstance(node, dict) else None
        out = dict(node) if isinstance(node, dict) else {}
        return out

    def section_values(self, model: type[SettingsSection]) -> dict[str, Any]:
        """The configured values of ``model``'s keys, unvalidated: its table's keys, then
        the environment variables it names in :attr:`SettingsSection.environment`."""
        values = {
            key: value
            for key, value in self.table(model.config_section).items()
            if key in model.model_fields
        }
        for key, variable in model.environment.items():
            if self._environ.get(variable):
                values[key] = self._environ[variable]
        return values

    def sections(self) -> dict[type[SettingsSection], SettingsSection]:
        """The plugin sections validated so far, by model (``config show`` prints them)."""
        return dict(self._sections)

    def section_owner(self, model: type[SettingsSection]) -> str:
        """The plugin that declared ``model`` ("" when the host was not told)."""
        return self._owners.get(model, "")

    def plugin_options(self, name: str) -> dict[str, Any]:
        """Legacy: a third-party plugin's untyped ``[extensions.NAME]`` table.

        Kept readable for plugins written before ``register_settings``; a
        new plugin declares a :class:`SettingsSection` instead.
        """
        return dict(self.extensions.get(name, {}))
