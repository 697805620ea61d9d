"""The plugin manager: one factory, entry-point loading one plugin at a time, blocking, tracing.

Nothing is loaded at import time. :func:`get_plugin_manager` returns a fresh
``pluggy.PluginManager`` with the hookspecs added and, unless told not to,
the entry points of group ``hermes_core`` loaded one by one:

* a plugin that fails to import is skipped with a :class:`PluginLoadWarning`
  naming it and its distribution version, and the rest still load; with
  ``plugins.strict`` (``HERMES_CORE_STRICT_PLUGINS=1``) the error is raised;
* a plugin named in ``plugins.block`` (``HERMES_CORE_BLOCK_PLUGINS=a,b``) is
  never imported, defaults included; when ``plugins.load``
  (``HERMES_CORE_LOAD_PLUGINS``) is set, only the plugins it names load;
* a plugin that declares a ``hermes_contract`` range excluding this host's
  contract version is refused like one that fails to import (see
  :mod:`hermes_core.plugin_checks`); block and load lists that name no plugin
  are reported (a warning; an error in strict mode);
* an entry point implementing a hook no hookspec declares (a misspelt hook
  name) fails like one that does not import: it is unregistered, listed as
  failed with its distribution, version and entry point, and the rest load
  (strict mode raises); ``pm.check_pending()`` then rejects such hooks in the
  plugins registered directly (tests, ``plugins=``);
* ``plugins.trace`` (``HERMES_CORE_TRACE_PLUGINS=1``) prints each hook call
  and its result to stderr through pluggy's monitoring.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy
from packaging.utils import canonicalize_name

from hermes_hookspecs import ENTRY_POINT_GROUP, PROJECT_NAME, PluginError, specs

from .config import Settings
from .plugin_checks import check_contract, check_plugin_lists


class PluginLoadWarning(UserWarning):
    """A plugin could not be loaded; the others still were."""


@dataclass
class PluginOrigin:
    """Where a registered plugin came from."""

    name: str
    distribution: str = ""
    version: str = ""
    entry_point: str = ""
    blocked: bool = False
    error: str = ""


@dataclass
class LoadReport:
    """What loading did, kept on the manager as ``pm.hermes_origins``."""

    origins: dict[str, PluginOrigin] = field(default_factory=dict)
    #: distribution names seen among the entry points (a list may name one)
    distributions: set[str] = field(default_factory=set)


def _dist_of(ep: metadata.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "", ""
    return str(dist.metadata["Name"] or ""), str(dist.version or "")


def origins(pm: pluggy.PluginManager) -> dict[str, PluginOrigin]:
    """The origin records the factory attached to ``pm`` (empty for a bare manager)."""
    report = getattr(pm, "hermes_origins", None)
    return report.origins if isinstance(report, LoadReport) else {}


def _trace_writer(line: str) -> None:
    sys.stderr.write(line)


def _refuse_unknown_hooks(pm: pluggy.PluginManager, plugin: object, entry_point: str) -> None:
    """Unregister ``plugin`` and raise when it implements a hook no hookspec declares.

    The check ``pm.check_pending()`` makes for the whole manager, made per entry
    point so a misspelt hook name fails that one plugin, like an import error.
    """
    unknown = sorted(
        caller.name
        for caller in pm.get_hookcallers(plugin) or []
        if not caller.has_spec()
        and any(not impl.optionalhook for impl in caller.get_hookimpls() if impl.plugin is plugin)
    )
    if unknown:
        pm.unregister(plugin)
        raise PluginError(
            f"entry point {entry_point} implements hooks no hookspec declares "
            f"(misspelt?): {', '.join(unknown)}"
        )


def load_entrypoint_plugins(
    pm: pluggy.PluginManager,
    settings: Settings,
    *,
    entry_points: Iterable[metadata.EntryPoint] | None = None,
) -> None:
    """Load the ``hermes_core`` entry points into ``pm``, one at a time."""
    report = getattr(pm, "hermes_origins", None)
    if not isinstance(report, LoadReport):
        report = LoadReport()
        pm.hermes_origins = report  # type: ignore[attr-defined]
    eps = (
        list(entry_points)
        if entry_points is not None
        else list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    )
    blocked = set(settings.plugins.block)
    allow = set(settings.plugins.load) if settings.plugins.load is not None else None
    seen: set[str] = set()
    for ep in sorted(eps, key=lambda e: e.name):
        if ep.name in seen:
            continue
        seen.add(ep.name)
        dist, version = _dist_of(ep)
        origin = PluginOrigin(
            name=ep.name, distribution=dist, version=version, entry_point=ep.value
        )
        report.origins[ep.name] = origin
        report.distributions.add(dist)
        if _listed(blocked, ep.name, dist) or (
            allow is not None and not _listed(allow, ep.name, dist)
        ):
            origin.blocked = True
            pm.set_blocked(ep.name)
            continue
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        try:
            plugin = ep.load()
            check_contract(ep.name, plugin)
            pm.register(plugin, name=ep.name)
            _refuse_unknown_hooks(pm, plugin, f"{ep.name} = {ep.value}")
        except Exception as exc:
            origin.error = f"{type(exc).__name__}: {exc}"
            if settings.plugins.strict:
                raise PluginError(
                    f"plugin {ep.name!r} ({dist or 'unknown distribution'} {version}, "
                    f"entry point {ep.name} = {ep.value}) failed to load: {origin.error}"
                ) from exc
            warnings.warn(
                f"hermes-core: plugin {ep.name!r} from {dist or 'unknown distribution'} "
                f"{version} (entry point {ep.name} = {ep.value}) failed to load and was "
                f"skipped: {origin.error}",
                PluginLoadWarning,
                stacklevel=2,
            )


def _listed(names: set[str], plugin: str, dist: str) -> bool:
    """Whether a block/load list names this plugin (by plugin or distribution name)."""
    if plugin in names:
        return True
    return bool(dist) and canonicalize_name(dist) in {canonicalize_name(n) for n in names}


def get_plugin_manager(
    settings: Settings | None = None,
    *,
    load_entrypoints: bool | None = None,
    plugins: Iterable[tuple[str, object]] | Iterable[object] = (),
) -> pluggy.PluginManager:
    """A fresh plugin manager with hermes-core's hookspecs.

    :param settings: the settings in force (defaults when omitted).
    :param load_entrypoints: load the ``hermes_core`` entry points; defaults to
        ``settings.plugins.autoload``. Tests pass False and register what they need.
    :param plugins: extra plugin objects (or ``(name, object)`` pairs) to
        register after the entry points, e.g. a test plugin.
    """
    settings = settings or Settings()
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(specs)
    pm.hermes_origins = LoadReport()  # type: ignore[attr-defined]
    for blocked in settings.plugins.block:
        pm.set_blocked(blocked)
    autoload = settings.plugins.autoload if load_entrypoints is None else load_entrypoints
    if autoload:
        load_entrypoint_plugins(pm, settings)
    for item in plugins:
        name: str | None = None
        obj: object
        if isinstance(item, tuple):
            name, obj = item
        else:
            obj = item
        if name is not None and pm.is_blocked(name):
            continue
        check_contract(name or repr(obj), obj)
        pm.register(obj, name=name)
    if autoload:
        report = pm.hermes_origins  # type: ignore[attr-defined]
        check_plugin_lists(
            block=settings.plugins.block,
            load=settings.plugins.load,
            plugin_names=[*report.origins, *(n for n, p in pm.list_name_plugin() if p is not None)],
            distributions=report.distributions,
            strict=settings.plugins.strict,
        )
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {exc.plugin!r} implements an unknown hook: {exc}") from exc
    if settings.plugins.trace:
        enable_tracing(pm)
    return pm


def enable_tracing(pm: pluggy.PluginManager) -> Any:
    """Print every hook call and result to stderr; returns the undo callable."""
    pm.trace.root.setwriter(_trace_writer)
    return pm.enable_tracing()


def plugin_name(pm: pluggy.PluginManager, plugin: object) -> str:
    """The registered name of ``plugin`` (``repr`` when unregistered)."""
    return pm.get_name(plugin) or repr(plugin)


def implemented_hooks(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    """Sorted names of the hooks ``plugin`` implements."""
    callers = pm.get_hookcallers(plugin) or []
    return sorted(caller.name for caller in callers)


def each_implementation(pm: pluggy.PluginManager, hook: str) -> list[tuple[str, pluggy.HookCaller]]:
    """Per plugin implementing ``hook``, in hook order: its name and a caller for it alone.

    The caller runs through pluggy (``pm.subset_hook_caller``) with that one
    plugin's implementation plus every ``wrapper=True`` / ``hookwrapper=True``
    implementation of the hook, so wrappers see each plugin's result and
    tracing (:func:`enable_tracing`) records the call. Used where results or
    errors must be attributed to a plugin (registries, prompt blocks, tool
    schemas, annotations). The callers are kept on the manager until its
    implementations of ``hook`` change (``annotate_message`` runs per message).
    """
    caller: pluggy.HookCaller = getattr(pm.hook, hook)
    impls = tuple(caller.get_hookimpls())
    cache: dict[str, tuple[tuple[Any, ...], list[tuple[str, pluggy.HookCaller]]]]
    cache = pm.__dict__.setdefault("hermes_each_implementation", {})
    found = cache.get(hook)
    if found is not None and found[0] == impls:
        return found[1]
    answering = [impl for impl in impls if not (impl.wrapper or impl.hookwrapper)]
    out = [
        (
            plugin_name(pm, impl.plugin),
            pm.subset_hook_caller(hook, [o.plugin for o in answering if o is not impl]),
        )
        for impl in reversed(answering)
    ]
    cache[hook] = (impls, out)
    return out


def call_each(pm: pluggy.PluginManager, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
    """Call every implementation of ``hook`` separately, in hook order, keeping who answered.

    Each call goes through pluggy (see :func:`each_implementation`). Used
    where results must be attributed to a plugin (prompt blocks, tool
    schemas). An exception is re-raised as :class:`PluginError` naming the plugin.
    """
    out: list[tuple[str, Any]] = []
    for owner, caller in each_implementation(pm, hook):
        try:
            results = caller(**kwargs)
        except Exception as exc:
            raise PluginError(
                f"plugin {owner!r} raised in {hook}: {type(exc).__name__}: {exc}"
            ) from exc
        for result in results or []:
            if result is not None:
                out.append((owner, result))
    return out
