"""Connections to one SQLite file: one writer per process, a pool of read-only readers.

* The journal is WAL unless WAL cannot work there (a network/FUSE filesystem
  in the mount table, or SQLite refusing the switch); then a rollback journal
  is used and a warning logged. A file that is already WAL is never
  downgraded.
* Writes run ``BEGIN IMMEDIATE`` with application-level retry and jittered
  exponential backoff on ``database is locked`` until ``busy_budget`` seconds
  have passed; the whole transaction body is re-run after a busy error.
* Readers open the file read-only (``mode=ro``) and use SQLite's busy handler.
* A new database file is created ``0600`` (its ``-wal`` and ``-shm`` follow).
  Before every ``COMMIT`` the database file and its ``-wal`` are checked to be
  the files the store opened (:mod:`.identity`); if one was deleted or
  replaced the write is refused with a :class:`StoreError` naming it, what
  was acknowledged before is saved, and every later write is refused too.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Literal, TypeVar

from hermes_hookspecs.errors import CorruptDatabaseError, HermesError, StoreError

from .filesystems import wal_unsafe_reason
from .health import check_file, is_corruption, wal_on_disk
from .identity import PRIVATE_MODE, FileWatch, create_private
from .migrations import migrate, read_version

JournalPolicy = Literal["auto", "wal", "rollback"]
Synchronous = Literal["NORMAL", "FULL"]
T = TypeVar("T")

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_BACKOFF_FIRST = 0.0005
_BACKOFF_CAP = 0.02


def is_busy(exc: sqlite3.Error) -> bool:
    """True for ``database is locked`` / ``SQLITE_BUSY`` style errors."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return True
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text


def translate(exc: sqlite3.Error, path: Path) -> HermesError:
    """Turn a SQLite error into the store's exception, naming the file."""
    if isinstance(exc, sqlite3.DatabaseError) and is_corruption(exc):
        return CorruptDatabaseError(f"{path} is corrupt: {exc}")
    return StoreError(f"sqlite store {path}: {exc}")


