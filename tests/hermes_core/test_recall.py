"""hermes_core.recall agrees with the reference scorer beside the probes.

The reference, ``transcripts/probes/recall.py``, is imported by path, as the data
folder ships it. Both scorers are run on the real message lists of the three probed
sessions (as our importers and as the reference importer make them), on truncations
of those lists and on the edge cases the scoring rules name.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hermes_core import recall
from hermes_core.errors import ImportFormatError
from hermes_plugin_importers import builtin_importers, detect_importer
from tests.hosts import HostFactory

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "transcripts" / "probes"
#: the probes each session came with (the reference scorer is checked against ours on them)
SESSIONS = {
    "entireio-cli-38ecf75f2f1d": ROOT
    / "transcripts/claude-code/entireio-cli-38ecf75f2f1d.jsonl.gz",
    "entireio-git-sync-07ebffc93812": ROOT
    / "transcripts/codex-rollout/entireio-git-sync-07ebffc93812.jsonl.gz",
    "entireio-git-sync-516fe4e51170": ROOT
    / "transcripts/claude-code/entireio-git-sync-516fe4e51170.jsonl.gz",
}
HELD_OUT = ROOT / "transcripts" / "probes-heldout"
#: the held-out probes the project wrote (transcripts/probes-heldout/README.md)
HELD_OUT_SESSIONS = {
    "entireio-git-sync-2dcf2f1a3166-glued-lines": ROOT
    / "transcripts/codex-rollout/entireio-git-sync-2dcf2f1a3166-glued-lines.jsonl.gz",
    "entireio-entire-graph-54fb8b1d18b6": ROOT
    / "transcripts/codex-rollout/entireio-entire-graph-54fb8b1d18b6.jsonl.gz",
    "entireio-entire-graph-1a6d96aa7834": ROOT
    / "transcripts/claude-code/entireio-entire-graph-1a6d96aa7834.jsonl.gz",
}
ALL_SESSIONS = {**SESSIONS, **HELD_OUT_SESSIONS}


def _load_by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ref() -> Any:
    """The reference scorer (it puts its own folder on sys.path; undone afterwards)."""
    saved = list(sys.path)
    try:
        module = _load_by_path("reference_recall", PROBES / "recall.py")
        yield module
    finally:
        sys.path[:] = saved
        sys.modules.pop("reference_importer", None)


@pytest.fixture(scope="module")
def ours_imported() -> dict[str, list[dict[str, Any]]]:
    """Each session as our importer makes it (first conversation: the main thread)."""
    importers = builtin_importers()
    out = {}
    for name, path in ALL_SESSIONS.items():
        conversation = detect_importer(path, importers).load(path)[0]
        out[name] = [message.to_api() for message in conversation.messages]
    return out


@pytest.fixture(scope="module")
def ref_imported(ref: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each session as the reference importer makes it (the list ``message_index`` counts in)."""
    folder = tmp_path_factory.mktemp("ref-import")
    out = {}
    for name, path in ALL_SESSIONS.items():
        plain = folder / f"{name}.jsonl"
        plain.write_bytes(gzip.decompress(path.read_bytes()))
        out[name] = ref.import_transcript(plain)
    return out


def probe_file(name: str) -> Path:
    return (HELD_OUT if name in HELD_OUT_SESSIONS else PROBES) / f"{name}.json"


def probes_of(name: str) -> list[recall.Probe]:
    return recall.load_probes(probe_file(name))


def raw_probes(name: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(probe_file(name).read_text(encoding="utf-8"))
    return data


def assert_same_score(ref: Any, messages: list[dict[str, Any]], name: str) -> recall.RecallScore:
    ours = recall.closed_book(messages, probes_of(name))
    theirs = ref.score(messages, raw_probes(name))
    assert ours.recall == theirs["recall"]
    assert ours.hits == theirs["hits"]
    assert ours.misses == theirs["misses"]
    return ours


# -- real message lists --------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_message_text_equals_reference_on_every_message(
    ref: Any, ours_imported: dict[str, Any], ref_imported: dict[str, Any], name: str
) -> None:
    for messages in (ours_imported[name], ref_imported[name]):
        for index, message in enumerate(messages):
            assert recall.message_text(message) == ref.message_text(message), index
        assert recall.messages_text(messages) == ref.messages_text(messages)


