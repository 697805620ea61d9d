"""A store path that collides with SQLite's side files (-wal, -shm, -journal) is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_hookspecs.errors import StoreError
from hermes_hookspecs.messages import Message
from hermes_hookspecs.records import NewMessage, NewSession
from hermes_plugin_sqlite_store.side_files import collision
from hermes_plugin_sqlite_store.store import SqliteSessionStore


def _store_with_a_session(path: Path) -> tuple[SqliteSessionStore, str]:
    store = SqliteSessionStore(path)
    sid = store.create_session(NewSession(title="kept")).id
    store.append_messages(sid, [NewMessage(message=Message(role="user", content="hello"))])
    return store, sid


@pytest.mark.parametrize("suffix", ["-shm", "-wal"])
def test_a_side_file_of_an_open_database_is_refused_and_the_database_is_untouched(
    tmp_path: Path, suffix: str
) -> None:
    store, sid = _store_with_a_session(tmp_path / "x.db")
    side = tmp_path / f"x.db{suffix}"
    assert side.exists()  # WAL mode: the live database keeps both
    before = side.stat().st_size
    with pytest.raises(StoreError, match=rf"x\.db{suffix} is the .* of the SQLite database"):
        SqliteSessionStore(side)
    assert side.stat().st_size == before
    assert not (tmp_path / f"x.db{suffix}-shm").exists()
    assert not (tmp_path / f"x.db{suffix}-wal").exists()
    assert [m.message.text() for m in store.active_messages(sid)] == ["hello"]
    assert store.health().ok
    store.close()


def test_a_side_file_name_of_a_closed_database_is_refused(tmp_path: Path) -> None:
    store, _sid = _store_with_a_session(tmp_path / "x.db")
    store.close()
    for suffix in ("-wal", "-shm", "-journal"):
        with pytest.raises(StoreError, match=r"open .*x\.db itself"):
            SqliteSessionStore(tmp_path / f"x.db{suffix}")
        assert not (tmp_path / f"x.db{suffix}").exists()


def test_a_database_lying_where_another_keeps_its_log_is_not_overwritten(tmp_path: Path) -> None:
    # a database named like a side file, made while the database it would belong to is absent
    squatter, sid = _store_with_a_session(tmp_path / "y.db-wal")
    squatter.close()
    with pytest.raises(StoreError, match=r"y\.db-wal is a SQLite database of its own"):
        SqliteSessionStore(tmp_path / "y.db")
    assert not (tmp_path / "y.db").exists()
    again = SqliteSessionStore(tmp_path / "y.db-wal")
    assert again.get_session(sid).title == "kept"
    again.close()


def test_names_that_only_look_like_side_files_are_allowed(tmp_path: Path) -> None:
    # no database "notes" beside it, and "-wal" alone is a name, not a suffix
    for name in ("notes-journal", "-wal"):
        assert collision(tmp_path / name) is None
        store = SqliteSessionStore(tmp_path / name)
        store.close()
    # beside a file that is not a database, a name ending like a side file is just a name
    (tmp_path / "plan").write_text("a text file, not a database\n")
    assert collision(tmp_path / "plan-journal") is None
    # ... but beside an empty file (SQLite's new database) it is one
    (tmp_path / "fresh.db").touch()
    assert collision(tmp_path / "fresh.db-wal") is not None
    # a real side file (not a database) where a new store keeps its own is no collision
    (tmp_path / "z.db-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7")
    assert collision(tmp_path / "z.db") is None
