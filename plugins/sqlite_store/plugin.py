"""Registers the ``sqlite`` session store (the entry point of this plugin)."""

from __future__ import annotations

from collections.abc import Callable

from hermes_hookspecs import SessionStore, Settings, SettingsSection, hookimpl

from .settings import SqliteStoreSettings
from .store import SqliteSessionStore


def open_store(settings: Settings) -> SessionStore:
    """Open the SQLite file named by ``session.path`` (default: the user data dir)."""
    own = settings.section(SqliteStoreSettings)
    path = own.sqlite_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return SqliteSessionStore(path, fts_index_cap=settings.session.fts_index_cap)


@hookimpl
def register_settings(register: Callable[[type[SettingsSection]], None]) -> None:
    """Declare the store's key of ``[session]`` (``path``)."""
    register(SqliteStoreSettings)


@hookimpl
def register_session_stores(
    register: Callable[[str, Callable[[Settings], SessionStore]], None],
) -> None:
    """Register the embedded default store, ``sqlite``."""
    register("sqlite", open_store)
