"""Importer for Gemini CLI session files (``gemini-cli``).

Google's Gemini CLI records each chat session as ONE JSON document (not
JSONL), rewritten whole after every change:
``~/.gemini/tmp/<project hash>/chats/session-<time>-<id>.json`` (Entire stores
it as ``full.jsonl``)::

    {"sessionId", "projectHash", "startTime", "lastUpdated", "messages": [record...]}

Every record has ``id``, ``timestamp``, ``type`` and ``content``:

* ``user``: what the user sent, a user message (verbatim); ``System: Please
  continue.``, the turn Gemini CLI sends by itself after a model stream that
  came back invalid, is marked ``harness="gemini_cli.continue"`` (flag
  ``injected``);
* ``gemini``: one model response, an assistant message with its ``content``
  and, for each of its ``toolCalls`` (``{id, name, args, result, status,
  ...}``), a function call (the record's id and name, ``json.dumps(args)``),
  followed by one tool message per call: the ``output`` of the call's
  ``functionResponse`` (its ``error`` when the call failed or was cancelled;
  any other response shape as JSON text, a text part as its text, an image
  as ``[inlineData <mime type>]``). A call without a ``result`` gets the
  builder's marked synthetic result. ``thoughts`` (reasoning summaries) are
  not replayed, counted in ``skipped`` as ``gemini.thought``; ``tokens``,
  ``model`` and the calls' ``status`` (``tool_errors``, ``cancelled_calls``)
  feed metadata; ``resultDisplay``, ``displayName`` and ``description`` are
  what the terminal showed and are not imported;
* ``info``, ``warning``, ``error``: notices the CLI showed the user (an
  update available, a hook that failed, an API error); they never reach the
  model's history, so they are skipped (``message.<type>``). A type not known
  here is skipped as ``unknown.<type>``.

Gemini CLI adds a response's tool calls to the last record when that is a
``gemini`` record, and starts an empty ``gemini`` record for them otherwise,
so a notice written while a call waited for approval splits one response in
two: a ``gemini`` record with no text and no thoughts right after notices
that follow a ``gemini`` record continues that record's assistant message
(counted as ``calls_rejoined_after_notice``), as the CLI would have written
it without the notice. A session holding no ``user`` or ``gemini`` record
(only a notice) has nothing to import and is refused.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_hookspecs import (
    ImportedConversation,
    Importer,
    ImportFormatError,
    Recognition,
    hookimpl,
)

from .builder import CallSpec, ConversationBuilder, earliest_timestamp
from .harness import GEMINI_CLI
from .reading import MAJORITY, ImportLimits, decode_head, load_json_document

FORMAT = "gemini-cli"
#: record types that are the conversation the model saw
_CONVERSATION = frozenset({"user", "gemini"})
#: record types that are notices the CLI showed the user, never sent to the model
_NOTICES = frozenset({"info", "warning", "error"})
_TYPES = _CONVERSATION | _NOTICES
_TOKEN_KEYS = ("input", "output", "cached", "thoughts", "tool", "total")
_SPACE = re.compile(r"\s*")


class GeminiCliImporter(Importer):
    """Gemini CLI ``~/.gemini/tmp/<project>/chats/session-*.json`` files."""

    name = FORMAT
    description = "Gemini CLI session JSON ({sessionId, projectHash, messages: [...]})"

    def __init__(self, *, limits: ImportLimits | None = None) -> None:
        self.limits = limits

    def sniff(self, path: Path, head: bytes) -> bool:
        return self.recognise(path, head).matched

    def recognise(self, path: Path, sample: bytes) -> Recognition:
        return _judge(_scan_head(decode_head(sample)))

    def load(self, path: Path) -> list[ImportedConversation]:
        document = load_json_document(path, self.limits)
        if not isinstance(document, dict):
            raise ImportFormatError(
                f'{path}:1: expected a Gemini CLI session object ({{"sessionId", "messages":'
                f" [...]}}), got {type(document).__name__}"
            )
        records = document.get("messages")
        if not isinstance(records, list):
            got = type(records).__name__ if "messages" in document else "no 'messages' key"
            raise ImportFormatError(
                f"{path}:1: the session's 'messages' is not a list ({got}; not a Gemini CLI"
                " session?)"
            )
        return [_conversation(path, document, records)]


# -- detection -----------------------------------------------------------------------------
@dataclass
class _Head:
    """What the first bytes of a file show of a session document."""

    is_object: bool = False
    #: top-level keys whose value was read whole (``messages`` once its list opened)
    keys: set[str] = field(default_factory=set)
    #: the complete message records in the sample
    messages: list[Any] = field(default_factory=list)
    #: another JSON value follows the first object: JSONL, not one document
    more_values: bool = False


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _scan_head(data: bytes) -> _Head:
    """The top-level keys and complete messages of a document's first bytes (may be cut)."""
    text = data.decode("utf-8", errors="replace")
    head = _Head()
    at = _skip(text, 0)
    if not text.startswith("{", at):
        return head
    head.is_object = True
    decoder = json.JSONDecoder()
    at += 1
    try:
        while True:
            at = _skip(text, at)
            if text.startswith("}", at):
                head.more_values = bool(text[at + 1 :].strip())
                return head
            key, at = decoder.raw_decode(text, at)
            at = _skip(text, at)
            if not isinstance(key, str) or not text.startswith(":", at):
                return head
            at = _skip(text, at + 1)
            if key == "messages" and text.startswith("[", at):
                head.keys.add(key)
                at = _scan_list(text, at + 1, head.messages, decoder)
            else:
                _, at = decoder.raw_decode(text, at)
                head.keys.add(key)
            at = _skip(text, at)
            if text.startswith(",", at):
                at += 1
            elif not text.startswith("}", at):
                return head
    except (json.JSONDecodeError, RecursionError):  # the sample ends (or breaks) in a value
        return head


