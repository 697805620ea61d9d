"""Tests for the builtin memory provider (hermes_plugin_memory_builtin): MEMORY.md / USER.md."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pluggy
import pytest

import hermes_plugin_memory_builtin
from hermes_core.config import MemorySettings, settings_from
from hermes_core.memory import tool_schema_problem
from hermes_core.testing.memory_suite import MemoryProviderSuite
from hermes_hookspecs import MemoryProvider, MemorySession, specs
from hermes_hookspecs.markers import PROJECT_NAME
from hermes_plugin_memory_builtin import (
    DELIMITER,
    BuiltinMemoryProvider,
    BuiltinMemorySettings,
    MemoryWriteRefused,
)
from hermes_plugin_memory_builtin.entries import (
    clean_entry,
    entries_size,
    parse_entries,
    render_entries,
)


def make(tmp_path: Path, **limits: int) -> BuiltinMemoryProvider:
    return BuiltinMemoryProvider(
        MemorySettings(home=str(tmp_path / "home")), BuiltinMemorySettings(**limits)
    )


def tool(provider: BuiltinMemoryProvider, **arguments: object) -> str:
    return provider.handle_tool_call("memory", dict(arguments), "s1")


# -- the file format -----------------------------------------------------------------


def test_delimiter_is_a_lone_section_sign_line() -> None:
    assert DELIMITER == "§"
    text = "first\n§\nsecond line one\nsecond line two\n  §  \n\n§\nthird\n"
    assert parse_entries(text) == ["first", "second line one\nsecond line two", "third"]
    assert parse_entries("") == []
    assert parse_entries("a § inside a line stays\n") == ["a § inside a line stays"]


def test_render_and_parse_round_trip_and_size_counts_delimiters() -> None:
    entries = ["uses uv", "multi\nline", "costs € 5 §ish"]
    text = render_entries(entries)
    assert text == "uses uv\n§\nmulti\nline\n§\ncosts € 5 §ish\n"
    assert parse_entries(text) == entries
    assert entries_size(entries) == len(text) - 1
    assert render_entries([]) == "" and entries_size([]) == 0


def test_entry_holding_a_delimiter_line_is_refused() -> None:
    with pytest.raises(ValueError, match="line 2 of the entry is a lone '§'"):
        clean_entry("one\n§\ntwo")
    with pytest.raises(ValueError, match="empty"):
        clean_entry("   \n ")


# -- writes ---------------------------------------------------------------------------------


def test_add_replace_remove_write_to_disk_at_once(tmp_path: Path) -> None:
    provider = make(tmp_path)
    message = tool(provider, action="add", target="memory", content="The project uses uv.")
    assert message.startswith("Added to MEMORY.md") and "1 entry" in message
    tool(provider, action="add", target="memory", content="CI runs `make check`.")
    tool(provider, action="add", target="user", content="Prefers terse answers.")
    memory_md = tmp_path / "home" / "MEMORY.md"
    assert memory_md.read_text(encoding="utf-8") == (
        "The project uses uv.\n§\nCI runs `make check`.\n"
    )
    assert (tmp_path / "home" / "USER.md").read_text(encoding="utf-8") == (
        "Prefers terse answers.\n"
    )

    out = tool(provider, action="replace", target="memory", old_text="uses uv", content="Uses pdm.")
    assert out.startswith("Replaced")
    assert provider.entries("memory") == ["Uses pdm.", "CI runs `make check`."]
    out = tool(provider, action="remove", target="memory", old_text="make check")
    assert out.startswith("Removed")
    assert memory_md.read_text(encoding="utf-8") == "Uses pdm.\n"
    tool(provider, action="remove", target="memory", old_text="pdm")
    assert memory_md.read_text(encoding="utf-8") == ""


def test_duplicate_add_is_a_no_op(tmp_path: Path) -> None:
    provider = make(tmp_path)
    tool(provider, action="add", target="user", content="Name: Ada")
    out = tool(provider, action="add", target="user", content="  Name: Ada \n")
    assert "already holds that entry" in out
    assert provider.entries("user") == ["Name: Ada"]


def test_replace_and_remove_need_exactly_one_match(tmp_path: Path) -> None:
    provider = make(tmp_path)
    tool(provider, action="add", target="memory", content="staging db is read-only")
    tool(provider, action="add", target="memory", content="prod db is replicated")
    out = tool(provider, action="remove", target="memory", old_text="db is")
    assert out.startswith("Error:") and "matches 2 entries" in out
    out = tool(provider, action="replace", target="memory", old_text="nothing", content="x")
    assert out == "Error: no entry in MEMORY.md contains 'nothing'"
    assert len(provider.entries("memory")) == 2


def test_cap_refuses_growth_with_a_clear_message(tmp_path: Path) -> None:
    provider = make(tmp_path, memory_char_limit=40, user_char_limit=20)
    tool(provider, action="add", target="memory", content="a" * 30)
    before = (tmp_path / "home" / "MEMORY.md").read_bytes()
    out = tool(provider, action="add", target="memory", content="b" * 10)
    assert out == (
        "Error: MEMORY.md would grow to 43 characters, over its cap of 40 "
        "(memory.memory_char_limit); nothing was written. Remove or shorten entries first "
        "(actions 'remove' / 'replace')."
    )
    assert (tmp_path / "home" / "MEMORY.md").read_bytes() == before
    out = tool(provider, action="add", target="user", content="u" * 21)
    assert "USER.md would grow to 21 characters, over its cap of 20" in out
    assert "memory.user_char_limit" in out
    with pytest.raises(MemoryWriteRefused, match="cap of 40"):
        provider.add("memory", "c" * 20)
    # exactly at the cap is allowed
    assert provider.add("memory", "d" * 7).startswith("Added")
    assert entries_size(provider.entries("memory")) == 40


def test_shrinking_writes_are_allowed_when_over_the_cap(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "MEMORY.md").write_text("x" * 50 + "\n§\n" + "y" * 50 + "\n", encoding="utf-8")
    provider = make(tmp_path, memory_char_limit=40)
    assert "Error" in tool(provider, action="add", target="memory", content="z")
    out = tool(provider, action="replace", target="memory", old_text="xxx", content="short")
    assert out.startswith("Replaced")
    assert tool(provider, action="remove", target="memory", old_text="yyy").startswith("Removed")
    assert provider.entries("memory") == ["short"]


def test_tool_arguments_are_validated_naming_the_field(tmp_path: Path) -> None:
    provider = make(tmp_path)
    out = tool(provider, action="forget", target="memory")
    assert out.startswith("Error: invalid memory tool arguments: action='forget'")
    out = tool(provider, action="add", target="soul", content="x")
    assert "target='soul'" in out
    assert "needs a non-empty 'content'" in tool(provider, action="add", target="memory")
    assert "needs a non-empty 'old_text'" in tool(provider, action="remove", target="user")
    assert "unknown argument 'extra'" in tool(
        provider, action="add", target="memory", content="x", extra=1
    )
    assert "missing argument 'target'" in tool(provider, action="add", content="x")
    assert "lone '§'" in tool(provider, action="add", target="memory", content="a\n§\nb")
    with pytest.raises(NotImplementedError, match="no tool 'recall'"):
        provider.handle_tool_call("recall", {}, "s1")
    with pytest.raises(ValueError, match="target='soul'"):
        provider.entries("soul")  # type: ignore[arg-type]


def test_tool_schema_is_a_valid_openai_function(tmp_path: Path) -> None:
    [schema] = make(tmp_path).tool_schemas()
    assert tool_schema_problem(schema) is None
    function = schema["function"]
    assert function["name"] == "memory"
    props = function["parameters"]["properties"]
    assert props["action"]["enum"] == ["add", "replace", "remove"]
    assert props["target"]["enum"] == ["memory", "user"]
    assert function["parameters"]["required"] == ["action", "target"]


# -- durability --------------------------------------------------------------------------------


def test_writes_are_atomic_and_leave_no_temp_files(tmp_path: Path) -> None:
    provider = make(tmp_path, memory_char_limit=1_000_000)
    path = provider.path("memory")
    big = "z" * 20_000
    stop = threading.Event()
    seen: list[list[str]] = []
    problems: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            entries = parse_entries(text)
            seen.append(entries)
            if any(entry != big for entry in entries) or (text and not text.endswith("\n")):
                problems.append(f"torn read: {len(text)} chars")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(15):
            provider.add("memory", big)
            provider.remove("memory", "z" * 10)
            provider.add("memory", big)
            provider.replace("memory", "zzz", big)
    finally:
        stop.set()
        thread.join()
    assert not problems, problems[:3]
    assert seen, "the reader never saw the file"
    assert sorted(p.name for p in path.parent.iterdir()) == [".memory.lock", "MEMORY.md"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_existing_file_mode_is_kept(tmp_path: Path) -> None:
    provider = make(tmp_path)
    provider.add("user", "one")
    os.chmod(provider.path("user"), 0o640)
    provider.add("user", "two")
    assert stat.S_IMODE(provider.path("user").stat().st_mode) == 0o640


def test_concurrent_processes_do_not_lose_writes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = textwrap.dedent(
        f"""
        import sys
        from hermes_core.config import MemorySettings
        from hermes_plugin_memory_builtin import BuiltinMemoryProvider, BuiltinMemorySettings
        p = BuiltinMemoryProvider(
            MemorySettings(home={str(home)!r}), BuiltinMemorySettings(memory_char_limit=100000)
        )
        for i in range(25):
            p.add("memory", f"process {{sys.argv[1]}} fact {{i}}")
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(n)], stderr=subprocess.PIPE)
        for n in range(3)
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    entries = make(tmp_path, memory_char_limit=100000).entries("memory")
    assert len(entries) == 75
    for n in range(3):
        assert [e for e in entries if e.startswith(f"process {n} ")] == [
            f"process {n} fact {i}" for i in range(25)
        ]


