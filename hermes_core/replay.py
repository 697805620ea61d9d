"""Replay a real transcript through the configured stack and report what was kept.

The transcript is imported (by the importer plugin that recognises it), then
fed into a fresh session turn by turn, as if it were happening: each user
message opens a turn, each assistant message is recorded as the model's
response, each tool result as the tool's, and ``prepare()`` runs before every
model call, so preflight compression fires exactly where it would live.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    ImportedConversation,
    Importer,
    ImportFormatError,
    Message,
    hookimpl,
)

from .host import Hermes
from .identifiers import extract_all, flatten

SEARCH_SAMPLE = 200


class Probe(BaseModel):
    """A recall probe: a question and the strings that answer it."""

    model_config = ConfigDict(extra="forbid")

    question: str
    answers: list[str] = Field(min_length=1)


class ProbeResult(BaseModel):
    question: str
    closed_book: bool
    one_search: bool


class CompressionInfo(BaseModel):
    request_index: int
    trigger: str
    status: str
    tokens_before: int
    tokens_after: int
    summarizer: str
    fallback_used: bool
    backend: str
    reason: str = ""


class IdentifierReport(BaseModel):
    compacted: int = 0
    kept_in_active: int = 0
    recoverable_by_search: int = 0
    searched: int = 0
    kept_ratio: float = 0.0
    recoverable_ratio: float = 0.0


class ReplayReport(BaseModel):
    """The result of one replay (``hermes-core replay --json`` prints it)."""

    transcript: str
    format: str
    conversation_id: str = ""
    session_id: str
    imported_messages: int
    turns: int
    requests: int
    threshold_tokens: int
    context_length: int
    tokens_exact: bool
    compressions: list[CompressionInfo] = Field(default_factory=list)
    request_tokens: list[int] = Field(default_factory=list)
    final_active_tokens: int = 0
    final_active_messages: int = 0
    prefix_reuse: float = 0.0
    prefix_breaks: dict[str, int] = Field(default_factory=dict)
    identifiers: IdentifierReport = Field(default_factory=IdentifierReport)
    probes: list[ProbeResult] = Field(default_factory=list)
    final_messages: list[dict[str, Any]] = Field(default_factory=list)
    #: the context engine selected (``compression.engine``)
    engine: str = ""
    #: compression attempts the engine answered with ``skipped`` or ``aborted``
    skipped_compressions: list[CompressionInfo] = Field(default_factory=list)


class _AttemptWatcher:
    """Records the compression attempts that did not compress (the CLI shows them)."""

    def __init__(self, report: ReplayReport) -> None:
        self.report = report

    @hookimpl(wrapper=True)
    def compress(self, request: CompressionRequest) -> Any:
        result: CompressionResult | None = yield
        if result is not None and result.status != "compressed":
            before = sum(r.token_count or 0 for r in request.messages)
            self.report.skipped_compressions.append(
                CompressionInfo(
                    request_index=self.report.requests,
                    trigger="manual" if request.manual else "auto",
                    status=result.status,
                    tokens_before=before,
                    tokens_after=before,  # nothing changed
                    summarizer=result.summarizer,
                    fallback_used=False,
                    backend="local",
                    reason=result.reason,
                )
            )
        return result


def pick_importer(importers: list[Importer], path: Path, name: str | None = None) -> Importer:
    """The importer called ``name``, or the first whose ``sniff`` accepts the file."""
    if name:
        for importer in importers:
            if importer.name == name:
                return importer
        known = ", ".join(sorted(i.name for i in importers)) or "(none registered)"
        raise ImportFormatError(f"unknown transcript format {name!r}; known formats: {known}")
    if not path.is_file():
        raise ImportFormatError(f"transcript not found: {path}")
    import gzip

    with path.open("rb") as fh:
        head = fh.read(65536)
    if head[:2] == b"\x1f\x8b":
        with gzip.open(path, "rb") as fh:
            head = fh.read(65536)
    for importer in sorted(importers, key=lambda i: i.name):
        if importer.sniff(path, head):
            return importer
    known = ", ".join(sorted(i.name for i in importers)) or "(none registered)"
    raise ImportFormatError(f"{path}: no importer recognises this file; known formats: {known}")


def split_turns(messages: list[Message]) -> tuple[str, list[list[Message]]]:
    """The leading system text, and the rest grouped into turns (each opened by a user message)."""
    system_parts: list[str] = []
    turns: list[list[Message]] = []
    for message in messages:
        if message.role == "system":
            if not turns:
                system_parts.append(message.text())
                continue
            message = Message(role="user", content=f"[system note]\n{message.text()}")
        if message.role == "user" or not turns:
            if message.role != "user":
                turns.append([Message(role="user", content="[replay: transcript opens here]")])
            else:
                if turns and turns[-1] and turns[-1][-1].role == "user" and len(turns[-1]) == 1:
                    # consecutive user messages: merge so a turn keeps one user opener
                    merged = turns[-1][0].text() + "\n\n" + message.text()
                    turns[-1][0] = Message(role="user", content=merged)
                    continue
                turns.append([message])
                continue
        turns[-1].append(message)
    return "\n\n".join(p for p in system_parts if p), turns


def replay(
    hermes: Hermes,
    transcript: Path,
    *,
    format: str | None = None,
    conversation: int = 0,
    context_length: int | None = None,
    probes: list[Probe] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Replay ``transcript`` into a fresh session and build the report."""
    importer = pick_importer(hermes.importers(), transcript, format)
    conversations = importer.load(transcript)
    if not conversations:
        raise ImportFormatError(f"{transcript}: no conversation found")
    if not 0 <= conversation < len(conversations):
        raise ImportFormatError(
            f"{transcript}: conversation {conversation} requested, file has {len(conversations)}"
        )
    conv: ImportedConversation = conversations[conversation]
    if context_length is not None:
        hermes.settings.model.context_length = context_length
    system_text, turns = split_turns(conv.messages)
    session = hermes.new_session(
        title=conv.title or transcript.name,
        cwd="",
        goal="",
        caller_message=system_text,
        routing={"replay": {"source": str(transcript), "format": importer.name}},
    )
    report = ReplayReport(
        transcript=str(transcript),
        format=importer.name,
        conversation_id=conv.conversation_id,
        session_id=session.id,
        imported_messages=len(conv.messages),
        turns=len(turns),
        requests=0,
        threshold_tokens=hermes.threshold(session.model).threshold_tokens,
        context_length=hermes.settings.model.context_length,
        tokens_exact=hermes.tokens(session.model).exact,
        engine=hermes.settings.compression.engine,
    )
    watcher = _AttemptWatcher(report)
    hermes.pm.register(watcher, name="hermes_core.replay-attempts")
    try:
        for index, turn_messages in enumerate(turns):
            _replay_turn(session, turn_messages, report)
            if progress is not None:
                progress(index + 1, len(turns))
    finally:
        hermes.pm.unregister(watcher)
    _finish(hermes, session, report, probes or [])
    return report


