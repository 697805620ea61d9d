"""Malformed inputs from a generator (hypothesis) against the importers, the runtime and the store.

Only the project's own error types may come out: ``ImportFormatError`` from an
importer, ``ValidationError`` (hermes' own, of which ``ImportFormatError`` is a
kind) from the runtime and the store. Anything else is a crash and counted as a
failure, with the input that caused it. Writes must be all or nothing.

* **importers**: first, fixed cases (every top-level field of each format's
  first record given a value of each other JSON type; JSON nested 100,000
  deep, as a JSONL line and as a document; a gzip bomb of 1 GiB in ~1 MB,
  whose peak traced memory is recorded); then real records of each bundled
  transcript, mutated (keys deleted, values replaced by random JSON, lines
  cut, garbage lines, gzip streams cut, raw bytes; for the markdown of aider,
  lines deleted, repeated, swapped or given another line's prefix), written
  to a file, detected, sniffed and loaded by every importer.
  A conversation that loads must be a valid sequence
  (:func:`hermes_plugin_importers.check_sequence`).
* **runtime**: random sequences of ``Turn.prepare`` / ``record_response`` /
  ``add_tool_result`` with random payloads (strings with NULs and lone
  surrogates, content-part lists, wire dicts with broken tool calls, other
  types), then ``commit`` or ``abort``; the stored rows grow by exactly the
  turn's messages on a successful commit and not at all otherwise.
* **store**: ``append_messages`` with batches mixing valid messages and ones
  built without validation (no role, unknown or duplicate call ids, non-JSON
  arguments, a summary without its record, bad content parts, odd text);
  the session grows by the whole batch or not at all.

Hypothesis runs with a fixed seed (``derandomize``), no example database, and
a per-target example count; each property records failures instead of raising
so every example runs.
"""

from __future__ import annotations

import gzip
import json
import tempfile
import time
import traceback
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..transcript_inputs import TRANSCRIPTS

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ODD_TEXT = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=30),
    st.sampled_from(["", "\x00", "a\x00b", "\ud800", "x\udfffy", "\u202e", "\ufeff", "🙂" * 5]),
)


class Tally:
    """Examples run and distinct failures, each with how often it occurred and one input.

    A crash is one failure per exception type and raising line, whatever its message.
    """

    def __init__(self) -> None:
        self.examples = 0
        self.found: dict[str, tuple[str, str, int]] = {}

    def fail(self, text: str, example: Any, key: str | None = None) -> None:
        key = key or text
        first, sample, count = self.found.get(key, (text, repr(example)[:300], 0))
        self.found[key] = (first, sample, count + 1)

    def crash(self, prefix: str, exc: BaseException, example: Any) -> None:
        text, key = _unexpected(exc)
        self.fail(prefix + text, example, key=prefix + key)

    @property
    def failures(self) -> list[str]:
        return [
            f"{text[:300]} [x{count}] (example: {sample})"
            for text, sample, count in self.found.values()
        ]


def _run(prop: Callable[..., None], strategy: st.SearchStrategy[Any], examples: int) -> None:
    test = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )(given(strategy)(prop))
    test()


def _unexpected(exc: BaseException) -> tuple[str, str]:
    """(description, dedup key): the exception type, the line that raised it, its message."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    ours = [f for f in frames if "site-packages" not in f.filename]  # the project's raising line
    frame = (ours or frames)[-1] if (ours or frames) else None
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    first = str(exc).splitlines()[0] if str(exc) else ""
    key = f"{type(exc).__module__}.{type(exc).__name__}{where}"
    return f"{key}: {first}", key


# -- importers ---------------------------------------------------------------------------------
def _samples() -> dict[str, tuple[str, list[str]]]:
    """Per bundled transcript: its suffix kind and its first records (JSONL lines or one doc)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(TRANSCRIPTS.rglob("*.gz")):
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        name = path.name.removesuffix(".gz")
        if name.endswith(".jsonl"):
            out[name] = ("jsonl", [line for line in text.splitlines()[:200] if line.strip()])
        elif name.endswith(".md"):
            start = text.find("# aider chat started at")
            out[name] = ("text", text[max(start, 0) :].splitlines()[:400])
        else:
            out[name] = ("json", [text])
    return out


