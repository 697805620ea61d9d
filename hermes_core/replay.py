"""Replay a real transcript through the configured stack and report what was kept.

The transcript is imported (by the importer plugin that recognises it), then
fed into a fresh session turn by turn, as if it were happening: each user
message opens a turn, each assistant message is recorded as the model's
response, each tool result as the tool's, and ``prepare()`` runs before every
model call, so preflight compression fires exactly where it would live.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from hermes_hookspecs import (
    SUMMARY_BEGIN,
    CompressionRequest,
    CompressionResult,
    ImportedConversation,
    Importer,
    ImportFormatError,
    Message,
    NotFoundError,
    SessionStore,
    ToolCall,
    ToolFunction,
    hookimpl,
)

from .detection import detect_importer
from .host import Hermes
from .identifiers import extract_all, flatten
from .recall import MESSAGE_SEPARATOR, Probe, closed_book
from .recall import message_text as recall_message_text
from .search import search_with_context
from .tools import session_lineage

#: hits one search returns in the one-search recall rule
ONE_SEARCH_LIMIT = 5
#: the recovery tool one-search recall scores (its result is what the model reads)
SEARCH_TOOL = "session_search"

SEARCH_SAMPLE = 200


class ProbeResult(BaseModel):
    """One probe's outcome in a replay."""

    id: str
    kind: str
    question: str
    closed_book: bool
    one_search: bool


class RecallReport(BaseModel):
    """Recall of the probes after the replay (rules: ``transcripts/probes/README.md``).

    ``closed_book``: the share of probes with an answer in the final active
    context (system prompt and summary included). ``one_search``: the share
    with an answer in what ONE ``session_search`` call returns to the model
    (the question's content words, limit 5, each place with its neighbouring
    messages and the user's next messages, within the tool's token budget);
    ``one_search_source`` says what was scored: the tool's result text, or,
    when no ``session_search`` tool is registered, the places in full.
    ``one_search_windows``: the share
    with an answer anywhere in the places that search found, in full (before
    the tool's budget cuts long messages to their matching passages).
    """

    probes: int = 0
    closed_book: float = 0.0
    one_search: float = 0.0
    one_search_source: str = ""
    one_search_windows: float = 0.0
    closed_book_misses: list[str] = Field(default_factory=list)
    one_search_misses: list[str] = Field(default_factory=list)
    one_search_windows_misses: list[str] = Field(default_factory=list)


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
    recall: RecallReport = Field(default_factory=RecallReport)
    kept_summary_chars: int = 0
    #: what the importer read and deliberately left out, by kind (its ``skipped``)
    import_skipped: dict[str, int] = Field(default_factory=dict)
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
    """The importer called ``name``, or the one that recognises the file (see
    :func:`hermes_core.detection.detect_importer`)."""
    return detect_importer(path, importers, name)