def _replay_turn(session: Any, messages: list[Message], report: ReplayReport) -> None:
    with session.turn("replay") as turn:
        turn_user: Message | None = messages[0]
        expect_prepare = True
        for message in messages[1:]:
            if message.role == "assistant":
                if expect_prepare:
                    request = turn.prepare(turn_user)
                    turn_user = None
                    _note_request(session, request, report)
                turn.record_response(message)
                expect_prepare = False
            elif message.role == "tool":
                turn.add_tool_result(message.tool_call_id or "", message.content, name=message.name)
                expect_prepare = True
            else:  # a user message inside a turn (should not happen after split_turns)
                turn.prepare(message)
        if turn_user is not None:  # a user message with no reply: still send it once
            request = turn.prepare(turn_user)
            _note_request(session, request, report)
        turn.commit()
    _note_compressions(session, report)


def _note_request(session: Any, request: Any, report: ReplayReport) -> None:
    report.requests += 1
    report.request_tokens.append(request.prompt_tokens)
    _note_compressions(session, report)


def _note_compressions(session: Any, report: ReplayReport) -> None:
    events = session.hermes.store().compaction_events(session.id)
    for event in events[len(report.compressions) :]:
        report.compressions.append(
            CompressionInfo(
                request_index=report.requests,
                trigger=str(event.detail.get("trigger", "")),
                status="compressed",
                tokens_before=event.tokens_before,
                tokens_after=event.tokens_after,
                summarizer=event.summarizer,
                fallback_used=event.fallback,
                backend=event.backend,
            )
        )


