"""Checks on the database file: header sanity, truncation, integrity.

The cheap checks (:func:`check_file`) run before a store opens a file, so a
corrupt or truncated file is refused with :class:`CorruptDatabaseError`
before SQLite writes anything to it. :func:`integrity_report` runs SQLite's
own ``integrity_check`` / ``quick_check`` on demand.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from hermes_hookspecs.errors import CorruptDatabaseError

SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100


class HealthReport(BaseModel):
    """The result of :meth:`SqliteSessionStore.health`."""

    model_config = ConfigDict(extra="forbid")

    path: str
    ok: bool
    problems: list[str]
    journal_mode: str
    schema_version: int
    page_count: int
    freelist_count: int


def _companion_in_use(path: Path, suffix: str) -> bool:
    companion = path.with_name(path.name + suffix)
    try:
        return companion.stat().st_size > 0
    except FileNotFoundError:
        return False


def check_file(path: Path) -> None:
    """Refuse a file that is not a SQLite database or is visibly truncated.

    An absent or empty file is fine (a new database). The truncation test
    compares the page count in the header with the file size, and is skipped
    while a ``-wal`` or ``-journal`` file is present (SQLite recovers from it).

    :raises CorruptDatabaseError: naming the path and what is wrong.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with path.open("rb") as handle:
        header = handle.read(_HEADER_SIZE)
    if len(header) < _HEADER_SIZE or not header.startswith(SQLITE_MAGIC):
        raise CorruptDatabaseError(
            f"{path} is not a SQLite database (bad header, {size} bytes); "
            "move it aside or restore it from a backup"
        )
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise CorruptDatabaseError(f"{path} has an invalid page size {page_size} in its header")
    change_counter = int.from_bytes(header[24:28], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    pages = int.from_bytes(header[28:32], "big")
    recovering = _companion_in_use(path, "-wal") or _companion_in_use(path, "-journal")
    if pages and change_counter == valid_for and not recovering and size < pages * page_size:
        raise CorruptDatabaseError(
            f"{path} is truncated: its header promises {pages} pages of {page_size} bytes "
            f"({pages * page_size} bytes) but the file has {size} bytes"
        )


def wal_on_disk(path: Path) -> bool:
    """True when the file's header says it is in WAL mode (read/write version 2)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(_HEADER_SIZE)
    except FileNotFoundError:
        return False
    return len(header) >= 20 and header.startswith(SQLITE_MAGIC) and header[18] == 2


def is_corruption(exc: sqlite3.DatabaseError) -> bool:
    """True when a SQLite error means the file is damaged (not busy, not a bug)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def integrity_problems(conn: sqlite3.Connection, *, quick: bool = False) -> list[str]:
    """Run ``integrity_check`` (or ``quick_check``); an empty list means ok."""
    pragma = "quick_check" if quick else "integrity_check"
    rows = [str(row[0]) for row in conn.execute(f"PRAGMA {pragma}")]
    problems = [row for row in rows if row != "ok"]
    if not quick:
        for table in ("messages_fts_word", "messages_fts_tri"):
            try:
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 0)")
            except sqlite3.DatabaseError as exc:
                problems.append(f"{table}: {exc}")
    return problems