@pytest.mark.parametrize("name", sorted(ALL_SESSIONS))
def test_closed_book_agrees_on_sessions_and_truncations(
    ref: Any, ours_imported: dict[str, Any], ref_imported: dict[str, Any], name: str
) -> None:
    for messages in (ours_imported[name], ref_imported[name]):
        assert assert_same_score(ref, messages, name).recall == 1.0
        n = len(messages)
        recalls = set()
        for tenth in range(1, 10):
            cut = n * tenth // 10
            recalls.add(assert_same_score(ref, messages[:cut], name).recall)
            recalls.add(assert_same_score(ref, messages[cut:], name).recall)
            recalls.add(assert_same_score(ref, [messages[0], *messages[cut:]], name).recall)
        # the truncations really exercise partial recall, not only 0 and 1
        assert len(recalls - {0.0, 1.0}) >= 3


def test_closed_book_agrees_on_a_real_replay(
    ref: Any, tmp_path: Path, make_host: HostFactory
) -> None:
    """The final context of a replay with compactions (handoff, placeholders, tail)."""
    from hermes_core.config import settings_from
    from hermes_core.replay import replay

    name = "entireio-cli-38ecf75f2f1d"
    settings = settings_from(
        {"session": {"path": str(tmp_path / "s.db")}, "memory": {"home": str(tmp_path / "m")}}
    )
    hermes = make_host.like(settings)
    report = replay(hermes, SESSIONS[name], context_length=32_000)
    hermes.close()
    assert len(report.compressions) >= 2
    final = report.final_messages
    for message in final:
        assert recall.message_text(message) == ref.message_text(message)
    score = assert_same_score(ref, final, name)
    assert 0.0 < score.recall < 1.0
    for cut in range(1, len(final), max(1, len(final) // 7)):
        assert_same_score(ref, final[cut:], name)


@pytest.mark.parametrize("name", sorted(ALL_SESSIONS))
def test_probe_rules_hold_on_the_reference_import(ref_imported: dict[str, Any], name: str) -> None:
    """message_index is the first message with an answer and the last 30% answers nothing."""
    messages = ref_imported[name]
    cut = int(len(messages) * 0.7)
    assert recall.closed_book(messages[cut:], probes_of(name)).recall == 0.0
    texts = [recall.message_text(m) for m in messages]
    for probe in probes_of(name):
        first = next(i for i, text in enumerate(texts) if probe.hit(text))
        assert first == probe.message_index, probe.id
        assert recall.closed_book(messages[: first + 1], [probe]).hits == [probe.id]
        assert recall.closed_book(messages[:first], [probe]).misses == [probe.id]


@pytest.mark.parametrize("name", sorted(ALL_SESSIONS))
def test_content_words_equal_reference_on_every_question(ref: Any, name: str) -> None:
    for probe in probes_of(name):
        words = recall.content_words(probe.question)
        assert words == ref.content_words(probe.question), probe.id
        assert 0 < len(words) <= recall.QUERY_WORDS
        assert probe.query() == " ".join(words)


# -- edge cases the rules name -------------------------------------------------------------------
PROBE = recall.Probe(
    id="p1", question="q?", answers=['say "hi"\n\\done'], kind="command", message_index=0
)
EDGE_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [{"type": "text", "text": "part one"}, "bare", {"content": "inner"}],
    },
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
    {"role": "assistant", "content": {"text_summary": "a summary dict"}},
    {"role": "assistant", "content": 42},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {
                    "name": "exec_command",
                    "arguments": json.dumps({"cmd": ["echo", 'say "hi"\n\\done'], "n": 3}),
                },
            },
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "raw", "arguments": "not json {"},
            },
            {"id": "c3", "type": "function", "function": {"name": "obj", "arguments": {"k": "v"}}},
            {"id": "c4", "type": "function", "function": {"name": "none", "arguments": None}},
            {
                "id": "c5",
                "type": "function",
                "function": {"name": "esc", "arguments": '"\\u00e9t\\u00e9"'},
            },
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "",
        "name": "ignored-key",
        "_flag": "ignored",
    },
]


