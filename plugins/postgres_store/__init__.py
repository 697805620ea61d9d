"""hermes-core plugin ``postgres_store``: the session store on PostgreSQL.

Selected with ``session.store = "postgres"``; the DSN comes from
``session.postgres_dsn`` or ``HERMES_CORE_POSTGRES_DSN``. psycopg is imported
only when the store is opened, so this plugin loads without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_core.storekit import holder_is_dead
from hermes_hookspecs import Settings, SettingsSection, hookimpl

from .connection import require_dsn
from .settings import PostgresStoreSettings
from .store import PostgresSessionStore

__all__ = [
    "PostgresSessionStore",
    "PostgresStoreSettings",
    "holder_is_dead",
    "open_from_settings",
    "register_session_stores",
    "register_settings",
    "store_options",
]


def open_from_settings(settings: Settings) -> PostgresSessionStore:
    """The store for the host settings (``session.postgres_dsn``)."""
    dsn = settings.section(PostgresStoreSettings).postgres_dsn
    return PostgresSessionStore(require_dsn(dsn), **store_options(settings))


def store_options(settings: Settings) -> dict[str, Any]:
    """The store's options from the settings (``session.fts_index_cap``, as the SQLite store)."""
    return {"fts_index_cap": settings.session.fts_index_cap}


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare the store's key of ``[session]`` (``postgres_dsn``)."""
    register(PostgresStoreSettings)


@hookimpl
def register_session_stores(register: Callable[[str, Callable[[Settings], Any]], None]) -> None:
    register("postgres", open_from_settings)
