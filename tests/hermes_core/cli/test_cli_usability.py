"""The command line as people use it: --db, tables, empty states, id prefixes, exit codes,
control characters, skipped compressions, replay warnings, plugin commands, completion.

Commands run as real child processes against real SQLite files; sessions are made through
the public API (``Hermes.new_session`` and a turn), as an integrator would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from hermes_core.cli import cli, load_commands
from hermes_core.cli.output import visible
from hermes_core.cli.render import _svg, print_replay_report, replay_warnings
from hermes_core.config import settings_from
from hermes_core.host import Hermes
from hermes_core.replay import replay
from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    ContextEngine,
    NewSession,
    hookimpl,
)
from tests.hosts import build_host
from tests.plugin_site import PluginSite

ROOT = Path(__file__).resolve().parents[3]
TRANSCRIPT = ROOT / "transcripts" / "openai-chat" / "openhands-django-11149.json.gz"
EVIL = "look \x1b]52;c;ZWNobyBwd25lZA==\x07 here \x1b[2J\x1b[31mred\u202e txt"


def run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, db: Path | None = None
) -> subprocess.CompletedProcess[str]:
    base = {
        **os.environ,
        "HERMES_CORE__SESSION__PATH": str(db or tmp_path / "default.db"),
        "HERMES_CORE__MEMORY__HOME": str(tmp_path / "mem"),
        "PYTHONWARNINGS": "ignore",
    }
    base.pop("HERMES_CORE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "hermes_core", *args],
        env={**base, **(env or {})},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )


def host(db: Path, tmp_path: Path) -> Hermes:
    """A host on ``db`` with every default plugin (what the CLI child processes load)."""
    return build_host(
        settings_from({"session": {"path": str(db)}, "memory": {"home": str(tmp_path / "mem")}})
    )


def make_session(db: Path, tmp_path: Path, *, title: str = "demo", text: str = "hello") -> str:
    with host(db, tmp_path) as hermes:
        session = hermes.new_session(title=title)
        with session.turn() as turn:
            turn.prepare(text)
            turn.record_response({"role": "assistant", "content": f"echo: {text}"})
            turn.commit()
        return session.id


def test_db_option_on_sessions_commands_and_the_table(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    sid = make_session(other, tmp_path, title="on the other db")
    # the default database is empty, and says so, naming the file it read
    empty = run(tmp_path, "sessions", "list")
    assert empty.returncode == 0 and empty.stdout == ""
    assert f"no sessions in {tmp_path / 'default.db'} (no such file)" in empty.stderr
    assert json.loads(run(tmp_path, "sessions", "list", "--json").stdout) == []
    listed = run(tmp_path, "sessions", "list", "--db", str(other))
    assert listed.returncode == 0, listed.stderr
    header = listed.stdout.splitlines()[0].split()
    assert header == ["ID", "UPDATED", "MESSAGES", "TOKENS", "COMPRESSIONS", "ENDED", "TITLE"]
    row = listed.stdout.splitlines()[1]
    assert sid in row and "on the other db" in row
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", row), row
    size = json.loads(run(tmp_path, "sessions", "list", "--db", str(other), "--json").stdout)
    assert size[0]["active_messages"] == 2 and size[0]["active_tokens"] > 0
    assert re.search(rf"{sid}\s+\S+ \S+\s+2\s+{size[0]['active_tokens']}\s", row), row
    for args in (
        ["sessions", "show", sid],
        ["sessions", "prefix", sid],
        ["sessions", "search", "hello", "--session", sid],
    ):
        found = run(tmp_path, *args, "--db", str(other))
        assert found.returncode == 0, (args, found.stderr)
        missing = run(tmp_path, *args)  # the default db does not exist
        assert missing.returncode == 1 and str(tmp_path / "default.db") in missing.stderr
    assert not (tmp_path / "default.db").exists(), "a read-only command created a database"
    nothing = run(tmp_path, "sessions", "search", "zebra", "--db", str(other))
    assert nothing.returncode == 0 and "no matches for 'zebra' in" in nothing.stderr


def test_unknown_ids_exit_1_with_one_line_and_prefixes_resolve(tmp_path: Path) -> None:
    db = tmp_path / "default.db"
    with host(db, tmp_path) as hermes:
        store = hermes.store()
        store.create_session(NewSession(id="abc111", title="first"))
        store.create_session(NewSession(id="abc222", title="second"))
    for args in (
        ["sessions", "show", "zzz"],
        ["sessions", "prefix", "zzz"],
        ["sessions", "search", "x", "--session", "zzz"],
        ["compress", "zzz"],
    ):
        out = run(tmp_path, *args)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("Error: no session 'zzz'")
    shown = json.loads(run(tmp_path, "sessions", "show", "abc2", "--json").stdout)
    assert shown["session"]["id"] == "abc222"
    ambiguous = run(tmp_path, "sessions", "show", "abc")
    assert ambiguous.returncode == 1
    assert "ambiguous" in ambiguous.stderr and "abc111" in ambiguous.stderr
    assert "abc222" in ambiguous.stderr
    for where in (
        ["sessions", "show", "zzz", "--traceback"],
        ["sessions", "--traceback", "show", "zzz"],
    ):
        traced = run(tmp_path, *where)  # after the subcommand, or on the group
        assert traced.returncode == 1 and "Traceback" in traced.stderr, where


def test_prefix_limit(tmp_path: Path) -> None:
    db = tmp_path / "default.db"
    with host(db, tmp_path) as hermes:
        session = hermes.new_session()
        for i in range(5):
            with session.turn() as turn:
                turn.prepare(f"question {i}")
                turn.record_response({"role": "assistant", "content": f"answer {i}"})
                turn.commit()
        sid = session.id
    full = json.loads(run(tmp_path, "sessions", "prefix", sid[:8], "--json").stdout)
    assert full["total_entries"] == len(full["entries"]) == 5
    last = json.loads(run(tmp_path, "sessions", "prefix", sid, "--limit", "2", "--json").stdout)
    assert [e["request_index"] for e in last["entries"]] == [
        e["request_index"] for e in full["entries"][-2:]
    ]
    text = run(tmp_path, "sessions", "prefix", sid, "--limit", "2").stdout
    assert "(last 2 of 5 requests" in text and "REQUEST" in text.splitlines()[1]
    assert len([line for line in text.splitlines() if re.match(r"\s*\d+\s+\d+", line)]) == 2


def test_control_characters_are_escaped_in_human_output_only(tmp_path: Path) -> None:
    db = tmp_path / "default.db"
    sid = make_session(db, tmp_path, title=f"title {EVIL}", text=f"please {EVIL} now")
    for args in (
        ["sessions", "list"],
        ["sessions", "show", sid],
        ["sessions", "search", "please", "--session", sid],
    ):
        out = run(tmp_path, *args)
        assert out.returncode == 0, out.stderr
        raw = out.stdout
        assert "\x1b" not in raw and "\x07" not in raw and "\u202e" not in raw, (args, raw)
        assert "\\x1b]52;c;" in raw and "\\x07" in raw and "\\u202e" in raw, (args, raw)
    shown = json.loads(run(tmp_path, "sessions", "show", sid, "--json").stdout)
    assert shown["session"]["title"] == f"title {EVIL}"
    assert EVIL in shown["messages"][0]["message"]["content"]
    assert visible("a\x1bb\x9bc\nd", keep_newlines=True) == "a\\x1bb\\x9bc\nd"


def test_a_skipped_compress_says_so(tmp_path: Path) -> None:
    db = tmp_path / "default.db"
    sid = make_session(db, tmp_path)
    with host(db, tmp_path) as hermes:
        empty_id = hermes.new_session().id
    data = json.loads(run(tmp_path, "compress", sid[:10], "--json").stdout)
    assert data["status"] != "compressed" and data["session_id"] == sid
    assert data["tokens_after"] == data["tokens_before"] > 0
    text = run(tmp_path, "compress", sid).stdout
    assert f"session {sid} was not compressed" in text and "→ 0 tokens" not in text
    assert f"stays at {data['tokens_before']} tokens" in text
    empty = json.loads(run(tmp_path, "compress", empty_id, "--json").stdout)
    assert empty["status"] == "skipped" and empty["session_id"] == empty_id


class NeverEngine(ContextEngine):
    name = "never"

    def compress(self, request: CompressionRequest) -> CompressionResult:
        return CompressionResult(status="aborted", engine=self.name, reason="never compresses")


class NeverPlugin:
    @hookimpl
    def register_context_engines(self, register: Any) -> None:
        register(NeverEngine())


def test_replay_names_the_engine_shows_skipped_attempts_and_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_from(
        {
            "session": {"path": str(tmp_path / "r.db")},
            "memory": {"home": str(tmp_path / "mem")},
            "compression": {"engine": "never"},
        }
    )
    with build_host(settings, NeverPlugin()) as hermes:
        report = replay(hermes, TRANSCRIPT, context_length=12000)
    assert report.engine == "never"
    assert report.skipped_compressions and not report.compressions
    assert {c.reason for c in report.skipped_compressions} == {"never compresses"}
    assert report.final_active_tokens > report.context_length
    warnings = replay_warnings(report)
    assert warnings and "over the 12000-token window" in warnings[0]
    print_replay_report(report)
    out = capsys.readouterr().out
    assert "engine             never" in out
    assert f"skipped attempts   {len(report.skipped_compressions)}" in out
    assert "aborted at" in out and "never compresses" in out
    svg = _svg(report)
    ticks = [int(t) for t in re.findall(r'class="y-tick"[^>]*>(\d+)<', svg)]
    assert len(ticks) >= 3 and ticks[0] == 0 and ticks == sorted(ticks)
    assert max(ticks) <= max(report.request_tokens) * 1.1
    assert re.findall(r'class="x-tick"[^>]*>(\d+)<', svg)


NEVER_ENGINE_PLUGIN = """
from hermes_hookspecs import CompressionResult, ContextEngine, hookimpl

