"""The compression coordinator: plans one compression from values, writes nothing itself.

:func:`plan_compression` takes the session's facts as values (its record,
model, frozen prompt and :class:`~hermes_core.view.ActiveView`) and the
host's :class:`~hermes_core.services.RuntimeServices`, and returns a
:class:`CompressionPlan`: what to archive and insert, the child session of a
rotation, the event to record, or the outcome when there is nothing to write.
The turn (:meth:`hermes_core.turn.Turn.compress`) carries it out, under its
lease. Order of work (each step's failure leaves the session exactly as it was):

1. ``on_pre_compress`` hooks and the memory manager return insights;
2. a provider-side compaction backend runs when one is configured and the
   session is eligible; if it fails, the local engine takes over;
3. otherwise the ``compress`` hook answers (the selected engine, last);
   ``aborted``/``skipped`` results change nothing (the plan carries only its
   outcome);
4. the turn builds the prompt for the session that continues
   (:attr:`CompressionPlan.continuing`) and stores its blobs; when its bytes
   are unchanged the old hash (and the provider's cache) is kept;
5. :meth:`CompressionPlan.commit` has ``archive_and_compact`` write the new
   active view in ONE transaction (rotation into a child session when
   ``compression.in_place`` is false), together with the continuing
   session's prompt hashes and new routing
   (:class:`~hermes_hookspecs.ContinuationUpdate`): a crash leaves either the
   old view with the old prompt or the new view with the new one;
6. ``on_session_switch(reason="compression")`` and ``on_compressed`` fire.

:func:`plan_draft_view` is the mid-turn variant: the engine's view of the
history plus a turn's unstored draft, sent for the rest of the turn and
never written.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
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
    LeaseGrant,
    NewMessage,
    NewSession,
    ProviderCompactionRequest,
    SessionRecord,
    SessionStore,
    StoredMessage,
)

from .prompt import FrozenPrompt
from .view import ActiveView

if TYPE_CHECKING:
    from .services import RuntimeServices

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


@dataclass(frozen=True)
class CompressionInputs:
    """The session's facts a compression is planned from (values, not the session)."""

    record: SessionRecord
    model: str
    prompt: FrozenPrompt
    view: ActiveView
    focus: str | None = None
    manual: bool = False
    reason: str = "manual"
    #: plan again the mid-turn view the turn was sent on (see :class:`ViewReplan`)
    replan: ViewReplan | None = None


@dataclass(frozen=True)
class ViewReplan:
    """A mid-turn view, to write at commit exactly as the turn sent it.

    ``result`` is what the engine answered for the view: its messages are
    written as they are, with no second engine call (a second summary by a
    model would differ, breaking the prefix the rest of the turn built, and cost
    another call). The view was planned over the stored history and the turn's
    draft rows as they were then (negative ids: not stored yet, so the engine
    quotes no message id for them); ``ids`` maps each draft id to the id its
    message was stored under, so the view's copies of draft rows point at the
    stored originals; active rows up to ``watermark`` are replaced and later
    ones (the rest of the turn) are kept after the view. A compaction backend
    does not run on it: the view came from the local engine, and a provider
    compaction at commit would break the prefix a second time.
    """

    ids: dict[int, int]
    watermark: int
    result: CompressionResult


