"""The SQLite session store on real files: CRUD, compaction, search, journal, schema, corruption."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_hookspecs.errors import (
    CorruptDatabaseError,
    NotFoundError,
    SchemaVersionError,
    StoreError,
    ValidationError,
)
from hermes_hookspecs.messages import HandoffSummary, Message, ToolCall, ToolFunction, Usage
from hermes_hookspecs.records import (
    CompactionEvent,
    NewMessage,
    NewSession,
    PrefixEntry,
    UsageRecord,
)
from hermes_plugin_sqlite_store import SqliteSessionStore
from hermes_plugin_sqlite_store.filesystems import wal_unsafe_reason
from hermes_plugin_sqlite_store.migrations import LATEST_VERSION, MIGRATIONS


def user(text: str, **extra: object) -> NewMessage:
    return NewMessage(message=Message(role="user", content=text), **extra)  # type: ignore[arg-type]


def call(call_id: str, args: str = '{"cmd": "ls"}') -> NewMessage:
    return NewMessage(
        message=Message(
            role="assistant",
            content=None,
            tool_calls=[ToolCall(id=call_id, function=ToolFunction(name="bash", arguments=args))],
        )
    )


def result(call_id: str, text: str) -> NewMessage:
    return NewMessage(message=Message(role="tool", tool_call_id=call_id, content=text))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSessionStore]:
    s = SqliteSessionStore(tmp_path / "hermes.db")
    yield s
    s.close()


def dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


# -- sessions and blobs -------------------------------------------------------------
def test_session_crud_and_listing(store: SqliteSessionStore) -> None:
    a = store.create_session(NewSession(title="a", cwd="/w", goal="g", routing={"chat": 1}))
    b = store.create_session(NewSession(id="fixed", title="b", parent_id=a.id))
    assert len(a.id) == 32 and b.id == "fixed" and b.parent_id == a.id
    assert store.get_session(a.id).routing == {"chat": 1}
    time.sleep(0.002)
    store.append_messages(a.id, [user("bump")])
    assert [s.id for s in store.list_sessions()] == [a.id, b.id]
    assert [s.id for s in store.list_sessions(limit=1, offset=1)] == [b.id]

    digest = store.put_blob("system_prompt", "You are hermes.")
    updated = store.update_session(
        a.id, title="new", routing={"x": [1]}, model="m", system_prompt_hash=digest
    )
    assert (updated.title, updated.routing, updated.model) == ("new", {"x": [1]}, "m")
    assert updated.system_prompt_hash == digest and updated.cwd == "/w"
    with pytest.raises(ValidationError, match="cwd"):
        store.update_session(a.id, cwd="/elsewhere")
    with pytest.raises(ValidationError, match="tools_hash"):
        store.update_session(a.id, tools_hash="0" * 64)
    with pytest.raises(ValidationError, match="already exists"):
        store.create_session(NewSession(id="fixed"))
    with pytest.raises(NotFoundError, match="nope"):
        store.create_session(NewSession(parent_id="nope"))
    ended = store.end_session(a.id, "user")
    assert ended.end_reason == "user" and ended.ended_at is not None
    with pytest.raises(NotFoundError, match="missing"):
        store.get_session("missing")


def test_blobs_are_content_addressed(store: SqliteSessionStore) -> None:
    text = "system prompt ✓ 東京\n"
    digest = store.put_blob("system_prompt", text)
    assert digest == hashlib.sha256(text.encode()).hexdigest()
    assert store.put_blob("system_prompt", text) == digest
    assert store.get_blob(digest) == text
    conn = sqlite3.connect(store.path)
    assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 1
    conn.close()
    with pytest.raises(NotFoundError, match="deadbeef"):
        store.get_blob("deadbeef")
    with pytest.raises(ValidationError, match="kind"):
        store.put_blob("other", "x")  # type: ignore[arg-type]


# -- messages ------------------------------------------------------------------------
def test_append_roundtrip_and_order(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    summary = HandoffSummary(goal="ship it", progress="half")
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "x"}},
    ]
    written = store.append_messages(
        sid,
        [
            NewMessage(
                message=Message(role="user", content="hi"),
                api_content="hi + recalled memory",
                token_count=7,
                turn_id="t1",
            ),
            NewMessage(message=Message(role="user", content=parts)),
            call("c1"),
            result("c1", "out"),
            NewMessage(message=Message(role="user", kind="summary", summary=summary, content="s")),
            NewMessage(message=Message(role="assistant", content="")),
        ],
    )
    assert [m.position for m in written] == [1, 2, 3, 4, 5, 6]
    active = store.active_messages(sid)
    assert [m.id for m in active] == [m.id for m in written]
    assert active[0].to_api() == {"role": "user", "content": "hi + recalled memory"}
    assert active[0].token_count == 7 and active[0].turn_id == "t1"
    assert active[1].message.content == parts
    assert active[2].message.tool_calls == call("c1").message.tool_calls
    assert active[3].message.tool_call_id == "c1"
    assert active[4].message.summary == summary
    assert active[5].message.content == ""
    assert [m.message for m in active] == [m.message for m in written]
    ids = [m.id for m in written]
    assert [m.id for m in store.get_messages([ids[3], ids[0]])] == [ids[3], ids[0]]
    with pytest.raises(NotFoundError):
        store.get_messages([10_000])
    more = store.append_messages(sid, [user("later")])
    assert more[0].position == 7
    assert [m.id for m in store.all_messages(sid)] == [*ids, more[0].id]


def test_tool_pairing_is_validated_against_the_active_view(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    store.append_messages(sid, [user("go"), call("c1")])
    store.append_messages(sid, [result("c1", "answer")])  # answers an earlier call
    store.append_messages(sid, [call("c2"), result("c2", "same batch")])
    before = dump(store.path)
    with pytest.raises(ValidationError, match="'nope'"):
        store.append_messages(sid, [user("x"), result("nope", "orphan")])
    with pytest.raises(ValidationError, match="'c3'"):
        store.append_messages(sid, [result("c3", "too early"), call("c3")])
    # once compacted away, a call no longer counts
    active = store.active_messages(sid)
    store.archive_and_compact(sid, [user("summary")], watermark=active[-1].id)
    with pytest.raises(ValidationError, match="'c1'"):
        store.append_messages(sid, [result("c1", "stale")])
    assert len(dump(store.path)) > len(before)  # the compaction did land


def test_bad_input_is_refused_whole(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    store.append_messages(sid, [user("kept")])
    before = dump(store.path)
    with pytest.raises(ValidationError, match="role"):
        store.append_messages(sid, [{"role": "user", "content": "ok"}, {"content": "no role"}])  # type: ignore[list-item]
    bad_args = {
        "role": "assistant",
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{not json"}}],
    }
    with pytest.raises(ValidationError, match="arguments"):
        store.append_messages(sid, [bad_args])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="tool_call_id"):
        store.append_messages(sid, [{"role": "tool", "content": "x"}])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="origin_id 999"):
        store.append_messages(sid, [user("x", origin_id=999)])
    with pytest.raises(NotFoundError):
        store.append_messages("nope", [user("x")])
    assert dump(store.path) == before
    # a wire dict that is valid is accepted
    assert store.append_messages(sid, [{"role": "user", "content": "wire"}])[0].position == 2  # type: ignore[list-item]


# -- compaction -------------------------------------------------------------------------
def _filled(store: SqliteSessionStore, n: int = 6) -> tuple[str, list[int]]:
    sid = store.create_session(
        NewSession(title="T", cwd="/c", goal="G", routing={"gateway": "chat-1"})
    ).id
    ids = [m.id for m in store.append_messages(sid, [user(f"msg {i}") for i in range(n)])]
    return sid, ids


def test_archive_and_compact_in_place(store: SqliteSessionStore) -> None:
    sid, ids = _filled(store)
    watermark = ids[-1]
    late = store.append_messages(sid, [user("arrived after the snapshot")])[0]
    tail = store.get_messages(ids[-2:])
    new = [user("SUMMARY")] + [NewMessage(message=m.message, origin_id=m.id) for m in tail]
    event = CompactionEvent(session_id=sid, engine="local", tokens_before=100, tokens_after=10)
    commit = store.archive_and_compact(sid, new, watermark=watermark, event=event)
    assert (commit.archived, commit.inserted, commit.carried_after_watermark) == (6, 3, 1)
    assert commit.child_session_id is None
    active = store.active_messages(sid)
    assert [m.id for m in active] == commit.active_ids
    assert [m.message.content for m in active] == [
        "SUMMARY",
        "msg 4",
        "msg 5",
        late.message.content,
    ]
    assert active[-1].id == late.id
    assert [m.origin_id for m in active[1:3]] == ids[-2:]
    everything = store.all_messages(sid)
    assert len(everything) == 6 + 1 + 3  # nothing deleted
    old = [m for m in everything if m.id in ids]
    assert all(not m.active and m.compacted for m in old)
    session = store.get_session(sid)
    assert (session.title, session.cwd, session.goal, session.routing) == (
        "T",
        "/c",
        "G",
        {"gateway": "chat-1"},
    )
    assert session.compression_count == 1 and session.end_reason is None
    assert [e.tokens_after for e in store.compaction_events(sid)] == [10]
    # appends continue after the new view
    assert store.append_messages(sid, [user("next")])[0].position > active[-1].position


def test_archive_and_compact_rotation(store: SqliteSessionStore) -> None:
    sid, ids = _filled(store, 4)
    digest = store.put_blob("system_prompt", "frozen")
    store.update_session(sid, system_prompt_hash=digest)
    late = store.append_messages(sid, [user("late")])[0]
    commit = store.archive_and_compact(sid, [user("SUMMARY")], watermark=ids[-1], in_place=False)
    assert commit.child_session_id is not None
    parent = store.get_session(sid)
    child = store.get_session(commit.child_session_id)
    assert parent.end_reason == "compression" and parent.ended_at is not None
    assert child.parent_id == sid and child.title == "T" and child.routing == parent.routing
    assert child.system_prompt_hash == digest and child.compression_count == 1
    assert [m.message.content for m in store.active_messages(child.id)] == ["SUMMARY", "late"]
    assert store.active_messages(child.id)[1].origin_id == late.id
    assert store.active_messages(sid) == []
    assert all(m.compacted for m in store.all_messages(sid))
    with pytest.raises(ValidationError, match="child"):
        store.archive_and_compact(child.id, [], watermark=0, child=NewSession())


def test_compaction_refuses_a_view_with_orphan_tool_results(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    first = store.append_messages(sid, [call("c9")])
    store.append_messages(sid, [result("c9", "late result")])
    before = dump(store.path)
    with pytest.raises(ValidationError, match="'c9'"):
        store.archive_and_compact(sid, [user("SUMMARY")], watermark=first[0].id)
    assert dump(store.path) == before


# -- search ---------------------------------------------------------------------------------
def test_search_word_substring_cjk_and_escaping(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    other = store.create_session(NewSession()).id
    rows = store.append_messages(
        sid,
        [
            user("The deployment failed with ConnectionRefusedError on port 5432"),
            user("東京タワーに行きました"),
            user('literal syntax: "quoted" AND NEAR(a b) col:val * ^start (paren'),
            call("c1", '{"path": "/srv/app/settings.py"}'),
            result("c1", "café résumé naïve"),
        ],
    )
    store.append_messages(other, [user("deployment elsewhere")])
    ids = [m.id for m in rows]

    def found(query: str, **kw: object) -> list[int]:
        return [h.message_id for h in store.search(query, **kw)]  # type: ignore[arg-type]

    assert found("deployment") == [ids[0], store.all_messages(other)[0].id] or set(
        found("deployment")
    ) == {ids[0], store.all_messages(other)[0].id}
    assert found("deployment", session_id=sid) == [ids[0]]
    assert found("RefusedErr") == [ids[0]]  # substring, via trigram
    assert found("東京タワー") == [ids[1]]  # CJK, via trigram
    assert found("東京") == [ids[1]]  # two CJK characters: substring scan
    assert found("settings.py") == [ids[3]]  # tool-call arguments are indexed
    assert found("cafe resume") == [ids[4]]  # diacritics folded
    for query in ['"quoted"', "AND", "NEAR(a b)", "col:val", "*", "^start", "(paren", '"', "'"]:
        hits = store.search(query)
        if query == "'":
            assert hits == []
        else:
            assert [h.message_id for h in hits] == [ids[2]], query
    for nasty in ["", "   ", "a OR", ")(", "NOT", '""""', "\x00", "-", "x" * 500]:
        store.search(nasty)  # never an error
    word_row, sub_row = store.append_messages(other, [user("we run tests"), user("rerunning")])
    ranked = store.search("run", session_id=other)
    assert [h.message_id for h in ranked] == [word_row.id, sub_row.id]  # word match first
    assert ranked[0].score > ranked[1].score >= 1  # both cover every term (one)
    hit = store.search("ConnectionRefusedError")[0]
    assert "ConnectionRefusedError" in hit.snippet and hit.role == "user" and hit.active
    assert hit.score > 0