def _mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """One random structural change somewhere inside ``value``."""
    if isinstance(value, dict) and value and depth < 6:
        key = data.draw(st.sampled_from(sorted(value, key=str)))
        action = data.draw(st.sampled_from(["delete", "replace", "descend", "descend", "descend"]))
        copy = dict(value)
        if action == "delete":
            del copy[key]
        elif action == "replace":
            copy[key] = data.draw(JSON)
        else:
            copy[key] = _mutate(copy[key], data, depth + 1)
        return copy
    if isinstance(value, list) and value and depth < 6:
        index = data.draw(st.integers(0, len(value) - 1))
        action = data.draw(st.sampled_from(["delete", "replace", "truncate", "descend", "descend"]))
        items = list(value)
        if action == "delete":
            del items[index]
        elif action == "replace":
            items[index] = data.draw(JSON)
        elif action == "truncate":
            items = items[:index]
        else:
            items[index] = _mutate(items[index], data, depth + 1)
        return items
    return data.draw(JSON)


def _malformed_file(
    folder: Path, name: str, kind: str, records: list[str], data: st.DataObject
) -> Path:
    how = data.draw(
        st.sampled_from(["structure", "structure", "structure", "bytes", "gzip-cut", "garbage"])
    )
    if kind in ("jsonl", "text"):
        start = data.draw(st.integers(0, max(0, len(records) - 1)))
        chosen = records[start : start + data.draw(st.integers(1, 40 if kind == "jsonl" else 120))]
    else:
        chosen = records
    if how == "structure" and kind == "text":
        lines = list(chosen)
        for _ in range(data.draw(st.integers(1, 6))):
            if not lines:
                break
            index = data.draw(st.integers(0, len(lines) - 1))
            action = data.draw(st.sampled_from(["delete", "repeat", "swap", "prefix", "fence"]))
            if action == "delete":
                del lines[index]
            elif action == "repeat":
                lines.insert(index, lines[index])
            elif action == "swap":
                other = data.draw(st.integers(0, len(lines) - 1))
                lines[index], lines[other] = lines[other], lines[index]
            elif action == "prefix":
                prefix = data.draw(st.sampled_from(["#### ", "> ", "", "# aider chat started at "]))
                lines[index] = prefix + lines[index].lstrip("#> ")
            else:
                lines.insert(index, data.draw(st.sampled_from(["```", "````python", "~~~"])))
        text = "\n".join(lines)
    elif how == "structure":
        lines = []
        for line in chosen:
            record = json.loads(line)
            if data.draw(st.integers(0, 3)) == 0:
                record = _mutate(record, data)
            lines.append(json.dumps(record))
        text = "\n".join(lines)
    elif how == "garbage":
        text = "\n".join(chosen)
        cut = data.draw(st.integers(0, len(text)))
        text = text[:cut] + data.draw(st.text(max_size=40)) + text[cut:]
    else:
        text = "\n".join(chosen)
    raw = text.encode("utf-8", "surrogatepass")
    if how == "bytes":
        raw = raw[: data.draw(st.integers(0, len(raw)))] + data.draw(st.binary(max_size=40))
    if how == "gzip-cut":
        zipped = gzip.compress(raw)
        raw = zipped[: data.draw(st.integers(0, len(zipped)))]
    path = folder / name
    path.write_bytes(raw)
    return path