@dataclass
class CompressionPlan:
    """What one compression writes, or (``done``) why it writes nothing."""

    session_id: str
    trigger: str
    tokens_before: int
    #: set when there is nothing to write: the compression's whole outcome
    done: CompressionOutcome | None = None
    backend: str = "local"
    engine: str = ""
    new_messages: list[NewMessage] = field(default_factory=list)
    #: the id of the last active row the plan replaces
    watermark: int = 0
    in_place: bool = True
    #: the child session of a rotation (``in_place`` false)
    child: NewSession | None = None
    #: the record of the session that continues, as its prompt is built for
    continuing: SessionRecord | None = None
    #: routing the compaction backend set (written only for in-place compaction)
    routing: dict[str, Any] = field(default_factory=dict)
    event: CompactionEvent | None = None
    result: CompressionResult | None = None
    notes: list[str] = field(default_factory=list)

    def commit(
        self, store: SessionStore, lease: LeaseGrant, prompt: FrozenPrompt
    ) -> CompactionCommit:
        """Write the plan in ONE transaction under ``lease``, with ``prompt``'s hashes."""
        assert self.done is None and self.event is not None
        return store.archive_and_compact(
            self.session_id,
            self.new_messages,
            watermark=self.watermark,
            lease=lease,
            in_place=self.in_place,
            child=self.child,
            event=self.event,
            update=ContinuationUpdate(
                system_prompt_hash=prompt.prompt_hash,
                tools_hash=prompt.tools_hash,
                routing=(
                    self.continuing.routing
                    if self.routing and self.in_place and self.continuing is not None
                    else None
                ),
            ),
        )

    def finish(
        self,
        commit: CompactionCommit,
        *,
        tokens_after: int,
        prompt_changed: bool,
    ) -> tuple[CompressionResult, CompressionOutcome]:
        """The result ``on_compressed`` receives and the outcome, once committed."""
        final = self.result or CompressionResult(
            status="compressed",
            engine=self.engine,
            tokens_before=self.tokens_before,
            tokens_after=tokens_after,
        )
        final.tokens_before = self.tokens_before
        final.tokens_after = tokens_after
        outcome = CompressionOutcome(
            status="compressed",
            trigger=self.trigger,
            backend=self.backend,
            engine=self.engine,
            summarizer=final.summarizer,
            fallback_used=final.fallback_used,
            tokens_before=self.tokens_before,
            tokens_after=tokens_after,
            prompt_changed=prompt_changed,
            session_id=self.session_id,
            new_session_id=commit.child_session_id,
            commit=commit,
            notes=self.notes + final.notes,
        )
        return final, outcome


def _previous_summary(rows: list[StoredMessage]) -> HandoffSummary | None:
    for row in rows:
        if row.message.kind == "summary" and row.message.summary is not None:
            return row.message.summary
    return None


def _provider_compaction(
    inputs: CompressionInputs, services: RuntimeServices, notes: list[str]
) -> tuple[list[NewMessage], dict[str, Any], str] | None:
    backend = services.compaction_backend()
    if backend is None:
        return None
    record = inputs.record
    settings = services.settings.table(f"compaction.{backend.name}")
    if not backend.eligible(record, inputs.model, settings):
        notes.append(f"compaction backend {backend.name!r} not eligible; local engine used")
        return None
    try:
        result = backend.compact(
            ProviderCompactionRequest(
                session=record,
                messages=list(inputs.view.rows),
                model=inputs.model,
                settings=settings,
            )
        )
    except CompactionBackendError as exc:
        notes.append(f"compaction backend {backend.name!r} failed, local engine used: {exc}")
        log.warning("provider compaction failed for %s: %s", record.id, exc)
        return None
    return result.messages, result.routing, backend.name


def _request(
    inputs: CompressionInputs,
    services: RuntimeServices,
    rows: list[StoredMessage],
    **extra: Any,
) -> CompressionRequest:
    threshold = services.threshold(inputs.model).threshold_tokens
    return CompressionRequest(
        session_id=inputs.record.id,
        messages=rows,
        model=inputs.model,
        settings=services.compression_settings(threshold),
        previous_summary=_previous_summary(rows),
        compression_index=inputs.record.compression_count + 1,
        system_tokens=inputs.view.prefix_tokens,
        # the request's own prefix, so a summarizer reusing it hits the provider's cache
        system_prompt=inputs.prompt.text,
        tools=inputs.prompt.tools,
        **extra,
    )


