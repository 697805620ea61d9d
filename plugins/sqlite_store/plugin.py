"""Registers the ``sqlite`` session store (the entry point of this plugin)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_hookspecs import SessionStore, hookimpl

from .store import SqliteSessionStore


def open_store(settings: Any) -> SessionStore:
    """Open the SQLite file named by ``session.path`` (default: the user data dir)."""
    path = settings.session.sqlite_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return SqliteSessionStore(path, fts_index_cap=settings.session.fts_index_cap)


@hookimpl
def register_session_stores(register: Callable[[str, Callable[[Any], SessionStore]], None]) -> None:
    """Register the embedded default store, ``sqlite``."""
    register("sqlite", open_store)
