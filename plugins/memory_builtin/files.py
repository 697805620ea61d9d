"""Durable file access for the builtin provider: atomic replace and a cross-process lock."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

LOCK_NAME = ".memory.lock"


def read_text(path: Path) -> str:
    """The file's text, or ``""`` when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so readers see the old or the new file, never a mix.

    The text goes to a temporary file in the same folder, is flushed and
    fsync'ed, then moved over ``path`` with :func:`os.replace`; the folder is
    fsync'ed afterwards (POSIX) so the rename itself is durable. New files are
    created readable by the owner only (memory may hold personal facts).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp_name, path.stat().st_mode & 0o777)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    if sys.platform == "win32":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FolderLock:
    """Serialises read-modify-write cycles on one memory folder.

    Threads of this process are serialised by a :class:`threading.Lock`;
    other processes by ``fcntl.flock`` on ``<folder>/.memory.lock`` (POSIX;
    on Windows only the in-process lock applies).
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._thread_lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self._thread_lock:
            if sys.platform == "win32":
                yield
                return
            import fcntl

            self._folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the flock
