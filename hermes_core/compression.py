"""The compression coordinator: one compression per session, under the turn lease.

Order of work (each step's failure leaves the session exactly as it was):

1. ``on_pre_compress`` hooks and the memory manager return insights;
2. a provider-side compaction backend runs when one is configured and the
   session is eligible; if it fails, the local engine takes over;
3. otherwise the ``compress`` hook answers (the selected engine, last);
   ``aborted``/``skipped`` results change nothing;
4. the prompt is invalidated and rebuilt for the session that continues (its
   blobs stored); when its bytes are unchanged the old hash (and the
   provider's cache) is kept;
5. ``archive_and_compact`` commits the new active view in ONE transaction
   (rotation into a child session when ``compression.in_place`` is false),
   together with the continuing session's prompt hashes and new routing
   (:class:`~hermes_hookspecs.ContinuationUpdate`): a crash leaves either the
   old view with the old prompt or the new view with the new one;
6. ``on_session_switch(reason="compression")`` and ``on_compressed`` fire.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from hermes_hookspecs import (
    CompactionBackendError,
    CompactionCommit,
    CompactionEvent,
    CompressionRequest,
    CompressionResult,
    ContinuationUpdate,
    HandoffSummary,
    NewMessage,
    NewSession,
    ProviderCompactionRequest,
    StoredMessage,
)

if TYPE_CHECKING:
    from .runtime import Turn

log = logging.getLogger("hermes_core.compression")


class CompressionOutcome(BaseModel):
    """What a compression did (or why it did nothing)."""

    model_config = ConfigDict(extra="forbid")

    status: str
    reason: str = ""
    trigger: str = ""
    backend: str = "local"
    engine: str = ""
    summarizer: str = ""
    fallback_used: bool = False
    tokens_before: int = 0
    tokens_after: int = 0
    prompt_changed: bool = False
    session_id: str = ""
    new_session_id: str | None = None
    commit: CompactionCommit | None = None
    notes: list[str] = Field(default_factory=list)


def _insights(turn: Turn) -> list[str]:
    s = turn.session
    messages = [row.message for row in s._rows]
    out: list[str] = []
    for result in turn.hermes.pm.hook.on_pre_compress(session_id=s.id, messages=messages):
        if isinstance(result, str):
            out.append(result)
        elif result:
            out.extend(str(item) for item in result)
    memory = turn.hermes.memory()
    if memory is not None:
        out.extend(memory.on_pre_compress(s.id, messages))
    return out


def _previous_summary(rows: list[StoredMessage]) -> HandoffSummary | None:
    for row in rows:
        if row.message.kind == "summary" and row.message.summary is not None:
            return row.message.summary
    return None


def _provider_compaction(
    turn: Turn, notes: list[str]
) -> tuple[list[NewMessage], dict[str, Any], str] | None:
    hermes = turn.hermes
    backend = hermes.compaction_backend()
    if backend is None:
        return None
    s = turn.session
    settings = hermes.settings.table(f"compaction.{backend.name}")
    if not backend.eligible(s.record, s.model, settings):
        notes.append(f"compaction backend {backend.name!r} not eligible; local engine used")
        return None
    try:
        result = backend.compact(
            ProviderCompactionRequest(
                session=s.record, messages=list(s._rows), model=s.model, settings=settings
            )
        )
    except CompactionBackendError as exc:
        notes.append(f"compaction backend {backend.name!r} failed, local engine used: {exc}")
        log.warning("provider compaction failed for %s: %s", s.id, exc)
        return None
    return result.messages, result.routing, backend.name


def run_compression(
    turn: Turn, *, focus: str | None = None, manual: bool = False, reason: str = "manual"
) -> CompressionOutcome:
    """Compress the turn's session now (the caller holds the lease through ``turn``)."""
    hermes = turn.hermes
    s = turn.session
    s.reload()
    rows = list(s._rows)
    before = s.active_tokens
    if not rows:
        return CompressionOutcome(status="skipped", reason="no active messages", trigger=reason)
    notes: list[str] = []
    insights = _insights(turn)
    provider = _provider_compaction(turn, notes)
    routing: dict[str, Any] = {}
    result: CompressionResult | None = None
    if provider is not None:
        new_messages, routing, backend_name = provider
        engine_name = backend_name
    else:
        backend_name = "local"
        threshold = hermes.threshold(s.model).threshold_tokens
        request = CompressionRequest(
            session_id=s.id,
            messages=rows,
            model=s.model,
            settings=hermes.compression_settings(threshold),
            insights=insights,
            focus=focus,
            manual=manual,
            previous_summary=_previous_summary(rows),
            compression_index=s.record.compression_count + 1,
            system_tokens=s._base.cum[2] if len(s._base.cum) > 2 else 0,
            # the request's own prefix, so a summarizer reusing it hits the provider's cache
            system_prompt=s.prompt.text,
            tools=s.prompt.tools,
        )
        result = hermes.call_compress(request)
        if result is None:
            return CompressionOutcome(status="skipped", reason="no engine answered", trigger=reason)
        if result.status != "compressed":
            return CompressionOutcome(
                status=result.status,
                reason=result.reason,
                trigger=reason,
                engine=result.engine,
                summarizer=result.summarizer,
                tokens_before=before,
                notes=notes + result.notes,
            )
        new_messages = [m for m in result.messages if m.message.role != "system"]
        engine_name = result.engine
    tokens = hermes.tokens(s.model)
    for item in new_messages:
        if item.token_count is None:
            item.token_count = tokens.count_message(item.message, item.api_content)
    after_messages = sum(m.token_count or 0 for m in new_messages)
    system_cost = s._base.cum[2] if len(s._base.cum) > 2 else 0
    event = CompactionEvent(
        session_id=s.id,
        engine=engine_name,
        backend=backend_name,
        tokens_before=before,
        tokens_after=system_cost + after_messages,
        summarizer=result.summarizer if result else "",
        fallback=result.fallback_used if result else False,
        detail={"trigger": reason, "focus": focus, "notes": notes},
    )
    store = hermes.store()
    in_place = hermes.settings.compression.in_place
    record = s.record
    child = None
    continuing = record.model_copy(update={"routing": {**record.routing, **routing}})
    if not in_place:
        child = NewSession(
            id=uuid.uuid4().hex,
            title=record.title,
            cwd=record.cwd,
            goal=record.goal,
            routing=continuing.routing,
            model=record.model,
            provider=record.provider,
            parent_id=record.id,
        )
        continuing = continuing.model_copy(update={"id": child.id, "parent_id": record.id})
    # the prompt is rebuilt for the session that continues before the commit, and its
    # hashes (and new routing) are written in the commit's transaction
    # (building it initialises the memory providers for that session)
    prompt = s.stage_prompt(continuing)
    try:
        commit = store.archive_and_compact(
            s.id,
            new_messages,
            watermark=max(row.id for row in rows),
            lease=turn.lease,
            in_place=in_place,
            child=child,
            event=event,
            update=ContinuationUpdate(
                system_prompt_hash=prompt.prompt_hash,
                tools_hash=prompt.tools_hash,
                routing=continuing.routing if routing and in_place else None,
            ),
        )
    except BaseException:
        if child is not None:  # the child was never created: memory serves the parent again
            s._init_memory(hermes, record)
        raise
    old_id = s.id
    if commit.child_session_id:
        # take the child's lease before handing the parent's back: no moment without one
        child_lease = store.acquire_lease(
            commit.child_session_id,
            turn.lease.holder,
            hermes.settings.session.lease_ttl,
            timeout=None,
        )
        store.release_lease(turn.lease)
        turn.lease = child_lease
        s._switch_to(store.get_session(commit.child_session_id))
    s._compaction_since = True
    s._usage_offset = 0  # the last reported usage measured the old view
    changed = s.adopt_prompt(prompt)
    new_id = s.id
    hermes.pm.hook.on_session_switch(
        old_session_id=old_id, new_session_id=new_id, reason="compression"
    )
    memory = hermes.memory()
    if memory is not None:
        memory.on_session_switch(old_id, new_id, "compression")
    final = result or CompressionResult(
        status="compressed", engine=engine_name, tokens_before=before, tokens_after=s.active_tokens
    )
    final.tokens_before = before
    final.tokens_after = s.active_tokens
    hermes.pm.hook.on_compressed(session_id=new_id, result=final)
    return CompressionOutcome(
        status="compressed",
        trigger=reason,
        backend=backend_name,
        engine=engine_name,
        summarizer=final.summarizer,
        fallback_used=final.fallback_used,
        tokens_before=before,
        tokens_after=s.active_tokens,
        prompt_changed=changed,
        session_id=old_id,
        new_session_id=commit.child_session_id,
        commit=commit,
        notes=notes + final.notes,
    )


