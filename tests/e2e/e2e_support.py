"""What the end-to-end suite shares: the loop from docs/runtime.md, settings, the fake's rules.

The loop is not re-typed here: :func:`docs_loop` takes the ``python`` block of
docs/runtime.md that defines ``agent_turn`` and runs its definitions, so the
suite drives exactly the code the docs tell integrators to write.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from hermes_core.config import settings_from
from hermes_core.host import Hermes
from hermes_core.testing.fake_openai import FakeOpenAIServer, Reply, Rules, ToolCallReply

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_DOC = ROOT / "docs" / "runtime.md"
CHILD = Path(__file__).with_name("e2e_child.py")
#: the fake counts this many characters of request JSON as one token: it reports
#: about twice the runtime's estimate, so only the reported usage reaches the trigger
CHARS_PER_TOKEN = 2.0
CONTEXT_LENGTH = 16_000


def docs_block() -> str:
    """The docs/runtime.md ``python`` block that defines ``agent_turn``."""
    text = RUNTIME_DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    found = [block for block in blocks if "def agent_turn(" in block]
    assert len(found) == 1, "docs/runtime.md must hold exactly one block defining agent_turn"
    return str(found[0])


def docs_loop(client: Any, run_tool: Any = None) -> dict[str, Any]:
    """``agent_turn``, ``run_tool`` and ``TOOLS`` from the docs block, using ``client``.

    The block's imports, ``TOOLS`` and function definitions run unchanged; its
    top-level client, host and session lines are the caller's (a test passes
    its own client and host instead of reading the environment).
    """
    tree = ast.parse(docs_block())
    keep: list[ast.stmt] = [
        node
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef)
        or (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "TOOLS")
    ]
    namespace: dict[str, Any] = {"client": client}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(RUNTIME_DOC), "exec"), namespace)
    if run_tool is not None:
        namespace["run_tool"] = run_tool
    return namespace


def settings_data(tmp: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "session": {"path": str(tmp / "sessions.db"), "lease_wait": 15.0, "lease_ttl": 6.0},
        "memory": {"home": str(tmp / "memory")},
        "model": {"name": "gpt-4o-mini", "context_length": CONTEXT_LENGTH},
        # a small window whose compressions have room to save: short tail and summary budgets
        "compression": {
            "lean_tail_min_tokens": 800,
            "lean_tail_max_tokens": 2_000,
            "identifier_budget_tokens": 300,
            "user_quote_budget_tokens": 300,
        },
    }
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return data


def write_config(tmp: Path, data: dict[str, Any]) -> Path:
    """The same settings as a hermes.toml for the child processes."""
    lines: list[str] = []
    for section, values in data.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path = tmp / "hermes.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def host(data: dict[str, Any], *plugins: object) -> Hermes:
    return Hermes(settings_from(data), load_entrypoints=True, plugins=plugins)


def agent_rules() -> Rules:
    """The fake model: parallel tool calls, the memory tool, then text."""
    bash = [
        ToolCallReply(name="bash", arguments={"cmd": "ls"}),
        ToolCallReply(name="bash", arguments={"cmd": "git status"}),
    ]
    remember = ToolCallReply(
        name="memory",
        arguments={"action": "add", "target": "memory", "content": "The CI runs on two cores."},
    )
    return (
        Rules(default=Reply(text="Understood; carrying on with the next step of the task."))
        .when(Reply(text="", tool_calls=bash), last_role="user", last_contains="in parallel")
        .when(Reply(text="", tool_calls=[remember]), last_role="user", last_contains="remember")
        .when(Reply(text="Both tools ran; their output is above."), last_role="tool")
    )


def fake_server(**kwargs: Any) -> FakeOpenAIServer:
    server = FakeOpenAIServer(chars_per_token=CHARS_PER_TOKEN, **kwargs)
    server.set_default("chat.completions", agent_rules())
    return server


def user_text(i: int) -> str:
    """The i-th user message: every third asks for parallel tools, every tenth to remember."""
    detail = " ".join(f"src/module{i}/file{j}.py" for j in range(30))
    if i % 10 == 4:
        return f"Turn {i}: please remember that CI runs on two cores. Context: {detail}"
    if i % 3 == 0:
        return f"Turn {i}: run ls and git status in parallel, then report. Files: {detail}"
    return f"Turn {i}: explain what changed in {detail} and what to do next."


def child_env(config: Path, fake: FakeOpenAIServer, **extra: str) -> dict[str, str]:
    env = {**os.environ, "HERMES_CORE_CONFIG": str(config), **extra}
    env["OPENAI_BASE_URL"] = fake.base_url
    env["OPENAI_API_KEY"] = "test-key"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "e2e"), env.get("PYTHONPATH", "")])
    return env


def start_child(config: Path, fake: FakeOpenAIServer, *args: str) -> subprocess.Popen[str]:
    """A child process running the docs loop (see e2e_child.py), talking over stdin/stdout."""
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        env=child_env(config, fake),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


def ask(child: subprocess.Popen[str], line: str) -> str:
    """Send one command line to a child and read its one-line answer."""
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(line + "\n")
    child.stdin.flush()
    answer = child.stdout.readline()
    if not answer:
        raise AssertionError(f"child died: {child.stderr.read() if child.stderr else ''}")
    return answer.rstrip("\n")


def tool_pairs_ok(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is answered right after it (else the API says 400)."""
    for i, message in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        ids = sorted(call["id"] for call in message["tool_calls"])
        answered = []
        for follow in messages[i + 1 :]:
            if follow.get("role") != "tool":
                break
            answered.append(follow["tool_call_id"])
        assert sorted(answered) == ids, f"message {i}: calls {ids}, results {answered}"


def finish(child: subprocess.Popen[str], *, kill: bool = False) -> str:
    """End a child (EOF on stdin, or SIGKILL) and close its pipes; returns its stderr."""
    if kill and child.poll() is None:
        child.kill()
    try:
        _, err = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        _, err = child.communicate()
    return err or ""
