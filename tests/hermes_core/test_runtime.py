"""The frozen layered prompt and the turn runtime, on a real SQLite file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest

from hermes_core.config import settings_from
from hermes_core.docsgen import hook_names
from hermes_core.host import Hermes
from hermes_hookspecs import (
    AgentTool,
    CompactionBackend,
    CompressionRequest,
    CompressionResult,
    ContextEngine,
    ImportedConversation,
    Importer,
    Layer,
    LeaseLost,
    Message,
    NewMessage,
    PluginError,
    PromptBlock,
    SettingsSection,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    TailPlan,
    TailRequest,
    TailStrategy,
    ToolContext,
    ValidationError,
    hookimpl,
    specs,
)
from hermes_plugin_tail_lean.annotations import VERSION as LEAN_VERSION
from tests.hosts import HostFactory

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPT = ROOT / "transcripts" / "openai-chat" / "openhands-django-11149.json.gz"


class KeepLastEngine(ContextEngine):
    """A tiny engine for runtime tests: keeps the last user turn only."""

    name = "keep-last"

    def compress(self, request: CompressionRequest) -> CompressionResult:
        rows = request.messages
        start = max(i for i, r in enumerate(rows) if r.message.role == "user")
        kept = [NewMessage(message=r.message, origin_id=r.id) for r in rows[start:]]
        return CompressionResult(status="compressed", engine=self.name, messages=kept)


class EchoTool(AgentTool):
    """A framework tool that answers with its arguments and session."""

    name = "zz_echo"

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "parameters": {}}}

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        return f"echo {arguments.get('text')} in {context.session_ids[0]}"


class RecorderSettings(SettingsSection):
    config_section: ClassVar[str] = "recorder"

    label: str = "rec"


class Recorder:
    """A plugin implementing every hook, recording the order of calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _note(self, name: str) -> None:
        self.calls.append(name)

    @hookimpl
    def register_settings(self, register):  # type: ignore[no-untyped-def]
        self._note("register_settings")
        register(RecorderSettings)

    @hookimpl
    def register_context_engines(self, register):  # type: ignore[no-untyped-def]
        self._note("register_context_engines")
        register(KeepLastEngine())

    @hookimpl
    def register_tail_strategies(self, register):  # type: ignore[no-untyped-def]
        self._note("register_tail_strategies")

        class Tail(TailStrategy):
            name = "rec-tail"

            def plan(self, request: TailRequest) -> TailPlan:
                return TailPlan(tail_start=0)

        register(Tail())

    @hookimpl
    def register_summarizers(self, register):  # type: ignore[no-untyped-def]
        self._note("register_summarizers")

        class S(Summarizer):
            name = "rec-summarizer"

            def summarize(self, request: SummaryRequest) -> SummaryResult:
                raise NotImplementedError

        register(S())

    @hookimpl
    def register_memory_providers(self, register):  # type: ignore[no-untyped-def]
        self._note("register_memory_providers")

    @hookimpl
    def register_session_stores(self, register):  # type: ignore[no-untyped-def]
        self._note("register_session_stores")

    @hookimpl
    def register_compaction_backends(self, register):  # type: ignore[no-untyped-def]
        self._note("register_compaction_backends")

        class Never(CompactionBackend):
            name = "never"

            def eligible(self, session, model, settings):  # type: ignore[no-untyped-def]
                return False

            def compact(self, request):  # type: ignore[no-untyped-def]
                raise AssertionError("not eligible")

        register(Never())

    @hookimpl
    def register_token_counters(self, register):  # type: ignore[no-untyped-def]
        self._note("register_token_counters")

    @hookimpl
    def register_importers(self, register):  # type: ignore[no-untyped-def]
        self._note("register_importers")

        class Nothing(Importer):
            name = "rec-nothing"

            def sniff(self, path: Path, head: bytes) -> bool:
                return False

            def load(self, path: Path) -> list[ImportedConversation]:
                return []

        register(Nothing())

    @hookimpl
    def register_tools(self, register):  # type: ignore[no-untyped-def]
        self._note("register_tools")
        register(EchoTool())

    @hookimpl
    def detect_harness(self, message):  # type: ignore[no-untyped-def]
        self._note("detect_harness")
        return "recorder.wrapper" if message.text().startswith("<wrapper>") else None

    @hookimpl
    def configure(self, settings):  # type: ignore[no-untyped-def]
        self._note("configure")

    @hookimpl
    def on_session_start(self, session, resumed):  # type: ignore[no-untyped-def]
        self._note("on_session_start")

    @hookimpl
    def on_session_end(self, session, reason):  # type: ignore[no-untyped-def]
        self._note("on_session_end")

    @hookimpl
    def on_session_switch(self, old_session_id, new_session_id, reason):  # type: ignore[no-untyped-def]
        self._note(f"on_session_switch:{reason}")

    @hookimpl
    def pre_llm_call(self, session, messages, user_message):  # type: ignore[no-untyped-def]
        self._note("pre_llm_call")
        return "RECALL: the deploy key lives in vault path secret/deploy"

    @hookimpl
    def post_llm_call(self, session, response, usage):  # type: ignore[no-untyped-def]
        self._note("post_llm_call")

    @hookimpl
    def on_turn_committed(self, session, turn_id, messages):  # type: ignore[no-untyped-def]
        self._note("on_turn_committed")

    @hookimpl
    def annotate_message(self, message, settings):  # type: ignore[no-untyped-def]
        self._note("annotate_message")
        return {"recorder": {"role": message.role, "chars": len(message.text())}}

    @hookimpl
    def prompt_blocks(self, context, settings):  # type: ignore[no-untyped-def]
        self._note("prompt_blocks")
        return [PromptBlock(layer=Layer.VOLATILE, key="recorder", text="Recorder block.")]

    @hookimpl
    def tool_schemas(self, context, settings):  # type: ignore[no-untyped-def]
        self._note("tool_schemas")
        return [{"type": "function", "function": {"name": "zz_tool", "parameters": {}}}]

    @hookimpl
    def select_context(self, request):  # type: ignore[no-untyped-def]
        self._note("select_context")
        return None

    @hookimpl
    def compress(self, request):  # type: ignore[no-untyped-def]
        self._note("compress")
        return None

    @hookimpl
    def on_pre_compress(self, session_id, messages):  # type: ignore[no-untyped-def]
        self._note("on_pre_compress")
        return ["keep the vault path"]

    @hookimpl
    def on_compressed(self, session_id, result):  # type: ignore[no-untyped-def]
        self._note("on_compressed")

    @hookimpl
    def redaction_rules(self):  # type: ignore[no-untyped-def]
        self._note("redaction_rules")
        return []

    @hookimpl
    def register_commands(self, cli):  # type: ignore[no-untyped-def]
        # called by the command line only (tests/test_cli_usability.py::test_plugins_add_commands)
        self._note("register_commands")