def plan_draft_view(turn: Turn, rows: list[StoredMessage]) -> CompressionResult | None:
    """The engine's compressed view of ``rows`` (history plus the turn's draft), NOT written.

    In the middle of a turn the draft is not stored yet (nothing is before
    ``commit()``), so the runtime sends this view for the rest of the turn and
    the real compression runs once the turn is committed. ``rows`` that are not
    stored carry negative ids. None when the engine did not compress.
    """
    hermes = turn.hermes
    s = turn.session
    threshold = hermes.threshold(s.model).threshold_tokens
    request = CompressionRequest(
        session_id=s.id,
        messages=rows,
        model=s.model,
        settings=hermes.compression_settings(threshold),
        previous_summary=_previous_summary(rows),
        compression_index=s.record.compression_count + 1,
        system_tokens=s._base.cum[2] if len(s._base.cum) > 2 else 0,
        system_prompt=s.prompt.text,
        tools=s.prompt.tools,
    )
    result: CompressionResult | None = hermes.call_compress(request)
    if result is None or result.status != "compressed":
        log.info(
            "session %s: mid-turn view not compressed (%s)",
            s.id,
            "no engine answered" if result is None else f"{result.status}: {result.reason}",
        )
        return None
    tokens = hermes.tokens(s.model)
    for item in result.messages:
        if item.token_count is None:
            item.token_count = tokens.count_message(item.message, item.api_content)
    result.messages = [m for m in result.messages if m.message.role != "system"]
    return result
