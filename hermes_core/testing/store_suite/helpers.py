"""Message builders and probes the store checks share (also handy in a store's own tests)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from hermes_core.storekit import process_state
from hermes_hookspecs import (
    HandoffSummary,
    Message,
    NewMessage,
    SessionStore,
    StoredMessage,
    ToolCall,
    ToolFunction,
)

StoreFactory = Callable[[], SessionStore]

#: queries full of search syntax (FTS5, tsquery, LIKE, SQL); each must be plain text
SYNTAX_QUERIES: tuple[str, ...] = (
    '"unbalanced',
    "foo AND NOT bar",
    "foo OR qux",
    "NEAR(foo bar)",
    "foo*",
    "col:foo",
    "^foo",
    "-foo",
    "(",
    ")",
    "'",
    "\\",
    "&|!",
    "foo:* & !bar",
    "<->",
    "{a b}",
    "[x]",
    "*",
    '"',
    ":",
    'a"b',
    "%",
    "_",
    "NOT",
    "AND",
    "OR",
    "foo' OR '1'='1",
    "foo; DROP TABLE messages; --",
    "\x00",
    " \t\n ",
)


# ---------------------------------------------------------------------------
# message helpers
# ---------------------------------------------------------------------------


def user(text: str, **extra: Any) -> NewMessage:
    return NewMessage(message=Message(role="user", content=text), **extra)


def assistant(
    text: str | None = None, calls: list[tuple[str, str, str]] | None = None
) -> NewMessage:
    tool_calls = (
        [
            ToolCall(id=cid, function=ToolFunction(name=name, arguments=args))
            for cid, name, args in calls
        ]
        if calls
        else None
    )
    return NewMessage(message=Message(role="assistant", content=text, tool_calls=tool_calls))


def tool(call_id: str, text: str) -> NewMessage:
    return NewMessage(message=Message(role="tool", tool_call_id=call_id, content=text))


def summary(text: str) -> NewMessage:
    handoff = HandoffSummary(goal="keep going", progress=text)
    return NewMessage(
        message=Message(
            role="user", content=handoff.render() + "\n" + text, kind="summary", summary=handoff
        )
    )


def carry(row: StoredMessage) -> NewMessage:
    """A message carried forward unchanged by a compaction (``origin_id`` set)."""
    return NewMessage.carried_from(row)


def texts(rows: list[StoredMessage]) -> list[str]:
    return [row.message.text() for row in rows]


_WORDS = re.compile(r"[^\W_]+")  # runs of letters and digits


def covers(text: str, term: str) -> bool:
    """Whether ``text`` covers a search term: as a substring, or its words as consecutive
    words, ignoring case (the store contract's rule, written out independently)."""
    low, want = text.lower(), term.lower()
    if want in low:
        return True
    words = " ".join(_WORDS.findall(want))
    return bool(words) and f" {words} " in " " + " ".join(_WORDS.findall(low)) + " "


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped (no such process now)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def zombie_process() -> subprocess.Popen[bytes]:
    """A child that has exited and is not reaped yet (state ``Z``); ``wait()`` it afterwards."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while process_state(proc.pid) != "Z":
        if time.monotonic() > deadline:
            raise AssertionError(f"child {proc.pid} did not become a zombie")
        time.sleep(0.005)
    return proc


def snapshot(store: SessionStore, session_id: str) -> dict[str, Any]:
    """Everything stored about a session, to compare before and after a refused call."""
    return {
        "session": store.get_session(session_id).model_dump(),
        "all": [m.model_dump() for m in store.all_messages(session_id)],
        "active": [m.id for m in store.active_messages(session_id)],
        "events": [e.model_dump() for e in store.compaction_events(session_id)],
        "lease": None if (lease := store.current_lease(session_id)) is None else lease.token,
    }
