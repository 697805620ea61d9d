"""hermes-core's plugin contract: hook markers, hook specifications and the types that cross them.

A plugin author needs only this package::

    from hermes_hookspecs import hookimpl, Message

    @hookimpl
    def pre_llm_call(session, user_message):
        return "Today's on-call engineer is Ada."
"""

from __future__ import annotations

from .compaction import (
    CompactionBackend,
    ProviderCompactionRequest,
    ProviderCompactionResult,
)
from .compression import (
    CompressionRequest,
    CompressionResult,
    CompressionSettings,
    ContextEngine,
    EngineStatus,
    SelectRequest,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    TailPlan,
    TailRequest,
    TailStrategy,
)
from .contract import (
    CONTRACT_ATTRIBUTE,
    CONTRACT_VERSION,
    DISTRIBUTION,
    HermesDeprecationWarning,
    deprecated,
)
from .errors import (
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
    SessionRotated,
    StoreError,
    SummarizerError,
    UnknownNameError,
    ValidationError,
)
from .importers import ImportedConversation, Importer, Recognition
from .markers import ENTRY_POINT_GROUP, PROJECT_NAME, hookimpl, hookspec
from .memory import MemoryProvider, MemorySession, TurnRecord
from .messages import (
    SUMMARY_BEGIN,
    SUMMARY_END,
    HandoffFact,
    HandoffSummary,
    Message,
    SummarySection,
    ToolCall,
    ToolFunction,
    Usage,
    content_text,
    string_values,
)
from .prompt import Layer, PromptBlock, PromptContext
from .records import (
    CompactionCommit,
    CompactionEvent,
    ContinuationUpdate,
    LeaseGrant,
    LeaseHolder,
    NewMessage,
    NewSession,
    PrefixEntry,
    SearchHit,
    SessionRecord,
    StoredMessage,
    UsageRecord,
)
from .redaction import RedactionRule
from .settings import Settings, SettingsSection
from .store import SessionStore
from .tokens import TokenCounter
from .tools import AgentTool, ToolContext

__version__ = CONTRACT_VERSION

__all__ = [
    "CONTRACT_ATTRIBUTE",
    "CONTRACT_VERSION",
    "DISTRIBUTION",
    "ENTRY_POINT_GROUP",
    "PROJECT_NAME",
    "SUMMARY_BEGIN",
    "SUMMARY_END",
    "AgentTool",
    "CompactionBackend",
    "CompactionBackendError",
    "CompactionCommit",
    "CompactionEvent",
    "CompressionAborted",
    "CompressionRequest",
    "CompressionResult",
    "CompressionSettings",
    "ConfigError",
    "ContextEngine",
    "ContinuationUpdate",
    "CorruptDatabaseError",
    "EngineStatus",
    "HandoffFact",
    "HandoffSummary",
    "HermesDeprecationWarning",
    "HermesError",
    "ImportFormatError",
    "ImportedConversation",
    "Importer",
    "Layer",
    "LeaseBusy",
    "LeaseError",
    "LeaseGrant",
    "LeaseHolder",
    "LeaseLost",
    "MemoryProvider",
    "MemoryProviderError",
    "MemorySession",
    "Message",
    "NewMessage",
    "NewSession",
    "NotFoundError",
    "PluginError",
    "PrefixEntry",
    "PromptBlock",
    "PromptContext",
    "ProviderCompactionRequest",
    "ProviderCompactionResult",
    "Recognition",
    "RedactionRule",
    "RegistrationError",
    "SchemaVersionError",
    "SearchHit",
    "SelectRequest",
    "SessionRecord",
    "SessionRotated",
    "SessionStore",
    "Settings",
    "SettingsSection",
    "StoreError",
    "StoredMessage",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "SummaryResult",
    "SummarySection",
    "TailPlan",
    "TailRequest",
    "TailStrategy",
    "TokenCounter",
    "ToolCall",
    "ToolContext",
    "ToolFunction",
    "TurnRecord",
    "UnknownNameError",
    "Usage",
    "UsageRecord",
    "ValidationError",
    "__version__",
    "content_text",
    "deprecated",
    "hookimpl",
    "hookspec",
    "string_values",
]