def test_edge_cases_equal_reference(ref: Any) -> None:
    for message in EDGE_MESSAGES:
        assert recall.message_text(message) == ref.message_text(message)
    tool_call = recall.message_text(EDGE_MESSAGES[4])
    assert 'say "hi"\n\\done' in tool_call  # a decoded string leaf
    assert "été" in tool_call  # a decoded JSON string (escapes undone)
    assert '{"k": "v"}' in tool_call  # non-string arguments are JSON-encoded
    assert "exec_command" in tool_call and "not json {" in tool_call
    assert recall.message_text(EDGE_MESSAGES[0]) == "part one\nbare\ninner"
    assert recall.message_text(EDGE_MESSAGES[1]) == ""
    assert recall.message_text(EDGE_MESSAGES[5]) == ""  # name and other keys are ignored


def test_decoded_leaves_are_what_match_an_escaped_answer(ref: Any) -> None:
    """The answer is only in the decoded arguments, never in the raw JSON (nor in the content)."""
    call_only = [EDGE_MESSAGES[4]]
    assert PROBE.answers[0] not in call_only[0]["tool_calls"][0]["function"]["arguments"]
    score = recall.closed_book(call_only, [PROBE])
    assert score.hits == ["p1"] and score.recall == 1.0
    assert ref.score(call_only, [PROBE.model_dump()])["hits"] == ["p1"]


def test_an_answer_never_spans_two_messages(ref: Any) -> None:
    probe = recall.Probe(
        id="p", question="q", answers=["alpha beta"], kind="number", message_index=0
    )
    split = [{"role": "user", "content": "alpha"}, {"role": "assistant", "content": " beta"}]
    assert recall.closed_book(split, [probe]).misses == ["p"]
    assert ref.score(split, [probe.model_dump()])["misses"] == ["p"]


def test_match_is_case_sensitive_and_any_answer_counts(ref: Any) -> None:
    probe = recall.Probe(
        id="p", question="q", answers=["NAK", "channel x"], kind="error", message_index=0
    )
    assert recall.closed_book([{"role": "user", "content": "nak"}], [probe]).recall == 0.0
    assert recall.closed_book([{"role": "user", "content": "on channel x"}], [probe]).recall == 1.0
    assert recall.closed_book([], [probe]).misses == ["p"]
    assert recall.closed_book([{"role": "user", "content": "x"}], []).recall == 0.0
    assert ref.score([], [])["recall"] == 0.0


@pytest.mark.parametrize(
    "question",
    [
        "What's the agent's 'exact' path of ./cmd/entire/main.go, and v1.2.3-rc?",
        "Why did it ask for A B CD or to_do_list in foo_bar?",
        "one two three four five six seven eight nine ten eleven",
        "",
        "   ",
        "日本語 only",
    ],
)
def test_content_words_edge_cases(ref: Any, question: str) -> None:
    assert recall.content_words(question) == ref.content_words(question)
    assert recall.content_words(question, k=3) == ref.content_words(question, k=3)


# -- loading -------------------------------------------------------------------------------------
def test_load_probes_reads_every_field() -> None:
    probes = probes_of("entireio-git-sync-516fe4e51170")
    assert len(probes) == 20
    assert [p.model_dump() for p in probes] == raw_probes("entireio-git-sync-516fe4e51170")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "probes file"),
        ('{"id": "x"}', "list"),
        (
            '[{"id": "a", "question": "q", "answers": [], "kind": "path", "message_index": 0}]',
            "0.answers",
        ),
        (
            '[{"id": "a", "question": "q", "answers": ["x"], "kind": "colour",'
            ' "message_index": 0}]',
            "0.kind",
        ),
        (
            '[{"id": "a", "question": "q", "answers": ["x"], "kind": "path", "message_index": -1}]',
            "0.message_index",
        ),
        ('[{"id": "a", "question": "q", "answers": ["x"], "kind": "path"}]', "0.message_index"),
        (
            '[{"id": "a", "question": "q", "answers": ["x"], "kind": "path", "message_index": 0,'
            ' "extra": 1}]',
            "0.extra",
        ),
        (
            '[{"id": "a", "question": "q", "answers": ["x"], "kind": "path", "message_index": 0},'
            ' {"id": "a", "question": "r", "answers": ["y"], "kind": "sha", "message_index": 1}]',
            "duplicate probe id 'a'",
        ),
    ],
)
def test_load_probes_names_what_is_wrong(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ImportFormatError) as info:
        recall.load_probes(path)
    assert needle in str(info.value) and str(path) in str(info.value)