class Never(ContextEngine):
    name = "never"

    def compress(self, request):
        return CompressionResult(status="aborted", engine=self.name, reason="never compresses")

@hookimpl
def register_context_engines(register):
    register(Never())
"""


def test_cli_replay_names_engine_lists_skips_and_warns_over_the_window(
    tmp_path: Path, plugin_site: PluginSite
) -> None:
    site = plugin_site.add("never_engine", NEVER_ENGINE_PLUGIN)
    env = {"PYTHONPATH": str(site), "HERMES_CORE__COMPRESSION__ENGINE": "never"}
    args = ["replay", str(TRANSCRIPT), "--context-length", "12000"]
    out = run(tmp_path, *args, "--db", str(tmp_path / "w.db"), env=env)
    assert out.returncode == 0, out.stderr
    assert "engine             never" in out.stdout
    skipped = re.search(r"skipped attempts\s+(\d+)", out.stdout)
    assert skipped and int(skipped.group(1)) > 0, out.stdout
    assert "aborted at" in out.stdout and "never compresses" in out.stdout
    assert "Warning: the final context (" in out.stderr
    assert "is over the 12000-token window" in out.stderr
    data = json.loads(
        run(tmp_path, *args, "--json", "--db", str(tmp_path / "j.db"), env=env).stdout
    )
    assert data["engine"] == "never" and data["skipped_compressions"]


def test_config_show_prints_resolved_paths(tmp_path: Path) -> None:
    env = {"HERMES_CORE__SESSION__PATH": "", "HERMES_CORE__MEMORY__HOME": "", "HOME": str(tmp_path)}
    text = run(tmp_path, "config", "show", env=env)
    assert text.returncode == 0, text.stderr
    data = json.loads(run(tmp_path, "config", "show", "--json", env=env).stdout)
    resolved = data["resolved"]
    assert resolved["session.path"].endswith("sessions.db") and resolved["memory.home"]
    assert f'path = "{resolved["session.path"]}"  # default location' in text.stdout
    assert 'path = ""' not in text.stdout
    assert f'home = "{resolved["memory.home"]}"' in text.stdout
    assert "# configuration file: (none: defaults)" in text.stdout


def test_every_command_takes_json_and_traceback() -> None:
    def leaves(group: click.Group, path: list[str]) -> list[tuple[list[str], click.Command]]:
        out = []
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                out += leaves(command, [*path, name])
            else:
                out.append(([*path, name], command))
        return out

    load_commands()
    found = leaves(cli, [])
    assert len(found) >= 9
    for path, command in found:
        if path == ["mcp"]:  # a stdio server for MCP clients: it prints no data to format
            continue
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert "--json" in options, f"hermes-core {' '.join(path)} has no --json"
        assert "--traceback" in options, f"hermes-core {' '.join(path)} has no --traceback"


def test_python_m_hermes_core_completion_and_docs(tmp_path: Path) -> None:
    version = run(tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("hermes-core, version 0.1.0")
    script = run(tmp_path, env={"_HERMES_CORE_COMPLETE": "bash_source"})
    assert script.returncode == 0 and "_hermes_core_completion" in script.stdout
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "Usage: hermes-core [OPTIONS] COMMAND" in docs and "Usage: cli" not in docs
    assert "_HERMES_CORE_COMPLETE=bash_source" in docs and "python -m hermes_core" in docs


COMMANDS_PLUGIN = """
import click
from hermes_hookspecs import NotFoundError, hookimpl

