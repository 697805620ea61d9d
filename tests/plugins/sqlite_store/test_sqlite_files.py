"""The SQLite store and its files on disk (issue #16 items 4 and 5), with real files.

Deleting the database file, deleting its ``-wal`` or replacing the file under
an open store must make the next write fail with a ``StoreError`` naming the
file, never an acknowledged write that is then lost; what was acknowledged
before is saved. New database files (and their ``-wal``/``-shm``) are 0600.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_hookspecs.errors import StoreError
from hermes_hookspecs.messages import Message
from hermes_hookspecs.records import NewMessage, NewSession
from hermes_plugin_sqlite_store import SqliteSessionStore


def user(text: str) -> NewMessage:
    return NewMessage(message=Message(role="user", content=text))


def stored_texts(path: Path, session_id: str) -> list[str]:
    store = SqliteSessionStore(path)
    try:
        return [row.message.text() for row in store.all_messages(session_id)]
    finally:
        store.close()


def test_new_database_wal_and_shm_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = SqliteSessionStore(tmp_path / "db" / "s.db")
        try:
            store.create_session(NewSession(title="t"))
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "db").iterdir()}
        finally:
            store.close()
    finally:
        os.umask(old)
    assert modes == {"s.db": 0o600, "s.db-wal": 0o600, "s.db-shm": 0o600}


def test_deleted_database_file_refuses_the_next_write_and_saves_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path)
    try:
        sid = store.create_session(NewSession(title="t")).id
        store.append_messages(sid, [user("before 1"), user("before 2")])
        path.unlink()
        with pytest.raises(StoreError) as refused:
            store.append_messages(sid, [user("after the delete")])
        message = str(refused.value)
        assert f"the database file {path} was deleted" in message
        for _ in range(3):  # every later write is refused too, not acknowledged
            with pytest.raises(StoreError, match="was deleted"):
                store.append_messages(sid, [user("later")])
    finally:
        store.close()
    (rescued,) = tmp_path.glob("s.db.rescued-*")
    assert str(rescued) in message
    assert stat.S_IMODE(rescued.stat().st_mode) == 0o600
    assert stored_texts(rescued, sid) == ["before 1", "before 2"]


def test_replaced_database_file_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path)
    try:
        sid = store.create_session(NewSession(title="t")).id
        store.append_messages(sid, [user("in the original")])
        other = tmp_path / "other.db"
        sqlite3.connect(other).execute("CREATE TABLE x (y)").connection.close()
        os.replace(other, path)
        with pytest.raises(StoreError, match=f"the database file {path} was replaced"):
            store.append_messages(sid, [user("into which file?")])
    finally:
        store.close()
    (rescued,) = tmp_path.glob("s.db.rescued-*")
    assert stored_texts(rescued, sid) == ["in the original"]


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from hermes_hookspecs.errors import StoreError
    from hermes_hookspecs.messages import Message
    from hermes_hookspecs.records import NewMessage, NewSession
    from hermes_plugin_sqlite_store import SqliteSessionStore

    path = sys.argv[1]
    store = SqliteSessionStore(path)
    sid = store.create_session(NewSession(id="s1", title="t")).id
    for i in range(5):
        store.append_messages(sid, [NewMessage(message=Message(role="user", content=f"turn {i}"))])
    os.unlink(path + "-wal")
    refused = 0
    for i in range(5):
        try:
            store.append_messages(
                sid, [NewMessage(message=Message(role="user", content=f"late {i}"))]
            )
        except StoreError as exc:
            refused += 1
            last = str(exc)
    print(refused)
    print(last)
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_deleted_wal_refuses_writes_and_earlier_turns_survive_a_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -9, done.stderr
    refused, message = done.stdout.splitlines()[:2]
    assert refused == "5"  # none of the writes after the delete was acknowledged
    assert f"the write-ahead log {path}-wal was deleted" in message
    assert "checkpointed into" in message
    # the turns acknowledged before the delete are in the main file after the SIGKILL
    assert stored_texts(path, "s1") == [f"turn {i}" for i in range(5)]


def test_an_intact_store_keeps_writing_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    for n in range(3):  # close/reopen: SQLite removes and recreates the -wal; that is fine
        store = SqliteSessionStore(path)
        try:
            sid = "s" if n else store.create_session(NewSession(id="s", title="t")).id
            store.append_messages(sid, [user(f"open {n}")])
        finally:
            store.close()
    assert stored_texts(path, "s") == ["open 0", "open 1", "open 2"]
