"""PostgreSQL store: plugin wiring, schema, and real-process concurrency, crash and takeover tests.

The server comes from ``HERMES_CORE_POSTGRES_DSN`` or the local one that
``.ci/start-postgres.sh`` starts; without one the server tests skip (saying
how to start one), except under CI (``CI=true``) where they fail. Child
processes are real interpreters started with ``spawn``; nothing of ours is
mocked.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest

from hermes_core.config import settings_from
from hermes_hookspecs import (
    ConfigError,
    LeaseBusy,
    LeaseHolder,
    LeaseLost,
    Message,
    NewMessage,
    NewSession,
    SchemaVersionError,
    StoreError,
    ToolCall,
    ToolFunction,
    ValidationError,
)
from hermes_plugin_postgres_store import (
    PostgresSessionStore,
    open_from_settings,
    store_options,
)
from hermes_plugin_postgres_store.migrations import MIGRATIONS
from hermes_plugin_postgres_store.testing import drop_schema, in_ci, scratch_schema

SPAWN = multiprocessing.get_context("spawn")


def pid(proc: BaseProcess) -> int:
    """A started process's pid (``Process.pid`` is None only before ``start()``)."""
    assert proc.pid is not None
    return proc.pid


@pytest.fixture
def store(pg_dsn: str, schema: str) -> Iterator[PostgresSessionStore]:
    handle = PostgresSessionStore(pg_dsn, schema=schema, max_size=4)
    try:
        yield handle
    finally:
        handle.close()


def user(text: str, turn_id: str | None = None) -> NewMessage:
    return NewMessage(message=Message(role="user", content=text), turn_id=turn_id)


def open_store(dsn: str, schema: str) -> PostgresSessionStore:
    return PostgresSessionStore(dsn, schema=schema, min_size=1, max_size=2)


