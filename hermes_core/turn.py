"""A turn: one exchange with the model under the session's turn lease.

One agent turn, as an integrator drives it with its own model client::

    with session.turn() as turn:              # acquires the turn lease, loads history
        req = turn.prepare("fix the test")    # frozen prompt + history + user message
        reply = my_client(req.chat_body())    # you call the model
        message = turn.record_response(reply_message, usage)
        for call in turn.run_framework_tools():   # the framework answers its own tools
            turn.add_tool_result(call.id, run_tool(call))
        # ...prepare() again for the next model call of the turn while calls came back
        turn.commit()                         # atomic append under the fencing token

Nothing of a turn is written before ``commit()``: what it records waits in
its :class:`~hermes_core.draft.TurnDraft`. A compression due before the
turn's first model call compresses the stored history (committed turns); one
due in the middle of a turn (after tool rounds) plans a view over the history
and the draft that is sent for the rest of the turn but not written: the turn
is appended whole at commit and the real compression runs then.

Per-turn context (``pre_llm_call`` results and memory recall) goes ONLY into
the current user message's API content, kept as its ``api_content`` sidecar
so later requests resend the same bytes. Compression is checked before each
request (preflight) and after each response; it runs under the same lease
(:class:`~hermes_core.lease.LeaseKeeper`).

The turn reaches its session through :class:`TurnSession` (what
:class:`~hermes_core.session.Session` offers it) and the host through
:class:`~hermes_core.services.RuntimeServices`; it imports neither.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError as PydanticValidationError

from hermes_hookspecs import (
    CompressionResult,
    LeaseGrant,
    LeaseLost,
    Message,
    NewMessage,
    SessionRecord,
    StoredMessage,
    ToolCall,
    Usage,
    UsageRecord,
    ValidationError,
)

from .compression import (
    CompressionInputs,
    CompressionOutcome,
    ViewReplan,
    plan_compression,
    plan_draft_view,
)
from .context_select import select_messages
from .draft import TurnDraft
from .lease import LeaseKeeper
from .ledger import PendingRequest, PrefixLedger
from .messages import (
    UNANSWERED_RESULT,
    MessagesView,
    check_arguments_depth,
    to_message,
    validation_error,
    with_recall,
)
from .pressure import ContextPressure
from .prompt import FrozenPrompt
from .requests import PreparedRequest
from .view import ActiveView

if TYPE_CHECKING:
    from .services import RuntimeServices

log = logging.getLogger("hermes_core.runtime")


class TurnSession(Protocol):
    """What a turn uses of its session (:class:`~hermes_core.session.Session` provides it)."""

    services: RuntimeServices
    record: SessionRecord
    prompt: FrozenPrompt
    model: str
    ledger: PrefixLedger
    pressure: ContextPressure

    @property
    def id(self) -> str: ...

    @property
    def view(self) -> ActiveView: ...

    @property
    def measured_tokens(self) -> int: ...

    @property
    def active_tokens(self) -> int: ...

    def reload(self, force: bool = False) -> None: ...

    def system_message(self) -> dict[str, Any]: ...

    def append_to_view(self, rows: list[StoredMessage], apis: list[dict[str, Any]]) -> None: ...

    def stage_prompt(self, record: SessionRecord) -> FrozenPrompt: ...

    def compacted(self, prompt: FrozenPrompt, child: SessionRecord | None) -> bool: ...

    def restore_memory(self) -> None: ...


#: commit keeps a mid-turn view only while, with the rest of the turn, it takes at most
#: this share of the threshold (a compaction should leave room for many turns)
REUSE_SHARE = 0.5


class Turn:
    """One agent turn under the session's turn lease. Use as a context manager."""

    def __init__(self, session: TurnSession, lease: LeaseGrant, ttl: float) -> None:
        self.session = session
        self.services = session.services
        self.id = uuid.uuid4().hex
        self.draft = TurnDraft()
        #: what the turn's first mid-turn view was planned over (the stored history and
        #: the draft as rows): commit checks it still stands before writing that view
        #: (see :meth:`_reusable_view`)
        self._draft_rows: list[StoredMessage] | None = None
        #: the engine's answer for that view (commit writes it, see :class:`ViewReplan`)
        self._draft_result: CompressionResult | None = None
        self._keeper = LeaseKeeper(self.services.store, lease, ttl).start()
        self._request: PendingRequest | None = None
        self._prompt_tokens_before = 0
        self._user_text = ""
        self._request_estimate: int | None = None
        self._prepared = False
        self._done = False
        self._hygiene()

    # -- lease --------------------------------------------------------------
    @property
    def hermes(self) -> RuntimeServices:
        """The host's services (the :class:`~hermes_core.host.Hermes` that opened the session)."""
        return self.services

    @property
    def lease(self) -> LeaseGrant:
        """The turn's current lease grant (its fencing token guards every write)."""
        return self._keeper.grant

    @property
    def lost(self) -> LeaseLost | None:
        """Set when the lease was taken over: the turn is interrupted."""
        return self._keeper.lost

    @property
    def pending(self) -> list[NewMessage]:
        """The turn's recorded messages, not stored before :meth:`commit`."""
        return self.draft.pending

    @property
    def done(self) -> bool:
        """True once the turn is committed or aborted."""
        return self._done

    def _check(self) -> None:
        if self._done:
            raise ValidationError("this turn is already committed or aborted")
        self._keeper.check()

    def _finish(self) -> None:
        self._done = True
        self._drop_unanswered_request()
        self._keeper.release()

    # -- steps ----------------------------------------------------------------
    def _add_pending(self, message: Message, api_content: Any = None) -> None:
        services = self.services
        message = services.harness(message)
        count = services.tokens(self.session.model).count_message(message, api_content)
        self.draft.add(
            NewMessage(
                message=message,
                api_content=api_content,
                token_count=count,
                turn_id=self.id,
                annotations=services.annotate(message),
            ),
            message.to_api(api_content),
        )

    def prepare(self, user_message: Any = None) -> PreparedRequest:
        """Build the next request; ``user_message`` (str, parts, dict, Message) starts the turn."""
        self._check()
        draft = self.draft
        if user_message is not None:
            if draft.open_calls:
                raise ValidationError(
                    f"cannot add a user message while tool calls are unanswered: {draft.open_calls}"
                )
            message = to_message(user_message, "user", "user message")
            self._user_text = message.text()
            self._add_pending(message, self._inject(message))
        elif not self._prepared:
            raise ValidationError("the first prepare() of a turn needs a user message")
        self._prepared = True
        # a request prepared before and never answered was not a request of the session
        self._drop_unanswered_request()
        compressed = self._maybe_compress(preflight=True)
        s = self.session
        view = s.view
        apis, chain = draft.parts(view)
        services = self.services
        messages = select_messages(
            services,
            [s.system_message(), *apis],
            lambda: draft.messages(view),
            session_id=s.id,
            model=s.model,
            system_prompt=s.prompt.text,
            threshold=self._threshold,
        )
        self._request_estimate = chain.total_tokens()
        self._request = s.ledger.prepare(s.id, chain, services.store())
        self._prompt_tokens_before = s.pressure.request_prepared(chain.total_tokens())
        backend = services.compaction_backend()
        extra: dict[str, Any] = {}
        if backend is not None:
            settings = services.settings.table(f"compaction.{backend.name}")
            try:
                if backend.eligible(s.record, s.model, settings):
                    extra = backend.request_options(s.record, s.model, settings)
            except Exception as exc:  # a backend fault must not stop the turn
                log.warning("compaction backend %r request options failed: %s", backend.name, exc)
        # built from validated parts: skip re-validating every message dict (O(history))
        return PreparedRequest.model_construct(
            session_id=s.id,
            turn_id=self.id,
            request_index=self._request.entry.request_index,
            model=s.model,
            messages=messages,
            tools=s.prompt.tools,
            prompt_tokens=chain.total_tokens(),
            tokens_exact=services.tokens(s.model).exact,
            compressed=compressed,
            extra_body=extra,
        )

    def _inject(self, message: Message) -> Any:
        """Per-turn context for the user message's API content only (None: none)."""
        s = self.session
        pieces = self.services.events.turn_context(s.record, MessagesView(s.view.rows), message)
        return with_recall(message, pieces)

    def record_response(self, message: Any, usage: Usage | dict[str, Any] | None = None) -> Message:
        """Record the model's assistant message (wire dict or Message) and its usage."""
        self._check()
        if not self._prepared:
            raise ValidationError("record_response() before prepare()")
        assistant = to_message(message, "assistant", "assistant message")
        check_arguments_depth(assistant)
        self._add_pending(assistant)
        self.draft.open(assistant)
        parsed: Usage | None
        if usage is None or isinstance(usage, Usage):
            parsed = usage
        else:
            parsed = Usage.from_openai(usage, self.session.model)
        s = self.session
        services = self.services
        if parsed is not None:
            services.store().record_usage(
                UsageRecord(session_id=s.id, turn_id=self.id, usage=parsed)
            )
            if self._request is not None:
                self._request.entry.provider_cached_tokens = parsed.cache_read_tokens
            if services.has_engine():
                services.engine().update_usage(s.id, parsed)
            # the provider's count of this request against ours: carried forward
            s.pressure.usage_reported(parsed.input_tokens, self._request_estimate)
        self._flush_ledger()
        services.events.response_recorded(s.record, assistant, parsed)
        if s.pressure.last_prompt_tokens + (self.pending[-1].token_count or 0) >= self._threshold():
            s.pressure.due = True
        return assistant

    def add_tool_result(self, tool_call_id: str, content: Any, *, name: str | None = None) -> None:
        """Record a tool result for an open call of this turn."""
        self._check()
        draft = self.draft
        if tool_call_id not in draft.open_calls:
            raise ValidationError(
                f"tool result for unknown call id {tool_call_id!r}; open calls: {draft.open_calls}"
            )
        try:
            message = Message(role="tool", tool_call_id=tool_call_id, content=content, name=name)
        except PydanticValidationError as exc:
            raise validation_error("tool result", exc) from None
        draft.answer(tool_call_id)
        self._add_pending(message)

    def run_framework_tools(self) -> list[ToolCall]:
        """Answer the open tool calls the framework owns; return the others, in call order.

        The framework owns the registered agent tools (``register_tools``:
        ``session_search`` and ``session_open`` by default) and the memory
        providers' tools. Their results are recorded as if passed to
        :meth:`add_tool_result`. The integrator's loop runs the calls this
        returns and records their results itself::

            turn.record_response(reply, usage)
            for call in turn.run_framework_tools():
                turn.add_tool_result(call.id, my_tools(call))
        """
        self._check()
        toolbox = self.services.toolbox()
        left: list[ToolCall] = []
        for call_id in list(self.draft.open_calls):
            call = self.draft.calls[call_id]
            if toolbox.owns(call.function.name):
                self.run_tool(call)
            else:
                left.append(call)
        return left

    def run_tool(self, call: ToolCall | str) -> str:
        """Answer one open call of a framework tool (by call or call id) and record it.

        :raises ValidationError: the call is not open in this turn, or not a
            framework tool (run it yourself and use :meth:`add_tool_result`).
        """
        self._check()
        call_id = call if isinstance(call, str) else call.id
        if call_id not in self.draft.open_calls:
            raise ValidationError(
                f"no open tool call {call_id!r} in this turn; open calls: {self.draft.open_calls}"
            )
        found = self.draft.calls[call_id]
        services = self.services
        toolbox = services.toolbox()
        if not toolbox.owns(found.function.name):
            raise ValidationError(
                f"tool {found.function.name!r} (call {call_id!r}) is not a framework tool; "
                "run it yourself and record it with add_tool_result()"
            )
        s = self.session
        result = toolbox.run(
            found, session_id=s.id, store=services.store(), tokens=services.tokens(s.model)
        )
        self.add_tool_result(call_id, result)
        return result

    def commit(self) -> list[StoredMessage]:
        """Append the turn's messages atomically under the lease's fencing token.

        A tool call still without a result is answered with a stub
        (:data:`UNANSWERED_RESULT`, logged as a warning) placed right after
        its assistant message's other results, so the stored view is always a
        valid request: the API rejects an assistant ``tool_calls`` message that
        is not followed by a result for each call.
        """
        self._check()
        if self.draft.open_calls:
            self._stub_open_calls()
        s = self.session
        draft = self.draft
        reusable = self._reusable_view()
        try:
            stored: list[StoredMessage] = []
            if draft.pending:
                stored = self.services.store().append_messages(
                    s.id, draft.pending, lease=self.lease
                )
                s.append_to_view(stored, draft.apis)
                self.services.events.turn_committed(
                    s.record, self.id, [m.message for m in draft.pending], self._user_text
                )
            draft.clear()
            if draft.view is not None:
                # the turn ran on a compressed view, so the engine found compression due:
                # the committed history (that turn included) is compressed now, for real
                draft.view = None
                s.ledger.mark_compaction()  # the next request leaves the view either way
                # the view the turn was sent on is written as the engine answered it (the
                # history and the draft up to that point, summarised once), so the next
                # request keeps its prefix; the rest of the turn follows as is
                replan = self._replan(reusable, stored) if reusable is not None else None
                self._compress(reason="post-response", replan=replan)
            elif s.pressure.due:
                self._maybe_compress(preflight=False)
            return stored
        finally:
            self._finish()

    def _reusable_view(self) -> dict[int, int] | None:
        """Draft row id -> pending index of the turn's mid-turn view, if commit keeps it.

        Commit writes the view the turn was sent on (so the next request keeps its
        prefix) when it is the turn's first view, planned over the stored history,
        and that history is still the active view (no compression ran during the
        turn), every message the view covered is still where it was, and with the
        rest of the turn after it the view takes at most :data:`REUSE_SHARE` of the
        threshold: else a full compression buys more room.
        """
        view, rows = self.draft.view, self._draft_rows
        if view is None or rows is None:
            return None
        stored = [row.id for row in rows if row.id > 0]
        if stored != [row.id for row in self.session.view.rows]:
            return None  # the history changed under the view (a compression during the turn)
        where = {id(m.message): i for i, m in enumerate(self.draft.pending)}
        covered: dict[int, int] = {}
        for row in rows:
            if row.id < 0:
                index = where.get(id(row.message))
                if index is None:
                    return None
                covered[row.id] = index
        upto = max(covered.values(), default=-1)
        if upto < 0 or sorted(covered.values()) != list(range(upto + 1)):
            return None  # a message moved in among the covered ones (a stubbed call)
        tokens = (
            self.session.view.prefix_tokens
            + sum(row.token_count or 0 for row in view.rows)
            + sum(m.token_count or 0 for m in self.draft.pending[upto + 1 :])
        )
        return covered if tokens <= self._threshold() * REUSE_SHARE else None

    def _replan(self, covered: dict[int, int], stored: list[StoredMessage]) -> ViewReplan | None:
        """The mid-turn view to write, its draft ids mapped to the ``stored`` ones."""
        rows, result = self._draft_rows, self._draft_result
        if rows is None or result is None or max(covered.values()) >= len(stored):
            return None
        ids = {draft_id: stored[index].id for draft_id, index in covered.items()}
        watermark = stored[max(covered.values())].id
        return ViewReplan(ids=ids, watermark=watermark, result=result)

    def _stub_open_calls(self) -> None:
        draft = self.draft
        log.warning(
            "session %s: committing a turn with unanswered tool calls %s; stubbed",
            self.session.id,
            ", ".join(draft.open_calls),
        )
        for call_id in list(draft.open_calls):
            owner = next(
                i
                for i, m in enumerate(draft.pending)
                if any(c.id == call_id for c in m.message.tool_calls or [])
            )
            at = owner + 1
            while at < len(draft.pending) and draft.pending[at].message.role == "tool":
                at += 1
            self.add_tool_result(call_id, UNANSWERED_RESULT)
            if at < len(draft.pending) - 1:  # move it from the end to its assistant's results
                draft.move_last_to(at)

    def abort(self) -> None:
        """Drop the turn's uncommitted messages and release the lease."""
        if not self._done:
            self.draft.clear()
            self._finish()

    # -- compression ---------------------------------------------------------
    def _threshold(self) -> int:
        return self.services.threshold(self.session.model).threshold_tokens

    def _hygiene(self) -> None:
        """Before a turn: catch sessions that grew while nobody compressed them."""
        s = self.session
        report = self.services.threshold(s.model)
        if s.measured_tokens >= report.hygiene_tokens or (
            len(s.view.rows) >= self.services.settings.compression.hygiene_max_messages
        ):
            self.compress(reason="hygiene")

    def _maybe_compress(self, *, preflight: bool) -> bool:
        s = self.session
        draft = self.draft
        # the provider's reported count when there is one (the estimate otherwise)
        if draft.view is None:
            total = s.measured_tokens + draft.tokens()
        else:
            total = s.pressure.measured(draft.parts(s.view)[1].total_tokens())
        threshold = self._threshold()
        due = s.pressure.due or total >= threshold
        # in the middle of a turn (the model answered already) the draft is part of what
        # outgrew the window, and it is not stored: compress a view, write nothing
        mid_turn = preflight and draft.has_reply()
        if not due or not (s.view.rows or mid_turn):
            return False
        services = self.services
        if services.has_engine() and not services.engine().should_compress(s.id, total, threshold):
            return False
        if mid_turn:
            return self._compress_draft()
        outcome = self.compress(reason="preflight" if preflight else "post-response")
        return outcome.status == "compressed"

    def _inputs(self, **extra: Any) -> CompressionInputs:
        s = self.session
        return CompressionInputs(
            record=s.record, model=s.model, prompt=s.prompt, view=s.view, **extra
        )

    def _compress_draft(self) -> bool:
        """Plan the mid-turn view over the history and the draft (nothing is written)."""
        s = self.session
        first = self.draft.view is None
        rows = self.draft.rows(s.view, s.id)
        result = plan_draft_view(self._inputs(), self.services, rows)
        s.pressure.due = False
        if result is None:
            return False
        # only a view planned over the stored history can be written at commit
        self._draft_rows = rows if first else None
        self._draft_result = result if first else None
        self.draft.cover(result.messages, s.id)
        s.ledger.mark_compaction()
        return True

    def compress(
        self, *, focus: str | None = None, manual: bool = False, reason: str = "manual"
    ) -> CompressionOutcome:
        """Compress the session's active context now, under this turn's lease."""
        return self._compress(focus=focus, manual=manual, reason=reason)

    def _compress(
        self,
        *,
        focus: str | None = None,
        manual: bool = False,
        reason: str = "manual",
        replan: ViewReplan | None = None,
    ) -> CompressionOutcome:
        """:meth:`compress`; with ``replan``, the mid-turn view is written as the engine
        answered it instead of a new cut (see :class:`~hermes_core.compression.ViewReplan`)."""
        self._keeper.check()
        outcome = self._run_compression(focus=focus, manual=manual, reason=reason, replan=replan)
        self.session.pressure.due = False
        return outcome

    def _run_compression(
        self, *, focus: str | None, manual: bool, reason: str, replan: ViewReplan | None = None
    ) -> CompressionOutcome:
        """Carry out the coordinator's plan: stage the prompt, commit, move the lease."""
        s = self.session
        services = self.services
        s.reload()
        plan = plan_compression(
            self._inputs(focus=focus, manual=manual, reason=reason, replan=replan), services
        )
        if plan.done is not None:
            return plan.done
        assert plan.continuing is not None
        # the prompt is rebuilt for the session that continues before the commit, and its
        # hashes (and new routing) are written in the commit's transaction
        # (building it initialises the memory providers for that session)
        prompt = s.stage_prompt(plan.continuing)
        store = services.store()
        try:
            commit = plan.commit(store, self.lease, prompt)
        except BaseException:
            if plan.child is not None:  # the child was never created: memory serves the parent
                s.restore_memory()
            raise
        old_id = s.id
        child: SessionRecord | None = None
        if commit.child_session_id:
            # take the child's lease before handing the parent's back: no moment without one
            child_lease = store.acquire_lease(
                commit.child_session_id,
                self.lease.holder,
                services.settings.session.lease_ttl,
                timeout=None,
            )
            store.release_lease(self.lease)
            self._keeper.hand_over(child_lease)
            child = store.get_session(commit.child_session_id)
        changed = s.compacted(prompt, child)
        new_id = s.id
        services.events.session_switched(old_id, new_id, "compression")
        final, outcome = plan.finish(commit, tokens_after=s.active_tokens, prompt_changed=changed)
        services.events.compressed(new_id, final)
        return outcome

    def _flush_ledger(self) -> None:
        """Record the answered request in the prefix ledger."""
        if self._request is not None:
            request, self._request = self._request, None
            self.session.ledger.record(request, self.services.store())

    def _drop_unanswered_request(self) -> None:
        """Forget a prepared request that got no response: the ledger never counts it."""
        if self._request is None:
            return
        self.session.ledger.forget(self._request)
        self.session.pressure.request_dropped(self._prompt_tokens_before)
        self._request = None

    # -- context manager --------------------------------------------------------
    def __enter__(self) -> Turn:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._done:
            self.abort()
