"""Noticing that the database file (or its ``-wal``) was deleted or replaced under an open store.

SQLite keeps writing to the files it opened: after ``rm sessions.db`` every
commit still succeeds, into an unlinked inode that vanishes when the process
exits; after ``rm sessions.db-wal`` commits go to an unlinked log, and a crash
then loses them and every earlier turn not yet checkpointed. So the store
records the device and inode of each file when it starts using it, and before
every ``COMMIT`` compares them with what the path names now
(:meth:`FileWatch.problem`). On a mismatch the write is refused with a
:class:`~hermes_hookspecs.StoreError` naming the file, and what was already
acknowledged is saved where it can be found (:mod:`.connections` does that:
a checkpoint into the main file for a lost ``-wal``, a ``VACUUM INTO`` copy
for a lost database file).

Only identities are compared (two ``stat`` calls per write): the store never
holds a descriptor of its own on the database file, since closing one would
drop SQLite's POSIX locks for the whole process.

:func:`create_private` makes a new database file ``0600``; SQLite gives its
``-wal`` and ``-shm`` files the database file's mode, so they are ``0600`` too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PRIVATE_MODE = 0o600


@dataclass(frozen=True)
class FileIdentity:
    """Device and inode of a file: what stays the same while it is the same file."""

    device: int
    inode: int

    def __str__(self) -> str:
        return f"device {self.device} inode {self.inode}"


def identity(path: Path) -> FileIdentity | None:
    """The identity of the file ``path`` names now, or None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return FileIdentity(st.st_dev, st.st_ino)


def create_private(path: Path) -> bool:
    """Create ``path`` empty with mode 0600 unless it exists; True when it was created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    except FileExistsError:
        return False
    os.close(fd)  # SQLite holds no lock on it yet, so closing drops nothing
    return True


class FileWatch:
    """One file the store relies on, by the identity it had when the store started using it.

    :param path: the file (the database or its ``-wal``).
    :param what: how errors name it ("database file", "write-ahead log").
    """

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        self.known: FileIdentity | None = identity(path)

    def note(self) -> None:
        """Record the identity now, if not known yet (the ``-wal`` appears on first write)."""
        if self.known is None:
            self.known = identity(self.path)

    def problem(self) -> str | None:
        """Why the path no longer names the file in use (None: it still does, or none yet)."""
        if self.known is None:
            return None
        now = identity(self.path)
        if now == self.known:
            return None
        if now is None:
            return f"the {self.what} {self.path} was deleted while the store had it open"
        return (
            f"the {self.what} {self.path} was replaced while the store had it open "
            f"(it was {self.known}, the path now names {now})"
        )

    @property
    def lost(self) -> bool:
        """True when :meth:`problem` reports one."""
        return self.problem() is not None
