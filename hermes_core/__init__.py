"""hermes-core: keep LLM agent sessions healthy for days.

The minimal core: the plugin manager, settings, the prompt builder, the turn
runtime and the compression coordinator. Every default behaviour is a plugin
loaded through the ``hermes_core`` entry-point group; the contract lives in
:mod:`hermes_hookspecs`. Installed as the ``hermes-session-core`` distribution.

The exception hierarchy is exported here too, so an integrator writes
``from hermes_core import LeaseBusy, StoreError``.
"""

from hermes_hookspecs import CONTRACT_VERSION, DISTRIBUTION, hookimpl, hookspec

from .async_turn import AsyncTurn
from .config import Settings, load_settings
from .errors import (
    ABORTING_FAILURES,
    CompactionBackendError,
    CompressionAborted,
    ConfigError,
    CorruptDatabaseError,
    HermesError,
    ImportFormatError,
    LeaseBusy,
    LeaseError,
    LeaseLost,
    MemoryProviderError,
    NotFoundError,
    PluginError,
    RegistrationError,
    SchemaVersionError,
    StoreError,
    SummarizerError,
    UnknownNameError,
    ValidationError,
)
from .host import Hermes
from .plugins import get_plugin_manager
from .session import Session
from .turn import Turn

__version__ = "0.1.0"

__all__ = [
    "ABORTING_FAILURES",
    "CONTRACT_VERSION",
    "DISTRIBUTION",
    "AsyncTurn",
    "CompactionBackendError",
    "CompressionAborted",
    "ConfigError",
    "CorruptDatabaseError",
    "Hermes",
    "HermesError",
    "ImportFormatError",
    "LeaseBusy",
    "LeaseError",
    "LeaseLost",
    "MemoryProviderError",
    "NotFoundError",
    "PluginError",
    "RegistrationError",
    "SchemaVersionError",
    "Session",
    "Settings",
    "StoreError",
    "SummarizerError",
    "Turn",
    "UnknownNameError",
    "ValidationError",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "load_settings",
]