def test_search_compacted_rows_dedupe_and_recovery_pointer(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    rows = store.append_messages(
        sid,
        [
            user("we chose the zebrafish protocol"),
            user("filler one"),
            user("the quokka decision is final"),
            user("filler two"),
        ],
    )
    tail = rows[-2:]
    new = [user("summary of earlier work")] + [
        NewMessage(message=m.message, origin_id=m.id) for m in tail
    ]
    store.archive_and_compact(sid, new, watermark=rows[-1].id)
    hits = store.search("zebrafish")
    assert [(h.message_id, h.active, h.compacted) for h in hits] == [(rows[0].id, False, True)]
    assert store.search("zebrafish", include_compacted=False) == []
    # the carried-forward row and its origin are one hit; the active copy is reported
    quokka = store.search("quokka")
    assert len(quokka) == 1 and quokka[0].active and quokka[0].message_id != rows[2].id
    # compact again: a copy of a copy still counts once
    active = store.active_messages(sid)
    again = [user("second summary")] + [
        NewMessage(message=m.message, origin_id=m.id) for m in active[1:]
    ]
    store.archive_and_compact(sid, again, watermark=active[-1].id)
    assert len(store.search("quokka")) == 1
    assert len(store.search("quokka", include_compacted=False)) == 1
    # the recovery pointer opens the original neighbourhood
    context = store.message_context(hits[0].message_id, before=1, after=1)
    assert [m.message.content for m in context] == [
        "we chose the zebrafish protocol",
        "filler one",
    ]
    middle = store.message_context(rows[1].id, before=1, after=1)
    assert [m.id for m in middle] == [rows[0].id, rows[1].id, rows[2].id]


@pytest.mark.parametrize("near", [4096, 3, 1])
def test_message_context_is_the_sessions_own_rows_in_write_order(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch, near: int
) -> None:
    """Interleaved sessions: a window's rows are its session's nearest, whether found
    by walking the ids near the message (``NEAR_IDS``) or through the session's index
    (rows further apart than that, or the session's first and last rows)."""
    from hermes_plugin_sqlite_store import messages

    monkeypatch.setattr(messages, "NEAR_IDS", near)
    mine = store.create_session(NewSession()).id
    other = store.create_session(NewSession()).id
    written: list[int] = []
    for i in range(6):
        written += [r.id for r in store.append_messages(mine, [user(f"mine {i}")])]
        store.append_messages(other, [user(f"other {i}.{j}") for j in range(i % 3 + 1)])
    for at, message_id in enumerate(written):
        context = store.message_context(message_id, before=2, after=2)
        assert [r.id for r in context] == written[max(0, at - 2) : at + 3]
        assert all(r.session_id == mine for r in context)
    assert [r.id for r in store.message_context(written[3], before=0, after=0)] == [written[3]]
    assert [r.id for r in store.message_context(written[0], before=9, after=9)] == written


def test_flag_flips_do_not_touch_the_fts_index(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    store.append_messages(sid, [user(f"indexed text {i}") for i in range(50)])
    store.close()

    def index_state() -> list[object]:
        conn = sqlite3.connect(store.path)
        out = [
            conn.execute(f"SELECT count(*), sum(length(block)), total(id) FROM {t}_data").fetchone()
            for t in ("messages_fts_word", "messages_fts_tri")
        ]
        conn.close()
        return out

    before = index_state()
    conn = sqlite3.connect(store.path)
    conn.execute("UPDATE messages SET active = 0, compacted = 1")
    conn.execute("UPDATE messages SET position = position + 100")
    conn.commit()
    with pytest.raises(sqlite3.DatabaseError, match="immutable"):
        conn.execute("UPDATE messages SET content = 'rewritten'")
    conn.close()
    assert index_state() == before


def test_index_cap_is_checked_as_in_postgres(tmp_path: Path) -> None:
    for bad in (0, -1, True, "10"):
        with pytest.raises(ValidationError, match="fts_index_cap"):
            SqliteSessionStore(tmp_path / "bad-cap.db", fts_index_cap=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "bad-cap.db").exists()


def test_large_tool_output_is_indexed_up_to_the_cap(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "cap.db", fts_index_cap=1000)
    sid = store.create_session(NewSession()).id
    big = "early_marker " + "filler " * 500 + "late_marker"
    store.append_messages(sid, [call("c1"), result("c1", big)])
    assert len(store.search("early_marker")) == 1
    assert store.search("late_marker") == []
    assert store.active_messages(sid)[1].message.content == big  # stored in full
    store.close()


# -- records -----------------------------------------------------------------------------
def test_usage_prefix_ledger_and_events(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    usage = Usage(input_tokens=10, output_tokens=2, cache_read_tokens=8, reasoning_tokens=1)
    store.record_usage(UsageRecord(session_id=sid, turn_id="t", usage=usage))
    assert store.usage(sid)[0].usage == usage
    entry = PrefixEntry(
        session_id=sid,
        request_index=0,
        request_hash="h",
        request_tokens=10,
        shared_prefix_hash="p",
        shared_prefix_tokens=0,
        previous_tokens=0,
        break_reason="first",
    )
    store.record_prefix(entry)
    got = store.prefix_entries(sid)[0]
    assert got.break_reason == "first" and got.created_at is not None
    with pytest.raises(NotFoundError):
        store.record_usage(UsageRecord(session_id="nope", usage=usage))


# -- busy handling ---------------------------------------------------------------------------
def test_writes_retry_while_locked_then_give_up(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "busy.db", busy_budget=1.0)
    sid = store.create_session(NewSession()).id
    other = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(0.1, lambda: other.execute("COMMIT"))
    timer.start()
    start = time.monotonic()
    store.append_messages(sid, [user("waited")])  # succeeds once the lock is gone
    assert 0.08 < time.monotonic() - start < 1.0
    timer.join()
    other.execute("BEGIN IMMEDIATE")
    start = time.monotonic()
    with pytest.raises(StoreError, match="locked"):
        store.append_messages(sid, [user("never")])
    assert 0.9 < time.monotonic() - start < 3.0
    other.execute("ROLLBACK")
    other.close()
    assert [m.message.content for m in store.active_messages(sid)] == ["waited"]
    store.close()


# -- journal mode ------------------------------------------------------------------------------
def test_wal_by_default_and_rollback_fallback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wal = SqliteSessionStore(tmp_path / "wal.db")
    assert wal.journal_mode == "wal"
    wal.close()
    with caplog.at_level(logging.WARNING):
        fallback = SqliteSessionStore(tmp_path / "rollback.db", journal="rollback")
    assert fallback.journal_mode == "delete"
    assert "rollback journal" in caplog.text
    sid = fallback.create_session(NewSession()).id
    fallback.append_messages(sid, [user("works without WAL")])
    assert fallback.search("without")[0].message_id == fallback.active_messages(sid)[0].id
    fallback.close()
    with (tmp_path / "rollback.db").open("rb") as handle:
        assert handle.read(20)[18] == 1  # legacy (rollback) on disk
    # an existing WAL file is never downgraded, even when rollback is asked for
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = SqliteSessionStore(tmp_path / "wal.db", journal="rollback")
    assert again.journal_mode == "wal" and "not downgrad" in caplog.text.replace(
        "never downgraded", "not downgrad"
    )
    again.close()
    with (tmp_path / "wal.db").open("rb") as handle:
        assert handle.read(20)[18] == 2


def test_filesystem_detection_from_the_mount_table(tmp_path: Path) -> None:
    mounts = "\n".join(
        [
            "/dev/vda / ext4 rw 0 0",
            "server:/export /mnt/nfs nfs4 rw 0 0",
            "sshfs#me@h: /mnt/ssh\\040dir fuse.sshfs rw 0 0",
            "/dev/sdb1 /mnt/ntfs fuseblk rw 0 0",
            "tmpfs /mnt/nfs/local tmpfs rw 0 0",
        ]
    )
    assert wal_unsafe_reason(Path("/home/me/h.db"), mounts) is None
    assert "nfs4" in (wal_unsafe_reason(Path("/mnt/nfs/x/h.db"), mounts) or "")
    assert "FUSE" in (wal_unsafe_reason(Path("/mnt/ssh dir/h.db"), mounts) or "")
    assert wal_unsafe_reason(Path("/mnt/ntfs/h.db"), mounts) is None
    assert wal_unsafe_reason(Path("/mnt/nfs/local/h.db"), mounts) is None  # longest prefix
    assert wal_unsafe_reason(tmp_path / "h.db") is None  # this machine's own mount table


# -- schema ---------------------------------------------------------------------------------------
def test_migrations_are_recorded_and_applied_once(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    first = SqliteSessionStore(path)
    assert first.applied_migrations == [m.name for m in MIGRATIONS]
    recorded = first.migrations()
    assert [(v, n) for v, n, _ in recorded] == [(i + 1, m.name) for i, m in enumerate(MIGRATIONS)]
    first.close()
    second = SqliteSessionStore(path)
    assert second.applied_migrations == []
    assert second.migrations() == recorded
    second.close()


def test_version_1_database_upgrades_with_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hermes_plugin_sqlite_store import migrations

    path = tmp_path / "v1.db"
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", MIGRATIONS[:1])
        patch.setattr(migrations, "LATEST_VERSION", 1)
        old = SqliteSessionStore(path)
        sid = old.create_session(NewSession(title="v1")).id
        old.close()
    conn = sqlite3.connect(path)  # a row as version 1 wrote it (no annotations column)
    conn.execute(
        "INSERT INTO messages (id, session_id, position, role, content, created_at, fts_cap) "
        "VALUES (7, ?, 1, 'user', 'written by version 1', 0, 1000)",
        (sid,),
    )
    conn.execute("UPDATE sessions SET next_position = 2 WHERE id = ?", (sid,))
    conn.commit()
    conn.close()
    store = SqliteSessionStore(path)
    assert store.applied_migrations == [m.name for m in MIGRATIONS[1:]]
    (row,) = store.active_messages(sid)
    assert (row.id, row.message.text(), row.annotations) == (7, "written by version 1", {})
    new = store.append_messages(sid, [user("now", annotations={"k": [1]})])
    assert store.get_messages([new[0].id])[0].annotations == {"k": [1]}
    assert [h.message_id for h in store.search("version")] == [row.id]
    assert [h.message_id for h in store.search("itten by vers")] == [row.id]  # trigram rebuilt
    store.close()


def test_future_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    SqliteSessionStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    conn.commit()
    conn.close()
    before = dump(path)
    with pytest.raises(SchemaVersionError, match=f"schema version {LATEST_VERSION + 1}"):
        SqliteSessionStore(path)
    assert dump(path) == before
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION}")
    conn.execute("UPDATE schema_migrations SET name = 'someone_elses' WHERE version = 1")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError, match="someone_elses"):
        SqliteSessionStore(path)


def test_corrupt_and_truncated_files_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 200)
    with pytest.raises(CorruptDatabaseError, match=r"garbage\.db"):
        SqliteSessionStore(garbage)
    assert garbage.read_bytes() == b"this is not a database at all" * 200

    path = tmp_path / "trunc.db"
    store = SqliteSessionStore(path)
    sid = store.create_session(NewSession()).id
    store.append_messages(sid, [user("x" * 2000 + str(i)) for i in range(200)])
    store.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptDatabaseError, match="truncated"):
        SqliteSessionStore(path)
    assert path.read_bytes() == data[: len(data) // 2]

    # damage inside the file (valid header): found by health() or on use
    broken = tmp_path / "broken.db"
    broken.write_bytes(data)
    raw = bytearray(data)
    for offset in range(4096 * 3, len(raw) - 4096, 4096 * 2):
        raw[offset + 10 : offset + 400] = b"\xff" * 390
    broken.write_bytes(bytes(raw))
    with pytest.raises(CorruptDatabaseError, match=r"broken\.db"):
        damaged = SqliteSessionStore(broken)
        report = damaged.health()
        if not report.ok:
            raise CorruptDatabaseError(f"{broken}: {report.problems[:2]}")
        damaged.all_messages(sid)

    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a hermes session database"):
        SqliteSessionStore(foreign)
    assert dump(foreign) == ["BEGIN TRANSACTION;", "CREATE TABLE t (x);", "COMMIT;"]


def test_health_report_on_a_sound_database(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    store.append_messages(sid, [user("fine")])
    report = store.health()
    assert report.ok and report.problems == [] and report.schema_version == LATEST_VERSION
    assert store.health(quick=True).ok


def test_concurrent_threads_share_one_store(store: SqliteSessionStore) -> None:
    sid = store.create_session(NewSession()).id
    errors: list[BaseException] = []

    def writer(tag: int) -> None:
        try:
            for i in range(30):
                store.append_messages(sid, [user(f"w{tag}-{i}")])
                store.active_messages(sid)
                store.search(f"w{tag}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    contents = [m.message.content for m in store.active_messages(sid)]
    assert len(contents) == 120 and len(set(contents)) == 120
    positions = [m.position for m in store.active_messages(sid)]
    assert positions == sorted(positions) and len(set(positions)) == 120


def test_too_old_sqlite_library_is_named() -> None:
    from hermes_plugin_sqlite_store.store import check_sqlite_version

    with pytest.raises(StoreError, match=r"needs SQLite 3\.35\.0 or newer.*uses SQLite 3\.31\.1"):
        check_sqlite_version("3.31.1")
    check_sqlite_version("3.35.0")
    check_sqlite_version(sqlite3.sqlite_version)


def test_search_small_session_scan_agrees_with_the_trigram_index(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hermes_plugin_sqlite_store.search as search_module

    sid = store.create_session(NewSession()).id
    other = store.create_session(NewSession()).id
    store.append_messages(other, [user("FormsetFactory in the other session")])
    store.append_messages(
        sid,
        [
            user("the FormsetFactory builder"),
            call("c1", '{"path": "/srv/app/Settings.py", "note": "say \\"hi\\""}'),
            result("c1", "ok"),
            user("我们的数据库很大"),
            user("mset and factory apart"),
            user("plain words only"),
        ],
    )
    queries = ["msetfac", "SETTINGS.PY", 'say "hi"', "数据库", "msetfac settings.py", "ms", "zzz q"]

    def answers() -> dict[str, list[int]]:
        return {q: [h.message_id for h in store.search(q, session_ids=[sid])] for q in queries}

    scanned = answers()  # a small session: its rows are read whole
    monkeypatch.setattr(search_module, "SESSION_SCAN_ROWS", 0)  # now through the trigram index
    assert answers() == scanned
    assert scanned["msetfac"] and scanned["数据库"] and scanned["SETTINGS.PY"]
    assert scanned["zzz q"] == []


def test_list_sessions_orders_ties_as_the_postgres_store_does(tmp_path: Path) -> None:
    # sessions updated at the same instant: the newest created first, then by id (both stores)
    store = SqliteSessionStore(tmp_path / "ties.db")
    for name in "cab":
        store.create_session(NewSession(id=f"s-{name}"))
    store.close()
    with sqlite3.connect(tmp_path / "ties.db") as conn:
        conn.execute("UPDATE sessions SET updated_at = 100.0, created_at = 50.0")
        conn.execute("UPDATE sessions SET created_at = 60.0 WHERE id = 's-a'")
    store = SqliteSessionStore(tmp_path / "ties.db")
    assert [s.id for s in store.list_sessions()] == ["s-a", "s-b", "s-c"]
    assert [s.id for s in store.list_sessions(limit=1, offset=1)] == ["s-b"]
    store.close()