def _finish(hermes: Hermes, session: Any, report: ReplayReport, probes: list[Probe]) -> None:
    store = hermes.store()
    session.reload(force=True)
    active = session.active_messages()
    final = [session.system_message(), *(row.to_api() for row in active)]
    report.final_messages = final
    report.final_active_messages = len(active)
    report.final_active_tokens = session.active_tokens
    entries = store.prefix_entries(session.id)
    scored = [e for e in entries if e.break_reason != "first"]
    shared = sum(e.shared_prefix_tokens for e in scored)
    previous = sum(e.previous_tokens for e in scored)
    report.prefix_reuse = round(shared / previous, 4) if previous else 1.0
    for entry in entries:
        if entry.break_reason:
            report.prefix_breaks[entry.break_reason] = (
                report.prefix_breaks.get(entry.break_reason, 0) + 1
            )
    active_text = "\n".join(json.dumps(m, ensure_ascii=False) for m in final)
    active_plain = "\n".join(
        str(m.get("content") or "") + " " + json.dumps(m.get("tool_calls") or "") for m in final
    )
    compacted = [row for row in store.all_messages(session.id) if row.compacted]
    wanted = flatten(extract_all(row.message.text() for row in compacted))
    wanted |= flatten(
        extract_all(
            call.function.arguments for row in compacted for call in (row.message.tool_calls or [])
        )
    )
    ids = IdentifierReport(compacted=len(wanted))
    missing = []
    for value in sorted(wanted):
        if value in active_plain or value in active_text:
            ids.kept_in_active += 1
        else:
            missing.append(value)
    step = max(1, len(missing) // SEARCH_SAMPLE)
    sample = missing[::step][:SEARCH_SAMPLE]
    found = 0
    for value in sample:
        hits = store.search(value, session_id=session.id, limit=5)
        rows = store.get_messages([h.message_id for h in hits]) if hits else []
        if any(value in _row_text(row) for row in rows):
            found += 1
    ids.searched = len(sample)
    if sample:
        ids.recoverable_by_search = round(found / len(sample) * len(missing))
    if ids.compacted:
        ids.kept_ratio = round(ids.kept_in_active / ids.compacted, 4)
        ids.recoverable_ratio = round(
            (ids.kept_in_active + ids.recoverable_by_search) / ids.compacted, 4
        )
    report.identifiers = ids
    for probe in probes:
        closed = any(answer in active_text or answer in active_plain for answer in probe.answers)
        hits = store.search(probe.question, session_id=session.id, limit=5)
        rows = store.get_messages([h.message_id for h in hits]) if hits else []
        searched = any(answer in _row_text(row) for row in rows for answer in probe.answers)
        report.probes.append(
            ProbeResult(question=probe.question, closed_book=closed, one_search=searched)
        )


def _row_text(row: Any) -> str:
    text: str = row.message.text()
    for call in row.message.tool_calls or []:
        text += "\n" + call.function.arguments
    return text


def load_probes(path: Path) -> list[Probe]:
    """Read a JSON list of ``{"question", "answers"}`` probes."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ImportFormatError(f"probes file {path}: {exc}") from None
    if not isinstance(data, list):
        raise ImportFormatError(f"probes file {path}: expected a JSON list of probes")
    return [Probe.model_validate(item) for item in data]