def test_recorder_implements_every_hook() -> None:
    implemented = {
        name for name in dir(Recorder) if hasattr(getattr(Recorder, name), "hermes_core_impl")
    }
    assert implemented == set(hook_names())


def test_hook_order_over_a_session_life(tmp_path: Path, make_host: HostFactory) -> None:
    rec = Recorder()
    host = make_host(rec, compression={"engine": "keep-last"})
    session = host.new_session(cwd=str(tmp_path))
    with session.turn() as turn:
        turn.prepare("first question")
        turn.record_response({"role": "assistant", "content": "first answer"})
        turn.commit()
    rec.calls.clear()
    with session.turn() as turn:
        turn.prepare("second question")
        turn.record_response({"role": "assistant", "content": "second answer"})
        turn.commit()
    turn_rows = host.store().all_messages(session.id)[-2:]
    assert [r.annotations["recorder"] for r in turn_rows] == [
        {"role": "user", "chars": len("second question")},
        {"role": "assistant", "chars": len("second answer")},
    ]
    session.compress()
    session.end()
    calls = [c for c in rec.calls if c != "redaction_rules"]
    assert calls == [
        "pre_llm_call",
        "detect_harness",  # the user message
        "annotate_message",
        "select_context",
        "annotate_message",  # the response (assistant text is never harness)
        "post_llm_call",
        "on_turn_committed",
        "on_pre_compress",
        "compress",
        "prompt_blocks",
        "tool_schemas",
        "on_session_switch:compression",
        "on_compressed",
        "on_session_end",
    ]


