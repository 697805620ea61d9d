"""Settings: loading the core's settings from TOML with environment overrides.

The models live in the contract (:mod:`hermes_hookspecs.settings`, re-exported
here) and hold only the core's keys; each plugin declares its own section
through ``register_settings``. Sources, later wins:

1. the defaults (``docs/configuration.md`` is generated from the core's and
   every registered plugin's models);
2. a TOML file: the path given by ``--config`` or ``HERMES_CORE_CONFIG``, else
   ``hermes.toml`` in the working directory when it exists;
3. environment variables ``HERMES_CORE__SECTION__KEY=value`` (double
   underscores separate the path; values are parsed as TOML scalars, falling
   back to plain strings), plus the plugin-manager variables
   ``HERMES_CORE_BLOCK_PLUGINS``, ``HERMES_CORE_LOAD_PLUGINS`` and
   ``HERMES_CORE_STRICT_PLUGINS``; and the variables a plugin's section names in
   ``SettingsSection.environment`` (``HERMES_CORE_POSTGRES_DSN``).

Unknown keys and bad values are :class:`~hermes_hookspecs.ConfigError` naming
the key, the value and what was expected: the core's keys when the settings
are loaded, the plugins' keys when the host loads the plugins
(:mod:`hermes_core.plugin_settings`).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from hermes_hookspecs import CompressionSettings, ConfigError
from hermes_hookspecs.settings import (
    APP_NAME,
    CompactionSettings,
    CompressionConfig,
    MemorySettings,
    ModelSettings,
    PluginSettings,
    PromptSettings,
    SessionSettings,
    Settings,
    SettingsSection,
    TokenSettings,
)

from .redaction import live_redactors

__all__ = [
    "APP_NAME",
    "CompactionSettings",
    "CompressionConfig",
    "MemorySettings",
    "ModelSettings",
    "PluginSettings",
    "PromptSettings",
    "SessionSettings",
    "Settings",
    "SettingsSection",
    "TokenSettings",
    "compression_settings",
    "load_settings",
    "settings_from",
]

ENV_PREFIX = "HERMES_CORE__"


def compression_settings(
    settings: Settings, threshold_tokens: int, context_length: int | None, summarizer: str
) -> CompressionSettings:
    """The resolved core ``[compression]`` settings handed to engines."""
    c = settings.compression
    return CompressionSettings(
        threshold_tokens=threshold_tokens,
        context_length=context_length or settings.model.context_length,
        protect_first_n=c.protect_first_n,
        prune_min_chars=c.prune_min_chars,
        max_tool_args_chars=c.max_tool_args_chars,
        summary_input_tokens=c.summary_input_tokens,
        summary_prefix_reuse=c.summary_prefix_reuse,
        abort_on_summary_failure=c.abort_on_summary_failure,
        summarizer=summarizer,
        tail=c.tail,
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
    return data


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


#: words that mark a settings key as holding a secret (matched inside the key path)
SECRET_KEY_WORDS = ("key", "token", "secret", "password", "passwd", "credential", "auth", "dsn")
HIDDEN = "<hidden: may be a secret>"
# a credential-shaped string: one run of token characters mixing letters and digits
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_\-+=.]{20,}")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for key, item in value.items() for s in [str(key), *_strings(item)]]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def _credential_shaped(run: str) -> bool:
    """Mixed-case letters with digits (API keys), or a long hex string (tokens, digests)."""
    upper = any(c.isupper() for c in run)
    lower = any(c.islower() for c in run)
    digit = any(c.isdigit() for c in run)
    if upper and lower and digit:
        return True
    return len(run) >= 32 and all(c in "0123456789abcdefABCDEF" for c in run)


def may_be_secret(key: str, value: Any) -> bool:
    """True when a bad settings value must not be echoed in an error message.

    A value is hidden when it holds text and either its key path names a
    secret (:data:`SECRET_KEY_WORDS`: ``api_key``, ``auth_token``,
    ``postgres_dsn``...), or a redaction rule of a running host matches it,
    or it is shaped like a credential (20+ token characters mixing upper- and
    lower-case letters and digits, 32+ hex digits, or a URL with a password).
    Numbers and booleans are shown, and so are names like ``gpt-4o-mini-2024-07-18``.
    """
    texts = _strings(value)
    if not texts:
        return False
    lowered = key.lower()
    if any(word in lowered for word in SECRET_KEY_WORDS):
        return True
    redactors = live_redactors()
    for text in texts:
        if any(redactor.redact(text) != text for redactor in redactors):
            return True
        for run in _TOKEN_SHAPE.findall(text):
            if _credential_shaped(run):
                return True
        if re.search(r"://[^/\s@]*:[^/\s@]*@", text):
            return True
    return False


def shown_value(key: str, value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut at ``limit`` characters, or :data:`HIDDEN` (:func:`may_be_secret`)."""
    if may_be_secret(key, value):
        return HIDDEN
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def describe_validation_error(error: ValidationError, prefix: str = "") -> list[str]:
    """One line per problem: the key (``prefix`` + location), the value unless secret, why."""
    lines = []
    for item in error.errors():
        key = prefix + ".".join(str(part) for part in item["loc"])
        value = shown_value(key, item["input"])
        if item["type"] == "extra_forbidden":
            lines.append(f"unknown key {key!r} (value {value})")
        else:
            lines.append(f"{key} = {value}: {item['msg']}")
    return lines


def _describe(error: ValidationError, source: str) -> str:
    return f"invalid configuration in {source}: " + "; ".join(describe_validation_error(error))


def config_path(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> Path | None:
    """The TOML file in force, or None."""
    if explicit:
        return Path(explicit)
    if environ.get("HERMES_CORE_CONFIG"):
        return Path(environ["HERMES_CORE_CONFIG"])
    local = Path.cwd() / "hermes.toml"
    return local if local.is_file() else None


def split_core(
    data: Mapping[str, Any], model: type[BaseModel]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``data`` split into the keys ``model``'s fields hold and the rest (plugins' keys)."""
    core: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            rest[key] = value
            continue
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel) and isinstance(value, Mapping):
            inner, extra = split_core(value, sub)
            core[key] = inner
            if extra:
                rest[key] = extra
        else:
            core[key] = value
    return core, rest


def _validate(
    data: Mapping[str, Any], source: str, environ: Mapping[str, str] | None = None
) -> Settings:
    core, rest = split_core(data, Settings)
    try:
        settings = Settings.model_validate(core)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    settings._plugin_data = rest
    settings._source = source
    settings._environ = {k: v for k, v in (environ or {}).items() if k.startswith("HERMES_CORE")}
    return settings


def load_settings(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Load settings from TOML, environment and explicit overrides (later wins).

    The core's keys are validated here; the keys of plugins' sections are kept
    and validated when the host loads the plugins
    (:func:`hermes_core.plugin_settings.bind_plugin_settings`).
    """
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
    return _validate(data, source, env)


def settings_from(data: Mapping[str, Any]) -> Settings:
    """Validate a settings mapping (tests, embedding hosts); plugins' keys as in load_settings."""
    return _validate(dict(data), "settings")