def plan_compression(inputs: CompressionInputs, services: RuntimeServices) -> CompressionPlan:
    """Plan the compression of ``inputs.view`` (the caller holds the session's lease)."""
    record = inputs.record
    rows = list(inputs.view.rows)
    before = inputs.view.total_tokens
    plan = CompressionPlan(session_id=record.id, trigger=inputs.reason, tokens_before=before)
    if not rows:
        plan.done = CompressionOutcome(
            status="skipped", reason="no active messages", trigger=inputs.reason
        )
        return plan
    notes = plan.notes
    replan = inputs.replan
    # a replanned view's insights were asked for when the view was planned (plan_draft_view)
    insights = (
        []
        if replan is not None
        else services.events.pre_compress(record.id, [r.message for r in rows])
    )
    provider: tuple[list[NewMessage], dict[str, Any], str] | None = None
    if replan is None:
        provider = _provider_compaction(inputs, services, notes)
    elif (backend := services.compaction_backend()) is not None:
        # the turn was sent on the local engine's mid-turn view: writing it keeps the
        # provider's cached prefix, while a backend's compaction now would break it again
        notes.append(f"compaction backend {backend.name!r} not used: the mid-turn view is written")
    kept = 0  # tokens of the rows a replanned view keeps after it
    if provider is not None:
        new_messages, plan.routing, plan.backend = provider
        plan.engine = plan.backend
    else:
        result: CompressionResult | None
        if replan is not None:
            # the view the turn was sent on, as the engine answered it then
            kept = sum(row.token_count or 0 for row in rows if row.id > replan.watermark)
            result = replan.result.model_copy(
                update={"messages": [m.model_copy() for m in replan.result.messages]}
            )
        else:
            request = _request(
                inputs,
                services,
                rows,
                insights=insights,
                focus=inputs.focus,
                manual=inputs.manual,
            )
            result = services.call_compress(request)
        if result is None:
            plan.done = CompressionOutcome(
                status="skipped", reason="no engine answered", trigger=inputs.reason
            )
            return plan
        if result.status != "compressed":
            plan.done = CompressionOutcome(
                status=result.status,
                reason=result.reason,
                trigger=inputs.reason,
                engine=result.engine,
                summarizer=result.summarizer,
                tokens_before=before,
                notes=notes + result.notes,
            )
            return plan
        new_messages = [m for m in result.messages if m.message.role != "system"]
        plan.engine = result.engine
        plan.result = result
    tokens = services.tokens(inputs.model)
    for item in new_messages:
        if item.token_count is None:
            item.token_count = tokens.count_message(item.message, item.api_content)
    if replan is not None:
        for item in new_messages:
            if item.origin_id is not None and item.origin_id in replan.ids:
                item.origin_id = replan.ids[item.origin_id]
            summary = item.message.summary
            if summary is not None:  # its facts from draft rows name them as stored now
                mapped = summary.with_stored_ids(replan.ids)
                item.message = item.message.model_copy(update={"summary": mapped})
        if plan.result is not None and plan.result.summary is not None:  # for on_compressed
            named = plan.result.summary.with_stored_ids(replan.ids)
            plan.result = plan.result.model_copy(update={"summary": named})
        plan.watermark = replan.watermark
    else:
        plan.watermark = max(row.id for row in rows)
    plan.new_messages = new_messages
    plan.event = CompactionEvent(
        session_id=record.id,
        engine=plan.engine,
        backend=plan.backend,
        tokens_before=before,
        tokens_after=inputs.view.prefix_tokens
        + sum(m.token_count or 0 for m in new_messages)
        + kept,
        summarizer=plan.result.summarizer if plan.result else "",
        fallback=plan.result.fallback_used if plan.result else False,
        detail={"trigger": inputs.reason, "focus": inputs.focus, "notes": notes},
    )
    plan.in_place = services.settings.compression.in_place
    continuing = record.model_copy(update={"routing": {**record.routing, **plan.routing}})
    if not plan.in_place:
        plan.child = NewSession(
            id=uuid.uuid4().hex,
            title=record.title,
            cwd=record.cwd,
            goal=record.goal,
            routing=continuing.routing,
            model=record.model,
            provider=record.provider,
            parent_id=record.id,
        )
        continuing = continuing.model_copy(update={"id": plan.child.id, "parent_id": record.id})
    plan.continuing = continuing
    return plan


def plan_draft_view(
    inputs: CompressionInputs, services: RuntimeServices, rows: list[StoredMessage]
) -> CompressionResult | None:
    """The engine's compressed view of ``rows`` (history plus a turn's draft), NOT written.

    In the middle of a turn the draft is not stored yet (nothing is before
    ``commit()``), so the runtime sends this view for the rest of the turn and
    the real compression runs once the turn is committed. ``rows`` that are not
    stored carry negative ids. None when the engine did not compress.
    """
    # the insights the summary must keep are asked for now: this view is what commit
    # writes when the turn ends (ViewReplan), with no second engine call
    insights = services.events.pre_compress(inputs.record.id, [row.message for row in rows])
    result = services.call_compress(_request(inputs, services, rows, insights=insights))
    if result is None or result.status != "compressed":
        log.info(
            "session %s: mid-turn view not compressed (%s)",
            inputs.record.id,
            "no engine answered" if result is None else f"{result.status}: {result.reason}",
        )
        return None
    tokens = services.tokens(inputs.model)
    for item in result.messages:
        if item.token_count is None:
            item.token_count = tokens.count_message(item.message, item.api_content)
    result.messages = [m for m in result.messages if m.message.role != "system"]
    return result