def test_per_turn_context_goes_only_into_the_user_api_content(
    tmp_path: Path, make_host: HostFactory
) -> None:
    rec = Recorder()
    host = make_host(rec, compression={"engine": "keep-last"})
    session = host.new_session(cwd=str(tmp_path))
    system_before = session.prompt.text
    with session.turn() as turn:
        request = turn.prepare("where is the key?")
        user = request.messages[-1]
        assert user["role"] == "user"
        assert "vault path secret/deploy" in user["content"]
        assert "vault" not in request.messages[0]["content"]
        turn.record_response({"role": "assistant", "content": "in the vault"})
        turn.commit()
    stored = host.store().active_messages(session.id)
    assert stored[0].message.content == "where is the key?"
    assert "secret/deploy" in str(stored[0].api_content)
    with session.turn() as turn:
        again = turn.prepare("thanks")
        assert again.messages[1] == user  # the exact bytes are resent
        turn.abort()
    assert session.prompt.text == system_before


def test_prompt_layers_order_and_tools_are_frozen(tmp_path: Path, make_host: HostFactory) -> None:
    rec = Recorder()
    (tmp_path / "AGENTS.md").write_text("Always run the tests.\x07\n", encoding="utf-8")
    host = make_host(rec)
    session = host.new_session(
        cwd=str(tmp_path),
        caller_message="You review pull requests.",
        tools=[{"type": "function", "function": {"name": "bash", "parameters": {}}}],
    )
    text = session.prompt.text
    identity = text.index("capable software agent")
    caller = text.index("You review pull requests.")
    rules = text.index("Always run the tests.")
    volatile = text.index("Recorder block.")
    assert identity < caller < rules < volatile
    assert "\x07" not in text and "control characters removed" in text
    assert [t["function"]["name"] for t in session.prompt.tools] == [
        "bash",
        "session_open",  # the default recall plugin's tools
        "session_search",
        "zz_echo",
        "zz_tool",
    ]
    assert host.store().get_blob(session.record.system_prompt_hash or "") == text


def test_rebuild_keeps_the_hash_when_bytes_are_equal(
    tmp_path: Path, make_host: HostFactory
) -> None:
    host = make_host()
    session = host.new_session(cwd=str(tmp_path))
    before = session.prompt.prompt_hash
    assert session.rebuild_prompt() is False
    assert session.prompt.prompt_hash == before


def test_bad_input_is_refused_and_nothing_stored_changes(
    tmp_path: Path, make_host: HostFactory
) -> None:
    host = make_host()
    session = host.new_session()
    with session.turn() as turn:
        turn.prepare("hello")
        turn.record_response({"role": "assistant", "content": "hi"})
        turn.commit()
    before = [m.model_dump() for m in host.store().active_messages(session.id)]
    with session.turn() as turn:
        with pytest.raises(ValidationError, match="expected a string"):
            turn.prepare(42)
        turn.prepare("next")
        with pytest.raises(ValidationError, match="not valid JSON"):
            turn.record_response(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "x", "arguments": "{oops"},
                        }
                    ],
                }
            )
        with pytest.raises(ValidationError, match="unknown call id"):
            turn.add_tool_result("nope", "out")
    after = [m.model_dump() for m in host.store().active_messages(session.id)]
    assert after == before