def fuzz_importers(examples: int) -> Tally:
    from hermes_core.detection import detect_importer
    from hermes_hookspecs import ImportFormatError
    from hermes_plugin_importers import builtin_importers, check_sequence

    tally = Tally()
    samples = _samples()
    importers = builtin_importers()
    with tempfile.TemporaryDirectory(prefix="fuzz-import-") as tmp:
        folder = Path(tmp)

        def check(path: Path, name: str) -> None:
            head = path.read_bytes()[:65536]
            tally.examples += 1
            try:
                detect_importer(path, importers)
            except ImportFormatError:
                pass
            except Exception as exc:
                tally.crash("detection: ", exc, (name, head[:200]))
            for importer in importers:
                tally.examples += 1
                try:
                    importer.sniff(path, head)
                    conversations = importer.load(path)
                except ImportFormatError:
                    continue
                except Exception as exc:
                    tally.crash(f"{importer.name}: ", exc, (name, head[:200]))
                    continue
                for conversation in conversations:
                    problems = check_sequence(conversation.messages)
                    if problems:
                        tally.fail(
                            f"{importer.name}: loaded an invalid sequence: {problems[0]}", name
                        )

        # fixed cases first, the same every run: each top-level field of each format's
        # first record replaced by a value of every other JSON type
        for name, (kind, records) in sorted(samples.items()):
            if kind == "text":
                continue
            first = json.loads(records[0])
            if not isinstance(first, dict):
                continue
            for key in sorted(first):
                others: tuple[object, ...] = ([], {}, 1, None, "x")
                for value in others:
                    if type(value) is type(first[key]):
                        continue
                    path = folder / name
                    path.write_text(json.dumps({**first, key: value}), encoding="utf-8")
                    check(path, name)

        _caps(folder, importers, tally)

        def prop(data: st.DataObject) -> None:
            name = data.draw(st.sampled_from(sorted(samples)))
            kind, records = samples[name]
            check(_malformed_file(folder, name, kind, records, data), name)

        _run(prop, st.data(), examples)
    return tally


#: what the caps cases measured in the last run (read by the torture report)
CAPS_FIGURES: dict[str, Any] = {}


def _caps(folder: Path, importers: list[Any], tally: Tally) -> None:
    """Deep JSON and a gzip bomb: each importer refuses, naming the limit, in bounded memory."""
    import tracemalloc

    from hermes_hookspecs import ImportFormatError

    depth = 100_000
    deep = {
        "deep-array.jsonl": "[" * depth + "]" * depth + "\n",
        "deep-object.json": '{"messages": ' + '{"a":' * depth + "1" + "}" * depth + "}",
    }
    bomb = folder / "bomb.jsonl.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with bomb.open("wb") as handle:
        handle.write(packer.compress(b'{"type": "user", "uuid": "u1", "message": {}}\n'))
        block = b"\n" * (1 << 20)
        for _ in range(1024):  # 1 GiB decompressed
            handle.write(packer.compress(block))
        handle.write(packer.flush())
    CAPS_FIGURES["bomb_compressed_bytes"] = bomb.stat().st_size
    peaks: dict[str, int] = {}
    for importer in importers:
        for name, text in deep.items():
            path = folder / name
            path.write_text(text, encoding="utf-8")
            tally.examples += 1
            try:
                importer.load(path)
                if importer.name != "aider-chat":
                    tally.fail(f"{importer.name}: loaded JSON nested {depth} deep", name)
            except ImportFormatError as exc:
                if importer.name != "aider-chat" and "max_depth" not in str(exc):
                    tally.fail(
                        f"{importer.name}: deep JSON refused without naming max_depth", str(exc)
                    )
            except Exception as exc:
                tally.crash(f"{importer.name}: ", exc, name)
        tally.examples += 1
        started = time.monotonic()
        tracemalloc.start()
        try:
            importer.load(bomb)
            tally.fail(f"{importer.name}: loaded a 1 GiB gzip bomb", "bomb")
        except ImportFormatError as exc:
            if "max_bytes" not in str(exc):
                tally.fail(f"{importer.name}: gzip bomb refused without naming max_bytes", str(exc))
        except Exception as exc:
            tally.crash(f"{importer.name}: ", exc, "bomb")
        finally:
            peaks[importer.name] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        CAPS_FIGURES.setdefault("bomb_seconds", {})[importer.name] = round(
            time.monotonic() - started, 2
        )
    CAPS_FIGURES["bomb_peak_traced_mib"] = {k: round(v / 2**20, 1) for k, v in peaks.items()}
    limit = 2 * (256 << 20)
    for name, peak in peaks.items():
        if peak > limit:
            tally.fail(f"{name}: gzip bomb peaked at {peak >> 20} MiB traced memory", "bomb")


