"""``ContextCompressor``: the default context engine (``compression.engine = "compressor"``).

``compress`` runs four phases over the session's active view (the frozen
system prompt is not part of it; leading ``system`` messages, if any, are
kept as they are):

1. **Cut points first.** Messages are grouped so that an assistant message
   and the tool results right after it form one group; every cut happens at a
   group start, so a tool call is never separated from its results (parallel
   calls included). The *head* is the first ``protect_first_n`` messages on
   the first compression (text a harness injected not counted); the
   protection decays by one per later compression
   (``protect_first_n - (compression_index - 1)``, never below 0) and never
   reaches past a previous summary. The *tail* comes from the configured tail
   strategy (``legacy`` or ``lean``) and always starts after the previous
   summary. Everything between is the *middle*.
2. **Prune** (:mod:`.prune`) every non-system message before the tail:
   duplicate tool results collapse to the latest copy, long tool results become
   a one-line placeholder with a ``message id N`` recovery pointer, long
   tool-call arguments are cut, long text a harness injected keeps its start
   and a pointer (standing context excepted: ``prune.STANDING_HARNESS``).
3. **Summarize** the middle with the configured summarizer (input bounded by
   ``summary_input_tokens``; chunked when the tail strategy asks for a digest;
   the previous summary is updated, not restarted; ``insights`` and ``focus``
   go into the request). With ``summary_prefix_reuse`` the request carries the
   conversation's own prefix instead (when it fits the summarizer's window).
4. **Reassemble and repair:** head, provider compaction items (opaque, always
   carried), the summary, the last real user message when it was in the
   middle, then the tail. The summary is a typed record:
   ``Message(role="user", kind="summary", summary=HandoffSummary(...),
   content=summary.render())`` - fenced by explicit begin/end markers and
   marked reference-only. When the result with the system prompt and tool
   schemas still exceeds ``FIT_RATIO`` (55%) of the trigger (one huge tool
   output in the latest round, or a call that wrote a patch or a whole file),
   the largest tool outputs of the tail are
   cut to a head-and-end excerpt and the largest calls' long string arguments
   cut, each naming the stored message that holds them whole when it has one
   (:func:`.prune.fit_tail`); without this a session whose tail alone
   overflows could never get back under its trigger, or a compaction would
   buy little room. When the head and the tail hold every message (no
   middle) and the view is over the trigger, only this fitting is done, over
   the whole view, and the result has no summary (:meth:`_Work._fit_only`).

**Repair rule** (:mod:`.repair`), applied to the reassembled list:

* orphan tool results are removed: a tool message survives only right after
  the assistant message whose call it answers (nothing but tool messages in
  between), once per call;
* an assistant tool call without a result gets a stub tool result saying the
  result was compacted, with ``message id N`` of the original result when the
  input had one - except for an assistant message that ends the list (only
  its own tool results after it): those calls are in flight and stay as they
  are;
* at least one real user turn survives: the last real user message of the
  input is always in the output (head, tail, or carried after the summary);
  text a harness injected (a reminder) is never taken for it;
* the output must be strictly smaller (tokens) than the input, else the
  result is ``aborted`` and nothing changes.

**Failure policy.** A :class:`SummarizerError` whose kind aborts (network,
auth, quota, truncated, empty, refused) aborts the compression and leaves the
session exactly as it was. Other failures use ``fallback_summarizer``
(deterministic) unless ``abort_on_summary_failure`` is set (ignored for a
manual compress). Every failure starts a cooldown that doubles with each
consecutive failure; a circuit breaker opens after ``breaker_after``
ineffective compressions in a row (see :mod:`.session_state`). A manual
compress bypasses both.

``select_context`` is not overridden (the runtime only sends sequences it
validated); :meth:`ContextCompressor.repair_view` returns the repaired view of
a sequence assembled elsewhere.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from hermes_hookspecs import (
    CompressionRequest,
    CompressionResult,
    CompressionSettings,
    ContextEngine,
    EngineStatus,
    HandoffFact,
    HandoffSummary,
    HermesError,
    Message,
    SelectRequest,
    Summarizer,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
    TailPlan,
    TailRequest,
    Usage,
)
from hermes_hookspecs.compression import EngineHost

from .facts import closing_answers, extract_facts, strip_reasoning
from .groups import group_starts, snap_back, snap_forward
from .items import Item
from .prune import fit_limit, fit_tail, fitted_tokens, prune
from .repair import plan_repair, stub_message
from .session_state import SessionState
from .settings import CompressorSettings
from .summary_input import SummaryInput, build_summary_input

#: tokens kept free in the summarizer's window for its instructions
SUMMARY_PROMPT_OVERHEAD = 2_000
#: the handoff's size: HANDOFF_RATE of the history it stands for, between
#: 1/HANDOFF_FLOOR and 1/HANDOFF_CAP of the threshold, and at most HANDOFF_MAX tokens
#: (the room in real tokens: an in-process summarizer's handoff is refitted,
#: :meth:`_Work._fitted`)
HANDOFF_RATE = 1 / 34
#: ... or up to DIALOGUE_RATE of it while the conversation's own words are larger
DIALOGUE_RATE = 1 / 16
HANDOFF_FLOOR = 24
HANDOFF_CAP = 3.5
HANDOFF_MAX = 14_000
#: ... or FACT_SHARE of the facts it chooses from, if that is more
FACT_SHARE = 1 / 2
#: after a compaction the view should take at most this share of the threshold
AFTER_TARGET = 0.57
#: an in-process summarizer's handoff this much over its room (:func:`handoff_room`)
#: is written again
REFIT_SLACK = 0.02


def handoff_tokens(
    threshold_tokens: int,
    covered_tokens: int,
    kept_tokens: int = 0,
    fact_tokens: int = 0,
    dialogue_tokens: int | None = None,
) -> int:
    """The handoff's token budget: it grows with the history it stands for, within the window.

    ``clamp(max(covered * HANDOFF_RATE, facts * FACT_SHARE), threshold / HANDOFF_FLOOR, high)``
    where ``facts`` is the size of the facts to choose from (the previous handoff's
    and the middle's): a history's raw size is mostly tool output, so a session of
    many short exchanges (requests, errors, answers) says more per token than one
    that read a few large files, and its handoff gets room for a share of what it
    says. A history rich in words (``dialogue_tokens``: the user's messages and the
    turn-closing answers in it, less what the handoff's other sections take) gets up
    to ``covered * DIALOGUE_RATE``, but never more than those words: a larger handoff
    would keep less than the words themselves kept verbatim. ``high``
    is ``threshold / HANDOFF_CAP`` or what :data:`AFTER_TARGET` of the threshold
    leaves after the ``kept_tokens`` (system prompt, head, tail and the tail
    strategy's sections) if that is less, but never under :func:`handoff_floor`;
    at least 256 and at most :data:`HANDOFF_MAX` (:func:`handoff_room`). A long
    history deserves a longer handoff, but never one that crowds the window: every
    compaction is a summary call and a cache break, so the view after it must leave
    room for many turns.
    """
    low = threshold_tokens // HANDOFF_FLOOR
    wanted = max(int(covered_tokens * HANDOFF_RATE), int(fact_tokens * FACT_SHARE))
    if dialogue_tokens is not None:
        wanted = max(wanted, min(int(covered_tokens * DIALOGUE_RATE), dialogue_tokens))
    return min(handoff_room(threshold_tokens, kept_tokens), max(256, low, wanted))


def handoff_room(threshold_tokens: int, kept_tokens: int = 0) -> int:
    """The most tokens a handoff may take (the ``high`` of :func:`handoff_tokens`).

    ``threshold / HANDOFF_CAP``, or what :data:`AFTER_TARGET` of the threshold
    leaves after the ``kept_tokens`` if that is less, but never under
    :func:`handoff_floor`; at least 256 and at most :data:`HANDOFF_MAX`.
    """
    high = int(threshold_tokens / HANDOFF_CAP)
    if kept_tokens:
        after = int(threshold_tokens * AFTER_TARGET) - kept_tokens
        high = min(high, max(handoff_floor(threshold_tokens), after))
    return max(256, min(HANDOFF_MAX, high))


def handoff_floor(threshold_tokens: int) -> int:
    """The least a handoff gets however little room the rest leaves: a 12th of the threshold."""
    return threshold_tokens // HANDOFF_FLOOR * 2


class _Aborted(Exception):
    """Internal: stop with an ``aborted`` result (the message is the reason)."""


class _Skipped(Exception):
    """Internal: stop with a ``skipped`` result (nothing to do)."""


class ContextCompressor(ContextEngine):
    """Head + structured summary + tail, with pruning, repair and a failure policy."""

    name = "compressor"
    #: the summarizer tried once when the configured one fails
    fallback_summarizer = "deterministic"

    def __init__(
        self,
        settings: CompressorSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or CompressorSettings()
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, SessionState] = {}

    # -- state -----------------------------------------------------------------
    def _state(self, session_id: str) -> SessionState:
        with self._lock:
            state = self._sessions.get(session_id)
            if state is None:
                state = self._sessions[session_id] = SessionState()
            return state

    def _host(self) -> EngineHost:
        if self.host is None:
            raise HermesError("the compressor engine is not bound: call engine.bind(host) first")
        return self.host

    def update_usage(self, session_id: str, usage: Usage) -> None:
        """Remember the provider's real prompt size (input tokens, cached ones included)."""
        self._state(session_id).last_prompt_tokens = usage.input_tokens

    def should_compress(self, session_id: str, prompt_tokens: int, threshold_tokens: int) -> bool:
        """Due at the threshold, unless in cooldown or the circuit breaker is open."""
        state = self._state(session_id)
        if state.circuit_open or state.in_cooldown(self._clock()):
            return False
        return prompt_tokens >= threshold_tokens

    def status(self, session_id: str, threshold_tokens: int) -> EngineStatus:
        return self._state(session_id).status(self.name, threshold_tokens)

    # ``select_context`` is deliberately NOT overridden: the runtime only ever sends
    # sequences it validated (at record time and at append), so a per-request repair
    # would cost O(history) on every request for nothing. Hosts that assemble
    # requests themselves can call :meth:`repair_view`.
    def repair_view(self, request: SelectRequest) -> list[Message] | None:
        """The repaired view when ``request.messages`` breaks the tool-pair rules, else None."""
        plan = plan_repair(request.messages)
        if not plan.changes:
            return None
        out: list[Message] = []
        for index, message in enumerate(request.messages):
            if index not in plan.drop:
                out.append(message)
            out.extend(stub_message(call, None) for call in plan.stubs_after.get(index, ()))
        return out

    # -- compress --------------------------------------------------------------
    def compress(self, request: CompressionRequest) -> CompressionResult:
        state = self._state(request.session_id)
        now = self._clock()
        if not request.manual:
            if state.circuit_open:
                return self._skip(
                    state,
                    f"circuit breaker open after {state.ineffective_streak} ineffective "
                    "compressions; run a manual compress",
                )
            if state.in_cooldown(now):
                left = (state.cooldown_until or now) - now
                return self._skip(
                    state, f"cooldown after a summary failure ({left:.0f}s left); manual bypasses"
                )
        host = self._host()
        work = _Work(self, request, host, state)
        try:
            result = work.run()
        except _Skipped as stop:
            return self._skip(state, str(stop))
        except _Aborted as stop:
            result = CompressionResult(
                status="aborted",
                engine=self.name,
                tokens_before=work.tokens_before,
                tokens_after=work.tokens_before,
                reason=str(stop),
                summarizer=work.summarizer_used,
                notes=work.notes,
            )
        state.last_status = result.status
        state.last_reason = result.reason
        if result.status == "compressed":
            state.compressions += 1
            state.last_tokens_before = result.tokens_before
            state.last_tokens_after = result.tokens_after
            state.last_summarizer = result.summarizer
            state.last_fallback_used = result.fallback_used
            if result.summary_usage is not None:
                state.last_summary_usage = result.summary_usage.model_dump()
            state.record_effect(result.tokens_before, result.tokens_after, self.settings)
        elif work.not_smaller:
            state.record_effect(work.tokens_before, work.tokens_before, self.settings)
        return result

    def _skip(self, state: SessionState, reason: str) -> CompressionResult:
        state.last_status = "skipped"
        state.last_reason = reason
        return CompressionResult(status="skipped", engine=self.name, reason=reason)


class _Work:
    """One compression run (kept off the engine so runs never share scratch state)."""

    def __init__(
        self,
        engine: ContextCompressor,
        request: CompressionRequest,
        host: EngineHost,
        state: SessionState,
    ) -> None:
        self.engine = engine
        self.request = request
        self.settings: CompressionSettings = request.settings
        self.host = host
        self.state = state
        self.notes: list[str] = []
        self.summarizer_used = ""
        self.tokens_before = 0
        self.not_smaller = False
        self.fallback_used = False
        self.usage: Usage | None = None
        self.facts: list[HandoffFact] = []
        #: the user's first request in the protected head (the handoff's goal may name it)
        self.head_request: HandoffFact | None = None

    def count(self, message: Message) -> int:
        return self.host.count_message(message)

    # -- phases ------------------------------------------------------------------
    def run(self) -> CompressionResult:
        request, settings = self.request, self.settings
        items = [
            Item(
                message=row.message,
                tokens=row.token_count if row.token_count is not None else self.count(row.message),
                stored=row,
            )
            for row in request.messages
        ]
        self.tokens_before = sum(item.tokens for item in items)
        leading = 0
        while leading < len(items) and items[leading].message.role == "system":
            leading += 1
        system, body = items[:leading], items[leading:]
        if not body:
            raise _Skipped("nothing to compress: the active view is empty")

        # 1. cut points
        starts = group_starts([item.message for item in body])
        summary_positions = [i for i, it in enumerate(body) if it.message.kind == "summary"]
        protect = max(0, settings.protect_first_n - (request.compression_index - 1))
        head_limit = summary_positions[0] if summary_positions else len(body)
        head_end = _head_end(body, protect, head_limit)
        if head_end:
            head_end = min(snap_forward(starts, head_end, len(body)), head_limit)
        rest = body[head_end:]
        fixed = request.system_tokens + sum(it.tokens for it in [*system, *body[:head_end]])
        plan = self._fitted_plan(rest, fixed)
        rest_starts = [s - head_end for s in starts if s >= head_end]
        tail_start = snap_back(rest_starts, min(max(plan.tail_start, 0), len(rest)))
        last_summary = max((p - head_end for p in summary_positions if p >= head_end), default=-1)
        if tail_start <= last_summary:
            tail_start = snap_forward(rest_starts, last_summary + 1, len(rest))
        middle, tail = rest[:tail_start], rest[tail_start:]
        if not any(it.message.kind == "message" for it in middle):
            fitted = self._fit_only([*system, *body])
            if fitted is not None:
                return fitted
            raise _Skipped(
                f"nothing to compress: the tail strategy {settings.tail!r} keeps every message "
                "after the head"
            )
        self.notes.extend(plan.notes)

        # carried verbatim: provider compaction items and the last real user message
        carried_items = [it for it in middle if it.message.kind == "compaction"]
        last_user = next((it for it in reversed(body) if it.is_real_user), None)
        carry_user = last_user is not None and any(it is last_user for it in middle)

        # 2. prune everything before the tail (system messages untouched)
        pruned_view = [*body[:head_end], *middle, *tail]
        if prune(pruned_view, head_end + len(middle), settings, self.count, exact_before=head_end):
            self.notes.append("pruned old tool output before the tail")

        # 3. summarize
        previous = request.previous_summary or next(
            (
                it.message.summary
                for it in reversed(middle)
                if it.message.kind == "summary" and it.message.summary is not None
            ),
            None,
        )
        to_summarize = [it for it in middle if it.message.kind == "message"]
        # facts come from the rows as stored: pruning has cut their tool output since;
        # a draft row's negative id is kept with its facts for commit to map
        self.facts = extract_facts(
            [it.stored.message if it.stored is not None else it.message for it in to_summarize],
            [it.source_id for it in to_summarize],
            [it.stored.annotations if it.stored is not None else None for it in to_summarize],
        )
        head = [it for it in body[:head_end] if it.is_real_user]
        self.head_request = next(
            (
                fact
                for fact in extract_facts(
                    [it.stored.message if it.stored is not None else it.message for it in head],
                    [it.source_id for it in head],
                    [it.stored.annotations if it.stored is not None else None for it in head],
                )
                if fact.kind == "request"
            ),
            None,
        )
        # the tail's long tool outputs and calls yield to the handoff: fit_tail cuts them
        # (pointer included) when the view would be over its limit; the messages' limit is
        # what the system prompt leaves of it (a prompt past it leaves them an eighth)
        limit = fit_limit(settings.threshold_tokens, request.system_tokens)
        kept = (
            request.system_tokens
            + sum(it.tokens for it in [*system, *body[:head_end], *carried_items])
            + fitted_tokens(tail, limit, self.count)
            + (last_user.tokens if carry_user and last_user is not None else 0)
        )
        # the tail strategy's sections (identifier index, ...) join the handoff's message:
        # the handoff's room is what they leave
        sections = self._sections_tokens(plan)
        summary, result = self._summarize(to_summarize, previous, plan, kept + sections, sections)
        summary_message = Message(
            role="user", kind="summary", summary=summary, content=summary.render()
        )

        # 4. reassemble and repair
        out: list[Item] = [*system, *body[:head_end], *carried_items]
        out.append(Item(message=summary_message, tokens=self.count(summary_message)))
        if carry_user and last_user is not None:
            out.append(last_user)
        out.extend(tail)
        out = self._repair(out, items)
        # the tail's first item (repair may have dropped or stubbed items before it)
        in_tail = {id(item) for item in tail}
        tail_from = next((i for i, item in enumerate(out) if id(item) in in_tail), len(out))
        if fit_tail(out, tail_from, limit, self.count):
            self.notes.append("cut oversized tool traffic in the tail to excerpts to fit")
        tokens_after = sum(item.tokens for item in out)
        if tokens_after >= self.tokens_before:
            self.not_smaller = True
            raise _Aborted(
                f"result would not be smaller ({tokens_after} >= {self.tokens_before} tokens); "
                "session left unchanged"
            )
        return CompressionResult(
            status="compressed",
            engine=self.engine.name,
            messages=[item.to_new() for item in out],
            summary=summary,
            tokens_before=self.tokens_before,
            tokens_after=tokens_after,
            summarizer=result.summarizer,
            fallback_used=self.fallback_used,
            notes=self.notes,
            summary_usage=self.usage,
        )

    def _fit_only(self, out: list[Item]) -> CompressionResult | None:
        """Nothing to summarize, yet the view is over the trigger: its long tool outputs
        and call arguments cut to excerpts, and no summary.

        The first round alone can be over the trigger (a task's first reads, in
        parallel, of four large files): the head and the tail's last group hold every
        message, so there is no middle, and without this each request of the round
        would go out over the window. :func:`.prune.fit_tail` cuts the largest outputs
        and arguments of the whole view (each naming the stored message that holds
        it whole) until it fits :func:`.prune.fit_limit`; the user's messages stay as
        they are. ``None`` when the view is not over the trigger or nothing could be
        cut (the compression is skipped, as before).
        """
        settings, request = self.settings, self.request
        if request.system_tokens + self.tokens_before <= settings.threshold_tokens:
            return None
        limit = fit_limit(settings.threshold_tokens, request.system_tokens)
        leading = next((i for i, it in enumerate(out) if it.message.role != "system"), len(out))
        if not fit_tail(out, leading, limit, self.count):
            return None
        out = self._repair(out, out)
        tokens_after = sum(item.tokens for item in out)
        if tokens_after >= self.tokens_before:
            return None
        self.notes.append(
            "nothing to summarize (the head and the tail hold every message) and the view "
            "over the trigger: cut oversized tool traffic to excerpts to fit, no summary"
        )
        return CompressionResult(
            status="compressed",
            engine=self.engine.name,
            messages=[item.to_new() for item in out],
            tokens_before=self.tokens_before,
            tokens_after=tokens_after,
            notes=self.notes,
        )

    def _fitted_plan(self, rest: Sequence[Item], fixed: int) -> TailPlan:
        """The tail plan, made again in less room when it would not leave the handoff its floor.

        ``fixed`` is what the view keeps before ``rest`` (system prompt and head).
        A strategy sizes its tail as a share of the room the system prompt
        leaves; with a large system prompt that tail, the handoff's floor and
        the tail's sections add up past :data:`AFTER_TARGET` of the threshold,
        and each compaction buys little room. The room is then scaled down in
        proportion, so the tail shrinks and the handoff keeps its floor (down to
        the tail's last group when the system prompt and head leave no room at
        all). The handoff's room counts the tail's sections in every case
        (:func:`handoff_room`).
        """
        plan = self._tail_plan(rest)
        threshold = self.settings.threshold_tokens
        tail_tokens = sum(it.tokens for it in rest[max(0, plan.tail_start) :])
        allowed = (
            int(threshold * AFTER_TARGET)
            - fixed
            - handoff_floor(threshold)
            - self._sections_tokens(plan)
        )
        if tail_tokens <= max(0, allowed):
            return plan
        # with no room at all left (a system prompt and head as large as the target)
        # the tail keeps its last group only: the strategy's suffix never goes below it
        room = max(1, threshold - self.request.system_tokens)
        smaller = max(1, room * max(0, allowed) // tail_tokens)
        self.notes.append(
            f"tail planned again in {smaller} of {room} tokens of room: the handoff keeps its floor"
        )
        return self._tail_plan(rest, smaller)

    def _sections_tokens(self, plan: TailPlan) -> int:
        if not plan.extra_sections:
            return 0
        sections = "\n\n".join(f"## {s.title}\n{s.body}" for s in plan.extra_sections)
        return self.count(Message(role="user", content=sections))

    def _tail_plan(self, rest: Sequence[Item], room: int | None = None) -> TailPlan:
        strategy = self.host.tail_strategy(self.settings.tail)
        stored = [it.stored for it in rest if it.stored is not None]
        if len(stored) != len(rest):
            raise HermesError("internal: every message of the view must come from a stored row")
        # the tail and its sections share what the system prompt leaves of the threshold
        if room is None:
            room = max(1, self.settings.threshold_tokens - self.request.system_tokens)
        return strategy.plan(
            TailRequest(
                messages=stored,
                token_counts=[it.tokens for it in rest],
                settings=self.settings.model_copy(update={"threshold_tokens": room}),
            )
        )

    def _repair(self, out: list[Item], original: Sequence[Item]) -> list[Item]:
        plan = plan_repair([item.message for item in out])
        if not plan.changes:
            return out
        result_ids: dict[str, int] = {}
        for item in original:
            if item.message.role == "tool" and item.message.tool_call_id:
                rid = item.recovery_id
                if rid is not None:
                    result_ids.setdefault(item.message.tool_call_id, rid)
        fixed: list[Item] = []
        for index, item in enumerate(out):
            if index not in plan.drop:
                fixed.append(item)
            for call in plan.stubs_after.get(index, ()):
                stub = stub_message(call, result_ids.get(call.id))
                fixed.append(Item(message=stub, tokens=self.count(stub)))
        if plan.drop:
            self.notes.append(f"repair removed {len(plan.drop)} orphan tool result(s)")
        stubbed = sum(len(calls) for calls in plan.stubs_after.values())
        if stubbed:
            self.notes.append(f"repair stubbed {stubbed} tool call(s) without a result")
        return fixed

    # -- summary -------------------------------------------------------------------
    def _summarize(
        self,
        middle: Sequence[Item],
        previous: HandoffSummary | None,
        plan: TailPlan,
        kept_tokens: int = 0,
        sections_tokens: int = 0,
    ) -> tuple[HandoffSummary, SummaryResult]:
        settings = self.settings
        summarizer = self.host.summarizer(settings.summarizer)
        self.summarizer_used = settings.summarizer
        covered = (previous.covered_tokens if previous is not None else 0) + sum(
            (it.stored.token_count or it.tokens) if it.stored is not None else it.tokens
            for it in middle
        )
        pool = [*(previous.facts if previous is not None else []), *self.facts]
        # facts are prose and identifiers: about four characters a token
        fact_tokens = sum(len(fact.text) + 12 for fact in pool) // 4
        dialogue = _dialogue_tokens(middle, previous)
        max_output = handoff_tokens(
            settings.threshold_tokens,
            covered,
            kept_tokens,
            fact_tokens,
            None if dialogue is None else dialogue - sections_tokens,
        )
        room = handoff_room(settings.threshold_tokens, kept_tokens)
        own_titles = {section.title for section in plan.extra_sections}

        def run(budget: int) -> SummaryResult:
            return _checked(
                self._run_summarizer(summarizer, middle, previous, plan, budget), summarizer
            )

        try:
            result = self._fitted(run, summarizer, max_output, room, own_titles)
        except SummarizerError as error:
            self._fail(error)
            result = self._fallback(middle, previous, max_output, room, own_titles, error)
        except Exception as exc:  # a third-party summarizer's bug: a non-aborting failure
            bug = SummarizerError(
                "other", f"{type(exc).__name__}: {exc}", summarizer=summarizer.name
            )
            self._fail(bug)
            result = self._fallback(middle, previous, max_output, room, own_titles, bug)
        else:
            self.state.record_summary_success()
        summary = result.summary.model_copy(deep=True)
        summary.extra = [s for s in summary.extra if s.title not in own_titles]
        summary.extra.extend(plan.extra_sections)
        summary.summarizer = result.summarizer or summarizer.name
        summary.compression_index = self.request.compression_index
        summary.covered_tokens = covered
        summary.covered_dialogue_tokens = dialogue
        return summary, result

    def _fitted(
        self,
        run: Callable[[int], SummaryResult],
        summarizer: Summarizer,
        max_output: int,
        room: int,
        replaced: set[str],
    ) -> SummaryResult:
        """``run(max_output)``, written again in a smaller budget when an in-process
        summarizer's handoff takes more tokens than the window leaves it (``room``,
        :func:`handoff_room`; the room is an upper bound, a handoff over its budget but
        within the room stands).

        A summarizer that calls no model sizes its text in characters (about four a
        token); code, paths and logs take more tokens a character, so its handoff can
        overshoot, and the view after the compaction the share of the threshold it
        should leave free. Such a summarizer costs no call, so it runs once more in
        the budget cut by the excess (``max_output * room // tokens``). A handoff that
        reports a model's usage, or comes from a summarizer that is not in process, is
        bounded by the model's own output limit and never asked twice. The handoff is
        measured as the view will hold it: without its sections titled like the tail
        strategy's (``replaced``), which the tail's own replace and which the room
        already left out. When the second run fails, the first handoff stands.
        """
        result = run(max_output)
        if not summarizer.in_process or result.usage is not None:
            return result
        shown = result.summary.model_copy(
            update={"extra": [s for s in result.summary.extra if s.title not in replaced]}
        )
        tokens = self.count(Message(role="user", content=shown.render()))
        if tokens <= room * (1 + REFIT_SLACK):
            return result
        smaller = max(1, max_output * room // tokens)
        noted = len(self.notes)
        failure: Exception | None = None
        try:
            again = run(smaller)
        except Exception as exc:  # the first handoff is a good one: it stands
            failure = exc
        # the run's own remarks (the input bound, the chunks) are said once
        added = self.notes[noted:]
        del self.notes[noted:]
        self.notes.extend(note for note in added if note not in self.notes)
        if failure is not None:
            self.notes.append(
                f"handoff kept at {tokens} tokens of {room}: writing it again in {smaller} "
                f"failed ({type(failure).__name__}: {failure})"
            )
            return result
        self.notes.append(f"handoff written again in {smaller} tokens: it took {tokens} of {room}")
        return again

    def _fail(self, error: SummarizerError) -> None:
        seconds = self.state.record_summary_failure(self.engine._clock(), self.engine.settings)
        self.notes.append(f"summary failed ({error.kind}): {error}; cooldown {seconds:.0f}s")
        if error.aborts:
            raise _Aborted(
                f"summary failed ({error.kind}): {error}; session left unchanged"
            ) from error
        if self.settings.abort_on_summary_failure and not self.request.manual:
            raise _Aborted(
                f"summary failed ({error.kind}) and abort_on_summary_failure is set; "
                "session left unchanged until a manual compress"
            ) from error

    def _fallback(
        self,
        middle: Sequence[Item],
        previous: HandoffSummary | None,
        max_output: int,
        room: int,
        replaced: set[str],
        error: SummarizerError,
    ) -> SummaryResult:
        name = self.engine.fallback_summarizer
        if name == self.settings.summarizer:
            raise _Aborted(f"summary failed ({error.kind}) and the fallback is the same summarizer")
        fallback = self.host.summarizer(name)
        bounded = self._input(middle, fallback, None)
        messages = [entry for chunk in bounded.chunks for entry in chunk]

        def run(budget: int) -> SummaryResult:
            return _checked(
                fallback.summarize(self._summary_request(messages, previous, budget)), fallback
            )

        try:
            result = self._fitted(run, fallback, max_output, room, replaced)
        except SummarizerError as second:
            raise _Aborted(
                f"summary failed ({error.kind}) and fallback {name!r} failed too: {second}"
            ) from second
        self.fallback_used = True
        self.summarizer_used = name
        self.notes.append(f"used fallback summarizer {name!r}")
        return result

    def _input(
        self, middle: Sequence[Item], summarizer: Summarizer, chunk: int | None
    ) -> SummaryInput:
        total = self.settings.summary_input_tokens
        if summarizer.context_length is not None:
            window = summarizer.context_length - SUMMARY_PROMPT_OVERHEAD - 4_000
            total = max(1_000, min(total, window))
        per_message = max(500, total // 8)
        return build_summary_input(
            middle, total=total, per_message=per_message, chunk=min(chunk or total, total)
        )

    def _summary_request(
        self,
        entries: Sequence[tuple[Message, int | None, int]],
        previous: HandoffSummary | None,
        max_output: int,
        facts: list[HandoffFact] | None = None,
    ) -> SummaryRequest:
        request = self.request
        return SummaryRequest(
            session_id=request.session_id,
            messages=[_without_reasoning(message) for message, _rid, _tokens in entries],
            recovery_ids=[rid for _message, rid, _tokens in entries],
            previous_summary=previous,
            insights=list(request.insights),
            focus=request.focus,
            model=request.model,
            max_output_tokens=max_output,
            facts=self.facts if facts is None else facts,
            head_request=self.head_request,
        )

    def _run_summarizer(
        self,
        summarizer: Summarizer,
        middle: Sequence[Item],
        previous: HandoffSummary | None,
        plan: TailPlan,
        max_output: int,
    ) -> SummaryResult:
        prefix = self._prefix(summarizer, max_output)
        bounded = self._input(middle, summarizer, plan.digest_chunks)
        if bounded.omitted_ids:
            self.notes.append(
                f"{len(bounded.omitted_ids)} oldest middle message(s) exceeded the summary input "
                "bound; they stay searchable and indexed"
            )
        if prefix is not None:
            entries = [entry for chunk in bounded.chunks for entry in chunk]
            summary_request = self._summary_request(entries, previous, max_output)
            summary_request.prefix_messages = prefix
            summary_request.prefix_tools = self.request.tools
            result = summarizer.summarize(summary_request)
            self._add_usage(result.usage)
            return result
        running = previous
        last: SummaryResult | None = None
        chunks = bounded.chunks or [[]]
        for number, chunk in enumerate(chunks):
            # each fact goes with the chunk holding its message (the last chunk takes the
            # facts of messages the input bound left out, and those of a turn's draft rows,
            # which have no id and are the newest), so each is handed over once
            if number == len(chunks) - 1:
                shown = {rid for c in chunks[:-1] for _m, rid, _t in c if rid is not None}
                facts = [f for f in self.facts if f.message_id not in shown]
            else:
                ids = {rid for _m, rid, _t in chunk if rid is not None}
                facts = [f for f in self.facts if f.message_id in ids]
            last = summarizer.summarize(self._summary_request(chunk, running, max_output, facts))
            self._add_usage(last.usage)
            running = last.summary
        if len(bounded.chunks) > 1:
            self.notes.append(f"digest of the middle in {len(bounded.chunks)} chunks")
        if last is None:  # pragma: no cover - the loop runs at least once
            raise HermesError("internal: no summary chunk was summarized")
        return last

    def _prefix(self, summarizer: Summarizer, max_output: int) -> list[Message] | None:
        if not self.settings.summary_prefix_reuse:
            return None
        window = summarizer.context_length
        needed = (
            self.request.system_tokens + self.tokens_before + max_output + SUMMARY_PROMPT_OVERHEAD
        )
        if window is not None and needed > window:
            self.notes.append(
                f"summary_prefix_reuse skipped: the prefix ({needed} tokens with output) exceeds "
                f"the summarizer window ({window})"
            )
            return None
        prefix: list[Message] = []
        if self.request.system_prompt:
            prefix.append(Message(role="system", content=self.request.system_prompt))
        for row in self.request.messages:
            message = row.message
            if row.api_content is not None:
                message = message.model_copy(update={"content": row.api_content})
            prefix.append(message)
        return prefix

    def _add_usage(self, usage: Usage | None) -> None:
        if usage is None:
            return
        if self.usage is None:
            self.usage = usage.model_copy()
            return
        self.usage = Usage(
            input_tokens=self.usage.input_tokens + usage.input_tokens,
            output_tokens=self.usage.output_tokens + usage.output_tokens,
            cache_read_tokens=self.usage.cache_read_tokens + usage.cache_read_tokens,
            cache_write_tokens=self.usage.cache_write_tokens + usage.cache_write_tokens,
            reasoning_tokens=self.usage.reasoning_tokens + usage.reasoning_tokens,
            model=usage.model or self.usage.model,
        )


def _head_end(body: Sequence[Item], protect: int, limit: int) -> int:
    """Where the protected head ends: after its ``protect``-th message that no harness
    injected (a harness's caveats, command wrappers and environment notices before the
    task do not use up the head, so the task is in it), at most at ``limit``."""
    if protect <= 0:
        return 0
    counted = 0
    for index, item in enumerate(body[:limit]):
        if item.message.harness is None:
            counted += 1
            if counted == protect:
                return index + 1
    return min(limit, len(body))


def _dialogue_tokens(middle: Sequence[Item], previous: HandoffSummary | None) -> int | None:
    """Tokens of the conversation's own words the handoff stands for, the previous one's too.

    The user's real messages and the answers that closed a turn (harness text and tool
    traffic left out). None when a previous handoff does not say (written before this
    was counted): its history's words are unknown, so they bound nothing.
    """
    before = 0
    if previous is not None and previous.covered_tokens:
        if previous.covered_dialogue_tokens is None:
            return None
        before = previous.covered_dialogue_tokens
    messages = [it.message for it in middle]
    closing = closing_answers(messages)
    own = sum(
        (it.stored.token_count or it.tokens) if it.stored is not None else it.tokens
        for position, it in enumerate(middle)
        if position in closing or it.is_real_user
    )
    return before + own


def _without_reasoning(message: Message) -> Message:
    """``message`` with inline reasoning blocks removed from its text content."""
    if message.role != "assistant" or not isinstance(message.content, str):
        return message
    text = strip_reasoning(message.content)
    return message if text == message.content else message.model_copy(update={"content": text})


def _checked(result: SummaryResult, summarizer: Summarizer) -> SummaryResult:
    """``result`` with inline reasoning removed; an empty handoff is a summarizer failure.

    :raises SummarizerError: (kind ``malformed``, so the fallback policy applies)
        when no standard section has any text left.
    """
    summary = result.summary
    cleaned = {
        attr: strip_reasoning(str(getattr(summary, attr)))
        for attr, _title in HandoffSummary.STANDARD_TITLES
    }
    if not any(value.strip() for value in cleaned.values()):
        raise SummarizerError(
            "malformed", "the handoff has no content in any section", summarizer=summarizer.name
        )
    extra = [
        section.model_copy(update={"body": strip_reasoning(section.body)})
        for section in summary.extra
    ]
    cleaned_summary = summary.model_copy(update={**cleaned, "extra": extra})
    return result.model_copy(update={"summary": cleaned_summary})
