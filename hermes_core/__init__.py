"""hermes-core: keep LLM agent sessions healthy for days.

The minimal core: the plugin manager, settings, the prompt builder, the turn
runtime and the compression coordinator. Every default behaviour is a plugin
loaded through the ``hermes_core`` entry-point group; the contract lives in
:mod:`hermes_hookspecs`.
"""

from hermes_hookspecs import hookimpl, hookspec

from .config import Settings, load_settings
from .host import Hermes
from .plugins import get_plugin_manager

__version__ = "0.1.0"

__all__ = [
    "Hermes",
    "Settings",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "load_settings",
]