def test_a_raising_prompt_block_hook_names_the_plugin(
    tmp_path: Path, make_host: HostFactory
) -> None:
    class Boom:
        @hookimpl
        def prompt_blocks(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("kaput")

    host = make_host(("boom-plugin", Boom()))
    with pytest.raises(PluginError, match=r"boom-plugin.*kaput"):
        host.new_session()


def _replay_messages() -> list[dict[str, Any]]:
    from hermes_plugin_importers.openai_chat import OpenAIChatImporter

    conv = OpenAIChatImporter().load(TRANSCRIPT)[0]
    return [m.to_api() for m in conv.messages]


def test_replay_keeps_the_whole_previous_request_as_prefix_and_resumes_byte_identical(
    tmp_path: Path,
    make_host: HostFactory,
) -> None:
    from hermes_core.replay import replay

    host = make_host(model={"context_length": 1_000_000})
    report = replay(host, TRANSCRIPT)
    assert report.requests > 20
    assert not report.compressions
    entries = host.store().prefix_entries(report.session_id)
    assert entries[0].break_reason == "first"
    assert all(e.break_reason is None for e in entries[1:])
    assert report.prefix_reuse == 1.0
    session = host.open_session(report.session_id)
    with session.turn() as turn:
        local = turn.prepare("one more question")
        turn.abort()
    host.close()
    code = textwrap.dedent(
        f"""
        import json, warnings
        warnings.simplefilter("ignore")
        from hermes_core.config import settings_from
        from hermes_core.host import Hermes
        host = Hermes(settings_from({{
            "plugins": {{"block": ["memory_builtin"]}},
            "session": {{"path": {str(tmp_path / "s.db")!r}}},
            "model": {{"context_length": 1000000}},
        }}))
        session = host.open_session({report.session_id!r})
        with session.turn() as turn:
            req = turn.prepare("one more question")
            print(json.dumps(req.messages))
            turn.abort()
        host.close()
        """
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    remote = json.loads(out.stdout)
    assert json.dumps(remote[:-1], sort_keys=True) == json.dumps(
        local.messages[:-1], sort_keys=True
    )
    assert remote[0]["content"] == local.messages[0]["content"]


def test_hookspec_module_is_the_single_contract() -> None:
    # every public hook is reachable through the pluggy manager
    host = Hermes(settings_from({}), load_entrypoints=False)
    for name in hook_names():
        assert hasattr(host.pm.hook, name)
        assert getattr(specs, name).__doc__


def test_rotation_mode_continues_in_a_child_session(tmp_path: Path, make_host: HostFactory) -> None:
    rec = Recorder()
    host = make_host(rec, compression={"engine": "keep-last", "in_place": False})
    switches: list[tuple[str, str, str]] = []

    class Switches:
        @hookimpl
        def on_session_switch(self, old_session_id, new_session_id, reason):  # type: ignore[no-untyped-def]
            switches.append((old_session_id, new_session_id, reason))

    host.pm.register(Switches())
    session = host.new_session(cwd=str(tmp_path), title="rotating")
    parent = session.id
    for i in range(3):
        with session.turn() as turn:
            turn.prepare(f"question {i}")
            turn.record_response({"role": "assistant", "content": f"answer {i}"})
            turn.commit()
    outcome = session.compress()
    assert outcome.status == "compressed"
    assert outcome.new_session_id and session.id == outcome.new_session_id != parent
    store = host.store()
    old = store.get_session(parent)
    child = store.get_session(session.id)
    assert old.end_reason == "compression" and child.parent_id == parent
    assert child.title == "rotating"
    assert switches[-1] == (parent, session.id, "compression")
    assert store.current_lease(parent) is None  # the parent's lease was handed back
    with session.turn() as turn:  # the next turn runs on the child
        turn.prepare("after rotation")
        turn.record_response({"role": "assistant", "content": "still here"})
        turn.commit()
    texts = [row.message.text() for row in store.active_messages(session.id)]
    assert texts[-2:] == ["after rotation", "still here"]
    assert all(not row.active for row in store.all_messages(parent))


def test_recorded_messages_carry_the_lean_identifier_annotation(
    tmp_path: Path, make_host: HostFactory
) -> None:
    host = make_host()
    session = host.new_session(cwd=str(tmp_path))
    with session.turn() as turn:
        turn.prepare("the failure is in /srv/app/models.py, see #4512")
        turn.record_response({"role": "assistant", "content": "Looking at commit 3f9c2ab71d"})
        turn.commit()
    rows = host.store().all_messages(session.id)
    assert rows[0].annotations["lean_identifiers"] == {
        "v": LEAN_VERSION,
        "ref": ["#4512"],
        "path": ["/srv/app/models.py"],
    }
    assert rows[1].annotations["lean_identifiers"] == {"v": LEAN_VERSION, "sha": ["3f9c2ab71d"]}


@pytest.mark.parametrize("in_place", [True, False])
def test_compaction_writes_the_rebuilt_prompt_in_its_own_transaction(
    tmp_path: Path, in_place: bool, monkeypatch: pytest.MonkeyPatch, make_host: HostFactory
) -> None:
    builds: list[int] = []

    class ChangingBlock:
        @hookimpl
        def prompt_blocks(self, context, settings):  # type: ignore[no-untyped-def]
            builds.append(1)
            text = f"Prompt build number {len(builds)}."
            return [PromptBlock(layer=Layer.VOLATILE, key="changing", text=text)]

    host = make_host(
        tmp_path,
        Recorder(),
        ChangingBlock(),
        compression={"engine": "keep-last", "in_place": in_place},
    )
    session = host.new_session(cwd=str(tmp_path))
    for i in range(2):
        with session.turn() as turn:
            turn.prepare(f"question {i}")
            turn.record_response({"role": "assistant", "content": f"answer {i}"})
            turn.commit()
    old_hash = session.prompt.prompt_hash
    store = host.store()
    separate_writes: list[dict[str, Any]] = []
    real_update = store.update_session

    def spy(session_id: str, **fields: Any) -> Any:
        separate_writes.append(fields)
        return real_update(session_id, **fields)

    monkeypatch.setattr(store, "update_session", spy)
    outcome = session.compress()
    assert outcome.status == "compressed" and outcome.prompt_changed
    assert separate_writes == []  # hashes went in with archive_and_compact
    row = store.get_session(session.id)
    assert row.system_prompt_hash == session.prompt.prompt_hash != old_hash
    assert store.get_blob(row.system_prompt_hash) == session.prompt.text
    assert "Prompt build number" in session.prompt.text


def test_rotation_takes_the_child_lease_before_releasing_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_host: HostFactory
) -> None:
    host = make_host(Recorder(), compression={"engine": "keep-last", "in_place": False})
    session = host.new_session(cwd=str(tmp_path))
    parent = session.id
    for i in range(2):
        with session.turn() as turn:
            turn.prepare(f"question {i}")
            turn.record_response({"role": "assistant", "content": f"answer {i}"})
            turn.commit()
    store = host.store()
    order: list[tuple[str, str]] = []
    real_acquire, real_release = store.acquire_lease, store.release_lease

    def acquire(session_id: str, *args: Any, **kwargs: Any) -> Any:
        order.append(("acquire", session_id))
        return real_acquire(session_id, *args, **kwargs)

    def release(grant: Any) -> Any:
        order.append(("release", grant.session_id))
        return real_release(grant)

    monkeypatch.setattr(store, "acquire_lease", acquire)
    monkeypatch.setattr(store, "release_lease", release)
    outcome = session.compress()
    child = outcome.new_session_id
    assert child is not None
    rotation = [step for step in order if step[1] in (parent, child)]
    assert rotation.index(("acquire", child)) < rotation.index(("release", parent))


def test_a_prompt_that_crowds_the_threshold_is_reported_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make_host: HostFactory
) -> None:
    host = make_host(model={"context_length": 16_000})
    with caplog.at_level("WARNING", logger="hermes_core.runtime"):
        small = host.new_session(cwd=str(tmp_path), caller_message="Be brief.")
        assert not [r for r in caplog.records if "of room" in r.getMessage()]
        big = host.new_session(cwd=str(tmp_path), caller_message="Always check. " * 2_000)
        with big.turn() as turn:  # reloads the view; the same prompt is not reported again
            turn.prepare("hello")
            turn.record_response({"role": "assistant", "content": "hi"})
            turn.commit()
    warnings = [r.getMessage() for r in caplog.records if "of room" in r.getMessage()]
    assert len(warnings) == 1 and big.id in warnings[0] and small.id not in warnings[0]


