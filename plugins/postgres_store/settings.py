"""The PostgreSQL store's key, in the ``[session]`` table beside the core's."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from hermes_hookspecs import SettingsSection

from .connection import DSN_ENV


class PostgresStoreSettings(SettingsSection):
    """Where the ``postgres`` store connects."""

    config_section: ClassVar[str] = "session"
    environment: ClassVar[dict[str, str]] = {"postgres_dsn": DSN_ENV}

    postgres_dsn: str = Field(
        default="", description="PostgreSQL DSN (or HERMES_CORE_POSTGRES_DSN)."
    )
