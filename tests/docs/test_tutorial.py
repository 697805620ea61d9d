"""docs/tutorial.md runs as written: every block, in order, in a fresh folder.

The page is the script. A fenced block with a ``title="NAME"`` is a file written
under that name; a ``console`` block is commands (``$ ...``) whose output must
match the lines shown after them; a ``console`` block titled ``second terminal``
starts a server that stays up until the end; the ``bash`` set-up block is the
README's set-up command, which CI (``.ci/run``) runs. Real parts throughout: the
tutorial's SQLite file, the loopback model server ``model.py`` (the project's
``fake_openai``) in its own process, ``agent.py`` run twice as two processes,
and the installed ``hermes-core`` command.

Matching shown output: digits and hex hashes are compared as "a number" / "a
hash" (counts vary with the tokenizer and the date in the prompt), runs of
spaces as one space, and ``...`` stands for any text, across lines too. The
facts the page claims are then checked exactly: a compaction that shrank the
context, the same prompt digest in both processes, and a full-prefix ledger
entry at the first request of the resumed process.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hermes_hookspecs import PrefixEntry
from hermes_plugin_sqlite_store import SqliteSessionStore

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
TUTORIAL = ROOT / "docs" / "tutorial.md"
#: the port the page uses; the test serves the model on a free one instead
PAGE_PORT = "8099"
SERVER_TITLE = "second terminal"

FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
TITLE = re.compile(r'title="([^"]+)"')


@dataclass
class Block:
    lang: str
    title: str | None
    body: str


@dataclass
class Command:
    line: str
    expected: str


@dataclass
class Run:
    """What running the page produced, for the fact checks."""

    outputs: list[tuple[str, str]] = field(default_factory=list)
    ledgers: list[list[PrefixEntry]] = field(default_factory=list)

    def output_of(self, prefix: str) -> list[str]:
        return [out for line, out in self.outputs if line.startswith(prefix)]


def blocks(text: str) -> list[Block]:
    found = []
    for match in FENCE.finditer(text):
        title = TITLE.search(match.group(2))
        found.append(Block(match.group(1), title.group(1) if title else None, match.group(3)))
    return found


def commands(block: Block) -> list[Command]:
    out: list[Command] = []
    for line in block.body.splitlines():
        if line.startswith("$ "):
            out.append(Command(line[2:], ""))
        elif out:
            out[-1].expected += line + "\n"
        else:
            raise AssertionError(f"console block starts without a '$ ' command: {line!r}")
    return out


def normalise(text: str) -> str:
    text = re.sub(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b", "H", text)
    text = re.sub(r"\d[\d,.]*", "N", text)
    text = re.sub(r"[ \t]+", " ", text)
    return "\n".join(line.strip() for line in text.strip().splitlines())


def shown_matches(expected: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in normalise(expected).split("..."))
    return re.fullmatch(pattern, normalise(actual), re.S) is not None


def free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def test_every_block_of_the_tutorial_is_of_a_kind_the_test_runs() -> None:
    found = blocks(TUTORIAL.read_text(encoding="utf-8"))
    assert len(found) >= 10
    for block in found:
        runnable = block.lang == "console" or block.title is not None
        assert runnable or block.lang == "bash", (block.lang, block.body[:60])


def test_the_setup_block_is_the_readme_setup_command() -> None:
    setup = [b for b in blocks(TUTORIAL.read_text(encoding="utf-8")) if b.lang == "bash"]
    assert len(setup) == 1, "the tutorial has one bash block: the set-up"
    install = setup[0].body.splitlines()[0]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"```bash\n{install} && " in readme, "the install line is not the README's set-up"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python3 -m venv .venv" in ci and "pip install --quiet -e '.[dev]'" in ci


def test_the_tutorial_is_linked_from_the_readme_and_the_docs_index() -> None:
    assert "docs/tutorial.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(tutorial.md)" in (ROOT / "docs" / "index.md").read_text(encoding="utf-8")


def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    port = free_port()
    page = TUTORIAL.read_text(encoding="utf-8").replace(PAGE_PORT, port)
    (tmp_path / "transcripts").symlink_to(ROOT / "transcripts")
    work = tmp_path / "tutorial"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_CORE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "100"
    env.pop("OPENAI_BASE_URL", None)
    env.pop("OPENAI_API_KEY", None)
    servers: list[subprocess.Popen[str]] = []
    run = Run()
    try:
        for block in blocks(page):
            if block.title is not None and block.lang != "console":
                (work / block.title).write_text(block.body, encoding="utf-8")
            elif block.lang == "console" and block.title == SERVER_TITLE:
                servers += [start_server(c, work, env) for c in commands(block)]
            elif block.lang == "console":
                for command in commands(block):
                    execute(command, work, env, run)
        for server in servers:
            server.send_signal(signal.SIGINT)  # Ctrl-C, as the page says
            _, err = server.communicate(timeout=30)
            assert server.returncode == 0, f"model.py exited {server.returncode}: {err}"
            assert err == "", f"model.py reported: {err}"  # no request the SDK would refuse
    finally:
        for server in servers:
            if server.poll() is None:
                server.kill()
            server.communicate()  # closes its pipes (else a later test reports them unclosed)
    check_facts(run)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_server(command: Command, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    server = subprocess.Popen(
        shlex.split(command.line),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it: a run started in the background (``cmd &``
        # in a script, as CI jobs may be) passes SIGINT on ignored, and Python then
        # never raises KeyboardInterrupt for it
        preexec_fn=_default_sigint,
    )
    assert server.stdout is not None
    first = server.stdout.readline()
    if not shown_matches(command.expected, first):
        server.kill()
        _, err = server.communicate()
        raise AssertionError(f"$ {command.line}\nprinted {first!r}, stderr:\n{err}")
    return server


def execute(command: Command, cwd: Path, env: dict[str, str], run: Run) -> None:
    if command.line.startswith("export "):
        for assignment in shlex.split(command.line)[1:]:
            name, _, value = assignment.partition("=")
            env[name] = value
        assert command.expected == ""
        return
    done = subprocess.run(
        ["bash", "-c", command.line],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"$ {command.line}\nexit {done.returncode}\n{done.stderr}"
    assert done.stderr == "", f"$ {command.line}\nwrote to stderr:\n{done.stderr}"
    assert shown_matches(command.expected, done.stdout), (
        f"$ {command.line}\nthe page shows:\n{command.expected}\nit printed:\n{done.stdout}"
    )
    run.outputs.append((command.line, done.stdout))
    if command.line.startswith("python agent.py"):
        run.ledgers.append(ledger(cwd / "sessions.db"))


def ledger(path: Path) -> list[PrefixEntry]:
    store = SqliteSessionStore(path)
    try:
        entries: list[PrefixEntry] = store.prefix_entries("tutorial")
        return entries
    finally:
        store.close()


def check_facts(run: Run) -> None:
    first, second = run.output_of("python agent.py")
    compactions = re.findall(r"compacted: (\d+) -> (\d+)", first)
    assert compactions, "the first process never compacted"
    assert all(int(after) < int(before) for before, after in compactions)
    assert first.startswith("new session") and second.startswith("resumed session")
    digests = [re.findall(r"prompt sha256 (\w+)", out) for out in (first, second)]
    assert digests[0] and digests[0] == digests[1], digests
    assert "It was: E   ImportError: cannot import name 'login_user'" in second
    before, after = run.ledgers
    resumed = after[len(before)]  # the first request of the second process
    assert resumed.request_index == before[-1].request_index + 1
    assert resumed.break_reason is None, resumed  # the whole last request is its prefix
    assert resumed.shared_prefix_tokens == before[-1].request_tokens
    assert resumed.shared_prefix_hash == before[-1].request_hash


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("context: 1706 tokens", "context: 1812 tokens", True),
        ("context: 1706 tokens", "context: 1812 words", False),
        ("a\n...\nz", "a\nb\nc\nz", True),
        ("prompt sha256 adb9508edc524a9a", "prompt sha256 0123456789abcdef", True),
        ("ID  UPDATED", "ID    UPDATED  ", True),
    ],
)
def test_shown_output_matching(expected: str, actual: str, ok: bool) -> None:
    assert shown_matches(expected, actual) is ok