def test_a_failed_rotation_leaves_memory_on_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_host: HostFactory
) -> None:
    host = make_host(Recorder(), compression={"engine": "keep-last", "in_place": False})
    session = host.new_session(cwd=str(tmp_path))
    for i in range(2):
        with session.turn() as turn:
            turn.prepare(f"question {i}")
            turn.record_response({"role": "assistant", "content": f"answer {i}"})
            turn.commit()
    initialised: list[str] = []
    memory = host.memory()
    assert memory is not None
    real_init = memory.initialize

    def spy(memory_session: Any) -> None:
        initialised.append(memory_session.session_id)
        real_init(memory_session)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise LeaseLost("simulated: the lease moved on during the commit")

    monkeypatch.setattr(memory, "initialize", spy)
    monkeypatch.setattr(host.store(), "archive_and_compact", refuse)
    with pytest.raises(LeaseLost):
        session.compress()
    assert len(initialised) == 2 and initialised[0] != session.id  # staged for the child
    assert initialised[-1] == session.id  # ... then back on the parent
    assert host.store().get_session(session.id).end_reason is None


def test_annotations_from_two_plugins_merge_and_a_shared_key_is_refused(
    make_host: HostFactory,
) -> None:
    class First:
        @hookimpl
        def annotate_message(self, message, settings):  # type: ignore[no-untyped-def]
            return {"first": len(message.text())}

    class Second:
        @hookimpl
        def annotate_message(self, message, settings):  # type: ignore[no-untyped-def]
            return {"second": message.role}

    class Clash:
        @hookimpl
        def annotate_message(self, message, settings):  # type: ignore[no-untyped-def]
            return {"first": "mine too"}

    class NotADict:
        @hookimpl
        def annotate_message(self, message, settings):  # type: ignore[no-untyped-def]
            return ["first"]

    message = Message(role="user", content="hello")
    host = make_host(First(), Second(), defaults=())
    assert host.annotate(message) == {"first": 5, "second": "user"}
    for extra, pattern in ((Clash(), "returned by both"), (NotADict(), "expected a dict")):
        host = make_host(First(), extra, defaults=())
        with pytest.raises(PluginError, match=pattern):
            host.annotate(message)