# -- runtime ------------------------------------------------------------------------------------
def _call(ids: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    good = st.fixed_dictionaries(
        {
            "id": ids,
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {"name": st.sampled_from(["bash", "read"]), "arguments": st.just('{"a": 1}')}
            ),
        }
    )
    return st.one_of(good, good, JSON, st.fixed_dictionaries({"id": ids, "function": JSON}))


PAYLOAD = st.one_of(
    ODD_TEXT,
    st.lists(JSON, max_size=3),
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": ODD_TEXT}), max_size=3),
    st.fixed_dictionaries(
        {"content": st.one_of(ODD_TEXT, st.none(), JSON)},
        optional={
            "tool_calls": st.one_of(
                st.lists(_call(st.sampled_from(["c1", "c2", "c1 "])), max_size=3), JSON
            ),
            "role": st.sampled_from(["assistant", "user", "tool", "system", "robot"]),
            "name": JSON,
        },
    ),
    JSON,
)
OPERATION = st.one_of(
    st.tuples(st.just("prepare"), PAYLOAD),
    st.tuples(st.just("prepare"), st.none()),
    st.tuples(st.just("record"), PAYLOAD),
    st.tuples(st.just("tool"), st.sampled_from(["c1", "c2", "zz", ""]), PAYLOAD),
)


def fuzz_runtime(examples: int) -> Tally:
    from hermes_core.config import settings_from
    from hermes_core.host import Hermes
    from hermes_hookspecs import ValidationError

    from .stores import view_problems

    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="fuzz-runtime-") as tmp:
        settings = settings_from(
            {
                "session": {"path": str(Path(tmp) / "fuzz.db")},
                "memory": {"home": str(Path(tmp) / "memory")},
                "model": {"context_length": 10_000_000},
            }
        )
        hermes = Hermes(settings)
        store = hermes.store()
        session = hermes.new_session(caller_message="fuzz")

        def prop(case: tuple[list[tuple[Any, ...]], bool]) -> None:
            operations, commit = case
            tally.examples += 1
            before = len(store.all_messages(session.id))
            pending = 0
            try:
                with session.turn("fuzz", wait=5) as turn:
                    for operation in operations:
                        try:
                            if operation[0] == "prepare":
                                turn.prepare(operation[1])
                            elif operation[0] == "record":
                                turn.record_response(operation[1])
                            else:
                                turn.add_tool_result(operation[1], operation[2])
                        except ValidationError:
                            continue
                    pending = len(turn.pending)
                    if commit:
                        turn.commit()
                    else:
                        turn.abort()
            except ValidationError:
                committed = False
            except Exception as exc:
                tally.crash("", exc, case)
                committed = False
            else:
                committed = commit
            after = len(store.all_messages(session.id))
            expected = before + (pending if committed else 0)
            if after != expected:
                tally.fail(f"stored rows {before} -> {after}, expected {expected}", case)
            for problem in view_problems(store, session.id, ()):
                tally.fail(f"unsound view: {problem}", case)

        try:
            _run(
                prop,
                st.tuples(st.lists(OPERATION, min_size=1, max_size=6), st.booleans()),
                examples,
            )
        finally:
            hermes.close()
    return tally


# -- store ---------------------------------------------------------------------------------------
def _message(**fields: Any) -> Any:
    """A validated Message, or (when the odd text makes it invalid, e.g. a lone
    surrogate) the same fields built without validation, so the store sees it."""
    from pydantic import ValidationError as PydanticValidationError

    from hermes_hookspecs import Message

    try:
        return Message(**fields)
    except PydanticValidationError:
        return Message.model_construct(**{"kind": "message", **fields})