def raw(dsn: str, schema: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        cur = conn.execute(query.encode(), params)
        return list(cur.fetchall()) if cur.description else []


# ---------------------------------------------------------------------------
# plugin wiring (no server needed)
# ---------------------------------------------------------------------------


def test_plugin_registers_postgres_factory() -> None:
    import hermes_plugin_postgres_store as plugin

    registered: dict[str, Any] = {}
    plugin.register_session_stores(
        register=lambda name, factory: registered.update({name: factory})
    )
    assert list(registered) == ["postgres"]
    assert PostgresSessionStore.name == "postgres"


def test_empty_dsn_is_a_config_error_naming_both_settings() -> None:
    settings = settings_from({"session": {"store": "postgres"}})
    with pytest.raises(ConfigError) as info:
        open_from_settings(settings)
    assert "session.postgres_dsn" in str(info.value)
    assert "HERMES_CORE_POSTGRES_DSN" in str(info.value)


def test_plugin_loads_without_psycopg_and_says_what_to_install() -> None:
    script = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('psycopg', 'psycopg_pool'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import hermes_plugin_postgres_store as p\n"
        "from hermes_hookspecs import ConfigError\n"
        "try:\n"
        "    p.PostgresSessionStore('postgresql://u@127.0.0.1/db')\n"
        "except ConfigError as exc:\n"
        "    print('CONFIG:', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "CONFIG:" in out.stdout and "pip install" in out.stdout and "psycopg" in out.stdout


def test_unreachable_server_is_a_store_error_without_password() -> None:
    with pytest.raises(StoreError) as info:
        PostgresSessionStore("postgresql://bob:s3cret@127.0.0.1:1/nowhere", connect_timeout=2)
    text = str(info.value)
    assert "cannot connect" in text and "s3cret" not in text and "127.0.0.1" in text


def test_bad_schema_name_refused() -> None:
    with pytest.raises(ConfigError, match="schema"):
        PostgresSessionStore("postgresql://u@127.0.0.1/db", schema='x"; DROP')


# ---------------------------------------------------------------------------
# schema and migrations
# ---------------------------------------------------------------------------


def test_migrations_recorded_once(pg_dsn: str, schema: str) -> None:
    open_store(pg_dsn, schema).close()
    open_store(pg_dsn, schema).close()
    names = [r[0] for r in raw(pg_dsn, schema, "SELECT name FROM schema_migrations ORDER BY name")]
    assert names == [m.name for m in MIGRATIONS]


def test_newer_schema_refused_and_untouched(pg_dsn: str, schema: str) -> None:
    with open_store(pg_dsn, schema) as store:
        sid = store.create_session(NewSession(title="kept")).id
    raw(pg_dsn, schema, "INSERT INTO schema_migrations (name) VALUES ('9999_from_the_future')")
    with pytest.raises(SchemaVersionError, match="9999_from_the_future"):
        open_store(pg_dsn, schema)
    assert raw(pg_dsn, schema, "SELECT title FROM sessions WHERE id = %s", (sid,)) == [("kept",)]


def test_migration_0007_takes_a_tool_results_name_out_of_its_search_body(
    pg_dsn: str, schema: str
) -> None:
    from hermes_hookspecs import Message, NewMessage, ToolCall, ToolFunction

    call = ToolCall(id="c1", function=ToolFunction(name="Bash", arguments='{"command": "ls"}'))
    with open_store(pg_dsn, schema) as store:
        sid = store.create_session(NewSession()).id
        asked, answered = store.append_messages(
            sid,
            [
                NewMessage(message=Message(role="assistant", tool_calls=[call])),
                NewMessage(
                    message=Message(role="tool", tool_call_id="c1", name="Bash", content="ok 7s")
                ),
            ],
        )
    # the body an older version wrote: the tool result's name on a line of its own
    raw(pg_dsn, schema, "UPDATE message_search SET body = body || E'\\nBash' WHERE body = 'ok 7s'")
    raw(
        pg_dsn, schema, "DELETE FROM schema_migrations WHERE name = '0007_search_body_without_name'"
    )
    with open_store(pg_dsn, schema) as store:
        assert [h.message_id for h in store.search("Bash", session_id=sid)] == [asked.id]
        assert [h.message_id for h in store.search("ok", session_id=sid)] == [answered.id]
    bodies = raw(
        pg_dsn, schema, "SELECT body FROM message_search WHERE message_id = %s", (answered.id,)
    )
    assert bodies == [("ok 7s",)]


def test_migration_0011_fills_the_kind_column_of_existing_rows(pg_dsn: str, schema: str) -> None:
    from hermes_hookspecs import HandoffSummary, Message, NewMessage

    text = "## Goal\nmirror the remotes (#1)"
    with open_store(pg_dsn, schema) as store:
        sid = store.create_session(NewSession()).id
        plain, summary = store.append_messages(
            sid,
            [
                NewMessage(message=Message(role="user", content='says "kind":"summary" as text')),
                NewMessage(
                    message=Message(
                        role="user", kind="summary", content=text, summary=HandoffSummary()
                    )
                ),
            ],
        )
    # the schema an older version wrote: no kind column, no summary index
    raw(pg_dsn, schema, "DROP INDEX messages_summaries")
    raw(pg_dsn, schema, "ALTER TABLE messages DROP COLUMN kind")
    raw(pg_dsn, schema, "DELETE FROM schema_migrations WHERE name = '0011_summary_index'")
    with open_store(pg_dsn, schema) as store:
        assert {h.message_id for h in store.search("mirror remotes kind", session_id=sid)} == {
            plain.id,
            summary.id,
        }
    kinds = raw(pg_dsn, schema, "SELECT id, kind FROM messages ORDER BY id")
    assert kinds == [(plain.id, "message"), (summary.id, "summary")]


def test_concurrent_first_open_migrates_once(pg_dsn: str, schema: str) -> None:
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            open_store(pg_dsn, schema).close()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    count = raw(pg_dsn, schema, "SELECT count(*) FROM schema_migrations")[0][0]
    assert count == len(MIGRATIONS)


def test_list_sessions_orders_ties_as_the_sqlite_store_does(
    store: PostgresSessionStore, pg_dsn: str, schema: str
) -> None:
    # sessions updated at the same instant: the newest created first, then by id (both stores)
    for name in "cab":
        store.create_session(NewSession(id=f"s-{name}"))
    raw(pg_dsn, schema, "UPDATE sessions SET updated_at = 100.0, created_at = 50.0")
    raw(pg_dsn, schema, "UPDATE sessions SET created_at = 60.0 WHERE id = 's-a'")
    assert [s.id for s in store.list_sessions()] == ["s-a", "s-b", "s-c"]
    assert [s.id for s in store.list_sessions(limit=1, offset=1)] == ["s-b"]


def test_trigram_search_reported(store: PostgresSessionStore) -> None:
    info = store.describe()
    assert info["store"] == "postgres" and "password" not in info["dsn"]
    assert isinstance(info["substring_index"], bool) and info["search"]
    # the CI database has pg_trgm (start-postgres.sh enables it)
    if in_ci():
        assert info["substring_index"], info["search"]


def test_flag_flips_do_not_rewrite_search_rows(
    store: PostgresSessionStore, pg_dsn: str, schema: str
) -> None:
    sid = store.create_session(NewSession()).id
    rows = store.append_messages(sid, [user(f"searchable row {i}") for i in range(5)])
    query = "SELECT message_id, xmin::text, ctid::text FROM message_search ORDER BY message_id"
    before = raw(pg_dsn, schema, query)
    store.archive_and_compact(sid, [user("summary")], watermark=rows[-1].id)
    assert raw(pg_dsn, schema, query)[: len(before)] == before
    assert [h.compacted for h in store.search("searchable")] == [True] * 5


def test_index_cap_comes_from_the_settings_and_is_checked_as_in_sqlite(pg_dsn: str) -> None:
    settings = settings_from({"session": {"store": "postgres", "fts_index_cap": 1234}})
    with (
        scratch_schema(pg_dsn) as schema,
        PostgresSessionStore(pg_dsn, schema=schema, **store_options(settings)) as store,
    ):
        assert store.fts_index_cap == 1234
    for bad in (0, -1, True, "10"):
        with pytest.raises(ValidationError, match="fts_index_cap"):
            PostgresSessionStore(pg_dsn, fts_index_cap=bad)  # type: ignore[arg-type]


def test_index_cap_limits_indexed_text(pg_dsn: str, schema: str) -> None:
    with PostgresSessionStore(pg_dsn, schema=schema, fts_index_cap=1000) as store:
        sid = store.create_session(NewSession()).id
        text = "early_marker " + "x" * 2000 + " late_marker"
        (row,) = store.append_messages(sid, [user(text)])
        assert [h.message_id for h in store.search("early_marker")] == [row.id]
        assert store.search("late_marker") == []
        assert store.get_messages([row.id])[0].message.content == text  # stored whole


def test_rotation_child_inherits_unset_fields(store: PostgresSessionStore) -> None:
    parent = store.create_session(NewSession(title="P", cwd="/w", goal="G", routing={"chat": 1}))
    rows = store.append_messages(parent.id, [user("hello")])
    commit = store.archive_and_compact(
        parent.id, [user("summary")], watermark=rows[-1].id, in_place=False
    )
    assert commit.child_session_id is not None
    child = store.get_session(commit.child_session_id)
    assert (child.title, child.cwd, child.goal, child.routing) == ("P", "/w", "G", {"chat": 1})
    assert child.compression_count == 1 and child.parent_id == parent.id


# ---------------------------------------------------------------------------
# real processes
# ---------------------------------------------------------------------------


def _turn_worker(dsn: str, schema: str, sid: str, index: int, turns: int, conn: Any) -> None:
    store = open_store(dsn, schema)
    log = []
    try:
        for turn in range(turns):
            grant = store.acquire_lease(sid, LeaseHolder(name=f"w{index}"), 30, timeout=120)
            seen = len(store.active_messages(sid))  # a new holder reloads the latest history
            turn_id = f"w{index}-t{turn}"
            call = f"call_{index}_{turn}"
            store.append_messages(
                sid, [user(f"{turn_id} token={grant.token}", turn_id)], lease=grant
            )
            time.sleep(0.001)  # widen the window an interleaving writer would need
            assistant = Message(
                role="assistant",
                tool_calls=[ToolCall(id=call, function=ToolFunction(name="ls", arguments="{}"))],
            )
            store.append_messages(
                sid,
                [
                    NewMessage(message=assistant, turn_id=turn_id),
                    NewMessage(
                        message=Message(role="tool", tool_call_id=call, content="ok"),
                        turn_id=turn_id,
                    ),
                    NewMessage(message=Message(role="assistant", content="done"), turn_id=turn_id),
                ],
                lease=grant,
            )
            store.release_lease(grant)
            log.append((turn_id, grant.token, seen))
        conn.send(("ok", log))
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        store.close()


def test_eight_processes_twenty_five_turns_each(
    store: PostgresSessionStore, pg_dsn: str, schema: str
) -> None:
    workers, turns, per_turn = 8, 25, 4
    sid = store.create_session(NewSession(title="busy")).id
    procs = []
    for index in range(workers):
        parent_end, child_end = SPAWN.Pipe()
        proc = SPAWN.Process(
            target=_turn_worker, args=(pg_dsn, schema, sid, index, turns, child_end), daemon=True
        )
        proc.start()
        procs.append((proc, parent_end))
    logs: list[tuple[str, int, int]] = []
    for proc, pipe in procs:
        assert pipe.poll(240), "a worker did not finish"
        status, payload = pipe.recv()
        assert status == "ok", payload
        logs += payload
        proc.join(30)

    active = store.active_messages(sid)
    assert len(active) == workers * turns * per_turn  # nothing lost
    assert len({m.id for m in active}) == len(active)  # nothing duplicated
    order: list[str] = []
    for message in active:
        if not order or order[-1] != message.turn_id:
            order.append(str(message.turn_id))
    assert len(order) == workers * turns, "turns interleaved"  # each turn is one contiguous block
    assert len(set(order)) == len(order)
    token_of = {turn_id: token for turn_id, token, _ in logs}
    seen_of = {turn_id: seen for turn_id, _, seen in logs}
    tokens = [token_of[t] for t in order]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)  # order = fencing order
    assert [seen_of[t] for t in order] == [i * per_turn for i in range(len(order))]


def _crash_worker(dsn: str, schema: str, sid: str, log_path: str, seed: int, conn: Any) -> None:
    """Append 5-message batches and compact, logging each commit after it returns.

    It reports ready after its first commit, so the kill that follows always lands
    in the middle of the stream, however slowly a loaded machine started the worker.
    """
    rng = random.Random(seed)
    store = open_store(dsn, schema)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    step = 0
    while True:
        if step == 1:
            conn.send("ready")
        step += 1
        if rng.random() < 0.25:
            block = [user(f"gen{step}-summary", f"gen{step}")] + [
                user(f"gen{step}-keep{k}", f"gen{step}") for k in range(3)
            ]
            store.archive_and_compact(sid, block, watermark=2**62)
            os.write(fd, f"gen{step}\n".encode())
        else:
            batch = [user(f"b{step}-{k}", f"b{step}") for k in range(5)]
            store.append_messages(sid, batch)
            os.write(fd, f"b{step}\n".encode())


def _await_killed_backends(dsn: str, schema: str, timeout: float = 30.0) -> None:
    """Wait until no other backend of this database is running a statement or holding a
    transaction. A SIGKILLed client's backend still finishes the statement it received (a
    COMMIT the client never saw acknowledged can land after the client died); checking
    before then reads the history and the active view on either side of that commit."""
    busy = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
        "AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')"
    )
    deadline = time.monotonic() + timeout
    while raw(dsn, schema, busy) != [(0,)]:
        assert time.monotonic() < deadline, "a killed worker's backend is still busy"
        time.sleep(0.05)


