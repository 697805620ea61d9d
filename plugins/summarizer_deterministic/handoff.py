"""The ``deterministic`` summarizer: an offline, extractive handoff.

No model is called; every line is copied or mechanically derived from the
messages, with ``message id N`` recovery anchors so session search can open
the original. Section by section:

* **Goal** - the previous goal, else the first user message (cut), plus the focus.
* **Constraints** - user sentences with must / never / don't / always / only ...
* **Progress** - one line per assistant step: its first line of text and the
  tools it called, with the anchor; the previous progress is kept and the
  oldest lines go first when over budget.
* **Decisions** - assistant sentences that state a choice (decided, instead,
  because, I'll ...).
* **Files** - file paths mentioned (files before directories, newest first),
  merged with the previous list.
* **Next Steps** - the last assistant text's closing lines, and the focus.
* **Critical Context** - error lines and exception names (newest first) and
  the ``on_pre_compress`` insights.

The output is bounded by ``max_output_tokens`` (about four characters a token).
It never raises for content reasons, which makes it the failure fallback.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from hermes_hookspecs import HandoffSummary, Message, Summarizer, SummaryRequest, SummaryResult
from hermes_plugin_compressor.identifiers import extract_identifiers
from hermes_plugin_compressor.prune import short_args

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_CONSTRAINT = re.compile(
    r"\b(?:must|never|don't|do not|always|only|should not|shouldn't|avoid|without|required?)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decided|decide|instead|because|I'll|I will|we will|chose|choose|the fix|approach|"
    r"root cause|the issue is|the problem is)\b",
    re.IGNORECASE,
)
#: share of the output budget per section (chars = tokens * 4 * share)
_SHARES = {
    "goal": 0.10,
    "constraints": 0.10,
    "progress": 0.35,
    "decisions": 0.12,
    "files": 0.10,
    "next_steps": 0.08,
    "critical_context": 0.15,
}


def _anchor(message_id: int | None) -> str:
    return f" (message id {message_id})" if message_id is not None else ""


def _first_line(text: str, limit: int = 160) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def _bounded_lines(lines: Sequence[str], limit: int, *, keep_newest: bool) -> str:
    """Join lines within ``limit`` chars, dropping the oldest (or newest) first."""
    ordered = list(reversed(lines)) if keep_newest else list(lines)
    out: list[str] = []
    used = 0
    for line in ordered:
        if used + len(line) + 1 > limit:
            dropped = len(ordered) - len(out)
            out.append(f"- … {dropped} more line(s) omitted; search the session for them")
            break
        out.append(line)
        used += len(line) + 1
    if keep_newest:
        out.reverse()
    return "\n".join(out)


def _merge(previous: str, new: Iterable[str]) -> list[str]:
    lines = [line for line in previous.splitlines() if line.strip() and "omitted;" not in line]
    seen = set(lines)
    for line in new:
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines


class DeterministicSummarizer(Summarizer):
    """Extractive handoff with the seven sections and recovery anchors; never calls a model."""

    name = "deterministic"
    context_length = None

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        messages = request.messages
        ids: list[int | None] = list(request.recovery_ids)
        ids += [None] * (len(messages) - len(ids))
        budget = max(400, request.max_output_tokens * 4)
        limit = {key: int(budget * share) for key, share in _SHARES.items()}
        prev = request.previous_summary or HandoffSummary()

        goal = prev.goal or self._goal(messages, ids, limit["goal"])
        if request.focus:
            goal = f"{goal}\nFocus for what follows: {request.focus}".strip()
        summary = HandoffSummary(
            goal=goal[: limit["goal"] + 200],
            constraints=_bounded_lines(
                _merge(prev.constraints, self._constraints(messages, ids)),
                limit["constraints"],
                keep_newest=False,
            ),
            progress=_bounded_lines(
                _merge(prev.progress, self._progress(messages, ids)),
                limit["progress"],
                keep_newest=True,
            ),
            decisions=_bounded_lines(
                _merge(prev.decisions, self._decisions(messages, ids)),
                limit["decisions"],
                keep_newest=True,
            ),
            files=self._files(messages, prev.files, limit["files"]),
            next_steps=self._next_steps(messages, ids, request.focus, limit["next_steps"])
            or prev.next_steps,
            critical_context=self._critical(
                messages, prev.critical_context, request.insights, limit["critical_context"]
            ),
            summarizer=self.name,
        )
        return SummaryResult(summary=summary, summarizer=self.name)

    # -- sections ------------------------------------------------------------------
    @staticmethod
    def _goal(messages: Sequence[Message], ids: Sequence[int | None], limit: int) -> str:
        for message, mid in zip(messages, ids, strict=True):
            if message.role == "user" and message.kind == "message":
                text = " ".join(message.text().split())
                if len(text) > limit:
                    text = text[:limit] + "…"
                return text + _anchor(mid)
        return ""

    @staticmethod
    def _constraints(messages: Sequence[Message], ids: Sequence[int | None]) -> list[str]:
        out: list[str] = []
        for message, mid in zip(messages, ids, strict=True):
            if message.role != "user" or message.kind != "message":
                continue
            for sentence in _SENTENCE.findall(message.text()):
                sentence = sentence.strip()
                if 12 <= len(sentence) <= 240 and _CONSTRAINT.search(sentence):
                    out.append(f"- {sentence}{_anchor(mid)}")
        return out

    @staticmethod
    def _progress(messages: Sequence[Message], ids: Sequence[int | None]) -> list[str]:
        out: list[str] = []
        for message, mid in zip(messages, ids, strict=True):
            if message.role != "assistant":
                continue
            parts = []
            first = _first_line(message.text())
            if first:
                parts.append(first)
            for call in message.tool_calls or []:
                parts.append(f"{call.function.name}({short_args(call.function.arguments, 80)})")
            if parts:
                out.append("- " + " | ".join(parts) + _anchor(mid))
        return out

    @staticmethod
    def _decisions(messages: Sequence[Message], ids: Sequence[int | None]) -> list[str]:
        out: list[str] = []
        for message, mid in zip(messages, ids, strict=True):
            if message.role != "assistant":
                continue
            for sentence in _SENTENCE.findall(message.text()):
                sentence = sentence.strip()
                if 20 <= len(sentence) <= 240 and _DECISION.search(sentence):
                    out.append(f"- {sentence}{_anchor(mid)}")
        return out[-12:]

    @staticmethod
    def _files(messages: Sequence[Message], previous: str, limit: int) -> str:
        paths: dict[str, None] = {}
        for message in reversed(messages):
            text = message.text()
            for call in message.tool_calls or []:
                text += "\n" + call.function.arguments
            for _kind, value in extract_identifiers(text, ("path",)):
                paths.setdefault(value, None)
        for value in (v.strip() for v in previous.split(", ")):
            if value and "omitted" not in value:
                paths.setdefault(value, None)
        # files (with an extension) before directories and URL-like paths
        ranked = sorted(paths, key=lambda v: "." not in v.rsplit("/", 1)[-1])
        out: list[str] = []
        used = 0
        for value in ranked:
            if used + len(value) + 2 > limit:
                break
            out.append(value)
            used += len(value) + 2
        return ", ".join(out)

    @staticmethod
    def _next_steps(
        messages: Sequence[Message], ids: Sequence[int | None], focus: str | None, limit: int
    ) -> str:
        parts: list[str] = []
        for message, mid in zip(reversed(messages), reversed(ids), strict=True):
            text = message.text().strip()
            if message.role == "assistant" and text:
                lines = [line.strip() for line in text.splitlines() if line.strip()]
                tail = " ".join(lines[-3:])
                if len(tail) > limit:
                    tail = "…" + tail[-limit:]
                parts.append(f"Last stated by the assistant{_anchor(mid)}: {tail}")
                break
        if focus:
            parts.append(f"Focus requested: {focus}")
        return "\n".join(parts)

    @staticmethod
    def _critical(
        messages: Sequence[Message], previous: str, insights: Sequence[str], limit: int
    ) -> str:
        lines = [f"- insight: {insight}" for insight in insights]
        errors: dict[str, None] = {}
        names: dict[str, None] = {}
        for message in reversed(messages):
            for kind, value in extract_identifiers(message.text(), ("error", "exception")):
                (errors if kind == "error" else names).setdefault(value, None)
        if names:
            lines.append("- exceptions seen: " + ", ".join(list(names)[:20]))
        lines.extend(f"- error: {value}" for value in list(errors)[:12])
        merged = _merge(previous, [])
        lines += [line for line in merged if line not in lines]
        return _bounded_lines(lines, limit, keep_newest=False)