def test_framework_tools_are_frozen_run_and_recorded(
    tmp_path: Path, make_host: HostFactory
) -> None:
    rec = Recorder()
    host = make_host(rec, compression={"engine": "keep-last"})
    session = host.new_session(cwd=str(tmp_path))
    names = [t["function"]["name"] for t in session.prompt.tools]
    assert "zz_echo" in names
    with session.turn() as turn:
        turn.prepare("<wrapper>harness text</wrapper>")
        turn.record_response(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "zz_echo", "arguments": '{"text": "hi"}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "bash", "arguments": "{}"},
                    },
                    {
                        "id": "c3",
                        "type": "function",
                        "function": {"name": "zz_echo", "arguments": "[1]"},
                    },
                ],
            }
        )
        left = turn.run_framework_tools()
        assert [c.id for c in left] == ["c2"]
        with pytest.raises(ValidationError, match="not a framework tool"):
            turn.run_tool("c2")
        turn.add_tool_result("c2", "ran bash")
        request = turn.prepare()
        tool_results = [m for m in request.messages if m["role"] == "tool"]
        assert tool_results[0] == {
            "role": "tool",
            "content": f"echo hi in {session.id}",
            "tool_call_id": "c1",
        }
        assert "must be a JSON object" in tool_results[1]["content"]
        assert all("harness" not in m for m in request.messages)
        turn.record_response({"role": "assistant", "content": "done"})
        turn.commit()
    rows = host.store().active_messages(session.id)
    assert rows[0].message.harness == "recorder.wrapper"
    assert [r.message.harness for r in rows[1:]] == [None] * (len(rows) - 1)


