"""SQLite's side files, and database paths that would collide with them.

SQLite keeps three files beside a database ``NAME``: ``NAME-wal`` (the
write-ahead log), ``NAME-shm`` (its shared-memory index) and ``NAME-journal``
(the rollback journal). A store opened on a side file of an existing database
would write a database of its own where SQLite keeps the other's log or index
(and its own side files as ``NAME-shm-shm``...); a database that happens to
lie where ``NAME`` would keep a side file would be overwritten the moment
``NAME`` is opened. :func:`collision` names both cases, so the store refuses
them before it touches any file.
"""

from __future__ import annotations

from pathlib import Path

from .health import SQLITE_MAGIC

#: each side file's suffix, and what SQLite keeps in it
SIDE_FILES = {
    "-wal": "write-ahead log",
    "-shm": "shared-memory index",
    "-journal": "rollback journal",
}


def _is_database(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC  # no side file starts so
    except OSError:  # absent or unreadable: not a database this store would overwrite
        return False


def _is_empty(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size == 0
    except OSError:
        return False


def collision(path: Path) -> str | None:
    """Why ``path`` must not be opened as a database, or ``None`` when it may.

    * ``path`` is named like a side file of a database that exists
      (``x.db-shm`` beside ``x.db``; a file that is not a SQLite database and
      not empty, such as a text file ``notes`` beside ``notes-journal``, is no
      database);
    * a file where ``path`` keeps a side file is a SQLite database of its own
      (``x.db-wal`` made by opening a store on that name).
    """
    for suffix, role in SIDE_FILES.items():
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            owner = path.with_name(path.name[: -len(suffix)])
            if _is_database(owner) or _is_empty(owner):  # an empty file is a new database
                return (
                    f"{path} is the {role} of the SQLite database {owner} (SQLite keeps one "
                    f"beside every database as NAME{suffix}); open {owner} itself, or give "
                    "this store a database name of its own"
                )
    for suffix, role in SIDE_FILES.items():
        side = path.with_name(path.name + suffix)
        if _is_database(side):
            return (
                f"{side} is a SQLite database of its own, but it lies where SQLite keeps the "
                f"{role} of {path}: opening {path} would overwrite it. Rename that database "
                f"(it must not end in {suffix} beside {path.name}) before opening {path}"
            )
    return None