def _check_crash_invariants(store: PostgresSessionStore, sid: str, logged: list[str]) -> None:
    """Committed work is all there once; the active view is exactly the newest compaction's."""
    rows = store.all_messages(sid)
    groups: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        groups[str(row.turn_id)].append(row)
    for label, members in groups.items():  # each commit is all there or not at all
        want = 4 if label.startswith("gen") else 5
        assert len(members) == want, (label, len(members))
    for label in logged:  # every acknowledged commit is there
        assert label in groups, label
    assert len({row.message.text() for row in rows}) == len(rows)  # ... exactly once
    gens = sorted(int(label[3:]) for label in groups if label.startswith("gen"))
    first_live = min((r.id for r in groups[f"gen{gens[-1]}"]), default=0) if gens else 0
    for row in rows:  # before the newest compaction: archived; from it on: live
        if row.id < first_live:
            assert not row.active and row.compacted, (row.turn_id, "should be archived")
        else:
            assert row.active and not row.compacted, (row.turn_id, "should be active")
    active = store.active_messages(sid)
    assert [r.id for r in active] == [r.id for r in rows if r.id >= first_live]


def test_sigkill_during_appends_and_compaction(
    store: PostgresSessionStore, pg_dsn: str, schema: str, tmp_path: Path
) -> None:
    rng = random.Random(1234)
    rounds, parallel = 2, 4
    for round_no in range(rounds):
        trials = []
        for slot in range(parallel):
            sid = store.create_session(NewSession(title=f"crash {round_no}.{slot}")).id
            log = tmp_path / f"log-{round_no}-{slot}.txt"
            parent_end, child_end = SPAWN.Pipe()
            proc = SPAWN.Process(
                target=_crash_worker,
                args=(pg_dsn, schema, sid, str(log), rng.randrange(10**6), child_end),
                daemon=True,
            )
            proc.start()
            trials.append((proc, parent_end, sid, log))
        for _proc, pipe, _, _ in trials:
            assert pipe.poll(60), "crash worker did not start"
            pipe.recv()
        for proc, _, _, _ in trials:
            time.sleep(rng.uniform(0.05, 0.4))
            os.kill(pid(proc), signal.SIGKILL)
            proc.join(10)
        _await_killed_backends(pg_dsn, schema)
        for _, _, sid, log in trials:
            logged = log.read_text().split() if log.exists() else []
            assert logged, "the worker committed nothing before it was killed"
            _check_crash_invariants(store, sid, logged)
    leftovers = raw(
        pg_dsn,
        schema,
        "SELECT count(*) FROM messages m LEFT JOIN message_search s ON s.message_id = m.id "
        "WHERE s.message_id IS NULL",
    )
    assert leftovers == [(0,)]


