"""The recall plugin: session_search and session_open, driven through a real turn.

A real SQLite store, the real default plugins (named, autoload off), and the turn
runtime's ``run_framework_tools()`` answering the model's calls, as an
integrator's loop would hand them over.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import pytest

from hermes_core.host import Hermes
from hermes_core.tools import session_lineage
from tests.hosts import HostFactory


@pytest.fixture
def hosts(make_host: HostFactory) -> HostFactory:
    """Hosts with the default plugins (memory_builtin blocked) and an 8K window."""
    return make_host.with_sections(model={"context_length": 8_000})


@pytest.fixture
def host(hosts: HostFactory) -> Hermes:
    return hosts()


def call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def ask(session: Any, *calls: dict[str, Any]) -> list[str]:
    """One turn in which the model calls framework tools; the results the runtime recorded."""
    with session.turn() as turn:
        turn.prepare("look it up")
        turn.record_response({"role": "assistant", "content": None, "tool_calls": list(calls)})
        assert turn.run_framework_tools() == []
        results = [m.message.text() for m in turn.pending if m.message.role == "tool"]
        turn.record_response({"role": "assistant", "content": "done"})
        turn.commit()
    return results


FILLER = " ".join(f"filler{i}" for i in range(150))


def seed(host: Hermes, session: Any, texts: list[str]) -> None:
    """Turns holding ``texts`` after a head, then enough turns to push them out of the tail."""
    for text in ["the task begins", *texts, *(f"later turn {i}: {FILLER}" for i in range(8))]:
        with session.turn() as turn:
            turn.prepare(text)
            turn.record_response({"role": "assistant", "content": f"noted: {text[:20]}"})
            turn.commit()


def test_both_tools_are_frozen_with_the_prompt(host: Hermes) -> None:
    session = host.new_session()
    names = [t["function"]["name"] for t in session.prompt.tools]
    assert {"session_search", "session_open"} <= set(names)
    schema = next(t for t in session.prompt.tools if t["function"]["name"] == "session_search")
    assert schema["function"]["parameters"]["required"] == ["query"]


def test_search_finds_compacted_history_and_says_how_to_open_it(host: Hermes) -> None:
    session = host.new_session()
    seed(host, session, ["the deploy failed with error E4711 in pkg/deploy/run.go", "other"])
    session.compress()
    original = next(r for r in host.store().all_messages(session.id) if "E4711" in r.message.text())
    assert original.compacted and not original.active
    [result] = ask(session, call("session_search", {"query": "deploy error E4711"}))
    assert "E4711" in result and "pkg/deploy/run.go" in result
    match = re.search(r"session_open\(message_id=(\d+), before=3, after=3\)", result)
    assert match, result
    [opened] = ask(session, call("session_open", {"message_id": int(match.group(1))}, "c2"))
    assert "E4711" in opened and "(compacted" in opened


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": "x", "color": "red"}, "takes no argument 'color'"),
        ({"query": ""}, "the query is empty"),
        ({"query": "word " * 2_000}, "at most 2,000 are searched"),
        ({"query": "x", "limit": 0}, "limit must be 1 to 20"),
        ({"query": "x", "limit": "5"}, "limit must be a whole number"),
        ({"query": 42}, "query must be a string"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_search_answers_bad_calls_with_what_was_wrong(
    host: Hermes, arguments: Any, expected: str
) -> None:
    session = host.new_session()
    [result] = ask(session, call("session_search", arguments))
    assert result.startswith("Error:") and expected in result, result


def test_open_refuses_unknown_ids_and_other_sessions_rows(host: Hermes) -> None:
    mine = host.new_session()
    other = host.new_session()
    seed(host, other, ["a secret plan of the other session"])
    foreign = host.store().all_messages(other.id)[0].id
    results = ask(
        mine,
        call("session_open", {"message_id": foreign}, "a"),
        call("session_open", {"message_id": 10**9}, "b"),
        call("session_open", {"message_id": "7"}, "c"),
        call("session_open", {}, "d"),
        call("session_open", {"message_id": 1, "before": 99}, "e"),
    )
    assert "not in this session's history" in results[0] and "secret" not in results[0]
    assert "not in this session's history" in results[1]
    assert "must be a whole number" in results[2]
    assert "message_id is required" in results[3]
    assert "before must be 0 to 20" in results[4]
    [found] = ask(other, call("session_search", {"query": "secret plan"}))
    assert "secret plan" in found
    [none] = ask(mine, call("session_search", {"query": "secret plan"}, "z"))
    assert none.startswith("No message of this session's history matches")


def test_results_stay_within_the_token_budget_and_page_long_messages(host: Hermes) -> None:
    session = host.new_session()
    long_text = "needle " + " ".join(f"word{i}" for i in range(6_000))
    seed(host, session, [long_text, "needle again"])
    [result] = ask(session, call("session_search", {"query": "needle"}))
    tokens = host.tokens(session.model)
    assert tokens.count_text(result) <= 2_000
    assert "more chars]" in result
    first = next(
        r.id for r in host.store().all_messages(session.id) if "word5999" in r.message.text()
    )
    [page] = ask(session, call("session_open", {"message_id": first, "offset": 20_000}, "p"))
    assert "from char 20,000" in page or "chars 20,000-" in page
    assert tokens.count_text(page) <= 2_000
    [past] = ask(session, call("session_open", {"message_id": first, "offset": 10**7}, "q"))
    assert "past the end" in past


def test_a_rotated_session_searches_its_ancestors(hosts: HostFactory) -> None:
    host = hosts(compression={"in_place": False})
    session = host.new_session()
    parent_id = session.id
    seed(host, session, ["the zebra-77 rollout broke staging", "unrelated"])
    session.compress()
    assert session.id != parent_id  # rotated into a child (maybe more than once)
    assert parent_id in session_lineage(host.store(), session.id)
    [found] = ask(session, call("session_search", {"query": "zebra-77 rollout"}))
    assert "zebra-77" in found


def test_a_long_message_shows_its_passages_that_match_not_its_head(host: Hermes) -> None:
    session = host.new_session()
    # a long tool-like output: the matching line sits far from the head, and the
    # verdict at the very end is what a reader wants when no term matches
    lines = [f"   {i}→ unrelated listing line {i}" for i in range(600)]
    lines[420] = "   420→ ok github.com/acme/tool/integration_test 71.643s"
    seed(host, session, ["\n".join(lines), "short note"])
    [result] = ask(session, call("session_search", {"query": "integration_test"}))
    assert "71.643s" in result
    assert "chars skipped]" in result  # the gap before the passage is marked
    assert host.tokens(session.model).count_text(result) <= 2_000


def test_a_compaction_copy_of_a_message_shown_is_not_shown_again(host: Hermes) -> None:
    session = host.new_session()
    seed(host, session, ["the marker QX-DEDUP-77 sits here"])
    store = host.store()
    [hit] = store.search("QX-DEDUP-77", session_id=session.id, limit=1)
    # the carried-forward copy and its origin are one family: the row appears once in full
    [result] = ask(session, call("session_search", {"query": "QX-DEDUP-77 marker", "limit": 5}))
    assert result.count("the marker QX-DEDUP-77 sits here") == 1, result
    assert hit.message_id


def test_tool_calls_are_shown_once_with_decoded_arguments(host: Hermes) -> None:
    session = host.new_session()
    with session.turn() as turn:
        turn.prepare("run the check")
        command = 'grep -n "unknown channel NAK" pkg/wire.go'
        turn.record_response(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("Bash", {"command": command}, "t1")],
            }
        )
        turn.add_tool_result("t1", "no match")
        turn.record_response({"role": "assistant", "content": "nothing found"})
        turn.commit()
    [result] = ask(session, call("session_search", {"query": "unknown channel NAK"}))
    assert f"Bash: command={command}" in result  # decoded: the quotes as the agent typed them
    assert '\\"unknown channel NAK\\"' not in result  # not the raw JSON again


def test_search_shows_what_the_user_said_next(host: Hermes) -> None:
    session = host.new_session()
    with session.turn() as turn:
        turn.prepare("build it")
        make = call("bash", {"c": "make"}, "b1")
        turn.record_response({"role": "assistant", "content": None, "tool_calls": [make]})
        turn.add_tool_result("b1", "error: linker failed W9321")
        # a substantial neighbour: the window ends with it (a slight one would not count)
        analysis = "the link step fails; " + "the object list is out of date. " * 20
        turn.record_response({"role": "assistant", "content": analysis})
        turn.commit()
    for request in ("what now?", "retry it with -j1, the parallel build races", "thanks"):
        with session.turn() as turn:
            turn.prepare(request)
            turn.record_response({"role": "assistant", "content": "retrying"})
            turn.commit()
    [found] = ask(session, call("session_search", {"query": "linker W9321"}))
    assert re.search(r"\n  then #\d+ user \(active\): what now\?", found), found
    assert re.search(
        r"\n  then #\d+ user \(active\): retry it with -j1, the parallel build races", found
    ), found
    assert "thanks" not in found  # two replies at most


def test_search_shows_terminal_output_as_text_and_names_harness_text(host: Hermes) -> None:
    """A command's colours and cursor moves are not shown (they cost tokens and say
    nothing); a harness block beside a hit is named, not shown."""
    session = host.new_session()
    padding = " padding" * 80
    reminder = f"<environment_context><cwd>/srv/app</cwd>{padding}</environment_context>"
    with session.turn() as turn:
        turn.prepare(reminder)
        turn.record_response({"role": "assistant", "content": "workspace noted as Q7781"})
        turn.commit()
    with session.turn() as turn:
        turn.prepare("build it")
        turn.record_response(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("bash", {"command": "make"}, "b1")],
            }
        )
        coloured = "\x1b[1;31merror:\x1b[0m linker failed W9321\r\n\x1b]0;make\x07\x1b[?25h done"
        turn.add_tool_result("b1", coloured)
        turn.record_response({"role": "assistant", "content": "the link step fails"})
        turn.commit()
    rows = host.store().all_messages(session.id)
    assert rows[0].message.harness == "codex.environment_context"  # marked at record time
    [found] = ask(session, call("session_search", {"query": "linker W9321"}))
    assert "error: linker failed W9321\n done" in found
    assert "\x1b" not in found and "\r" not in found
    [near] = ask(session, call("session_search", {"query": "Q7781"}, "c2"))
    assert "padding padding" not in near
    assert re.search(r"#\d+ user \(active\): \[text the harness injected \(codex\.", near), near
    [opened] = ask(session, call("session_open", {"message_id": rows[-2].id}, "c3"))
    assert "error: linker failed W9321" in opened and "\x1b" not in opened


def test_the_budget_setting_is_the_tools_and_the_window_caps_it(hosts: HostFactory) -> None:
    # the plugin's own budget_tokens decides a result's size, up to the host's ceiling:
    # an eighth of the usable window (so a setting can raise it on a large window, and
    # never lets one result crowd a small one)
    sizes = {}
    for window in (8_000, 128_000):
        host = hosts(
            model={"context_length": window}, extensions={"recall": {"budget_tokens": 6_000}}
        )
        session = host.new_session()
        texts = [
            " ".join(f"needle w{i}x{j}" if j % 40 == 0 else f"w{i}x{j}" for j in range(3_000))
            for i in range(5)
        ]
        seed(host, session, texts)
        [result] = ask(session, call("session_search", {"query": "needle"}))
        sizes[window] = host.tokens(session.model).count_text(result)
    assert sizes[8_000] <= 1_000  # (8,000 - 4,096 reserved for output) / 8, floored at 1,000
    assert 2_000 < sizes[128_000] <= 6_000


def test_a_result_uses_the_room_it_has_when_a_message_is_cut(hosts: HostFactory) -> None:
    # one long matching message: the renderer grows its room to near the whole budget
    # (default 3,000 tokens at a 128K window) instead of stopping at the first that fits
    host = hosts(model={"context_length": 128_000})
    session = host.new_session()
    text = " ".join(f"needle w{j}" if j % 25 == 0 else f"w{j}" for j in range(20_000))
    seed(host, session, [text])
    [result] = ask(session, call("session_search", {"query": "needle"}))
    used = host.tokens(session.model).count_text(result)
    assert "more chars]" in result or "chars skipped]" in result
    assert 2_700 <= used <= 3_000, used  # a tenth of the budget unused at most (old: 2,670)


def test_a_places_best_hit_keeps_the_most_room(tmp_path: Path) -> None:
    # hits of one turn widen a place; the row that ranked best is shown with
    # BEST_HIT_ROOM times a neighbour's room, another hit with twice it
    from hermes_core.search import search_with_context
    from hermes_hookspecs import Message, NewMessage, NewSession
    from hermes_plugin_recall.tools import BEST_HIT_ROOM, SessionSearchTool, _Rows
    from hermes_plugin_sqlite_store import SqliteSessionStore

    store = SqliteSessionStore(tmp_path / "s.db")
    sid = store.create_session(NewSession()).id

    def said(role: Literal["user", "assistant"], text: str) -> NewMessage:
        return NewMessage(message=Message(role=role, content=text))

    lines = [f"line {i} of the report" for i in range(300)]
    best = "\n".join(["kestrel osprey heron verdict", *lines])
    other = "\n".join(["kestrel note", *lines])
    rows = store.append_messages(
        sid, [said("user", "check it"), said("assistant", other), said("assistant", best)]
    )
    (place,) = search_with_context(store, "kestrel osprey heron", session_ids=[sid])
    assert place.message.id == rows[2].id and len(place.hits) == 2
    text = SessionSearchTool._render("kestrel osprey heron", [place], _Rows(["report"]), 300)
    shown = {
        int(m.group(1)): len(m.group(2))
        for m in re.finditer(
            r"» #(\d+) assistant \(active\): (.*?)(?=\n[» ] #|\nRead |\Z)", text, re.S
        )
    }
    assert BEST_HIT_ROOM > 2
    assert 2 * 300 < shown[rows[2].id] <= BEST_HIT_ROOM * 300 + 120
    assert shown[rows[1].id] <= 2 * 300 + 120
    store.close()
