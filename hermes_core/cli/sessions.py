"""Session look-up for the CLI: which database is read, and short session-id prefixes."""

from __future__ import annotations

import re
from pathlib import Path

from hermes_hookspecs import NotFoundError, SessionStore, ValidationError

from ..config import Settings
from ..plugin_settings import resolved_value

#: how many sessions one page of the prefix scan reads
_PAGE = 500


def describe_store(settings: Settings) -> str:
    """The database a command reads, for messages (a DSN's password is hidden)."""
    store = settings.session.store
    if store == "sqlite":
        return resolved_value(settings, "session", "path")
    if store == "postgres":
        dsn = resolved_value(settings, "session", "postgres_dsn") or "(HERMES_CORE_POSTGRES_DSN)"
        dsn = re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
        dsn = re.sub(r"(password=)\S+", r"\1***", dsn)
        return f"postgres {dsn}"
    return f"session store {store!r}"


def missing_database(settings: Settings) -> str | None:
    """For the SQLite store, the file the settings name when it does not exist (else None).

    Read-only commands check this first, so a mistyped ``--db`` creates no empty database.
    """
    if settings.session.store != "sqlite":
        return None
    path = resolved_value(settings, "session", "path")
    return None if not path or Path(path).exists() else path


def require_database(settings: Settings, session_id: str) -> None:
    """:raises NotFoundError: the SQLite file does not exist, so no session can be in it."""
    missing = missing_database(settings)
    if missing is not None:
        raise NotFoundError(f"no session {session_id!r}: there is no database at {missing}")


def resolve_session_id(store: SessionStore, text: str, settings: Settings) -> str:
    """``text`` as a full session id, or the one session whose id starts with it.

    :raises NotFoundError: no session matches (the message names the database).
    :raises ValidationError: the prefix matches several sessions (they are listed).
    """
    try:
        return store.get_session(text).id
    except NotFoundError:
        pass
    matches: list[str] = []
    offset = 0
    while True:
        page = store.list_sessions(limit=_PAGE, offset=offset)
        matches.extend(s.id for s in page if s.id.startswith(text))
        if len(page) < _PAGE:
            break
        offset += _PAGE
    where = describe_store(settings)
    if not matches:
        raise NotFoundError(f"no session {text!r} (neither an id nor an id prefix) in {where}")
    if len(matches) > 1:
        shown = ", ".join(sorted(matches)[:10]) + (" ..." if len(matches) > 10 else "")
        raise ValidationError(
            f"session id prefix {text!r} is ambiguous in {where}: it matches "
            f"{len(matches)} sessions ({shown}); give more characters"
        )
    return matches[0]
