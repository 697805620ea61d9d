"""Settings: pydantic models for every option, loaded from TOML with environment overrides.

Sources, later wins:

1. the defaults below (``docs/configuration.md`` is generated from them);
2. a TOML file: the path given by ``--config`` or ``HERMES_CORE_CONFIG``, else
   ``hermes.toml`` in the working directory when it exists;
3. environment variables ``HERMES_CORE__SECTION__KEY=value`` (double
   underscores separate the path; values are parsed as TOML scalars, falling
   back to plain strings), plus the plugin-manager variables
   ``HERMES_CORE_BLOCK_PLUGINS``, ``HERMES_CORE_LOAD_PLUGINS`` and
   ``HERMES_CORE_STRICT_PLUGINS``.

Unknown keys and bad values are :class:`~hermes_hookspecs.ConfigError` naming
the key, the value and what was expected.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hermes_hookspecs import CompressionSettings, ConfigError

ENV_PREFIX = "HERMES_CORE__"
APP_NAME = "hermes-core"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class PluginSettings(_Section):
    """Which plugins load."""

    block: list[str] = Field(
        default_factory=list, description="Plugin names never loaded (defaults included)."
    )
    load: list[str] | None = Field(
        default=None, description="Allowlist: when set, only these plugins load."
    )
    strict: bool = Field(default=False, description="Re-raise when a plugin fails to import.")
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
    """The session store and turn leases."""

    store: str = Field(default="sqlite", description="Registered session store to use.")
    path: str = Field(
        default="", description="SQLite file; empty: sessions.db under the user data dir."
    )
    postgres_dsn: str = Field(
        default="", description="PostgreSQL DSN (or HERMES_CORE_POSTGRES_DSN)."
    )
    lease_ttl: float = Field(default=60.0, gt=0, description="Turn-lease time to live, seconds.")
    lease_wait: float = Field(
        default=30.0, ge=0, description="How long a turn waits for the lease, seconds."
    )
    fts_index_cap: int = Field(
        default=32_768, gt=0, description="Characters of one message indexed for search."
    )

    def sqlite_path(self) -> Path:
        """The SQLite file in force (the user data dir when ``path`` is empty)."""
        if self.path:
            return Path(self.path).expanduser()
        return Path(platformdirs.user_data_dir(APP_NAME)) / "sessions.db"


class SummarizerOpenAISettings(_Section):
    """The ``openai`` summarizer: any OpenAI-compatible chat-completions endpoint."""

    base_url: str = Field(default="", description="Endpoint base URL, e.g. http://host/v1.")
    model: str = Field(default="", description="Auxiliary model name.")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Env var holding the key.")
    timeout: float = Field(default=60.0, gt=0, description="Request timeout, seconds.")
    context_length: int = Field(default=128_000, gt=0, description="Auxiliary model's window.")
    max_output_tokens: int = Field(default=4_000, gt=0, description="Summary length cap.")
    fallback_to_main: bool = Field(
        default=True, description="Retry once on the main model's endpoint when unavailable."
    )


class SummarizerSettings(_Section):
    openai: SummarizerOpenAISettings = Field(default_factory=SummarizerOpenAISettings)


class CompressionConfig(_Section):
    """When and how the context is compressed."""

    engine: str = Field(default="compressor", description="Registered context engine.")
    tail: str = Field(default="lean", description="Tail strategy: lean or legacy.")
    summarizer: str = Field(
        default="", description="Summarizer; empty: openai if configured, else deterministic."
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
    target_ratio: float = Field(default=0.20, gt=0, lt=1, description="Legacy tail size ratio.")
    tail_min_messages: int = Field(default=6, ge=1, description="Legacy tail minimum messages.")
    protect_first_n: int = Field(default=3, ge=0, description="Head messages protected at first.")
    prune_min_chars: int = Field(default=400, ge=0, description="Tool output pruned above this.")
    max_tool_args_chars: int = Field(default=2_000, ge=100, description="Tool args cut above this.")
    summary_input_tokens: int = Field(default=60_000, gt=0, description="Summarizer input bound.")
    summary_prefix_reuse: bool = Field(default=False, description="Reuse the cached prefix.")
    abort_on_summary_failure: bool = Field(
        default=False, description="Keep the session untouched on any summary failure."
    )
    in_place: bool = Field(default=True, description="Compact in place (False: rotate).")
    lean_tail_min_tokens: int = Field(default=10_000, gt=0, description="Lean tail band low.")
    lean_tail_max_tokens: int = Field(default=25_000, gt=0, description="Lean tail band high.")
    identifier_budget_tokens: int = Field(default=2_000, ge=0, description="Identifier index.")
    user_quote_budget_tokens: int = Field(
        default=0, ge=0, description="Lean-tail user quotes (0: the handoff quotes requests)."
    )
    cooldown_seconds: float = Field(default=60.0, ge=0, description="First failure cooldown.")
    max_cooldown_seconds: float = Field(default=3_600.0, ge=0, description="Cooldown cap.")
    breaker_after: int = Field(default=3, ge=1, description="Ineffective runs before the breaker.")
    min_savings_ratio: float = Field(default=0.10, ge=0, lt=1, description="Effective savings.")
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
    """Memory providers."""

    provider: str = Field(default="", description="External provider beside builtin; empty: none.")
    home: str = Field(default="", description="Folder of MEMORY.md/USER.md; empty: user data dir.")
    memory_char_limit: int = Field(default=8_000, gt=0, description="MEMORY.md cap, characters.")
    user_char_limit: int = Field(default=4_000, gt=0, description="USER.md cap, characters.")
    prefetch_timeout: float = Field(default=3.0, gt=0, description="Prefetch cut-off, seconds.")
    call_timeout: float = Field(default=10.0, gt=0, description="Other provider calls, seconds.")

    def home_path(self) -> Path:
        if self.home:
            return Path(self.home).expanduser()
        return Path(platformdirs.user_data_dir(APP_NAME)) / "memory"


class PromptSettings(_Section):
    """The layered system prompt."""

    identity: str = Field(
        default="You are a capable software agent working for the user.",
        description="Stable layer: who the agent is.",
    )
    tool_guidance: str = Field(default="", description="Stable layer: how to use the tools.")
    platform: str = Field(default="", description="Stable layer: platform hint (cli, chat...).")
    rule_files: list[str] = Field(
        default_factory=lambda: [".hermes.md", "AGENTS.md", "CLAUDE.md", ".cursorrules"],
        description="Project rule files; the first found from cwd upwards is used.",
    )
    rule_file_max_chars: int = Field(default=20_000, gt=0, description="Rule file size cap.")


class TokenSettings(_Section):
    counter: str = Field(default="tiktoken", description="Registered token counter.")


class CompactionSettings(_Section):
    """Provider-side compaction backends."""

    backend: str = Field(default="", description="responses, codex, or empty for local only.")
    responses: dict[str, Any] = Field(default_factory=dict, description="responses settings.")
    codex: dict[str, Any] = Field(default_factory=dict, description="codex settings.")


class Settings(_Section):
    """Every hermes-core setting."""

    plugins: PluginSettings = Field(default_factory=PluginSettings)
    model: ModelSettings = Field(default_factory=ModelSettings)
    session: SessionSettings = Field(default_factory=SessionSettings)
    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    summarizer: SummarizerSettings = Field(default_factory=SummarizerSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    tokens: TokenSettings = Field(default_factory=TokenSettings)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    extensions: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Third-party plugin sections, by plugin name."
    )

    def plugin_options(self, name: str) -> dict[str, Any]:
        """A third-party plugin's own ``[extensions.NAME]`` table."""
        return dict(self.extensions.get(name, {}))

    def summarizer_name(self) -> str:
        """The summarizer in force: explicit, else openai when configured, else deterministic."""
        if self.compression.summarizer:
            return self.compression.summarizer
        cfg = self.summarizer.openai
        return "openai" if cfg.base_url and cfg.model else "deterministic"

    def compression_settings(
        self, threshold_tokens: int, context_length: int | None = None
    ) -> CompressionSettings:
        """The resolved settings handed to engines."""
        c = self.compression
        return CompressionSettings(
            threshold_tokens=threshold_tokens,
            context_length=context_length or self.model.context_length,
            protect_first_n=c.protect_first_n,
            target_ratio=c.target_ratio,
            tail_min_messages=c.tail_min_messages,
            prune_min_chars=c.prune_min_chars,
            max_tool_args_chars=c.max_tool_args_chars,
            summary_input_tokens=c.summary_input_tokens,
            summary_prefix_reuse=c.summary_prefix_reuse,
            abort_on_summary_failure=c.abort_on_summary_failure,
            summarizer=self.summarizer_name(),
            tail=c.tail,
            lean_tail_min_tokens=c.lean_tail_min_tokens,
            lean_tail_max_tokens=c.lean_tail_max_tokens,
            identifier_budget_tokens=c.identifier_budget_tokens,
            user_quote_budget_tokens=c.user_quote_budget_tokens,
            cooldown_seconds=c.cooldown_seconds,
            max_cooldown_seconds=c.max_cooldown_seconds,
            breaker_after=c.breaker_after,
            min_savings_ratio=c.min_savings_ratio,
        )


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


