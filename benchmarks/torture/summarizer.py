"""A summarizer endpoint that misbehaves: the session is left intact or falls back, per policy.

The ``openai`` summarizer is pointed at a loopback
:class:`~hermes_core.testing.fake_openai.FakeOpenAIServer` (real HTTP, the
chat-completions wire format, every request and answer validated against the
official ``openai`` package's types). For each failure class a fresh session
of ~30K tokens on a real SQLite file is compressed (manual compress, which
ignores cooldowns) while the endpoint answers with that failure every time.

The failure policy (issue 5): network down, auth, unrecoverable quota,
truncated, empty or refused summaries abort and leave the session exactly as
it was; other failures (timeout, 429 rate limit, 5xx, a dropped connection, a
body that is not JSON) fall back to the deterministic summarizer. With
``abort_on_summary_failure`` an automatic (preflight) compression keeps the
session untouched on every failure. A control case (a well-formed summary)
proves the path is wired.

Checked per case: the outcome (aborted / compressed with the fallback /
compressed by ``openai``), and either the session untouched (same active rows,
byte for byte, same stored rows, no compaction event) or a sound compacted
session with every original row still stored.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from hermes_core.testing.fake_openai import (
    Behaviour,
    Drop,
    ErrorReply,
    FakeOpenAIServer,
    Malformed,
    Reply,
)

from .stores import sqlite_problems, view_problems

GOOD_SUMMARY = "\n".join(
    f"## {title}\n{body}"
    for title, body in (
        ("Goal", "Fix the failing test."),
        ("Constraints", "(none)"),
        ("Progress", "Read the code, ran the tests."),
        ("Decisions", "(none)"),
        ("Files", "src/app.py"),
        ("Next Steps", "Patch and rerun."),
        ("Critical Context", "(none)"),
    )
)

#: (name, endpoint behaviour, expected outcome, extra compression settings, automatic)
CASES: list[tuple[str, Behaviour, str, dict[str, Any], bool]] = [
    ("control: good summary", Reply(text=GOOD_SUMMARY), "openai", {}, False),
    ("timeout", Reply(text=GOOD_SUMMARY, delay_s=3.0), "fallback", {}, False),
    (
        "HTTP 401",
        ErrorReply(
            status=401,
            type="invalid_request_error",
            code="invalid_api_key",
            message="Incorrect API key provided",
        ),
        "abort",
        {},
        False,
    ),
    (
        "HTTP 429 rate limit",
        ErrorReply(
            status=429, type="requests", code="rate_limit_exceeded", message="Rate limit reached"
        ),
        "fallback",
        {},
        False,
    ),
    (
        "HTTP 429 quota",
        ErrorReply(
            status=429,
            type="insufficient_quota",
            code="insufficient_quota",
            message="You exceeded your current quota",
        ),
        "abort",
        {},
        False,
    ),
    ("HTTP 500", ErrorReply(status=500), "fallback", {}, False),
    (
        "truncated (finish_reason=length)",
        Reply(text="## Goal\nFix th", finish_reason="length"),
        "abort",
        {},
        False,
    ),
    ("empty", Reply(text=""), "abort", {}, False),
    ("refused", Reply(text="", refusal="I can't help with that."), "abort", {}, False),
    ("body not JSON", Malformed(), "fallback", {}, False),
    ("connection dropped", Drop(), "fallback", {}, False),
    (
        "HTTP 500, abort_on_summary_failure, automatic",
        ErrorReply(status=500),
        "untouched",
        {"abort_on_summary_failure": True},
        True,
    ),
]


def _snapshot(store: Any, sid: str) -> tuple[list[tuple[int, str, Any]], int, int]:
    active = [
        (r.id, r.message.model_dump_json(), r.api_content) for r in store.active_messages(sid)
    ]
    return active, len(store.all_messages(sid)), len(store.compaction_events(sid))


def _fill(session: Any, turns: int) -> None:
    """Real turns: user question, a tool round with a long output, an answer."""
    for k in range(turns):
        with session.turn("filler") as turn:
            turn.prepare(f"question {k}: please look at src/module_{k}.py and fix issue #{100 + k}")
            call = f"call_{k}"
            turn.record_response(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call,
                            "type": "function",
                            "function": {"name": "bash", "arguments": f'{{"cmd": "cat {k}"}}'},
                        }
                    ],
                }
            )
            turn.add_tool_result(
                call, f"output {k}: " + f"def f{k}(x):\n    return x + {k}\n" * 400
            )
            turn.prepare()
            turn.record_response({"role": "assistant", "content": f"Done with step {k}. " * 5})
            turn.commit()


def run_case(
    folder: Path,
    fake: FakeOpenAIServer,
    name: str,
    behaviour: Behaviour,
    expected: str,
    extra: dict[str, Any],
    automatic: bool,
) -> list[str]:
    from hermes_core.config import settings_from
    from hermes_core.host import Hermes

    window = 24_000
    settings = settings_from(
        {
            "session": {"path": str(folder / "summarizer.db")},
            "memory": {"home": str(folder / "memory")},
            "model": {"context_length": window if automatic else 1_000_000},
            "summarizer": {
                "openai": {
                    "base_url": fake.base_url,
                    "model": "gpt-4o-mini",
                    "timeout": 1.0,
                    "fallback_to_main": False,
                    "api_key_env": "HERMES_TORTURE_NO_KEY",
                }
            },
            "compression": {"summarizer": "openai", **extra},
        }
    )
    problems: list[str] = []
    hermes = Hermes(settings)
    try:
        store = hermes.store()
        session = hermes.new_session(caller_message=f"summarizer torture: {name}")
        fake.set_default("chat.completions", Reply(text=GOOD_SUMMARY))
        _fill(session, 2 if automatic else 12)
        before = _snapshot(store, session.id)
        originals = {r.id for r in store.all_messages(session.id)}
        fake.set_default("chat.completions", behaviour)
        asked = len(fake.requests_to("chat.completions"))
        reason = ""
        if automatic:
            hermes.settings.model.context_length = window // 4  # now far over the threshold
            with session.turn("auto") as turn:
                turn.prepare("one more question")
                turn.record_response({"role": "assistant", "content": "ok"})
                turn.commit()
            status, fallback, summarizer = "n/a", False, ""
            after = _snapshot(store, session.id)
            # the turn's own two messages are appended; compression must not have touched the rest
            before = (before[0], before[1] + 2, before[2])
            after = (after[0][: len(before[0])], after[1], after[2])
        else:
            outcome = session.compress()
            status, fallback, summarizer = outcome.status, outcome.fallback_used, outcome.summarizer
            reason = f" ({outcome.reason})" if outcome.reason else ""
            after = _snapshot(store, session.id)
        if len(fake.requests_to("chat.completions")) == asked:
            problems.append("the summarizer endpoint was never called")
        if expected in ("abort", "untouched"):
            if status not in ("aborted", "n/a"):
                problems.append(f"status {status!r}{reason}, expected aborted")
            if after != before:
                problems.append(
                    f"session changed (active {len(before[0])}->{len(after[0])}, rows "
                    f"{before[1]}->{after[1]}, compactions {before[2]}->{after[2]})"
                )
        else:
            want = "deterministic" if expected == "fallback" else "openai"
            if status != "compressed" or summarizer != want or fallback != (expected == "fallback"):
                problems.append(
                    f"outcome {status!r}{reason} by {summarizer!r} (fallback {fallback}), expected "
                    f"compressed by {want!r}"
                )
            stored = {r.id for r in store.all_messages(session.id)}
            if not originals <= stored:
                problems.append(f"{len(originals - stored)} original rows lost")
            if after[2] != before[2] + 1:
                problems.append(f"compaction events {before[2]}->{after[2]}, expected +1")
        problems += view_problems(store, session.id, ())
    finally:
        hermes.close()
    return problems


def run() -> dict[str, Any]:
    started = time.monotonic()
    failures: list[str] = []
    checked: list[str] = []
    with tempfile.TemporaryDirectory(prefix="torture-summarizer-") as tmp:
        folder = Path(tmp)
        fake = FakeOpenAIServer(check_on_exit=False)
        with fake:
            for name, behaviour, expected, extra, automatic in CASES:
                problems = run_case(folder, fake, name, behaviour, expected, extra, automatic)
                checked.append(f"{name} -> {expected}")
                failures += [f"{name}: {p}" for p in problems]
            issues = fake.take_issues()
        # a dropped connection or a deliberate error body is not the client's fault; anything
        # else the fake flags (a request the openai SDK would not accept) is
        failures += [f"fake endpoint: {issue}" for issue in issues if issue.direction == "request"]
        failures += [f"sqlite: {p}" for p in sqlite_problems(folder / "summarizer.db")]
    return {
        "cases": len(CASES),
        "checked": checked,
        "elapsed_s": round(time.monotonic() - started, 1),
        "failures": failures,
    }
