"""The exception hierarchy shared by the core and every plugin.

Everything hermes-core raises on purpose derives from :class:`HermesError`.
The CLI prints ``str(error)`` as one line; messages therefore name the
field, value or plugin that was wrong and what was expected.
"""

from __future__ import annotations

from typing import Literal


class HermesError(Exception):
    """Base class of every error hermes-core raises on purpose."""


class ConfigError(HermesError):
    """A configuration key or value is wrong (names the key, value and expectation)."""


class PluginError(HermesError):
    """A plugin misbehaved: failed to load, registered a duplicate name, or raised in a hook."""


class RegistrationError(PluginError):
    """A ``register_*`` hook contributed something invalid or a duplicate name."""


class UnknownNameError(ConfigError):
    """A name selected in configuration matches no registered contribution."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        listed = ", ".join(self.known) if self.known else "(none registered)"
        super().__init__(f"unknown {kind} {name!r}; registered {kind}s: {listed}")


class ValidationError(HermesError):
    """Input crossing a boundary (a message, a transcript, a request) is malformed."""


class StoreError(HermesError):
    """The session store failed or refused an operation."""


class SchemaVersionError(StoreError):
    """The database was written by a newer (or unknown) schema version."""


class CorruptDatabaseError(StoreError):
    """The database file is not a database, is truncated, or fails its integrity check."""


class NotFoundError(StoreError):
    """A session, message or prompt hash does not exist."""


class LeaseError(StoreError):
    """Base class of the turn-lease errors."""


class LeaseBusy(LeaseError):
    """Another live holder owns the session's turn lease (try once, or the wait timed out)."""


class LeaseLost(LeaseError):
    """The caller's lease expired or was taken over; its writes are rejected (fencing)."""


class SessionRotated(StoreError):
    """The session was ended by a rotation (``compression.in_place = false``).

    The store refuses writes and lease requests for it; ``successor_id`` names
    the session that continues it (None when the store found none), so a stale
    handle can follow the chain to the live session.
    """

    def __init__(
        self, message: str, *, session_id: str = "", successor_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.successor_id = successor_id


class ImportFormatError(ValidationError):
    """A transcript cannot be imported; names the file, line and what was wrong."""


SummaryFailureKind = Literal[
    "network",
    "auth",
    "quota",
    "rate_limit",
    "timeout",
    "server",
    "truncated",
    "empty",
    "refused",
    "malformed",
    "config",
    "other",
]

#: Failure kinds after which compression aborts and leaves the session untouched.
ABORTING_FAILURES: frozenset[str] = frozenset(
    {"network", "auth", "quota", "truncated", "empty", "refused"}
)


class SummarizerError(HermesError):
    """A summarizer could not produce a usable summary.

    :param kind: the failure class; :data:`ABORTING_FAILURES` lists the kinds
        after which compression aborts instead of falling back.
    """

    def __init__(self, kind: SummaryFailureKind, message: str, *, summarizer: str = "") -> None:
        self.kind: SummaryFailureKind = kind
        self.summarizer = summarizer
        prefix = f"summarizer {summarizer!r}: " if summarizer else ""
        super().__init__(f"{prefix}{kind}: {message}")

    @property
    def aborts(self) -> bool:
        """True when compression must abort and keep the session as it was."""
        return self.kind in ABORTING_FAILURES


class CompressionAborted(HermesError):
    """Compression stopped without changing the session (the reason says why)."""


class CompactionBackendError(HermesError):
    """A provider-side compaction backend failed; the local engine may take over."""


class MemoryProviderError(HermesError):
    """A memory provider failed; the turn goes on without it."""