def _parse_env_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _set_path(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for key in path[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"cannot set {'.'.join(path)}: {key!r} is not a table")
        node = child
    node[path[-1]] = value


def _csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """Settings taken from environment variables (see the module docstring)."""
    data: dict[str, Any] = {}
    for name, raw in environ.items():
        if name.startswith(ENV_PREFIX):
            path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__") if part]
            if path:
                _set_path(data, path, _parse_env_value(raw))
    if environ.get("HERMES_CORE_BLOCK_PLUGINS"):
        _set_path(data, ["plugins", "block"], _csv(environ["HERMES_CORE_BLOCK_PLUGINS"]))
    if environ.get("HERMES_CORE_LOAD_PLUGINS"):
        _set_path(data, ["plugins", "load"], _csv(environ["HERMES_CORE_LOAD_PLUGINS"]))
    if environ.get("HERMES_CORE_STRICT_PLUGINS"):
        _set_path(
            data, ["plugins", "strict"], environ["HERMES_CORE_STRICT_PLUGINS"] not in ("0", "")
        )
    if environ.get("HERMES_CORE_TRACE_PLUGINS"):
        _set_path(data, ["plugins", "trace"], environ["HERMES_CORE_TRACE_PLUGINS"] not in ("0", ""))
    if environ.get("HERMES_CORE_POSTGRES_DSN"):
        _set_path(data, ["session", "postgres_dsn"], environ["HERMES_CORE_POSTGRES_DSN"])
    return data


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _describe(error: ValidationError, source: str) -> str:
    lines = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"])
        if item["type"] == "extra_forbidden":
            lines.append(f"unknown key {key!r} (value {item['input']!r})")
        else:
            lines.append(f"{key} = {item['input']!r}: {item['msg']}")
    return f"invalid configuration in {source}: " + "; ".join(lines)


def config_path(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> Path | None:
    """The TOML file in force, or None."""
    if explicit:
        return Path(explicit)
    if environ.get("HERMES_CORE_CONFIG"):
        return Path(environ["HERMES_CORE_CONFIG"])
    local = Path.cwd() / "hermes.toml"
    return local if local.is_file() else None


def load_settings(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Load settings from TOML, environment and explicit overrides (later wins)."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    source = "defaults"
    file = config_path(path, env)
    if file is not None:
        if not file.is_file():
            raise ConfigError(f"configuration file not found: {file}")
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"configuration file {file} is not valid TOML: {exc}") from None
        source = str(file)
    env_data = env_overrides(env)
    if env_data:
        data = _merge(data, env_data)
        source += " + environment"
    if overrides:
        data = _merge(data, overrides)
        source += " + overrides"
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None


def settings_from(data: Mapping[str, Any]) -> Settings:
    """Validate a settings mapping (tests and embedding hosts)."""
    try:
        return Settings.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(_describe(exc, "settings")) from None