def _open_transaction_worker(dsn: str, schema: str, sid: str, conn: Any) -> None:
    """Hold a write transaction open (session row locked, rows inserted) until killed."""
    from hermes_plugin_postgres_store.writes import insert_messages, lock_session

    store = open_store(dsn, schema)
    with store._tx() as tx:
        position, _ = lock_session(tx, sid)
        insert_messages(
            tx,
            sid,
            [user("uncommitted")],
            start_position=position,
            roots=[None],
            cap=1000,
            what="messages",
        )
        conn.send("inside")
        time.sleep(3600)


def test_sigkill_inside_open_transaction_rolls_back(
    store: PostgresSessionStore, pg_dsn: str, schema: str
) -> None:
    sid = store.create_session(NewSession()).id
    store.append_messages(sid, [user("committed before")])
    parent_end, child_end = SPAWN.Pipe()
    proc = SPAWN.Process(
        target=_open_transaction_worker, args=(pg_dsn, schema, sid, child_end), daemon=True
    )
    proc.start()
    assert parent_end.poll(60) and parent_end.recv() == "inside"
    os.kill(pid(proc), signal.SIGKILL)
    proc.join(10)
    started = time.monotonic()
    store.append_messages(sid, [user("committed after")])  # the row lock is gone
    assert time.monotonic() - started < 5
    assert [m.message.text() for m in store.all_messages(sid)] == [
        "committed before",
        "committed after",
    ]
    assert store.search("uncommitted") == []


