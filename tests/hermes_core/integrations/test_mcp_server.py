"""``hermes-core mcp``: the real server process, driven by the ``mcp`` package's own client.

The store holds two sessions recorded through the turn runtime and one
transcript imported with ``hermes-core replay`` (compacted three times); the
server is scoped to two of them, so the third must stay invisible.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.hosts import HostFactory, build_host

pytest.importorskip("mcp", reason="needs the 'mcp' extra (pip install -e '.[mcp]'): mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from hermes_core.config import settings_from
from hermes_core.host import Hermes

REPO = Path(__file__).resolve().parents[3]
TRANSCRIPT = REPO / "transcripts" / "openai-chat" / "openhands-django-11149.json.gz"


def cli_command() -> list[str]:
    script = Path(sys.executable).with_name("hermes-core")
    return [str(script)] if script.exists() else [sys.executable, "-m", "hermes_core.cli"]


def record_session(hermes: Hermes, sid: str, user: str, reply: str) -> None:
    session = hermes.new_session(session_id=sid, title=f"title of {sid}")
    with session.turn() as turn:
        turn.prepare(user)
        turn.record_response({"role": "assistant", "content": reply})
        turn.commit()


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("mcp")
    db = root / "s.db"
    out = subprocess.run(
        [*cli_command(), "replay", str(TRANSCRIPT), "--context-length", "32000",
         "--db", str(db), "--json"],
        capture_output=True, text=True, timeout=240, cwd=root,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    replayed = json.loads(out.stdout)["session_id"]
    hermes = build_host(
        settings_from(
            {
                "plugins": {"autoload": True, "block": ["memory_builtin"]},
                "session": {"path": str(db)},
                "memory": {"home": str(root / "mem")},
            }
        )
    )
    record_session(hermes, "alpha", "Where did the quokka go?", "The quokka went east.")
    record_session(hermes, "beta", "Secret: the wombat code is 7731.", "Noted, wombat 7731.")
    hermes.close()
    return {"root": root, "db": db, "replayed": replayed}


def write_config(root: Path, db: Path, sessions: Any, name: str) -> Path:
    path = root / name
    scope = json.dumps(sessions)
    path.write_text(
        f'[session]\npath = "{db}"\n[memory]\nhome = "{root / "mem"}"\n'
        f'[plugins]\nblock = ["memory_builtin"]\n'
        f"[extensions.mcp]\nsessions = {scope}\nbudget_tokens = 600\nmax_query_chars = 200\n",
        encoding="utf-8",
    )
    return path


async def with_client(config: Path, *extra: str, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    command = cli_command()
    params = StdioServerParameters(
        command=command[0], args=[*command[1:], "--config", str(config), "mcp", *extra]
    )
    async with Client(params, read_timeout_seconds=60) as client:
        tools = await client.list_tools()
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def db_state(db: Path) -> list[Any]:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return [
            conn.execute("SELECT count(*), max(id) FROM messages").fetchone(),
            conn.execute("SELECT id, updated_at, compression_count FROM sessions").fetchall(),
            conn.execute("SELECT * FROM leases").fetchall(),
        ]


def test_scoped_search_open_and_list_over_stdio(store_dir: dict[str, Any]) -> None:
    root, db, replayed = store_dir["root"], store_dir["db"], store_dir["replayed"]
    config = write_config(root, db, ["alpha", replayed], "scoped.toml")
    before = db_state(db)
    tools, results = asyncio.run(
        with_client(
            config,
            calls=[
                ("sessions_list", {}),
                ("session_search", {"query": "quokka"}),
                ("session_search", {"query": "ManyToManyFields inlines"}),
                ("session_search", {"query": "wombat"}),
                ("session_search", {"query": "quokka", "session_id": "beta"}),
                ("session_search", {"query": "x" * 500}),
                ("session_open", {"message_id": 1}),
                ("session_open", {"message_id": 999_999}),
                ("nope", {}),
            ],
        )
    )
    listed, quokka, imported, wombat, other, oversized, opened, unknown, bad = results
    assert {tool.name for tool in tools.tools} == {
        "sessions_list",
        "session_search",
        "session_open",
    }
    assert all(tool.annotations.read_only_hint for tool in tools.tools)
    sessions = json.loads(text(listed))["sessions"]
    assert {row["id"] for row in sessions} == {"alpha", replayed}
    assert not quokka.is_error and "quokka went east" in text(quokka)
    # the imported transcript is searchable, compacted history included
    assert not imported.is_error and "compacted" in text(imported)
    assert "ManyToManyField" in text(imported)
    # beta is out of scope: never shown, not even when named
    assert "7731" not in text(wombat)
    assert other.is_error and "'beta'" in text(other)
    assert oversized.is_error and "500 characters" in text(oversized)
    assert not opened.is_error and "uploaded" in text(opened)  # row 1: the replay's first message
    assert unknown.is_error
    assert bad.is_error and "no tool 'nope'" in text(bad)
    # budgeted: no result past the configured 600 tokens (about 2,400 characters)
    assert all(len(text(result)) < 4_000 for result in results)
    # read-only: nothing written, no lease taken
    assert db_state(db) == before


def test_all_sessions_and_a_message_of_another_session(
    store_dir: dict[str, Any], make_host: HostFactory
) -> None:
    root, db = store_dir["root"], store_dir["db"]
    config = write_config(root, db, ["alpha"], "alpha.toml")
    hermes = make_host.like(
        settings_from({"session": {"path": str(db)}, "plugins": {"autoload": True}})
    )
    beta_row = hermes.store().active_messages("beta")[0].id
    hermes.close()
    _, (hidden,) = asyncio.run(
        with_client(config, calls=[("session_open", {"message_id": beta_row})])
    )
    assert hidden.is_error and "7731" not in text(hidden)
    _, (listed, found) = asyncio.run(
        with_client(
            config,
            "--all",
            calls=[("sessions_list", {"limit": 10}), ("session_search", {"query": "wombat"})],
        )
    )
    assert len(json.loads(text(listed))["sessions"]) == 3
    assert "7731" in text(found)


def test_mcp_command_reports_missing_tools_and_bad_settings(store_dir: dict[str, Any]) -> None:
    root, db = store_dir["root"], store_dir["db"]
    config = root / "bad.toml"
    config.write_text(
        f'[session]\npath = "{db}"\n[extensions.mcp]\nsessions = "some"\n', encoding="utf-8"
    )
    out = subprocess.run(
        [*cli_command(), "--config", str(config), "mcp"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 1
    assert "extensions.mcp.sessions" in out.stderr and "'some'" in out.stderr
    assert out.stdout == ""  # the server never started
    blocked = subprocess.run(
        [*cli_command(), "--config", str(write_config(root, db, "all", "all.toml")), "mcp"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "HERMES_CORE_BLOCK_PLUGINS": "recall,memory_builtin"},
    )  # fmt: skip
    assert blocked.returncode == 1
    assert "session_search" in blocked.stderr and "recall plugin blocked" in blocked.stderr
    missing = root / "missing.db"
    typo = subprocess.run(
        [*cli_command(), "mcp", "--db", str(missing), "--all"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=root,
    )  # fmt: skip
    assert typo.returncode == 1 and f"no session store at {missing}" in typo.stderr
    assert not missing.exists()


def test_the_docs_example_runs(store_dir: dict[str, Any]) -> None:
    """docs/mcp.md's copy-paste client, on the store the fixture replayed into."""
    doc = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    example = doc.split("```python\n", 1)[1].split("```", 1)[0]
    example = example.replace("/tmp/recall.db", str(store_dir["db"]))
    script = store_dir["root"] / "example.py"
    script.write_text(example, encoding="utf-8")
    bindir = str(Path(cli_command()[0]).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120,
        cwd=store_dir["root"],
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert '"total": 3' in out.stdout and "ManyToManyField" in out.stdout