# -- issue #17: every hook call goes through pluggy (wrappers, tracing) -----------------
class Wrapper:
    """``wrapper=True`` implementations of one hook of each kind, recording what they see."""

    def __init__(self) -> None:
        self.seen: dict[str, list[Any]] = {}

    def _see(self, name: str, result: Any) -> Any:
        self.seen.setdefault(name, []).append(result)
        return result

    @hookimpl(wrapper=True)
    def register_context_engines(self, register):  # type: ignore[no-untyped-def]
        return self._see("register_context_engines", (yield))

    @hookimpl(wrapper=True)
    def register_tools(self, register):  # type: ignore[no-untyped-def]
        return self._see("register_tools", (yield))

    @hookimpl(wrapper=True)
    def prompt_blocks(self, context, settings):  # type: ignore[no-untyped-def]
        return self._see("prompt_blocks", (yield))

    @hookimpl(wrapper=True)
    def tool_schemas(self, context, settings):  # type: ignore[no-untyped-def]
        return self._see("tool_schemas", (yield))

    @hookimpl(wrapper=True)
    def annotate_message(self, message, settings):  # type: ignore[no-untyped-def]
        return self._see("annotate_message", (yield))

    @hookimpl(wrapper=True)
    def detect_harness(self, message):  # type: ignore[no-untyped-def]
        return self._see("detect_harness", (yield))

    @hookimpl(wrapper=True)
    def compress(self, request, engine):  # type: ignore[no-untyped-def]
        return self._see("compress", (yield))

    @hookimpl(wrapper=True)
    def on_session_start(self, session, resumed):  # type: ignore[no-untyped-def]
        return self._see("on_session_start", (yield))


def test_wrappers_see_the_result_of_every_kind_of_hook(
    tmp_path: Path, make_host: HostFactory
) -> None:
    wrapper = Wrapper()
    host = make_host(Recorder(), wrapper, compression={"engine": "keep-last"})
    session = host.new_session(cwd=str(tmp_path))
    with session.turn() as turn:
        turn.prepare("<wrapper>first question")
        turn.record_response({"role": "assistant", "content": "first answer"})
        turn.commit()
    session.compress()
    # registration: called once per registering plugin, through pluggy
    assert host.registry.get("tools", "zz_echo") is not None
    assert wrapper.seen["register_tools"] and all(r == [] for r in wrapper.seen["register_tools"])
    assert (
        len(wrapper.seen["register_context_engines"])
        == len(host.pm.hook.register_context_engines.get_hookimpls()) - 1
    )  # every implementation but the wrapper itself
    # per-plugin calls (prompt blocks, tool schemas, annotations): each plugin's result
    blocks = [b for r in wrapper.seen["prompt_blocks"] for bs in r for b in bs]
    assert any(b.key == "recorder" for b in blocks)
    schemas = [s for r in wrapper.seen["tool_schemas"] for ss in r for s in ss]
    assert any(s["function"]["name"] == "zz_tool" for s in schemas)
    notes = [a for r in wrapper.seen["annotate_message"] for a in r]
    assert {"recorder": {"role": "user", "chars": len("<wrapper>first question")}} in notes
    # firstresult hooks and broadcasts
    assert "recorder.wrapper" in wrapper.seen["detect_harness"]
    (compressed,) = wrapper.seen["compress"]
    assert compressed.engine == "keep-last" and compressed.status == "compressed"
    assert wrapper.seen["on_session_start"] == [[]]


def test_tracing_records_every_hook_call(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], make_host: HostFactory
) -> None:
    """``plugins.trace`` (pluggy's call monitoring) prints every hook the core calls."""
    import re

    rec = Recorder()
    host = make_host(rec, compression={"engine": "keep-last"}, plugins={"trace": True})
    session = host.new_session(cwd=str(tmp_path))
    with session.turn() as turn:
        turn.prepare("first question")
        turn.record_response({"role": "assistant", "content": "first answer"})
        turn.commit()
    session.compress()
    session.end()
    host.pm.register(Recorder(), name="late")  # configure is replayed for it
    host.close()
    traced = set(re.findall(r"^\s*(\w+) \[hook\]", capfd.readouterr().err, re.M))
    called = {c.split(":")[0] for c in rec.calls}
    assert called == set(hook_names()) - {"register_commands"}  # the CLI alone calls it
    assert called <= traced, called - traced