def _scan_list(text: str, at: int, out: list[Any], decoder: json.JSONDecoder) -> int:
    """Append the list's items starting at ``at`` to ``out``; the position after its ``]``."""
    while True:
        at = _skip(text, at)
        if text.startswith("]", at):
            return at + 1
        value, at = decoder.raw_decode(text, at)
        out.append(value)
        at = _skip(text, at)
        if text.startswith(",", at):
            at += 1
        elif not text.startswith("]", at):
            raise json.JSONDecodeError("expected ',' or ']'", text, at)


def _judge(head: _Head) -> Recognition:
    if not head.is_object:
        return Recognition(matched=False, reason="not a JSON object document")
    if head.more_values:
        return Recognition(
            matched=False, reason="several JSON values (JSONL), not one session document"
        )
    own = [m for m in head.messages if isinstance(m, dict) and m.get("type") in _TYPES]
    session = bool({"sessionId", "projectHash"} & head.keys) or any(
        m["type"] == "gemini" for m in own
    )
    if head.messages:
        share = len(own) / len(head.messages)
        if session and share >= MAJORITY:
            return Recognition(
                matched=True, score=share, reason="a session document with user/gemini messages"
            )
        if not session:
            reason = "a 'messages' list but no sessionId, projectHash or gemini record"
        else:
            reason = (
                f"{len(head.messages) - len(own)} of {len(head.messages)} messages are not"
                " Gemini CLI records (type user, gemini, info, warning or error)"
            )
        return Recognition(matched=False, score=0.5 * share, reason=reason)
    if {"sessionId", "projectHash"} <= head.keys:
        return Recognition(
            matched=True, score=0.6, reason="sessionId and projectHash (no whole message sampled)"
        )
    if head.keys & {"sessionId", "projectHash", "startTime", "lastUpdated"}:
        return Recognition(
            matched=False,
            score=0.3,
            reason="a JSON object with some session keys but no sessionId, projectHash and"
            " messages",
        )
    return Recognition(
        matched=False,
        reason='not a Gemini CLI session ({"sessionId", "projectHash", "messages": [...]})',
    )


# -- loading -------------------------------------------------------------------------------
@dataclass
class _Stats:
    """What the records say about the session besides its messages."""

    skipped: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    tokens: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    conversation_records: int = 0