@hookimpl
def register_commands(cli):
    @cli.command("hello")
    @click.option("--fail", is_flag=True)
    def hello(fail):
        '''Say hello from a plugin.'''
        if fail:
            raise NotFoundError("no such greeting")
        click.echo("hello from a plugin")

    @cli.command("plugins")
    def hijack():
        click.echo("hijacked")
"""

BROKEN_COMMANDS_PLUGIN = """
from hermes_hookspecs import hookimpl

@hookimpl
def register_commands(cli):
    raise RuntimeError("no commands today")
"""


def test_plugins_add_commands(tmp_path: Path, plugin_site: PluginSite) -> None:
    site = plugin_site.add("greeter_plugin", COMMANDS_PLUGIN)
    plugin_site.add("broken_commands", BROKEN_COMMANDS_PLUGIN)
    plugin_site.add("future_plugin", 'hermes_contract = ">=99"\n')
    env = {"PYTHONPATH": str(site)}
    hello = run(tmp_path, "hello", "--traceback", env=env)
    assert hello.returncode == 0 and hello.stdout == "hello from a plugin\n", hello.stderr
    assert "plugin 'broken_commands' failed in register_commands" in hello.stderr
    assert "plugin 'greeter_plugin' adds a command 'plugins', which is built in" in hello.stderr
    failed = run(tmp_path, "hello", "--fail", env=env)
    assert failed.returncode == 1 and "Error: no such greeting" in failed.stderr
    listed = run(tmp_path, "plugins", "--json", env=env)
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert "register_commands" in rows["greeter_plugin"]["hooks"]
    table = run(tmp_path, "plugins", env=env).stdout.splitlines()
    assert table[0].split() == ["PLUGIN", "STATE", "DISTRIBUTION", "VERSION", "REGISTERS", "HOOKS"]
    greeter = next(line for line in table if line.startswith("greeter_plugin "))
    assert greeter.split()[1:4] == ["loaded", "greeter_plugin", "1.2.3"]
    assert "register_commands" in greeter
    assert next(line for line in table if line.startswith("future_plugin ")).split()[1] == "FAILED"
    assert any(
        line.startswith("future_plugin failed: PluginError:") and "'>=99'" in line for line in table
    )
    helped = run(tmp_path, "--help", env=env)
    assert "hello" in helped.stdout and "Say hello from a plugin." in helped.stdout
    blocked = run(tmp_path, "hello", env={**env, "HERMES_CORE_BLOCK_PLUGINS": "greeter_plugin"})
    assert blocked.returncode == 2 and "No such command 'hello'" in blocked.stderr
    strict = run(tmp_path, "plugins", env={**env, "HERMES_CORE_STRICT_PLUGINS": "1"})
    assert strict.returncode == 1
    assert "broken_commands" in strict.stderr or "future_plugin" in strict.stderr


def test_one_line_shows_tabs_as_spaces_and_escapes_other_controls() -> None:
    from hermes_core.cli.output import one_line

    assert one_line("a\tb\nc\x1b[2Jd\x07") == "a b c\\x1b[2Jd\\x07"


def test_sessions_search_shows_what_the_user_said_next(tmp_path: Path) -> None:
    db = tmp_path / "default.db"
    with host(db, tmp_path) as hermes:
        session = hermes.new_session(title="reply")
        for text in ("the heron build fails", "fine, pin the compiler then"):
            with session.turn() as turn:
                turn.prepare(text)
                turn.record_response({"role": "assistant", "content": "noted"})
                turn.commit()
        sid = session.id
    args = ("sessions", "search", "heron", "--session", sid, "--context", "0")
    [place] = json.loads(run(tmp_path, *args, "--json").stdout)
    assert [c["text"] for c in place["context"]] == ["the heron build fails"]
    assert [r["text"] for r in place["replies"]] == ["fine, pin the compiler then"]
    shown = run(tmp_path, *args).stdout
    assert re.search(r"then #\d+ user: fine, pin the compiler then", shown), shown