def _new_message(draw: Callable[..., Any]) -> Any:
    from hermes_hookspecs import HandoffSummary, Message, NewMessage
    from hermes_hookspecs.messages import ToolCall, ToolFunction

    shape = draw(
        st.sampled_from(
            [
                "user",
                "assistant",
                "call",
                "tool",
                "no-role",
                "bad-args",
                "summary-without",
                "bad-parts",
                "tool-no-id",
                "dup-call",
                "summary",
                "api-content",
            ]
        )
    )
    text = draw(ODD_TEXT)
    call_id = draw(st.sampled_from(["k1", "k2", "k3"]))
    if shape == "user":
        message = _message(role="user", content=text)
    elif shape == "assistant":
        message = _message(role="assistant", content=text or "x")
    elif shape in ("call", "dup-call"):
        calls = [ToolCall(id=call_id, function=ToolFunction(name="bash"))]
        if shape == "dup-call":
            calls = calls * 2
            message = Message.model_construct(
                role="assistant", content=text, tool_calls=calls, kind="message"
            )
        else:
            message = _message(role="assistant", content=text, tool_calls=calls)
    elif shape == "tool":
        message = _message(role="tool", tool_call_id=call_id, content=text)
    elif shape == "no-role":
        message = Message.model_construct(content=text, kind="message")
    elif shape == "bad-args":
        function = ToolFunction.model_construct(
            name="bash", arguments=draw(st.sampled_from(["{", "nope", ""]))
        )
        call = ToolCall.model_construct(id=call_id, type="function", function=function)
        message = Message.model_construct(
            role="assistant", content=text, tool_calls=[call], kind="message"
        )
    elif shape == "summary-without":
        message = Message.model_construct(role="user", content=text, kind="summary", summary=None)
    elif shape == "bad-parts":
        message = Message.model_construct(
            role="user", content=draw(st.lists(JSON, min_size=1, max_size=2)), kind="message"
        )
    elif shape == "tool-no-id":
        message = Message.model_construct(
            role="tool", content=text, tool_call_id=None, kind="message"
        )
    elif shape == "summary":
        summary = HandoffSummary.model_construct(goal=text)
        message = _message(role="user", kind="summary", summary=summary, content=text)
    else:  # an api_content sidecar of the wrong shape
        message = Message(role="user", content="x")
        api_content = draw(JSON)
        return NewMessage.model_construct(
            message=message, api_content=api_content, token_count=None, turn_id=None, origin_id=None
        )
    return NewMessage.model_construct(
        message=message, api_content=None, token_count=None, turn_id=None, origin_id=None
    )


def fuzz_store(examples: int) -> Tally:
    from hermes_hookspecs import Message, NewMessage, NewSession, ValidationError
    from hermes_plugin_sqlite_store import SqliteSessionStore

    from .stores import sqlite_problems

    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="fuzz-store-") as tmp:
        path = Path(tmp) / "fuzz.db"
        store = SqliteSessionStore(path)

        @st.composite
        def batches(draw: Callable[..., Any]) -> list[Any]:
            return [_new_message(draw) for _ in range(draw(st.integers(1, 4)))]

        def prop(batch: list[Any]) -> None:
            tally.examples += 1
            # a fresh session per example: a row the store cannot read back spoils only it
            sid = store.create_session(NewSession(title="fuzz")).id
            prefix = [NewMessage(message=Message(role="user", content="before"))]
            store.append_messages(sid, prefix)
            added = 0
            try:
                added = len(store.append_messages(sid, batch))
            except ValidationError:
                pass
            except Exception as exc:
                tally.crash("", exc, [m.message for m in batch])
            try:
                after = len(store.all_messages(sid))
            except Exception as exc:
                tally.crash("wrote a row it cannot read back: ", exc, batch)
                return
            if after != 1 + added or added not in (0, len(batch)):
                tally.fail(f"partial write: 1 -> {after} for a batch of {len(batch)}", batch)

        try:
            _run(prop, batches(), examples)
        finally:
            store.close()
        for problem in sqlite_problems(path):
            tally.fail(f"database: {problem}", "after the run")
    return tally


def run(examples: int) -> dict[str, Any]:
    started = time.monotonic()
    targets = {
        "importers": fuzz_importers(examples),
        "runtime": fuzz_runtime(examples),
        "store": fuzz_store(examples),
    }
    failures = [
        f"{name}: {failure}" for name, tally in targets.items() for failure in tally.failures
    ]
    return {
        "examples": {name: tally.examples for name, tally in targets.items()},
        "elapsed_s": round(time.monotonic() - started, 1),
        "failures": failures,
    }