def _stopped_holder(dsn: str, schema: str, sid: str, ttl: float, conn: Any) -> None:
    store = open_store(dsn, schema)
    grant = store.acquire_lease(sid, LeaseHolder(name="stopped"), ttl)
    store.append_messages(sid, [user("before the stop")], lease=grant)
    conn.send(("holding", grant.token))
    time.sleep(0.3)  # SIGSTOP lands here; on SIGCONT it carries on with its turn
    results = []
    for attempt in ("append", "renew", "compact"):
        try:
            if attempt == "append":
                store.append_messages(sid, [user("after the stop")], lease=grant)
            elif attempt == "renew":
                store.renew_lease(grant, ttl)
            else:
                store.archive_and_compact(
                    sid, [user("stale summary")], watermark=2**62, lease=grant
                )
            results.append((attempt, "accepted"))
        except LeaseLost:
            results.append((attempt, "LeaseLost"))
        except Exception as exc:
            results.append((attempt, f"{type(exc).__name__}: {exc}"))
    conn.send(("resumed", results))
    store.close()


def test_sigstop_holder_loses_lease_and_is_fenced(
    store: PostgresSessionStore, pg_dsn: str, schema: str
) -> None:
    ttl = 1.0
    sid = store.create_session(NewSession()).id
    parent_end, child_end = SPAWN.Pipe()
    proc = SPAWN.Process(target=_stopped_holder, args=(pg_dsn, schema, sid, ttl, child_end))
    proc.start()
    try:
        assert parent_end.poll(60)
        status, old_token = parent_end.recv()
        assert status == "holding"
        os.kill(pid(proc), signal.SIGSTOP)
        with pytest.raises(LeaseBusy):  # stopped but alive and unexpired: not taken
            store.acquire_lease(sid, LeaseHolder(name="new"), 30)
        grant = store.acquire_lease(sid, LeaseHolder(name="new"), 30, timeout=ttl + 5)
        assert grant.token > old_token
        store.append_messages(sid, [user("new holder proceeds")], lease=grant)
        os.kill(pid(proc), signal.SIGCONT)
        assert parent_end.poll(60)
        status, results = parent_end.recv()
    finally:
        os.kill(pid(proc), signal.SIGCONT)
        proc.join(30)
    assert status == "resumed"
    assert results == [("append", "LeaseLost"), ("renew", "LeaseLost"), ("compact", "LeaseLost")]
    assert [m.message.text() for m in store.active_messages(sid)] == [
        "before the stop",
        "new holder proceeds",
    ]
    current = store.current_lease(sid)
    assert current is not None and current.token == grant.token