def split_turns(
    messages: list[Message], mark: Callable[[Message], Message] | None = None
) -> tuple[str, list[list[Message]]]:
    """The leading system text, and the rest grouped into turns (each opened by a user message).

    :param mark: sets :attr:`Message.harness` (the host's ``detect_harness``);
        consecutive user messages merge into one opener only when neither is
        harness text, so a harness wrapper never hides the user's words.
    """
    system_parts: list[str] = []
    turns: list[list[Message]] = []
    for message in messages:
        if mark is not None:
            message = mark(message)
        if message.role == "system":
            if not turns:
                system_parts.append(message.text())
                continue
            message = Message(
                role="user",
                content=f"[system note]\n{message.text()}",
                harness=message.harness or "transcript.system_note",
            )
        if message.role == "user" or not turns:
            if message.role != "user":
                turns.append([Message(role="user", content="[replay: transcript opens here]")])
            else:
                lone = turns[-1][0] if turns and len(turns[-1]) == 1 else None
                if (
                    lone is not None
                    and lone.role == "user"
                    and not lone.harness
                    and not (message.harness)
                ):
                    # consecutive user messages: merge so a turn keeps one user opener
                    merged = lone.text() + "\n\n" + message.text()
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
    system_text, turns = split_turns(conv.messages, hermes.harness)
    session = hermes.new_session(
        session_id=replay_session_id(
            hermes.store(), transcript, conversation, hermes.settings.model.context_length
        ),
        title=conv.title or transcript.name,
        cwd="",
        goal="",
        caller_message=system_text,
        routing={"replay": {"source": str(transcript), "format": importer.name}},
        started=conv.started_at,  # the prompt dated as the session was, not as today
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
        import_skipped=dict(conv.skipped),
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


def replay_session_id(
    store: SessionStore, transcript: Path, conversation: int, context_length: int
) -> str:
    """The id of a replay's session: the same for the same transcript, conversation and
    window, so two replays of one case are the same run.

    The id is in the system prompt, and a fresh random one tokenizes into a few
    tokens more or less: every compaction point after moves with it, and a recall
    figure of the same code changed from run to run. A store that holds the id
    already (the same case replayed into one database again) gets the next one.
    """
    digest = hashlib.sha256()
    with transcript.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    base = f"{digest.hexdigest()}:{conversation}:{context_length}"
    attempt = 1
    while True:
        key = base if attempt == 1 else f"{base}:{attempt}"
        candidate = hashlib.sha256(key.encode()).hexdigest()[:32]
        try:
            store.get_session(candidate)
        except NotFoundError:
            return candidate
        attempt += 1


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
    report.kept_summary_chars = sum(
        len(str(m.get("content") or "")) for m in final if SUMMARY_BEGIN in str(m.get("content"))
    )
    if probes:
        _score_probes(hermes, store, session, final, probes, report)


def _score_probes(
    hermes: Hermes,
    store: Any,
    session: Any,
    final: list[dict[str, Any]],
    probes: list[Probe],
    report: ReplayReport,
) -> None:
    """Closed-book and one-search recall of ``probes``, scored as the probe README says."""
    closed = closed_book(final, probes)
    lineage = list(session_lineage(store, session.id))
    toolbox = hermes.toolbox()
    tool = SEARCH_TOOL if SEARCH_TOOL in toolbox.tools else None
    tokens = hermes.tokens(session.model)
    searched: list[str] = []
    in_windows: list[str] = []
    for probe in probes:
        places = search_with_context(
            store, probe.query(), session_ids=lineage, limit=ONE_SEARCH_LIMIT, neighbours=1
        )
        text = MESSAGE_SEPARATOR.join(
            recall_message_text(row.message.to_api()) for place in places for row in place.rows
        )
        if probe.hit(text):
            in_windows.append(probe.id)
        if tool is not None:
            arguments = json.dumps({"query": probe.query(), "limit": ONE_SEARCH_LIMIT})
            call = ToolCall(id="probe", function=ToolFunction(name=tool, arguments=arguments))
            text = toolbox.run(call, session_id=session.id, store=store, tokens=tokens)
        if probe.hit(text):
            searched.append(probe.id)
        report.probes.append(
            ProbeResult(
                id=probe.id,
                kind=probe.kind,
                question=probe.question,
                closed_book=probe.id in closed.hits,
                one_search=probe.id in searched,
            )
        )
    n = len(probes)
    report.recall = RecallReport(
        probes=n,
        closed_book=round(closed.recall, 4),
        one_search=round(len(searched) / n, 4),
        one_search_source=(
            f"the {tool} tool's result (its own budget, within the host's ceiling of "
            f"{toolbox.budget_tokens:,} tokens)"
            if tool is not None
            else "the places search_with_context found, in full (no session_search tool)"
        ),
        one_search_windows=round(len(in_windows) / n, 4),
        closed_book_misses=closed.misses,
        one_search_misses=[p.id for p in probes if p.id not in searched],
        one_search_windows_misses=[p.id for p in probes if p.id not in in_windows],
    )


def _row_text(row: Any) -> str:
    text: str = row.message.text()
    for call in row.message.tool_calls or []:
        text += "\n" + call.function.arguments
    return text