def _conversation(path: Path, document: dict[str, Any], records: list[Any]) -> ImportedConversation:
    builder = ConversationBuilder(str(path))
    stats = _Stats()
    #: key of the assistant turn that notices alone follow (a split response continues it)
    resumable: str | None = None
    after_notice = False
    for index, record in enumerate(records):
        builder.where = f"messages[{index}]"
        if not isinstance(record, dict):
            raise builder.error(None, f"expected a message object, got {type(record).__name__}")
        kind = record.get("type")
        if not isinstance(kind, str) or not kind:
            raise builder.error(
                None, "message has no 'type' (expected user, gemini, info, warning or error)"
            )
        if kind == "user":
            stats.conversation_records += 1
            _user(builder, record, stats)
            resumable, after_notice = None, False
        elif kind == "gemini":
            stats.conversation_records += 1
            key = f"gemini-{index}"
            if resumable is not None and after_notice and _continues(record):
                key = resumable
                builder.counts["calls_rejoined_after_notice"] += 1
            if _gemini(builder, record, key, stats):
                resumable = key
            after_notice = False
        elif kind in _NOTICES:
            stats.skipped[f"message.{kind}"] += 1
            after_notice = True
        else:  # a record type not known here: skipped, and no response is rejoined across it
            stats.skipped[f"unknown.{kind}"] += 1
            resumable, after_notice = None, False
    builder.where = ""
    if not stats.conversation_records:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(stats.skipped.items())) or "none"
        raise ImportFormatError(
            f"{path}:1: the session holds no user or gemini message (records: {kinds});"
            " nothing to import"
        )
    return _build(path, builder, document, records, stats)


def _continues(record: dict[str, Any]) -> bool:
    """A record the CLI started only for tool calls (no text, no thoughts of its own)."""
    return (
        not _content_text(record.get("content"), Counter()).strip()
        and not record.get("thoughts")
        and bool(record.get("toolCalls"))
    )


def _user(builder: ConversationBuilder, record: dict[str, Any], stats: _Stats) -> None:
    text = _content_text(record.get("content"), stats.skipped)
    if not text.strip():
        stats.skipped["message.user_empty"] += 1
        return
    harness = GEMINI_CLI.whole(text)
    flags = ("injected",) if harness else ()
    builder.plain("user", text, line=0, flags=flags, harness=harness)


def _gemini(builder: ConversationBuilder, record: dict[str, Any], key: str, stats: _Stats) -> bool:
    """Add the response's assistant message and tool results; False when it held nothing."""
    thoughts = record.get("thoughts")
    if isinstance(thoughts, list) and thoughts:
        stats.skipped["gemini.thought"] += len(thoughts)
    model = record.get("model")
    if isinstance(model, str) and model:
        stats.models[model] += 1
    tokens = record.get("tokens")
    if isinstance(tokens, dict):
        for name in _TOKEN_KEYS:
            value = tokens.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                stats.tokens[name] += value
    text = _content_text(record.get("content"), stats.skipped)
    calls = _tool_calls(builder, record, stats)
    if not text.strip() and not calls:
        stats.skipped["message.gemini_empty"] += 1
        return False
    builder.assistant(text or None, [spec for spec, _ in calls], line=0, key=key)
    for spec, result in calls:
        if result is not None:
            builder.tool_result(spec.id, result, line=0)
    return True


def _tool_calls(
    builder: ConversationBuilder, record: dict[str, Any], stats: _Stats
) -> list[tuple[CallSpec, str | None]]:
    """Each tool call of a ``gemini`` record and the text of its result (None: no result)."""
    raw = record.get("toolCalls")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise builder.error(None, f"'toolCalls' is {type(raw).__name__}, not a list")
    out: list[tuple[CallSpec, str | None]] = []
    for position, call in enumerate(raw):
        if not isinstance(call, dict):
            raise builder.error(None, f"toolCalls[{position}] is not an object")
        call_id, name = call.get("id"), call.get("name")
        if not isinstance(call_id, str) or not call_id:
            raise builder.error(None, f"toolCalls[{position}] has no 'id'")
        if not isinstance(name, str) or not name:
            raise builder.error(None, f"toolCalls[{position}] ({call_id!r}) has no 'name'")
        args = call.get("args")
        arguments = json.dumps({} if args is None else args, ensure_ascii=False)
        status = call.get("status")
        if isinstance(status, str) and status:
            stats.statuses[status] += 1
        out.append((CallSpec(id=call_id, name=name, arguments=arguments), _result_text(call)))
    return out


