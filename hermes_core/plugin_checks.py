"""Checks the plugin manager applies while loading: contract ranges and the block/load lists.

* :func:`check_contract` refuses a plugin whose declared ``hermes_contract``
  range (a PEP 440 specifier, see :mod:`hermes_hookspecs.contract`) does not
  contain the contract version this host provides;
* :func:`check_plugin_lists` reports names in ``plugins.block`` or
  ``plugins.load`` that match no plugin: a warning, or an error in strict mode.

There are three names to keep apart. A **distribution** is what ``pip``
installs (``hermes-session-core``); an **entry point** (the plugin name) is one
plugin module it declares in group ``hermes_core`` (``compressor``); a
**contribution** is what a plugin registers (the context engine ``compressor``,
the store ``sqlite``, the tail ``lean``) and what ``compression.engine``,
``session.store``, ... select. Block and load lists take plugin names, or a
distribution name for all of its plugins.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from hermes_hookspecs import CONTRACT_ATTRIBUTE, CONTRACT_VERSION, DISTRIBUTION, PluginError


class PluginListWarning(UserWarning):
    """A block or load list names no known plugin."""


def declared_contract(plugin: object) -> str | None:
    """The ``hermes_contract`` range ``plugin`` declares (None: it declares none)."""
    value = getattr(plugin, CONTRACT_ATTRIBUTE, None)
    if value is None:
        return None
    return str(value)


def check_contract(name: str, plugin: object, *, contract: str = CONTRACT_VERSION) -> None:
    """Refuse ``plugin`` when its declared contract range excludes ``contract``.

    :raises PluginError: the range excludes this host's contract, or is not a
        valid PEP 440 specifier; the message names the plugin, its range and
        the contract version provided.
    """
    declared = declared_contract(plugin)
    if declared is None:
        return
    try:
        spec = SpecifierSet(declared)
    except InvalidSpecifier:
        raise PluginError(
            f"plugin {name!r} declares {CONTRACT_ATTRIBUTE} = {declared!r}, which is not a "
            "version range (write e.g. '>=1,<2')"
        ) from None
    if not spec.contains(Version(contract), prereleases=True):
        raise PluginError(
            f"plugin {name!r} supports hermes contract {declared!r}, but this {DISTRIBUTION} "
            f"provides contract {contract}; install a release of the plugin written for "
            f"contract {contract} (or a {DISTRIBUTION} whose contract it supports)"
        )


def check_plugin_lists(
    *,
    block: Iterable[str],
    load: Iterable[str] | None,
    plugin_names: Iterable[str],
    distributions: Iterable[str],
    strict: bool,
) -> list[str]:
    """Report list entries that name no plugin and no distribution; returns the messages.

    :raises PluginError: in strict mode, for the first such entry.
    """
    plugins = sorted(set(plugin_names))
    dists = sorted({d for d in distributions if d})
    known = set(plugins) | {canonicalize_name(d) for d in dists}
    messages: list[str] = []
    for setting, env, names in (
        ("plugins.block", "HERMES_CORE_BLOCK_PLUGINS", list(block)),
        ("plugins.load", "HERMES_CORE_LOAD_PLUGINS", list(load or [])),
    ):
        for entry in names:
            if entry in known or canonicalize_name(entry) in known:
                continue
            close = difflib.get_close_matches(entry, plugins + dists, n=3)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            messages.append(
                f"{setting} ({env}) names {entry!r}, which is no plugin{hint}; these lists take "
                f"plugin names (entry points: {', '.join(plugins) or 'none'}) or distribution "
                f"names ({', '.join(dists) or 'none'}), not the name of an engine, store, tail "
                "or summarizer a plugin registers (`hermes-core plugins` shows which plugin "
                "registers what)"
            )
    for message in messages:
        if strict:
            raise PluginError(message)
        warnings.warn(message, PluginListWarning, stacklevel=3)
    return messages
