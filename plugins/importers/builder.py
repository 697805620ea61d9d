"""Assemble chat-completions messages from transcript events, keeping tool calls paired.

Each importer feeds a :class:`ConversationBuilder` in file order: plain
messages, assistant turns (merged by a key such as Claude Code's
``message.id``), extra tool calls, tool results, and positional markers
(compaction boundaries). The builder

* keeps the tool results of a turn right after it, moving any user, system
  or marker entry that arrived while calls were still open to after the
  results (counted as ``reordered``);
* answers a call that never got a result with a synthetic tool message when
  the conversation goes on after it (counted as ``synthetic_tool_results``),
  and the calls the transcript leaves open at its very end with
  :data:`FINAL_SYNTHETIC_RESULT` (counted as ``synthetic_final_results``;
  ``metadata["unanswered_final_calls"]`` says how many), so no call is ever
  left dangling;
* gives a tool result that arrives before any assistant turn, for a call the
  transcript never shows (a session continued from an earlier file), the
  synthetic call :data:`CALL_BEFORE_START` (counted as
  ``synthetic_calls_before_start``), so its output is kept and paired;
* renames a call id that repeats within the conversation (``renamed_call_ids``);
* validates every message and the whole sequence before handing it out.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from hermes_hookspecs import ImportedConversation, ImportFormatError, Message

from .sequence import check_sequence


def parse_timestamp(value: object) -> dt.datetime | None:
    """A transcript's timestamp as an aware datetime (UTC when it names no zone), or None.

    ISO 8601 (``2026-04-08T12:58:53.226Z``, ``2024-05-01 10:00:00``) is read;
    anything else, and a stamp with no date in UTC, is no timestamp: it dates
    nothing, and the import goes on.
    """
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        parsed.astimezone(dt.UTC)  # a stamp with no UTC date (year 1 east of UTC) is none
    except (ValueError, OverflowError):
        return None
    return parsed


def earliest_timestamp(values: Iterable[object]) -> dt.datetime | None:
    """The earliest of ``values`` that :func:`parse_timestamp` reads (None: none does)."""
    stamps = [stamp for stamp in map(parse_timestamp, values) if stamp is not None]
    return min(stamps, default=None)


#: content of the tool message added for a call whose result was never recorded
SYNTHETIC_RESULT = (
    "[hermes-core import: no tool result was recorded for this call;"
    " the tool was interrupted or its output was not saved]"
)


#: content of the tool message added for a call still open where the transcript ends
FINAL_SYNTHETIC_RESULT = (
    "[hermes-core import: the transcript ends before this call's result was recorded]"
)


#: name and arguments of the call given to a result that arrives before the transcript
#: shows any call (the session began in an earlier file)
CALL_BEFORE_START = (
    "unrecorded_call",
    json.dumps({"note": "made before this transcript begins; the call was not recorded"}),
)


@dataclass(frozen=True)
class CallSpec:
    """One tool call as read from a transcript."""

    id: str
    name: str
    arguments: str
    line: int = 0


@dataclass
class _Call:
    spec: CallSpec
    arguments: str
    result: str | None = None
    result_name: str | None = None
    answered: bool = False
    synthetic: bool = False
    final_id: str = ""


@dataclass
class _Turn:
    key: str | None
    line: int
    texts: list[str] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)

    def any_answered(self) -> bool:
        return any(call.answered for call in self.calls)


@dataclass
class _Plain:
    role: str
    content: str
    line: int
    flags: set[str] = field(default_factory=set)
    name: str | None = None
    harness: str | None = None
    #: calls still unanswered when this message arrived (it is moved after their results)
    waiting: list[_Call] = field(default_factory=list)


@dataclass
class _Marker:
    data: dict[str, Any]


_Entry = _Turn | _Plain | _Marker


class ConversationBuilder:
    """Collects one conversation's events in order; :meth:`build` validates and returns it.

    :param path: the transcript path, used in every error message.
    :param where: a prefix for error locations inside the file (for
        example ``"instance 2"``); lines are still named.
    """

    def __init__(self, path: str, where: str = "") -> None:
        self.path = path
        self.where = where
        self._entries: list[_Entry] = []
        self._deferred: list[_Plain | _Marker] = []
        self.counts: Counter[str] = Counter()
        self.metadata: dict[str, Any] = {}
        #: the synthetic turn holding the calls of results that came before any call
        self._before_start: _Turn | None = None

    # -- locations ---------------------------------------------------------
    def location(self, line: int | None = None) -> str:
        """``path:line`` (plus the ``where`` prefix) for error messages."""
        spot = self.path if line is None or line <= 0 else f"{self.path}:{line}"
        return f"{spot}: {self.where}" if self.where else spot

    def error(self, line: int | None, message: str) -> ImportFormatError:
        """An :class:`ImportFormatError` located at ``line``."""
        return ImportFormatError(f"{self.location(line)}: {message}")

    # -- state helpers -----------------------------------------------------
    def _open_turn(self) -> _Turn | None:
        if self._entries and isinstance(self._entries[-1], _Turn):
            return self._entries[-1]
        return None

    def _has_open_calls(self) -> bool:
        turn = self._open_turn()
        return bool(turn and turn.calls)

    def _flush(self) -> None:
        """Close the open turn: answer leftover calls synthetically, emit deferred entries."""
        if not self._deferred:
            return
        plain = [entry for entry in self._deferred if isinstance(entry, _Plain)]
        turn = self._open_turn()
        if turn is not None and plain:
            self._answer_synthetically(turn)
        for entry in plain:
            if any(call.answered and not call.synthetic for call in entry.waiting):
                self.counts["moved_after_tool_results"] += 1
        self._entries.extend(self._deferred)
        self._deferred = []

    def _answer_synthetically(self, turn: _Turn) -> None:
        for call in turn.calls:
            if not call.answered:
                call.answered = True
                call.synthetic = True
                call.result = SYNTHETIC_RESULT
                self.counts["synthetic_tool_results"] += 1

    def _close_for_new_turn(self) -> None:
        turn = self._open_turn()
        if turn is not None:
            self._answer_synthetically(turn)
        self._flush()

    def _make_call(self, spec: CallSpec) -> _Call:
        if not spec.id:
            raise self.error(spec.line, f"tool call {spec.name!r} has no id")
        if not spec.name:
            raise self.error(spec.line, f"tool call {spec.id!r} has no name")
        arguments = spec.arguments
        try:
            json.loads(arguments)
        except (TypeError, ValueError):
            arguments = json.dumps({"raw_arguments": arguments}, ensure_ascii=False)
            self.counts["unparseable_arguments"] += 1
        return _Call(spec=spec, arguments=arguments)

    # -- events ------------------------------------------------------------
    def plain(
        self,
        role: str,
        content: str,
        *,
        line: int,
        flags: tuple[str, ...] = (),
        name: str | None = None,
        harness: str | None = None,
    ) -> None:
        """A system or user message (deferred while the open turn's calls await results).

        :param harness: the harness construct that wrote the text
            (:attr:`hermes_hookspecs.Message.harness`), None for a person's words.
        """
        if role not in ("system", "user"):
            raise self.error(line, f"unsupported role {role!r} for a plain message")
        entry = _Plain(
            role=role, content=content, line=line, flags=set(flags), name=name, harness=harness
        )
        if self._deferred or self._has_open_calls():
            turn = self._open_turn()
            if turn is not None:
                entry.waiting = [call for call in turn.calls if not call.answered]
            self._deferred.append(entry)
        else:
            self._entries.append(entry)

    def marker(self, **data: Any) -> None:
        """A positional marker (for example a compaction boundary) recorded in metadata."""
        entry = _Marker(dict(data))
        if self._deferred or self._has_open_calls():
            self._deferred.append(entry)
        else:
            self._entries.append(entry)

    def assistant(
        self,
        text: str | None,
        calls: list[CallSpec] | None = None,
        *,
        line: int,
        key: str | None = None,
        flags: tuple[str, ...] = (),
    ) -> None:
        """An assistant turn; merged into the open turn when ``key`` matches its key."""
        turn = self._open_turn()
        if key is not None and turn is not None and turn.key == key:
            target = turn
        else:
            self._close_for_new_turn()
            target = _Turn(key=key, line=line)
            self._entries.append(target)
        if text:
            target.texts.append(text)
        target.flags.update(flags)
        for spec in calls or []:
            target.calls.append(self._make_call(spec))

    def calls(self, specs: list[CallSpec], *, line: int) -> None:
        """Tool calls that continue the current assistant turn, or start one without text.

        They join the open turn while none of its calls has a result (a user or
        system entry deferred in between still goes after the turn's results);
        otherwise a new assistant message begins.
        """
        turn = self._open_turn()
        # a notice deferred between two calls of one turn stays deferred (it goes after
        # the turn's results); a call after a result starts a new assistant message
        if turn is None or turn.any_answered():
            self._close_for_new_turn()
            turn = _Turn(key=None, line=line)
            self._entries.append(turn)
        for spec in specs:
            turn.calls.append(self._make_call(spec))

    def tool_result(
        self,
        call_id: str,
        content: str,
        *,
        line: int,
        name: str | None = None,
    ) -> None:
        """The result of a call of the open assistant turn."""
        turn = self._open_turn()
        if turn is not None:
            for call in turn.calls:
                if call.spec.id == call_id and not call.answered:
                    call.answered = True
                    call.result = content
                    call.result_name = name
                    return
            if any(call.spec.id == call_id for call in turn.calls):
                raise self.error(line, f"second tool result for call id {call_id!r}")
        for entry in reversed(self._entries):
            if isinstance(entry, _Turn) and any(c.spec.id == call_id for c in entry.calls):
                raise self.error(
                    line,
                    f"tool result for call id {call_id!r} arrives after the conversation"
                    f" moved on from its call (line {entry.line})",
                )
        if self._before_start is not None and turn is self._before_start:
            self._call_before_start(turn, call_id, content, line=line, name=name)
            return
        if not any(isinstance(entry, _Turn) for entry in self._entries):
            turn = _Turn(key=None, line=line, flags={"synthetic_call"})
            self._close_for_new_turn()
            self._entries.append(turn)
            self._before_start = turn
            self._call_before_start(turn, call_id, content, line=line, name=name)
            return
        raise self.error(line, f"tool result answers unknown call id {call_id!r}")

    def _call_before_start(
        self, turn: _Turn, call_id: str, content: str, *, line: int, name: str | None
    ) -> None:
        """Answer ``call_id`` with ``content`` through a synthetic call in ``turn``."""
        tool, arguments = CALL_BEFORE_START
        call = self._make_call(CallSpec(id=call_id, name=tool, arguments=arguments, line=line))
        call.answered, call.result, call.result_name = True, content, name
        turn.calls.append(call)
        self.counts["synthetic_calls_before_start"] += 1

    def continues(self, key: str | None) -> bool:
        """Whether an assistant event with ``key`` would merge into the open turn."""
        turn = self._open_turn()
        return key is not None and turn is not None and turn.key == key

    # -- output ------------------------------------------------------------
    def _render(self) -> tuple[list[Message], dict[str, Any]]:
        messages: list[Message] = []
        flags: dict[str, list[int]] = {}
        markers: list[dict[str, Any]] = []
        used_ids: set[str] = set()

        def flag(index: int, names: set[str]) -> None:
            for name in sorted(names):
                flags.setdefault(name, []).append(index)

        def add(data: dict[str, Any], line: int) -> None:
            try:
                messages.append(Message.model_validate(data))
            except PydanticValidationError as exc:
                first = exc.errors()[0]
                spot = ".".join(str(part) for part in first.get("loc", ()))
                detail = f"{spot}: {first.get('msg')}" if spot else str(first.get("msg"))
                raise self.error(line, f"invalid {data.get('role')} message: {detail}") from None

        for entry in self._entries:
            if isinstance(entry, _Marker):
                markers.append({"index": len(messages), **entry.data})
                continue
            if isinstance(entry, _Plain):
                body: dict[str, Any] = {"role": entry.role, "content": entry.content}
                if entry.name:
                    body["name"] = entry.name
                if entry.harness:
                    body["harness"] = entry.harness
                flag(len(messages), entry.flags)
                add(body, entry.line)
                continue
            text = "\n".join(part for part in entry.texts if part)
            if not text and not entry.calls:
                self.counts["dropped_empty_assistant"] += 1
                continue
            tool_calls = []
            for call in entry.calls:
                final = call.spec.id
                if final in used_ids:
                    serial = 2
                    while f"{call.spec.id}-dup{serial}" in used_ids:
                        serial += 1
                    final = f"{call.spec.id}-dup{serial}"
                    self.counts["renamed_call_ids"] += 1
                used_ids.add(final)
                call.final_id = final
                tool_calls.append(
                    {
                        "id": final,
                        "type": "function",
                        "function": {"name": call.spec.name, "arguments": call.arguments},
                    }
                )
            assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
            if tool_calls:
                assistant["tool_calls"] = tool_calls
            flag(len(messages), entry.flags)
            add(assistant, entry.line)
            for call in entry.calls:
                if not call.answered:
                    continue
                if call.synthetic:
                    flag(len(messages), {"synthetic_tool_result"})
                tool: dict[str, Any] = {
                    "role": "tool",
                    "tool_call_id": call.final_id,
                    "content": call.result or "",
                }
                if call.result_name:
                    tool["name"] = call.result_name
                add(tool, entry.line)
        metadata: dict[str, Any] = {}
        if flags:
            metadata["flags"] = flags
        if markers:
            metadata["markers"] = markers
        return messages, metadata

    def build(
        self, *, source_format: str, skipped: dict[str, int] | None = None, **fields: Any
    ) -> ImportedConversation:
        """Validate and return the conversation; raises :class:`ImportFormatError` on problems.

        :param skipped: what the importer read and left out, by kind
            (:attr:`ImportedConversation.skipped`).
        """
        if self._deferred:
            self._flush()
        open_at_end = 0
        turn = self._open_turn()
        if turn is not None:
            for call in turn.calls:
                if not call.answered:
                    call.answered = True
                    call.synthetic = True
                    call.result = FINAL_SYNTHETIC_RESULT
                    open_at_end += 1
            if open_at_end:
                self.counts["synthetic_final_results"] += open_at_end
        messages, rendered = self._render()
        if not messages:
            raise self.error(None, "no messages found")
        problems = check_sequence(messages)
        if problems:
            shown = "; ".join(problems[:3])
            more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
            raise self.error(None, f"imported messages break the tool-call rules: {shown}{more}")
        metadata: dict[str, Any] = dict(self.metadata)
        metadata.update(rendered)
        counts = {key: value for key, value in sorted(self.counts.items()) if value}
        if counts:
            metadata["counts"] = counts
        metadata.setdefault("unanswered_final_calls", open_at_end)
        try:
            return ImportedConversation(
                source_format=source_format,
                source_path=self.path,
                messages=messages,
                metadata=metadata,
                skipped={k: v for k, v in sorted((skipped or {}).items()) if v},
                **fields,
            )
        except PydanticValidationError as exc:
            raise self.error(None, f"invalid conversation record: {exc.errors()[0]}") from None
