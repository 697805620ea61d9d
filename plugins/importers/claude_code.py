"""Importer for Claude Code session JSONL (``claude-code``).

One file gives one conversation for the main thread, plus one per subagent
(inline sidechains, ``agent_progress`` copies, or the ``subagents/agent-*.jsonl``
files beside the session) and, on request, one per abandoned branch:

* records are deduplicated by ``uuid`` (resumed sessions repeat them);
* the branch that was continued after a rewind is followed
  (:mod:`.claude_branches`); abandoned branches are counted in ``skipped``
  and imported as their own conversations with ``include_abandoned_branches``;
* records are read in the order of their ``parentUuid`` tree: one written
  before its parent (a tool result flushed ahead of the streamed block
  that made the call) follows the parent;
* consecutive ``assistant`` records sharing ``message.id`` are one API
  response written block by block; they merge into one assistant message,
  even when the results of its first calls were written in between;
* ``tool_result`` blocks become ``tool`` messages; text blocks of the same
  record become a following user message;
* harness text is marked with ``Message.harness`` from structure:
  ``isMeta`` and ``isCompactSummary`` records, and the wrapper tags and
  interrupt markers of :mod:`.harness`; a user record mixing harness
  wrappers and typed words is split so the words stay unmarked;
* ``queue-operation``: text typed while the agent worked. An ``enqueue``
  later ``remove``-d was delivered mid-turn and appears nowhere else, so it
  becomes a user message (flag ``queued``; a ``queued_command`` attachment
  repeating it is skipped); a ``dequeue``-d one is repeated as an ordinary
  user record and is skipped; ``popAll`` took it back unsent;
* ``system`` records: ``compact_boundary`` and ``microcompact_boundary``
  become markers in ``metadata["markers"]``; every other record type is
  skipped and counted in ``skipped`` (``transcripts/FORMATS.md`` lists them).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from hermes_hookspecs import (
    ImportedConversation,
    Importer,
    ImportFormatError,
    Recognition,
    hookimpl,
)

from .builder import ConversationBuilder, earliest_timestamp
from .claude_branches import branch_with_context, causal_order, follow_branches
from .claude_records import Queue, feed_assistant, feed_system, feed_user
from .claude_threads import (
    MESSAGE_TYPES,
    Record,
    Thread,
    agent_calls,
    agent_label,
    first_line_of,
    first_str,
    root_prompt,
    split_threads,
    task_prompts,
    title_of,
)
from .reading import (
    ImportLimits,
    decode_head,
    first_line,
    iter_jsonl,
    judge_sample,
    sample_records,
)

FORMAT = "claude-code"
#: ``continued`` (default) or ``all``: whether abandoned branches become conversations too
BRANCHES_ENV = "HERMES_CORE_IMPORT_BRANCHES"
#: record types read for metadata only or deliberately left out (counted in ``skipped``)
_SKIPPED_TYPES = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "file-history-delta",
        "progress",
        "pr-link",
        "permission-mode",
        "mode",
        "custom-title",
        "ai-title",
        "agent-name",
        "last-prompt",
        "bridge-session",
        "tag",
    }
)
_KNOWN_TYPES = MESSAGE_TYPES | _SKIPPED_TYPES | {"queue-operation", "attachment"}
#: keys only Claude Code records carry
_CLAUDE_KEYS = frozenset({"parentUuid", "leafUuid", "isSidechain", "sessionId", "uuid"})
#: the same, found in a first record cut short by the sample size
_SNIFF_KEYS = re.compile(
    rb'"(parentUuid|leafUuid|isSidechain)"\s*:'
    rb'|"type"\s*:\s*"(file-history-snapshot|queue-operation|permission-mode|last-prompt)"'
)


class ClaudeCodeImporter(Importer):
    """Claude Code ``~/.claude/projects/*/<session>.jsonl`` files.

    :param include_queued: turn ``queue-operation`` text delivered mid-turn
        into user messages.
    :param include_progress_subagents: import the subagent turns found in
        2.x ``agent_progress`` records as extra conversations.
    :param include_subagent_files: import ``<session>/subagents/agent-*.jsonl``
        beside the file as extra conversations.
    :param include_abandoned_branches: import each branch abandoned by a
        rewind as an extra conversation (its context up to the fork, then
        the abandoned turns); None (the default) reads
        ``HERMES_CORE_IMPORT_BRANCHES`` (``continued``, the default, or ``all``).
    :param limits: read caps (default: :meth:`ImportLimits.from_env`).
    """

    name = FORMAT
    description = "Claude Code session JSONL (main thread, subagents, rewinds)"

    def __init__(
        self,
        *,
        include_queued: bool = True,
        include_progress_subagents: bool = True,
        include_subagent_files: bool = True,
        include_abandoned_branches: bool | None = None,
        limits: ImportLimits | None = None,
    ) -> None:
        self.include_queued = include_queued
        self.include_progress_subagents = include_progress_subagents
        self.include_subagent_files = include_subagent_files
        self.include_abandoned_branches = include_abandoned_branches
        self.limits = limits

    def sniff(self, path: Path, head: bytes) -> bool:
        return self.recognise(path, head).matched

    def recognise(self, path: Path, sample: bytes) -> Recognition:
        values, bad = sample_records(sample)
        objects = [v for v in values if isinstance(v, dict)]
        if not objects:
            line = first_line(decode_head(sample))
            if (
                line.startswith(b"{")
                and _SNIFF_KEYS.search(line[:4000])
                and b'"payload"' not in line[:400]
            ):
                return Recognition(
                    matched=True, score=0.6, reason="a first record with Claude Code's keys"
                )
            return Recognition(matched=False, reason="no JSON object on any complete line")
        typed = [v for v in objects if isinstance(v.get("type"), str)]
        known = [v for v in typed if v["type"] in _KNOWN_TYPES and "payload" not in v]
        claude = [v for v in known if _CLAUDE_KEYS & v.keys() or v["type"] in _SKIPPED_TYPES]
        return judge_sample(
            objects,
            claude,
            bad,
            what="Claude Code",
            near_score=0.2 * len(known) / len(objects),
            none_reason=f"none of the {len(objects)} records has Claude Code's record keys"
            " (uuid, parentUuid, sessionId) or record types",
            matched_reason="Claude Code record types and keys",
        )

    # -- loading -------------------------------------------------------------
    def load(self, path: Path) -> list[ImportedConversation]:
        records, duplicates = self._read(path, path)
        if not any(r.data["type"] in MESSAGE_TYPES for r in records):
            raise ImportFormatError(
                f"{path}:{records[0].line}: no user/assistant records; not a Claude Code session"
            )
        main, sidechains = split_threads(path, records)
        branches = follow_branches(main.records)
        main.records = branches.kept
        session_id = first_str(records, "sessionId") or path.name.split(".")[0]
        title = title_of(records)
        prompts_of_tasks = task_prompts(main.records)

        first = self._convert(path, main, conversation_id=session_id, title=title, is_main=True)
        first.metadata["duplicate_records"] = duplicates
        if branches.abandoned:
            first.skipped["branch.abandoned"] = len(branches.abandoned)
            first.skipped["branch.abandoned_records"] = sum(len(b) for b in branches.abandoned)
            first.metadata["abandoned_branches"] = [
                {"fork_uuid": fork, "first_line": branch[0].line, "records": len(branch)}
                for fork, branch in zip(branches.fork_points, branches.abandoned, strict=True)
            ]
        conversations = [first]
        for number, thread in enumerate(sidechains, start=1):
            prompt = root_prompt(thread)
            label = agent_label(thread) or f"sidechain-{number}"
            conversation = self._convert(
                path,
                thread,
                conversation_id=f"{session_id}:{label}",
                title=f"subagent: {first_line_of(prompt)}",
                is_main=False,
            )
            conversation.metadata["parent_conversation_id"] = session_id
            conversation.metadata["subagent_source"] = "sidechain"
            if prompt in prompts_of_tasks:
                conversation.metadata["task_call_id"] = prompts_of_tasks[prompt]
            conversations.append(conversation)
        if self.include_progress_subagents:
            subagents, skipped = self._progress_subagents(path, records, session_id)
            conversations.extend(subagents)
            if skipped:
                first.metadata["skipped_subagents"] = skipped
        if self.include_subagent_files:
            conversations.extend(self._subagent_files(path, main.records, session_id, first))
        if self._abandoned_wanted():
            for number, branch in enumerate(branches.abandoned, start=1):
                thread = Thread(
                    key=f"branch-{number}", records=branch_with_context(branches.kept, branch)
                )
                conversation = self._convert(
                    path,
                    thread,
                    conversation_id=f"{session_id}:branch-{number}",
                    title=f"abandoned branch {number}: {title}".strip(": "),
                    is_main=True,
                )
                conversation.metadata["parent_conversation_id"] = session_id
                conversation.metadata["abandoned_branch"] = number
                conversation.metadata["fork_uuid"] = branches.fork_points[number - 1]
                conversations.append(conversation)
        return conversations

    def _abandoned_wanted(self) -> bool:
        if self.include_abandoned_branches is not None:
            return self.include_abandoned_branches
        value = os.environ.get(BRANCHES_ENV, "").strip().lower() or "continued"
        if value not in ("continued", "all"):
            raise ImportFormatError(
                f"{BRANCHES_ENV}={value!r}: expected 'continued' (import the branch that was"
                " continued after a rewind) or 'all' (also each abandoned branch)"
            )
        return value == "all"

    def _read(self, path: Path, shown: Path) -> tuple[list[Record], int]:
        records: list[Record] = []
        seen: set[str] = set()
        duplicates = 0
        for item in iter_jsonl(path, self.limits):
            if not isinstance(item.value, dict):
                raise ImportFormatError(f"{shown}:{item.line}: expected a JSON object per line")
            kind = item.value.get("type")
            if not isinstance(kind, str):
                raise ImportFormatError(f"{shown}:{item.line}: record has no string 'type'")
            uuid = item.value.get("uuid")
            if isinstance(uuid, str):
                if uuid in seen:
                    duplicates += 1
                    continue
                seen.add(uuid)
            records.append(Record(item.line, item.value))
        if not records:
            raise ImportFormatError(f"{shown}:1: empty file (no Claude Code records)")
        return records, duplicates

    def _subagent_files(
        self,
        path: Path,
        main_records: list[Record],
        session_id: str,
        first: ImportedConversation,
    ) -> list[ImportedConversation]:
        """Conversations from ``<session>/subagents/agent-*.jsonl`` beside ``path``.

        Each is linked to the main thread's tool call that started it
        (``metadata["task_call_id"]``) through the agent id its tool result
        reports. Claude Code's own compaction agents (``agent-acompact-*``)
        are skipped and counted.
        """
        stem = path.name
        for suffix in (".gz", ".jsonl"):
            stem = stem.removesuffix(suffix)
        folder = path.parent / stem / "subagents"
        if not folder.is_dir():
            return []
        calls = agent_calls(main_records)
        out: list[ImportedConversation] = []
        for file in sorted(folder.glob("agent-*.jsonl*")):
            agent = file.name.split(".", 1)[0].removeprefix("agent-")
            if agent.startswith("acompact"):
                first.skipped["subagent_file.compaction"] = (
                    first.skipped.get("subagent_file.compaction", 0) + 1
                )
                continue
            records, _ = self._read(file, file)
            thread = Thread(key=agent, records=records)
            conversation = self._convert(
                file,
                thread,
                conversation_id=f"{session_id}:agent-{agent}",
                title=f"subagent: {first_line_of(root_prompt(thread))}",
                is_main=False,
                session_id=session_id,
            )
            conversation.metadata["parent_conversation_id"] = session_id
            conversation.metadata["subagent_source"] = "subagent_file"
            conversation.metadata["agent_id"] = first_str(records, "agentId") or agent
            call = calls.get(conversation.metadata["agent_id"])
            if call:
                conversation.metadata["task_call_id"] = call
            out.append(conversation)
        return out

    def _convert(
        self,
        path: Path,
        thread: Thread,
        *,
        conversation_id: str,
        title: str,
        is_main: bool,
        session_id: str = "",
        version: str = "",
    ) -> ImportedConversation:
        builder = ConversationBuilder(str(path))
        skipped: Counter[str] = Counter()
        queue = Queue(builder, skipped, deliver=self.include_queued)
        models: Counter[str] = Counter()
        tool_errors = 0
        tool_calls: Counter[str] = Counter()
        for record in causal_order(thread.records):
            data = record.data
            kind = data["type"]
            if kind == "assistant":
                model = feed_assistant(builder, record, tool_calls)
                if model and model != "<synthetic>":
                    models[model] += 1
            elif kind == "user":
                tool_errors += feed_user(builder, record)
            elif kind == "system":
                feed_system(builder, record, skipped)
            elif kind == "queue-operation":
                queue.operation(record)
            elif kind == "attachment":
                queue.attachment(record)
            elif kind in _SKIPPED_TYPES:
                skipped[f"record.{kind}"] += 1
            else:
                skipped[f"unknown.{kind}"] += 1
        queue.finish()
        builder.metadata["session_id"] = first_str(thread.records, "sessionId") or session_id
        builder.metadata["version"] = first_str(thread.records, "version") or version
        builder.metadata["git_branch"] = first_str(thread.records, "gitBranch")
        builder.metadata["tool_errors"] = tool_errors
        builder.metadata["tool_calls_by_name"] = dict(sorted(tool_calls.items()))
        builder.metadata["first_line"] = thread.records[0].line if thread.records else None
        conversation = builder.build(
            source_format=FORMAT,
            conversation_id=conversation_id,
            title=title,
            cwd=first_str(thread.records, "cwd"),
            model=models.most_common(1)[0][0] if models else "",
            started_at=earliest_timestamp(
                record.data.get("timestamp") for record in thread.records
            ),
        )
        conversation.skipped.update(sorted(skipped.items()))
        return conversation

    def _progress_subagents(
        self, path: Path, records: list[Record], session_id: str
    ) -> tuple[list[ImportedConversation], list[dict[str, str]]]:
        """Subagent conversations from ``agent_progress`` records, and the ones skipped.

        The progress stream is a copy the parent session kept of the
        subagent's turns; a stream that does not form a valid conversation
        is skipped (named with its error in the main conversation's
        ``metadata["skipped_subagents"]``) instead of failing the import.
        """
        threads: dict[str, Thread] = {}
        prompts: dict[str, str] = {}
        calls: dict[str, str] = {}
        seen: set[str] = set()
        for record in records:
            data = record.data
            if data["type"] != "progress":
                continue
            payload = data.get("data")
            if not isinstance(payload, dict) or payload.get("type") != "agent_progress":
                continue
            inner = payload.get("message")
            agent = payload.get("agentId")
            if not isinstance(inner, dict) or not isinstance(agent, str):
                continue
            uuid = inner.get("uuid")
            if isinstance(uuid, str):
                if uuid in seen:
                    continue
                seen.add(uuid)
            if inner.get("type") not in ("user", "assistant"):
                continue
            thread = threads.setdefault(agent, Thread(key=agent))
            thread.records.append(Record(record.line, inner))
            if isinstance(payload.get("prompt"), str):
                prompts.setdefault(agent, payload["prompt"])
            if isinstance(data.get("parentToolUseID"), str):
                calls.setdefault(agent, data["parentToolUseID"])
        out: list[ImportedConversation] = []
        skipped: list[dict[str, str]] = []
        for agent, thread in threads.items():
            try:
                conversation = self._convert(
                    path,
                    thread,
                    conversation_id=f"{session_id}:agent-{agent}",
                    title=f"subagent: {first_line_of(prompts.get(agent, ''))}",
                    is_main=False,
                    session_id=session_id,
                    version=first_str(records, "version"),
                )
            except ImportFormatError as exc:
                skipped.append({"agent_id": agent, "error": str(exc)})
                continue
            conversation.metadata["parent_conversation_id"] = session_id
            conversation.metadata["subagent_source"] = "agent_progress"
            conversation.metadata["agent_id"] = agent
            if agent in calls:
                conversation.metadata["task_call_id"] = calls[agent]
            out.append(conversation)
        return out, skipped


@hookimpl
def register_importers(register: Callable[[Importer], None]) -> None:
    """Register the ``claude-code`` importer."""
    register(ClaudeCodeImporter())