def _holder_until_killed(dsn: str, schema: str, sid: str, conn: Any) -> None:
    store = open_store(dsn, schema)
    store.acquire_lease(sid, LeaseHolder(name="doomed"), 3600)
    conn.send("holding")
    time.sleep(3600)


def test_waiter_takes_over_when_holder_process_dies(
    store: PostgresSessionStore, pg_dsn: str, schema: str
) -> None:
    sid = store.create_session(NewSession()).id
    parent_end, child_end = SPAWN.Pipe()
    proc = SPAWN.Process(target=_holder_until_killed, args=(pg_dsn, schema, sid, child_end))
    proc.start()
    assert parent_end.poll(60) and parent_end.recv() == "holding"
    killed_at: list[float] = []

    def kill_soon() -> None:
        time.sleep(0.3)
        killed_at.append(time.monotonic())
        os.kill(pid(proc), signal.SIGKILL)  # not reaped yet: a zombie counts as dead

    killer = threading.Thread(target=kill_soon)
    killer.start()
    grant = store.acquire_lease(sid, LeaseHolder(name="heir"), 30, timeout=20)
    took = time.monotonic() - killed_at[0]
    killer.join()
    proc.join(10)
    assert grant.holder.name == "heir"
    assert took < 2.0, f"noticed the dead holder after {took:.2f}s (lease TTL was an hour)"


def test_drop_schema_helper_is_idempotent(pg_dsn: str) -> None:
    drop_schema(pg_dsn, "t_never_created_here")
