"""The ``deterministic`` summarizer: an offline, extractive handoff built from facts.

No model is called. The handoff is made of the facts the engine extracted
from the original middle (:mod:`hermes_plugin_compressor.facts`; the
summarizer extracts them itself when called without them), each line quoting
the session verbatim and naming the message it came from as ``#N`` (the id
``session_open(message_id=N)`` opens). Section by section:

* **Goal** - the user's earliest real request seen (the previous goal, unless the
  head, kept verbatim at first, joined the middle with an earlier one), plus the focus.
* **Constraints** - rules the user set, in their words.
* **Progress** - the digest: the user's requests, the agent's answers, and
  the commands it ran with their outcome, in order, best first within the
  budget (a fact's kind and recency decide), so each compression keeps what
  an engineer resuming the work would ask about.
* **Decisions** - sentences in which the agent states a choice or its reason.
* **Files** - files the agent created or edited, newest first.
* **Next Steps** - the last thing the agent said it would do, and the focus.
* **Critical Context** - exact error lines with the command that produced
  them, and the ``on_pre_compress`` insights.

Harness text (:attr:`Message.harness`) is never quoted as the user's words.
Each section keeps the previous handoff's lines at slightly lower priority,
so re-compressions update the handoff instead of restarting it. The output is
bounded by ``max_output_tokens`` (about four characters a token): the goal,
files and next steps take what they need within small shares, and the facts of
every other section share the rest in one ranking (score per character,
:func:`hermes_plugin_compressor.facts.select_facts`), so no section's room is
wasted while another's best facts are cut. It never raises for content reasons,
which makes it the failure fallback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hermes_hookspecs import (
    HandoffFact,
    HandoffSummary,
    Summarizer,
    SummaryRequest,
    SummaryResult,
)
from hermes_plugin_compressor.facts import WEIGHTS, extract_facts, priority, select_facts

#: share of the output budget the fixed parts may take (chars = tokens * 4 * share);
#: the facts of every section share the rest in one ranking. The goal's share leaves a
#: task as long as a request fact (``MAX_REQUEST_CHARS``) whole from a 32K window up
SHARES = {"goal": 0.08, "files": 0.03, "next_steps": 0.03}
#: characters of section titles and the anchor note, kept free of the budget
SECTION_OVERHEAD = 200
_PROGRESS = {"request", "answer", "command"}
#: the label each fact kind carries in a rendered line, and back
LABELS = {
    "request": "user",
    "constraint": "rule",
    "error": "error",
    "decision": "decided",
    "answer": "agent",
    "command": "ran",
    "file": "file",
}
_KINDS = {label: kind for kind, label in LABELS.items()}
_LINE = re.compile(r"^- #(\d+|\?) (\w+): (.*)$")
#: the facts that did not fit are kept (unrendered) up to this many times the room the
#: facts had, best first: a handoff squeezed by a large tail gets them back at the next
#: compression with room to spare instead of losing them for good
RESERVE_FACTOR = 3
#: a previous handoff's line weighs this much less than a fresh fact of its kind
CARRIED_PENALTY = 0.5  # lines read back from another summarizer's handoff
ANCHOR_NOTE = "#N is a message id: session_open(message_id=N) opens the original."


def render_fact(fact: HandoffFact) -> str:
    anchor = str(fact.message_id) if fact.message_id is not None else "?"
    return f"- #{anchor} {LABELS[fact.kind]}: {fact.text}"


def parse_lines(body: str) -> list[HandoffFact]:
    """The facts of a rendered section, oldest first, at carried-forward priority."""
    out: list[HandoffFact] = []
    lines = [line for line in body.splitlines() if line.startswith("- #")]
    for order, line in enumerate(lines):
        match = _LINE.match(line)
        if match is None or match.group(2) not in _KINDS:
            continue
        kind = _KINDS[match.group(2)]
        mid = None if match.group(1) == "?" else int(match.group(1))
        out.append(
            HandoffFact(
                kind=kind,  # type: ignore[arg-type]
                text=match.group(3),
                message_id=mid,
                position=order - len(lines),  # before every fresh fact
                score=WEIGHTS[kind] - CARRIED_PENALTY + order / max(1, len(lines)),
            )
        )
    return out


def _carried(previous: HandoffSummary) -> list[HandoffFact]:
    """The previous handoff's facts, before every fresh one, at their own scores.

    A handoff this summarizer wrote keeps its facts (``HandoffSummary.facts``, and
    those it had no room for, ``HandoffSummary.reserve``); one written by another
    summarizer is read back from its rendered lines.
    """
    if previous.facts or previous.reserve:
        kept = sorted([*previous.facts, *previous.reserve], key=lambda f: f.position)
        n = len(kept)
        return [f.model_copy(update={"position": i - n}) for i, f in enumerate(kept)]
    out: list[HandoffFact] = []
    for body in (
        previous.progress,
        previous.constraints,
        previous.decisions,
        previous.critical_context,
    ):
        out.extend(parse_lines(body))
    return out


def _reserve(
    pool: Sequence[HandoffFact], chosen: Sequence[HandoffFact], budget_chars: int
) -> list[HandoffFact]:
    """The best facts of ``pool`` left out of ``chosen``, within ``budget_chars``, oldest first.

    Ranked as :func:`~hermes_plugin_compressor.facts.select_facts` ranks (score per
    character), each text once and none that a chosen fact holds already.
    """
    taken = {id(f) for f in chosen}
    seen = {f.text.strip() for f in chosen}
    out: list[HandoffFact] = []
    used = 0
    for fact in sorted(pool, key=lambda f: -priority(f)):
        key = fact.text.strip()
        if id(fact) in taken or not key or key in seen:
            continue
        cost = len(key) + 12
        if used + cost > budget_chars:
            continue
        seen.add(key)
        out.append(fact)
        used += cost
    return sorted(out, key=lambda f: f.position)


#: the message id a goal names at the end of its text: ``... (#32)``
_GOAL_ANCHOR = re.compile(r" \(#(\d+)\)$")
_FOCUS = "\nFocus for what follows: "
#: how a goal names a request kept verbatim before the handoff (the protected head)
_KEPT = " ({}kept verbatim before this summary)"
_KEPT_ANCHOR = re.compile(r" \((?:#\d+, )?kept verbatim before this summary\)$")
#: characters of a request kept before the handoff that its goal quotes (it points at the rest)
KEPT_GOAL_CHARS = 200


def _split_focus(goal: str) -> tuple[str, str]:
    """A goal's text and its focus line (``_FOCUS`` and the focus, or empty).

    The focus line is the last one a handoff appended; a goal that is a focus line
    alone (no request to quote, so no ``(#N)`` anchor) is all focus. A request of
    the user's that merely starts with those words keeps its anchor, and stays the goal.
    """
    at = goal.rfind(_FOCUS)
    if at >= 0:
        return goal[:at], goal[at:]
    if goal.startswith(_FOCUS[1:]) and _GOAL_ANCHOR.search(goal) is None:
        return "", "\n" + goal
    return goal, ""


def _goal_request(goal: str) -> tuple[HandoffFact | None, str]:
    """A previous goal as the request it quoted (None when it names no message id),
    and its focus part. The request is placed by the caller."""
    text, focus = _split_focus(goal)
    match = _GOAL_ANCHOR.search(text)
    if match is None:
        return None, focus
    fact = HandoffFact(
        kind="request",
        text=text[: match.start()],
        message_id=int(match.group(1)),
        score=WEIGHTS["request"],
    )
    return fact, focus


def _render(facts: Sequence[HandoffFact]) -> str:
    return "\n".join(render_fact(f) for f in facts)


class DeterministicSummarizer(Summarizer):
    """Extractive handoff from the middle's facts, with message-id anchors; never calls a model."""

    name = "deterministic"
    context_length = None
    in_process = True  # it calls no model: its input goes nowhere

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        facts = list(request.facts or [])
        if request.facts is None:  # called without the engine's facts: derive them here
            ids: list[int | None] = list(request.recovery_ids)
            ids += [None] * (len(request.messages) - len(ids))
            facts = extract_facts(request.messages, ids)
        budget = max(400, request.max_output_tokens * 4)
        limit = {key: int(budget * share) for key, share in SHARES.items()}
        prev = request.previous_summary or HandoffSummary()

        goal, facts, displaced = self._goal_and_facts(
            prev.goal, facts, limit["goal"], request.head_request
        )
        if request.focus:  # the newest focus replaces the one an earlier handoff carried
            goal = f"{_split_focus(goal)[0]}{_FOCUS}{request.focus}".strip()
        goal = goal[: limit["goal"] + 200]
        files = self._files(facts, prev.files, limit["files"])
        next_steps = self._next_steps(facts, request.focus, limit["next_steps"]) or prev.next_steps
        head = [f"- insight: {insight}" for insight in request.insights]
        # one ranking for every kind: the facts share what the fixed parts leave, so a
        # kind with few facts leaves its room to the others instead of wasting it
        fixed = len(goal) + len(files) + len(next_steps) + sum(len(line) + 1 for line in head)
        room = max(0, budget - fixed - SECTION_OVERHEAD)
        carried = _carried(prev)
        if displaced is not None:  # the oldest fact of all: before the carried ones
            start = min((f.position for f in carried), default=0)
            facts = [displaced.model_copy(update={"position": start - 1}), *facts]
        pool = [f for f in [*carried, *facts] if f.kind != "file"]
        chosen = select_facts(pool, room)
        reserve = _reserve(pool, chosen, room * RESERVE_FACTOR)
        progress = [f for f in chosen if f.kind in _PROGRESS]
        constraints = [f for f in chosen if f.kind == "constraint"]
        decisions = [f for f in chosen if f.kind == "decision"]
        errors = [f for f in chosen if f.kind == "error"]
        summary = HandoffSummary(
            goal=goal,
            constraints=_render(constraints),
            progress=f"{ANCHOR_NOTE}\n{_render(progress)}" if progress else "",
            decisions=_render(decisions),
            files=files,
            next_steps=next_steps,
            critical_context="\n".join([*head, _render(errors)] if errors else head),
            summarizer=self.name,
            facts=chosen,
            reserve=reserve,
        )
        return SummaryResult(summary=summary, summarizer=self.name)

    # -- sections ------------------------------------------------------------------
    def _goal_and_facts(
        self,
        previous: str,
        facts: list[HandoffFact],
        limit: int,
        head: HandoffFact | None = None,
    ) -> tuple[str, list[HandoffFact], HandoffFact | None]:
        """The goal, the facts left to place (the goal's request is not quoted twice), and
        the previous goal when it was replaced, as the request it quoted.

        The goal is the earliest real request seen: the previous goal, unless the
        middle holds a request older than the message the previous goal names
        (``(#N)``; one that names none is kept). That happens once the head, kept
        verbatim at the first compressions, joins a middle: its request is the
        session's task, which becomes the goal then, and the previous goal goes back
        among the facts. While the head still holds a request (``head``,
        :attr:`SummaryRequest.head_request`; the head comes before every middle, so it
        is the earliest), the goal names it with its first :data:`KEPT_GOAL_CHARS`
        characters, as kept verbatim before the handoff: the session's task is not
        ``(none)`` because it sits above the handoff, nor quoted twice.
        """
        first = next((f for f in facts if f.kind == "request"), None)
        stated, _ = _split_focus(previous)  # the previous goal without its focus line
        if _KEPT_ANCHOR.search(stated):  # a pointer to the head is made anew
            previous, stated = previous[len(stated) :].lstrip("\n"), ""
        old, focus = _goal_request(previous) if previous else (None, "")
        # the head comes before every middle, so its request is the earliest seen; a
        # previous goal naming no message (another summarizer's words) is kept
        if head is not None and not (stated and old is None):
            same = old is not None and old.message_id == head.message_id
            return self._kept_goal(head, limit) + focus, facts, None if same else old
        earlier = (
            first is not None
            and first.message_id is not None
            and old is not None
            and old.message_id is not None
            and first.message_id < old.message_id
        )
        if stated and not earlier:  # a focus alone is no goal to keep
            return previous, facts, None
        goal = self._goal(facts, limit) + focus
        rest = [f for f in facts if f is not first]
        return goal, rest, old if earlier else None

    @staticmethod
    def _kept_goal(head: HandoffFact, limit: int) -> str:
        cap = min(limit, KEPT_GOAL_CHARS)
        text = " ".join(head.text.split())
        text = text if len(text) <= cap else text[:cap] + "…"
        return text + _KEPT.format(f"#{head.message_id}, " if head.message_id is not None else "")

    @staticmethod
    def _goal(facts: Sequence[HandoffFact], limit: int) -> str:
        first = next((f for f in facts if f.kind == "request"), None)
        if first is None:
            return ""
        text = first.text if len(first.text) <= limit else first.text[:limit] + "…"
        anchor = f" (#{first.message_id})" if first.message_id is not None else ""
        return text + anchor

    @staticmethod
    def _files(facts: Sequence[HandoffFact], previous: str, limit: int) -> str:
        paths: dict[str, None] = {}
        for fact in reversed(facts):
            if fact.kind == "file":
                paths.setdefault(fact.text, None)
        for value in (v.strip() for v in previous.split(", ")):
            if value:
                paths.setdefault(value, None)
        out: list[str] = []
        used = 0
        for value in paths:
            if used + len(value) + 2 > limit:
                break
            out.append(value)
            used += len(value) + 2
        return ", ".join(out)

    @staticmethod
    def _next_steps(facts: Sequence[HandoffFact], focus: str | None, limit: int) -> str:
        parts: list[str] = []
        last = next((f for f in reversed(facts) if f.kind == "answer"), None)
        if last is not None:
            text = last.text if len(last.text) <= limit else "…" + last.text[-limit:]
            anchor = f" (#{last.message_id})" if last.message_id is not None else ""
            parts.append(f"Last stated by the agent{anchor}: {text}")
        if focus:
            parts.append(f"Focus requested: {focus}")
        return "\n".join(parts)
