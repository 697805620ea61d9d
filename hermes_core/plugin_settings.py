"""Plugins' own settings: collected through ``register_settings``, validated at load.

:func:`bind_plugin_settings` is what the host runs once the plugins are
loaded: it asks every plugin for its
:class:`~hermes_hookspecs.settings.SettingsSection` models, checks that no
key is declared twice in one table, validates each model against the
configured keys of its table and rejects every configured key that neither
the core nor a loaded plugin declares. Errors name the key, the value (unless
it may be a secret) and the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pluggy
from pydantic import BaseModel, ValidationError

from hermes_hookspecs import ConfigError, RegistrationError
from hermes_hookspecs.settings import Settings, SettingsSection

from .config import describe_validation_error, shown_value
from .plugins import each_implementation

CORE = "core"


@dataclass(frozen=True)
class Declared:
    """One settings model a plugin declared."""

    model: type[SettingsSection]
    plugin: str


def declared_settings(pm: pluggy.PluginManager) -> list[Declared]:
    """Every plugin's settings models, in hook order (``register_settings``)."""
    out: list[Declared] = []
    for owner, caller in each_implementation(pm, "register_settings"):

        def register(model: Any, _owner: str = owner) -> None:
            if not (isinstance(model, type) and issubclass(model, SettingsSection)):
                raise RegistrationError(
                    f"plugin {_owner!r} registered {model!r} as settings; expected a "
                    "subclass of hermes_hookspecs.SettingsSection"
                )
            if not model.config_section:
                raise RegistrationError(
                    f"plugin {_owner!r}: settings model {model.__name__} sets no config_section"
                )
            out.append(Declared(model, _owner))

        try:
            caller(register=register)
        except RegistrationError:
            raise
        except Exception as exc:
            raise RegistrationError(
                f"plugin {owner!r} failed in register_settings: {type(exc).__name__}: {exc}"
            ) from exc
    return out


def core_tables() -> dict[str, type[BaseModel]]:
    """The core's own tables (``"compression"`` → its model), the root as ``""``."""
    tables: dict[str, type[BaseModel]] = {"": Settings}
    for name, field in Settings.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            tables[name] = field.annotation
    return tables


def key_owners(declared: list[Declared]) -> dict[str, dict[str, str]]:
    """table → key → owner (``core`` or a plugin name).

    :raises RegistrationError: a key is declared twice in one table, or a
        plugin's table is a key the core holds.
    """
    core = core_tables()
    owners: dict[str, dict[str, str]] = {
        table: {key: CORE for key in model.model_fields} for table, model in core.items()
    }
    for item in declared:
        table = item.model.config_section
        head, _, last = table.rpartition(".")
        parent = core.get(head)
        if table not in core and parent is not None and last in parent.model_fields:
            raise RegistrationError(
                f"plugin {item.plugin!r} declares settings table [{table}], which is the core's "
                f"key {table!r}"
            )
        keys = owners.setdefault(table, {})
        for key in item.model.model_fields:
            if key in keys:
                first = keys[key]
                who = "the core" if first == CORE else f"plugin {first!r}"
                raise RegistrationError(
                    f"settings key '{table}.{key}' is declared by both {who} and plugin "
                    f"{item.plugin!r}"
                )
            keys[key] = item.plugin
    return owners


def _unknown(data: dict[str, Any], prefix: str, owners: dict[str, dict[str, str]]) -> list[str]:
    """Dotted keys under ``prefix`` that no owner declares."""
    out: list[str] = []
    declared = owners.get(prefix, {})
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        is_table = any(t == path or t.startswith(path + ".") for t in owners)
        if isinstance(value, dict) and is_table:
            out.extend(_unknown(value, path, owners))
        elif key in declared:
            continue
        elif isinstance(value, dict) and value:
            out.extend(_unknown(value, path, {}))
        else:
            out.append(path)
    return out


def _declarers(table: str, owners: dict[str, dict[str, str]]) -> str:
    who = sorted(set(owners.get(table, {}).values()))
    return ", ".join("the core" if w == CORE else f"plugin {w!r}" for w in who)


def bind_plugin_settings(settings: Settings, declared: list[Declared]) -> None:
    """Validate every declared section of ``settings`` and reject unknown keys.

    :raises RegistrationError: a key is declared twice (see :func:`key_owners`).
    :raises ConfigError: a value is wrong, or a key is declared by no one; the
        message names the key, the value unless it may be a secret, and the plugin.
    """
    owners = key_owners(declared)
    problems: list[str] = []
    # the legacy [extensions.NAME] tables stay untyped unless a plugin declares one
    typed = {
        name: table for name, table in settings.extensions.items() if f"extensions.{name}" in owners
    }
    tree = {**settings._plugin_data, "extensions": typed} if typed else settings._plugin_data
    for path in _unknown(tree, "", owners):
        table = path.rpartition(".")[0]
        value: Any = tree
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        where = _declarers(table, owners) if table else ""
        if where:
            why = f"[{table}] holds the keys declared by {where}"
        elif table:
            why = f"neither the core nor a loaded plugin declares a table [{table}]"
        else:
            why = "neither the core nor a loaded plugin declares it"
        problems.append(f"unknown key {path!r} (value {shown_value(path, value)}): {why}")
    for item in declared:
        model, table = item.model, item.model.config_section
        values = settings.section_values(model)
        try:
            settings._sections[model] = model.model_validate(values)
        except ValidationError as exc:
            lines = describe_validation_error(exc, prefix=f"{table}.")
            problems.extend(f"{line} (plugin {item.plugin!r})" for line in lines)
        settings._owners[model] = item.plugin
    if problems:
        raise ConfigError(f"invalid configuration in {settings._source}: " + "; ".join(problems))


def section_values(settings: Settings, table: str) -> dict[str, Any]:
    """The effective keys of ``table`` that plugins declare (validated, defaults included)."""
    out: dict[str, Any] = {}
    for model, section in sorted(settings.sections().items(), key=lambda kv: kv[0].__name__):
        if model.config_section == table:
            out.update(section.model_dump(mode="json"))
    return out


def resolved_value(settings: Settings, table: str, key: str) -> str:
    """A plugin key's value as its plugin resolves it (``session.path`` → the file), or ""."""
    for model, section in settings.sections().items():
        if model.config_section == table and key in model.model_fields:
            resolved = section.resolved_values()
            return str(resolved[key] if key in resolved else getattr(section, key))
    return ""
