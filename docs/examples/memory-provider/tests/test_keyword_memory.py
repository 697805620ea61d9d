"""Behaviour of the example provider itself, and its registration through the entry point."""

from __future__ import annotations

import json
import logging
from importlib.metadata import entry_points
from pathlib import Path

import pluggy
import pytest
from hermes_example_memory import KeywordMemoryProvider
from hermes_example_memory.provider import extract_facts, keywords

from hermes_core.config import settings_from
from hermes_hookspecs import ConfigError, MemoryProvider, Message, TurnRecord, specs
from hermes_hookspecs.markers import ENTRY_POINT_GROUP, PROJECT_NAME


def turn(text: str, session_id: str = "s1", turn_id: str = "t1") -> TurnRecord:
    return TurnRecord(session_id=session_id, turn_id=turn_id, user_text=text, assistant_text="ok")


def test_extracts_stated_facts_only() -> None:
    text = (
        "Remember that the staging database is read-only on Fridays. "
        "What time is it? I prefer pytest over unittest! my editor is helix. Thanks."
    )
    assert extract_facts(text) == [
        "The staging database is read-only on Fridays.",
        "I prefer pytest over unittest.",
        "My editor is helix.",
    ]
    assert extract_facts("How do I run the tests?") == []
    assert keywords("The Staging DB, read-only!") == ["staging", "db", "read-only"]


def test_sync_then_prefetch_recalls_by_keywords(tmp_path: Path) -> None:
    provider = KeywordMemoryProvider(tmp_path / "facts.json", max_recall=2)
    provider.sync_turn(turn("Remember that deploys go through the blue cluster."))
    provider.sync_turn(turn("Note that the staging database is read-only on Fridays.", "s1", "t2"))
    provider.sync_turn(turn("Remember that deploys go through the blue cluster."))  # duplicate
    assert len(provider.facts()) == 2
    recall = provider.prefetch("can I write to the staging database today?", "s2")
    assert recall == (
        "Recalled facts (example-memory):\n- The staging database is read-only on Fridays."
    )
    assert provider.prefetch("completely unrelated", "s2") is None
    # persisted: a new instance on the same file sees the facts
    again = KeywordMemoryProvider(tmp_path / "facts.json")
    assert again.search("blue cluster") == ["Deploys go through the blue cluster."]


def test_pre_compress_insights_follow_the_rotation_lineage(tmp_path: Path) -> None:
    provider = KeywordMemoryProvider(tmp_path / "facts.json")
    provider.sync_turn(turn("Remember that the API freeze starts on June 3.", session_id="old"))
    provider.sync_turn(turn("Remember that unrelated sessions stay out.", session_id="other"))
    provider.on_session_switch("old", "new", "compression")
    unsynced = [Message(role="user", content="I always use tabs in Makefiles.")]
    insights = provider.on_pre_compress("new", unsynced)
    assert insights == [
        "User stated (keep verbatim): The API freeze starts on June 3.",
        "User stated (keep verbatim): I always use tabs in Makefiles.",
    ]


def test_session_switch_is_logged_and_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_example_memory")
    provider = KeywordMemoryProvider(tmp_path / "facts.json")
    provider.on_session_switch("a", "b", "compression")
    provider.on_session_switch("b", "b", "resume")
    assert "session switch 'a' -> 'b' (compression)" in caplog.text
    assert provider.switches() == [
        {"old": "a", "new": "b", "reason": "compression"},
        {"old": "b", "new": "b", "reason": "resume"},
    ]
    data = json.loads((tmp_path / "facts.json").read_text(encoding="utf-8"))
    assert data["switches"][0]["reason"] == "compression"


def test_tools_recall_and_forget(tmp_path: Path) -> None:
    provider = KeywordMemoryProvider(tmp_path / "facts.json")
    provider.sync_turn(turn("Remember that the VPN needs the yubikey."))
    assert provider.handle_tool_call("example_memory_recall", {"query": "vpn"}, "s") == (
        "- The VPN needs the yubikey."
    )
    assert provider.handle_tool_call("example_memory_forget", {"text": "yubikey"}, "s") == (
        "Forgot 1 fact(s)."
    )
    assert provider.handle_tool_call("example_memory_recall", {"query": "vpn"}, "s") == (
        "No matching facts."
    )


def test_registration_reads_settings(tmp_path: Path) -> None:
    from hermes_example_memory import plugin

    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(specs)
    pm.register(plugin)
    settings = settings_from(
        {
            "memory": {"home": str(tmp_path / "home"), "provider": "example-memory"},
            "extensions": {"example_memory": {"max_recall": 5}},
        }
    )
    registered: list[MemoryProvider] = []
    pm.hook.register_memory_providers(register=registered.append, settings=settings)
    [provider] = registered
    assert isinstance(provider, KeywordMemoryProvider)
    assert provider.path == tmp_path / "home" / "example-memory.json"
    assert provider.max_recall == 5

    bad = settings_from({"extensions": {"example_memory": {"max_recall": 0}}})
    with pytest.raises(ConfigError, match="max_recall = 0"):
        pm.hook.register_memory_providers(register=registered.append, settings=bad)


def test_entry_point_is_declared() -> None:
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == "example_memory"]
    assert [ep.value for ep in found] == ["hermes_example_memory.plugin"]