class Database:
    """The connections of one store instance to one database file."""

    def __init__(
        self,
        path: Path,
        *,
        busy_budget: float,
        journal: JournalPolicy,
        synchronous: Synchronous,
        readers: int,
        log: logging.Logger,
    ) -> None:
        if busy_budget <= 0:
            raise StoreError(f"busy_budget must be positive seconds, got {busy_budget!r}")
        if readers < 1:
            raise StoreError(f"readers must be at least 1, got {readers!r}")
        self.path = path
        self.busy_budget = float(busy_budget)
        self._log = log
        self._rng = random.Random()
        self._writer_lock = threading.Lock()
        self._pool: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._pool_lock = threading.Lock()
        self._readers_max = readers
        self._readers_made = 0
        self._all_readers: list[sqlite3.Connection] = []
        self._closed = False
        self.applied_migrations: list[str] = []
        #: set when the files went missing: every later write is refused with it
        self.refused: str | None = None

        check_file(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            create_private(path)
        except OSError as exc:
            raise StoreError(
                f"sqlite store {path}: cannot create the database file: {exc}"
            ) from exc
        try:
            self._writer = sqlite3.connect(
                str(path), timeout=0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise translate(exc, path) from exc
        self._watch_db = FileWatch(path, "database file")
        self._watch_wal = FileWatch(path.with_name(path.name + "-wal"), "write-ahead log")
        try:
            read_version(self._writer, str(path))
            self.journal_mode = self._setup_journal(journal)
            sync = synchronous if self.journal_mode == "wal" else "FULL"
            self._writer.execute(f"PRAGMA synchronous = {sync}")
            self._writer.execute("PRAGMA foreign_keys = ON")
            self._writer.execute("PRAGMA cache_size = -16000")
            # fewer, larger checkpoints: each append dirties ~10 pages (two FTS indexes)
            self._writer.execute("PRAGMA wal_autocheckpoint = 4000")
            self.applied_migrations = self.write(lambda conn: migrate(conn, str(path)))
        except sqlite3.Error as exc:
            self._writer.close()
            raise translate(exc, path) from exc
        except BaseException:
            self._writer.close()
            raise

    # -- journal -------------------------------------------------------------
    def _setup_journal(self, policy: JournalPolicy) -> str:
        conn = self._writer
        current = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if current == "wal" or wal_on_disk(self.path):
            if policy == "rollback":
                self._log.warning(
                    "%s is already in WAL mode; keeping WAL (a WAL database is never downgraded)",
                    self.path,
                )
            else:
                unsafe = wal_unsafe_reason(self.path)
                if unsafe:
                    self._log.warning(
                        "%s is in WAL mode but %s; keeping WAL (never downgraded)",
                        self.path,
                        unsafe,
                    )
            return "wal"
        reason: str | None
        if policy == "rollback":
            reason = "a rollback journal was requested"
        elif policy == "auto":
            reason = wal_unsafe_reason(self.path)
        else:
            reason = None
        if reason is None:
            try:
                mode = self._retry_busy(
                    lambda: str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
                )
            except sqlite3.OperationalError as exc:
                mode, reason = current, f"SQLite refused WAL: {exc}"
            if mode == "wal":
                return "wal"
            reason = reason or f"SQLite kept journal mode {mode!r}"
            if policy == "wal":
                raise StoreError(f"{self.path}: WAL journal requested but unavailable: {reason}")
        self._log.warning(
            "%s: using a rollback journal instead of WAL (%s); readers will wait for writers",
            self.path,
            reason,
        )
        if current not in ("delete", "truncate", "persist"):
            current = str(
                self._retry_busy(lambda: conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0])
            ).lower()
        return current

    # -- retry helpers ---------------------------------------------------------
    def _sleep_or_give_up(self, attempt: int, deadline: float, exc: sqlite3.Error) -> None:
        delay = self._rng.uniform(0.5, 1.0) * min(_BACKOFF_CAP, _BACKOFF_FIRST * (2**attempt))
        if time.monotonic() + delay > deadline:
            raise StoreError(
                f"{self.path} stayed locked by another writer for more than "
                f"{self.busy_budget:g}s (busy_budget): {exc}"
            ) from exc
        time.sleep(delay)

    def _retry_busy(self, action: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.busy_budget
        attempt = 0
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                self._sleep_or_give_up(attempt, deadline, exc)
                attempt += 1

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

    # -- writes ----------------------------------------------------------------
    def write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction and commit.

        A busy error anywhere re-runs the whole body after a jittered
        backoff, until ``busy_budget`` is spent; any other exception rolls
        back and propagates.
        """
        if self._closed:
            raise StoreError(f"sqlite store {self.path} is closed")
        deadline = time.monotonic() + self.busy_budget
        attempt = 0
        with self._writer_lock:
            if self.refused is not None:
                raise StoreError(self.refused)
            conn = self._writer
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    result = body(conn)
                    self._check_files(conn)
                    self._commit(conn, deadline)
                    if self.journal_mode == "wal":
                        self._watch_wal.note()
                    return result
                except sqlite3.OperationalError as exc:
                    self._rollback(conn)
                    if not is_busy(exc):
                        raise translate(exc, self.path) from exc
                    self._sleep_or_give_up(attempt, deadline, exc)
                    attempt += 1
                except sqlite3.Error as exc:
                    self._rollback(conn)
                    raise translate(exc, self.path) from exc
                except BaseException:
                    self._rollback(conn)
                    raise

    # -- the files under the store ------------------------------------------------
    def _check_files(self, conn: sqlite3.Connection) -> None:
        """Before COMMIT: refuse if the database file or its -wal is not the one opened."""
        problem = self._watch_db.problem()
        if problem is None and self.journal_mode == "wal":
            problem = self._watch_wal.problem()
        if problem is None:
            return
        self._rollback(conn)
        # a lost database file: copy what the open inode holds; a lost -wal: checkpoint it
        saved = self._rescue_copy(conn) if self._watch_db.lost else self._checkpoint(conn)
        self.refused = (
            f"sqlite store {self.path}: {problem}; this write and every later one is refused "
            f"so that nothing is acknowledged that would be lost. {saved} Reopen the store "
            "(after restoring the file) to write again."
        )
        self._log.error("%s", self.refused)
        raise StoreError(self.refused)

    def _checkpoint(self, conn: sqlite3.Connection) -> str:
        """Copy the committed log into the main file (SQLite still reads the unlinked log)."""
        try:
            busy, _frames, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            return f"Checkpointing the earlier commits into {self.path} failed ({exc})."
        if busy:
            return (
                f"The earlier commits could not all be checkpointed into {self.path} "
                "(a reader held the log); keep this process alive and copy them out."
            )
        return f"The earlier commits were checkpointed into {self.path}."

    def _rescue_copy(self, conn: sqlite3.Connection) -> str:
        """Save the still-open (unlinked or displaced) database to a new file next to the path."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        rescue = self.path.with_name(f"{self.path.name}.rescued-{stamp}-{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            create_private(rescue)
            conn.execute("VACUUM INTO ?", (str(rescue),))
        except (OSError, sqlite3.Error) as exc:
            return f"Saving a copy of what was stored to {rescue} failed ({exc})."
        with suppress(OSError):
            os.chmod(rescue, PRIVATE_MODE)
        return f"Everything stored before was saved to {rescue}."

    def _commit(self, conn: sqlite3.Connection, deadline: float) -> None:
        attempt = 0
        while True:
            try:
                conn.execute("COMMIT")
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or not conn.in_transaction:
                    raise
                # rollback-journal mode: readers still hold SHARED locks; the
                # transaction stays open and COMMIT can be retried.
                self._sleep_or_give_up(attempt, deadline, exc)
                attempt += 1

    # -- reads -----------------------------------------------------------------
    def _connect_reader(self) -> sqlite3.Connection:
        uri = self.path.as_uri() + "?mode=ro"
        conn = sqlite3.connect(
            uri,
            uri=True,
            timeout=self.busy_budget,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute("PRAGMA cache_size = -16000")
        return conn

    def _take_reader(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"sqlite store {self.path} is closed")
        try:
            return self._pool.get_nowait()
        except queue.Empty:
            pass
        with self._pool_lock:
            if self._readers_made < self._readers_max:
                self._readers_made += 1
                try:
                    conn = self._connect_reader()
                except sqlite3.Error as exc:
                    self._readers_made -= 1
                    raise translate(exc, self.path) from exc
                self._all_readers.append(conn)
                return conn
        try:
            return self._pool.get(timeout=self.busy_budget)
        except queue.Empty:
            raise StoreError(
                f"sqlite store {self.path}: no read connection free within {self.busy_budget:g}s"
            ) from None

    @contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        """A pooled read-only connection, outside any transaction."""
        conn = self._take_reader()
        try:
            yield conn
        finally:
            self._rollback(conn)
            self._pool.put(conn)

    @contextmanager
    def private_reader(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection of the caller's own, closed afterwards (for long waits)."""
        if self._closed:
            raise StoreError(f"sqlite store {self.path} is closed")
        try:
            conn = self._connect_reader()
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        finally:
            conn.close()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A pooled read-only connection inside one read transaction (one snapshot)."""
        with self.reader() as conn:
            try:
                conn.execute("BEGIN")
                yield conn
            except sqlite3.Error as exc:
                raise translate(exc, self.path) from exc

    # -- lifecycle ---------------------------------------------------------------
    def close(self) -> None:
        """Close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._pool_lock:
            for conn in self._all_readers:
                conn.close()
            self._all_readers.clear()
        with self._writer_lock:
            self._writer.close()