def test_concurrent_threads_do_not_lose_writes(tmp_path: Path) -> None:
    provider = make(tmp_path, memory_char_limit=100_000)
    threads = [
        threading.Thread(
            target=lambda n=n: [provider.add("user", f"thread {n} item {i}") for i in range(20)]
        )
        for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(provider.entries("user")) == 80


# -- the frozen snapshot --------------------------------------------------------------------


def test_snapshot_is_frozen_until_the_next_rebuild(tmp_path: Path) -> None:
    provider = make(tmp_path)
    provider.add("memory", "Uses uv.")
    provider.initialize(MemorySession(session_id="s1"))
    first = provider.system_prompt_block("s1")
    assert first is not None and "Uses uv." in first and "MEMORY.md" in first

    out = tool(provider, action="add", target="memory", content="Deploys on Fridays are banned.")
    assert "next session" in out
    assert provider.system_prompt_block("s1") == first  # mid-session write: not visible
    assert "Deploys on Fridays" in provider.path("memory").read_text(encoding="utf-8")

    provider.initialize(MemorySession(session_id="s2"))  # another session sees it
    assert "Deploys on Fridays" in (provider.system_prompt_block("s2") or "")
    assert provider.system_prompt_block("s1") == first

    provider.on_session_switch("s1", "s1", "compression")  # in-place compaction: rebuild
    rebuilt = provider.system_prompt_block("s1")
    assert rebuilt is not None and "Deploys on Fridays" in rebuilt

    provider.add("user", "Name: Ada")
    provider.on_session_switch("s1", "s3", "compression")  # rotation
    assert "Name: Ada" in (provider.system_prompt_block("s3") or "")
    provider.refresh("s2")
    assert "Name: Ada" in (provider.system_prompt_block("s2") or "")


def test_snapshot_text_lists_both_files_and_is_none_when_empty(tmp_path: Path) -> None:
    provider = make(tmp_path, memory_char_limit=100, user_char_limit=100)
    provider.initialize(MemorySession(session_id="s"))
    assert provider.system_prompt_block("s") is None
    provider.add("memory", "one")
    provider.add("memory", "two")
    provider.add("user", "likes tea")
    provider.refresh("s")
    assert provider.system_prompt_block("s") == (
        "# Persistent memory\n"
        "Saved with the `memory` tool; entries are separated by lines holding only §. "
        "This snapshot was taken when the prompt was built.\n\n"
        "## MEMORY.md (your notes) [2 entries, 9/100 chars]\n"
        "one\n§\ntwo\n\n"
        "## USER.md (about the user) [1 entry, 9/100 chars]\n"
        "likes tea"
    )


def test_snapshot_of_an_over_full_file_stops_at_the_cap(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "MEMORY.md").write_text("\n§\n".join(["x" * 30] * 5) + "\n", encoding="utf-8")
    provider = make(tmp_path, memory_char_limit=70)
    block = provider.system_prompt_block("never-initialised") or ""
    assert block.count("x" * 30) == 2
    assert "(3 more entries over the 70-character cap not shown)" in block


def test_session_end_drops_the_snapshot(tmp_path: Path) -> None:
    provider = make(tmp_path)
    provider.add("memory", "old")
    provider.initialize(MemorySession(session_id="s"))
    provider.add("memory", "new")
    provider.on_session_end("s", "user")
    assert "new" in (provider.system_prompt_block("s") or "")


def test_nothing_is_created_until_the_first_write(tmp_path: Path) -> None:
    provider = make(tmp_path)
    provider.initialize(MemorySession(session_id="s"))
    provider.system_prompt_block("s")
    assert not (tmp_path / "home").exists()


def test_instances_share_no_state(tmp_path: Path) -> None:
    a = BuiltinMemoryProvider(MemorySettings(home=str(tmp_path / "a")))
    b = BuiltinMemoryProvider(MemorySettings(home=str(tmp_path / "b")))
    a.add("memory", "only in a")
    a.initialize(MemorySession(session_id="s"))
    b.initialize(MemorySession(session_id="s"))
    assert b.system_prompt_block("s") is None
    assert b.entries("memory") == []


# -- registration ------------------------------------------------------------------------------


def test_hookimpl_registers_a_provider_for_the_settings(tmp_path: Path) -> None:
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(specs)
    pm.register(hermes_plugin_memory_builtin)
    settings = settings_from({"memory": {"home": str(tmp_path / "m"), "user_char_limit": 123}})
    registered: list[MemoryProvider] = []
    pm.hook.register_memory_providers(register=registered.append, settings=settings)
    [provider] = registered
    assert isinstance(provider, BuiltinMemoryProvider)
    assert provider.name == "builtin"
    assert provider.home == tmp_path / "m"
    assert provider.cap("user") == 123
    again: list[MemoryProvider] = []
    pm.hook.register_memory_providers(register=again.append, settings=settings)
    assert again[0] is not provider  # a fresh instance each time: no module-level state


class TestBuiltinConformance(MemoryProviderSuite):
    """The builtin provider passes the vendor conformance suite too."""

    @pytest.fixture
    def provider(self, tmp_path: Path) -> BuiltinMemoryProvider:
        return make(tmp_path)