def test_load_probes_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=r"no-such\.json"):
        recall.load_probes(tmp_path / "no-such.json")


# -- the recall benchmark's own measurements (benchmarks/comparison/recall.py) ---------------
def _bench() -> Any:
    if str(ROOT) not in sys.path:  # ``benchmarks`` is a package at the repo root, not installed
        sys.path.insert(0, str(ROOT))
    import benchmarks.comparison.recall as bench

    return bench


def test_keep_user_turns_baseline_on_a_real_session() -> None:
    bench = _bench()
    from benchmarks.transcript_inputs import counter, load, replay_order

    tokens = counter()
    messages = replay_order(load("codex-rollout/entireio-git-sync-07ebffc93812.jsonl.gz"))
    everything = bench.keep_user_turns(messages, 10**9, tokens)
    users = [m for m in messages if m.role == "user"]
    assert [m for m in everything if m["role"] == "user"] == [
        {"role": "user", "content": m.text()} for m in users
    ]
    assert all("tool_calls" not in m and m["role"] != "tool" for m in everything)
    answers = [m for m in everything if m["role"] == "assistant"]
    assert 0 < len(answers) <= len(users)
    small = bench.keep_user_turns(messages, 8_000, tokens)
    size = sum(tokens.count_message(bench.Message.from_api(m)) for m in small)
    assert size <= 8_000 < sum(tokens.count_message(bench.Message.from_api(m)) for m in everything)
    # the newest fit: the small list is the system prompt plus a suffix of the full one
    assert small[0]["role"] == "system" and small[0] == everything[0]
    assert small[1:] == everything[len(everything) - len(small) + 1 :]


def test_one_search_counts_a_hit_and_its_neighbours_only(
    tmp_path: Path, make_host: HostFactory
) -> None:
    bench = _bench()
    from hermes_core.config import settings_from
    from hermes_hookspecs import Message, NewMessage, NewSession

    db = tmp_path / "s.db"
    hermes = make_host.like(settings_from({"session": {"path": str(db)}}))
    store = hermes.store()
    session = store.create_session(NewSession(title="t"))
    other = store.create_session(NewSession(title="other"))
    texts = [
        "far answer FAR-123",
        "filler one",
        "near answer NEAR-456",
        "the zebra quokka discussion",
        "filler two",
        "filler three",
    ]
    store.append_messages(
        session.id,
        [
            NewMessage(message=Message(role="user" if i % 2 == 0 else "assistant", content=t))
            for i, t in enumerate(texts)
        ],
    )
    store.append_messages(
        other.id, [NewMessage(message=Message(role="user", content="zebra quokka OTHER-789"))]
    )
    hermes.close()

    def probe_for(answer: str) -> recall.Probe:
        return recall.Probe(
            id=answer,
            question="What was in the zebra quokka discussion?",
            answers=[answer],
            kind="number",
            message_index=0,
        )

    probes = [probe_for("NEAR-456"), probe_for("FAR-123"), probe_for("OTHER-789")]
    score = bench.one_search(db, session.id, probes, tmp_path)
    assert score.hits == ["NEAR-456"]  # the neighbour before the hit
    assert score.misses == ["FAR-123", "OTHER-789"]  # two away; another session's row


@pytest.mark.bench
def test_recall_benchmark_runs_alone(tmp_path: Path) -> None:
    """``python -m benchmarks recall`` on one session and window (needs the reference venv)."""
    import subprocess

    out = tmp_path / "recall.json"
    args = ["--sessions", "entireio-cli-38ecf75f2f1d", "--windows", "128000", "--json", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.comparison.recall", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "closed-book recall, cli-38ec 128K" in proc.stdout
    (case,) = json.loads(out.read_text())["section"]["detail"]["cases"]
    systems = {kept["system"]: kept for kept in case["systems"]}
    assert set(systems) == {"ours", "hermes-agent fallback", "hermes-agent stub", "keep-user-turns"}
    assert systems["ours"]["one_search"] is not None and systems["ours"]["compactions"] >= 1