def test_configure_is_historic_so_a_late_plugin_is_configured(
    tmp_path: Path, make_host: HostFactory
) -> None:
    host = make_host()
    late = Recorder()
    host.pm.register(late, name="late")
    assert late.calls == ["configure"]


def test_a_replay_of_the_same_case_is_the_same_run(
    tmp_path: Path,
    make_host: HostFactory,
) -> None:
    """The session id (in the system prompt) is the case's, not a random one: a random
    id tokenizes differently and moved every compaction point from run to run."""
    from hermes_core.config import settings_from
    from hermes_core.replay import replay

    reports = []
    for name in ("a", "b", "a"):
        settings = settings_from(
            {
                "session": {"path": str(tmp_path / f"{name}.db")},
                "memory": {"home": str(tmp_path / "m")},
            }
        )
        host = make_host.like(settings)
        reports.append(replay(host, TRANSCRIPT, context_length=6_000))
        host.close()
    first, second, again = reports
    assert first.compressions
    assert first.session_id == second.session_id
    assert first.request_tokens == second.request_tokens
    assert first.final_messages == second.final_messages
    # the same case into a database that holds it already: the next id, not a clash
    assert again.session_id != first.session_id
    other = replay_id_for(tmp_path / "a.db", context_length=7_000)
    assert other not in {first.session_id, again.session_id}


def replay_id_for(db: Path, context_length: int) -> str:
    from hermes_core.replay import replay_session_id
    from hermes_plugin_sqlite_store import SqliteSessionStore

    store = SqliteSessionStore(db)
    try:
        return replay_session_id(store, TRANSCRIPT, 0, context_length)
    finally:
        store.close()


def test_a_replay_dates_its_prompt_by_the_transcript_not_today(
    tmp_path: Path, make_host: HostFactory
) -> None:
    """The session info's ``Started:`` is in the frozen prompt: dated today, a replay run
    on another day had other bytes (and tokens) and moved every compaction point."""
    from hermes_core.replay import replay

    def item(role: str, text: str) -> dict[str, Any]:
        kind = "input_text" if role == "user" else "output_text"
        return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}

    records = [
        {
            "timestamp": "2026-04-08T12:58:53.226Z",
            "type": "session_meta",
            "payload": {"id": "s1", "timestamp": "2026-04-08T12:55:32.856Z", "cwd": "/r"},
        },
        {
            "timestamp": "2026-04-08T12:59:00Z",
            "type": "response_item",
            "payload": item("user", "hi"),
        },
        {
            "timestamp": "2026-04-09T08:00:00Z",
            "type": "response_item",
            "payload": item("assistant", "hello"),
        },
    ]
    rollout = tmp_path / "rollout-2026-04-08T12-55-32-s1.jsonl"
    rollout.write_text("".join(json.dumps(r) + "\n" for r in records))
    host = make_host()
    report = replay(host, rollout)
    host.close()
    system = report.final_messages[0]
    assert system["role"] == "system"
    assert "Started: 2026-04-08" in system["content"]


def test_a_session_is_dated_by_the_date_it_is_given(make_host: HostFactory) -> None:
    import datetime as dt

    from hermes_hookspecs import ValidationError

    host = make_host()
    try:
        dated = host.new_session(started=dt.date(2026, 4, 8))
        assert "Started: 2026-04-08" in dated.prompt.text
        late = dt.datetime(2026, 4, 8, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
        assert "Started: 2026-04-09" in host.new_session(started=late).prompt.text  # UTC
        with pytest.raises(ValidationError, match="started must be a date, not str"):
            host.new_session(started="2026-04-08")
    finally:
        host.close()