def _result_text(call: dict[str, Any]) -> str | None:
    """What the model received for ``call``: its result parts as text (None: none recorded)."""
    result = call.get("result")
    if result is None:
        return None
    parts = result if isinstance(result, list) else [result]
    if not parts:
        return None
    return "\n".join(_part_text(part) for part in parts)


def _content_text(content: Any, skipped: Counter[str]) -> str:
    """A record's ``content`` (a string, or Gemini parts) as text; thought parts are counted."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    texts = []
    for part in parts:
        if isinstance(part, dict) and part.get("thought") is True:
            skipped["gemini.thought"] += 1
            continue
        texts.append(_part_text(part))
    return "\n".join(texts)


def _part_text(part: Any) -> str:
    """One Gemini API part as text: a function response, text, or a placeholder for data."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return json.dumps(part, ensure_ascii=False)
    if "functionResponse" in part:
        return _response_text(part["functionResponse"])
    if isinstance(part.get("text"), str):
        return str(part["text"])
    for kind, detail in (("inlineData", "mimeType"), ("fileData", "fileUri")):
        data = part.get(kind)
        if isinstance(data, dict):
            what = data.get(detail)
            return f"[{kind} {what}]" if isinstance(what, str) and what else f"[{kind}]"
    return json.dumps(part, ensure_ascii=False)


def _response_text(function_response: Any) -> str:
    """A ``functionResponse``'s ``response``: its ``output``, its ``error``, or its JSON."""
    if not isinstance(function_response, dict):
        return json.dumps(function_response, ensure_ascii=False)
    response = function_response.get("response")
    if isinstance(response, str):
        return response
    if isinstance(response, dict) and len(response) == 1:
        (only,) = response.values()
        if next(iter(response)) in ("output", "error"):
            return only if isinstance(only, str) else json.dumps(only, ensure_ascii=False)
    if response is None:
        rest = {k: v for k, v in function_response.items() if k not in ("id", "name")}
        return json.dumps(rest, ensure_ascii=False)
    return json.dumps(response, ensure_ascii=False)


def _build(
    path: Path,
    builder: ConversationBuilder,
    document: dict[str, Any],
    records: list[Any],
    stats: _Stats,
) -> ImportedConversation:
    session_id = document.get("sessionId")
    for key, name in (("session_id", "sessionId"), ("project_hash", "projectHash")):
        if isinstance(document.get(name), str):
            builder.metadata[key] = document[name]
    if isinstance(document.get("lastUpdated"), str):
        builder.metadata["last_updated"] = document["lastUpdated"]
    builder.metadata["message_records"] = len(records)
    builder.metadata["tool_errors"] = stats.statuses["error"]
    builder.metadata["cancelled_calls"] = stats.statuses["cancelled"]
    if stats.tokens:
        builder.metadata["tokens"] = dict(stats.tokens)
    stamps = [document.get("startTime")]
    stamps += [r.get("timestamp") for r in records if isinstance(r, dict)]
    summary = document.get("summary")
    return builder.build(
        source_format=FORMAT,
        skipped=dict(stats.skipped),
        conversation_id=session_id
        if isinstance(session_id, str) and session_id
        else path.name.split(".")[0],
        title=summary if isinstance(summary, str) else "",
        model=stats.models.most_common(1)[0][0] if stats.models else "",
        started_at=earliest_timestamp(stamps),
    )


@hookimpl
def register_importers(register: Callable[[Importer], None]) -> None:
    """Register the ``gemini-cli`` importer."""
    register(GeminiCliImporter())
