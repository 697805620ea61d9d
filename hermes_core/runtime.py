"""The turn runtime: sessions with a frozen prompt, and turns under a lease.

One agent turn, as an integrator drives it with its own model client::

    with session.turn() as turn:              # acquires the turn lease, loads history
        req = turn.prepare("fix the test")    # frozen prompt + history + user message
        reply = my_client(req.chat_body())    # you call the model
        message = turn.record_response(reply_message, usage)
        for call in turn.run_framework_tools():   # the framework answers its own tools
            turn.add_tool_result(call.id, run_tool(call))
        # ...prepare() again for the next model call of the turn while calls came back
        turn.commit()                         # atomic append under the fencing token

Nothing of a turn is written before ``commit()``. A compression due before
the turn's first model call compresses the stored history (committed turns);
one due in the middle of a turn (after tool rounds) plans a view over the
history and the draft that is sent for the rest of the turn but not written:
the turn is appended whole at commit and the real compression runs then.

Per-turn context (``pre_llm_call`` results and memory recall) goes ONLY into
the current user message's API content, kept as its ``api_content`` sidecar
so later requests resend the same bytes. Compression is checked before each
request (preflight) and after each response; it runs under the same lease.
The runtime caches each active message's wire dict, token count and prefix
hash, so its own cost per step does not grow with the session's length.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError as PydanticValidationError

from hermes_hookspecs import (
    LeaseGrant,
    LeaseHolder,
    LeaseLost,
    MemorySession,
    Message,
    NewMessage,
    NewSession,
    PromptContext,
    SearchHit,
    SessionRecord,
    SessionRotated,
    StoredMessage,
    ToolCall,
    TurnRecord,
    Usage,
    UsageRecord,
    ValidationError,
)

from .ledger import RequestChain, ledger_entry, segment_hash
from .prompt import FrozenPrompt, build_prompt, canonical_tools
from .requests import PreparedRequest

if TYPE_CHECKING:
    from .compression import CompressionOutcome
    from .host import Hermes

log = logging.getLogger("hermes_core.runtime")

PROMPT_ROUTING_KEY = "hermes.prompt"
RECALL_HEADER = "[Recalled context for this turn; reference only, not from the user]"
#: the tool result :meth:`Turn.commit` stores for a call the turn never answered
UNANSWERED_RESULT = "[no result: the turn was committed before this tool call was answered]"
#: how many rotations a stale session handle follows before giving up
MAX_ROTATION_HOPS = 64
#: the deepest JSON nesting accepted in tool-call arguments (deeper is a ValidationError)
MAX_ARGUMENT_DEPTH = 64


def json_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of JSON text, scanned without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _validation(what: str, exc: PydanticValidationError) -> ValidationError:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or what}: {e['msg']}" for e in exc.errors()
    )
    return ValidationError(f"invalid {what}: {problems}")


def to_message(value: Any, role: str, what: str) -> Message:
    """Validate a user/assistant/tool message given as str, parts list, dict or Message."""
    if isinstance(value, Message):
        message = value
    elif isinstance(value, str) or (isinstance(value, list) and role == "user"):
        try:
            message = Message(role=role, content=value)  # type: ignore[arg-type]
        except PydanticValidationError as exc:
            raise _validation(what, exc) from None
    elif isinstance(value, dict):
        try:
            message = Message.from_api({"role": role, **value})
        except PydanticValidationError as exc:
            raise _validation(what, exc) from None
    else:
        raise ValidationError(
            f"invalid {what}: expected a string, a list of content parts, a dict or a Message, "
            f"got {type(value).__name__}"
        )
    if message.role != role:
        raise ValidationError(f"invalid {what}: role is {message.role!r}, expected {role!r}")
    return message


class _MessagesView(Sequence[Message]):
    """A read-only view of the active messages (no copy per hook call)."""

    def __init__(self, rows: list[StoredMessage]) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [row.message for row in self._rows[index]]
        return self._rows[index].message


class Session:
    """A session with its frozen prompt and a cached active view."""

    def __init__(self, hermes: Hermes, record: SessionRecord, prompt: FrozenPrompt) -> None:
        self.hermes = hermes
        self.record = record
        self.prompt = prompt
        self.model = record.model or hermes.settings.model.name
        self._lock = threading.RLock()
        self._rows: list[StoredMessage] = []
        self._api: list[dict[str, Any]] = []
        self._base = RequestChain()
        self._version: tuple[float, int] | None = None
        self._last_chain: RequestChain | None = None
        self._last_digest: str | None = None
        self._last_tokens = 0
        self._request_index = 0
        self._compaction_since = False
        self._last_prompt_tokens = 0
        self._compression_due = False
        #: reported input tokens minus our estimate of the same request (0 until a usage)
        self._usage_offset = 0
        self._room_checked: str | None = None
        self.reload()

    # -- creation / resume --------------------------------------------------
    @classmethod
    def create(
        cls,
        hermes: Hermes,
        *,
        session_id: str | None = None,
        title: str = "",
        cwd: str = "",
        goal: str = "",
        model: str | None = None,
        provider: str = "",
        caller_message: str = "",
        platform: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        routing: dict[str, Any] | None = None,
    ) -> Session:
        """Create a session, build its prompt once, freeze and store it by hash."""
        store = hermes.store()
        inputs = {
            "caller_message": caller_message,
            "platform": platform if platform is not None else hermes.settings.prompt.platform,
            "started_date": dt.datetime.now(dt.UTC).date().isoformat(),
            "tools": canonical_tools(list(tools or []))[0],
        }
        record = store.create_session(
            NewSession(
                id=session_id,
                title=title,
                cwd=cwd,
                goal=goal,
                model=model or hermes.settings.model.name,
                provider=provider,
                routing={**(routing or {}), PROMPT_ROUTING_KEY: inputs},
            )
        )
        prompt = cls._build(hermes, record)
        record = cls._freeze(hermes, record, prompt)
        session = cls(hermes, record, prompt)
        hermes.pm.hook.on_session_start(session=record, resumed=False)
        memory = hermes.memory()
        if memory is not None:
            memory.on_session_switch("", record.id, "new")
        return session

    @classmethod
    def resume(cls, hermes: Hermes, session_id: str) -> Session:
        """Reopen a stored session with its frozen prompt bytes (never rebuilt here)."""
        store = hermes.store()
        record = cls._live(hermes, store.get_session(session_id))
        if record.system_prompt_hash is None or record.tools_hash is None:
            prompt = cls._build(hermes, record)
            record = cls._freeze(hermes, record, prompt)
        else:
            prompt = cls._frozen(hermes, record)
            cls._init_memory(hermes, record)
        session = cls(hermes, record, prompt)
        hermes.pm.hook.on_session_start(session=record, resumed=True)
        memory = hermes.memory()
        if memory is not None:
            memory.on_session_switch(record.id, record.id, "resume")
        return session

    @staticmethod
    def _frozen(hermes: Hermes, record: SessionRecord) -> FrozenPrompt:
        """The session's frozen prompt and tools, read back from their blobs."""
        store = hermes.store()
        assert record.system_prompt_hash is not None and record.tools_hash is not None
        tools_json = store.get_blob(record.tools_hash)
        return FrozenPrompt(
            text=store.get_blob(record.system_prompt_hash),
            prompt_hash=record.system_prompt_hash,
            tools=json.loads(tools_json),
            tools_json=tools_json,
            tools_hash=record.tools_hash,
        )

    @staticmethod
    def _live(hermes: Hermes, record: SessionRecord) -> SessionRecord:
        """``record``, or the session a chain of rotations continued it in."""
        store = hermes.store()
        for _ in range(MAX_ROTATION_HOPS):
            successor = store.continued_as(record.id)
            if successor is None:
                return record
            log.info("session %s was rotated into %s; continuing there", record.id, successor)
            record = store.get_session(successor)
        raise SessionRotated(
            f"session {record.id!r}: more than {MAX_ROTATION_HOPS} rotations to follow",
            session_id=record.id,
        )

    @staticmethod
    def _init_memory(hermes: Hermes, record: SessionRecord) -> None:
        memory = hermes.memory()
        if memory is not None:
            memory.initialize(
                MemorySession(
                    session_id=record.id,
                    cwd=record.cwd,
                    model=record.model,
                    home=str(hermes.settings.memory.home_path()),
                )
            )

    @staticmethod
    def _context(hermes: Hermes, record: SessionRecord) -> PromptContext:
        inputs = record.routing.get(PROMPT_ROUTING_KEY, {})
        return PromptContext(
            session_id=record.id,
            cwd=record.cwd,
            model=record.model,
            provider=record.provider,
            platform=inputs.get("platform", ""),
            caller_message=inputs.get("caller_message", ""),
            started_date=inputs.get("started_date", ""),
            title=record.title,
            goal=record.goal,
        )

    @classmethod
    def _build(cls, hermes: Hermes, record: SessionRecord) -> FrozenPrompt:
        """Build the prompt from the hooks and memory (refreshing memory's snapshot)."""
        cls._init_memory(hermes, record)
        memory = hermes.memory()
        extra_blocks = []
        extra_tools: list[dict[str, Any]] = list(
            record.routing.get(PROMPT_ROUTING_KEY, {}).get("tools", [])
        )
        if memory is not None:
            extra_blocks = [("memory", block) for block in memory.prompt_blocks(record.id)]
            extra_tools += memory.tool_schemas()
        extra_tools += hermes.toolbox().schemas()
        return build_prompt(
            hermes.pm,
            cls._context(hermes, record),
            hermes.settings,
            extra_blocks=extra_blocks,
            extra_tools=extra_tools,
        )

    @staticmethod
    def _store_blobs(hermes: Hermes, prompt: FrozenPrompt) -> None:
        store = hermes.store()
        prompt_hash = store.put_blob("system_prompt", prompt.text)
        tools_hash = store.put_blob("tools", prompt.tools_json)
        if prompt_hash != prompt.prompt_hash or tools_hash != prompt.tools_hash:
            raise ValidationError("store returned a different SHA-256 than the prompt's own")

    @classmethod
    def _freeze(cls, hermes: Hermes, record: SessionRecord, prompt: FrozenPrompt) -> SessionRecord:
        cls._store_blobs(hermes, prompt)
        return hermes.store().update_session(
            record.id, system_prompt_hash=prompt.prompt_hash, tools_hash=prompt.tools_hash
        )

    def stage_prompt(self, record: SessionRecord) -> FrozenPrompt:
        """Build the prompt ``record`` gets and store its blobs, writing no session row.

        The compression coordinator stages the continuing session's prompt
        this way and writes its hashes inside ``archive_and_compact``'s
        transaction, then calls :meth:`adopt_prompt`.
        """
        prompt = self._build(self.hermes, record)
        self._store_blobs(self.hermes, prompt)
        return prompt

    def adopt_prompt(self, prompt: FrozenPrompt) -> bool:
        """Use ``prompt``, already recorded on the session's row. True when bytes changed."""
        with self._lock:
            changed = (prompt.prompt_hash, prompt.tools_hash) != (
                self.prompt.prompt_hash,
                self.prompt.tools_hash,
            )
            self.prompt = prompt
            self.reload(force=True)
            return changed

    def rebuild_prompt(self) -> bool:
        """Invalidate and rebuild the prompt (compaction boundary). True when bytes changed."""
        with self._lock:
            record = self.hermes.store().get_session(self.record.id)
            prompt = self._build(self.hermes, record)
            if (prompt.prompt_hash, prompt.tools_hash) == (
                self.prompt.prompt_hash,
                self.prompt.tools_hash,
            ):
                return False
            self.record = self._freeze(self.hermes, record, prompt)
            self.prompt = prompt
            self.reload(force=True)
            return True

    # -- the cached active view --------------------------------------------
    @property
    def id(self) -> str:
        return self.record.id

    def system_message(self) -> dict[str, Any]:
        return {"role": "system", "content": self.prompt.text}

    def _prefix_chain(self) -> RequestChain:
        chain = RequestChain()
        tokens = self.hermes.tokens(self.model)
        chain.extend(
            segment_hash({"tools": self.prompt.tools_json}),
            tokens.count_text(self.prompt.tools_json),
        )
        chain.extend(
            segment_hash(self.system_message()),
            tokens.count_message(Message(role="system", content=self.prompt.text)),
        )
        return chain

    def reload(self, force: bool = False) -> None:
        """Reload the active view from the store when it changed (or when forced)."""
        with self._lock:
            store = self.hermes.store()
            record = store.get_session(self.record.id)
            if record.end_reason is not None:
                live = self._live(self.hermes, record)
                if live.id != record.id:  # another process rotated it: a stale handle follows
                    record, force = live, True
                    if live.system_prompt_hash is not None and live.tools_hash is not None:
                        self.prompt = self._frozen(self.hermes, live)
                    self._init_memory(self.hermes, live)
                    self._usage_offset = 0
            version = (record.updated_at, record.compression_count)
            if not force and version == self._version:
                return
            self.record = record
            rows = store.active_messages(record.id)
            tokens = self.hermes.tokens(self.model)
            missing = [row for row in rows if row.token_count is None]
            if missing:
                counts = tokens.count_messages([row.message for row in missing])
                for row, count in zip(missing, counts, strict=True):
                    row.token_count = count
            self._rows = rows
            self._api = [row.to_api() for row in rows]
            self._base = self._prefix_chain()
            self._check_prompt_room()
            for api, row in zip(self._api, rows, strict=True):
                self._base.extend(segment_hash(api), row.token_count or 0)
            self._version = version

    #: warn when the system prompt and tools take more than this share of the threshold
    PROMPT_ROOM_WARNING = 0.5

    def _check_prompt_room(self) -> None:
        """Warn (once per prompt) when the prompt leaves compressions little room to work in."""
        if self._room_checked == self.prompt.prompt_hash:
            return
        self._room_checked = self.prompt.prompt_hash
        prompt_tokens = self._base.total_tokens()
        threshold = self.hermes.threshold(self.model).threshold_tokens
        if prompt_tokens > threshold * self.PROMPT_ROOM_WARNING:
            log.warning(
                "session %s: the system prompt and tool schemas take %d of the %d-token "
                "compression threshold for %s; the conversation has %d tokens of room, so "
                "compressions will fire every few turns (a larger window, or a shorter "
                "prompt, fixes it)",
                self.record.id,
                prompt_tokens,
                threshold,
                self.model,
                max(0, threshold - prompt_tokens),
            )

    def _extend_cache(self, rows: list[StoredMessage], apis: list[dict[str, Any]]) -> None:
        for row, api in zip(rows, apis, strict=True):
            self._rows.append(row)
            self._api.append(api)
            self._base.extend(segment_hash(api), row.token_count or 0)
        record = self.hermes.store().get_session(self.record.id)
        self.record = record
        self._version = (record.updated_at, record.compression_count)

    @property
    def active_tokens(self) -> int:
        """Tokens of the whole next request without new messages (tools + system + history)."""
        return self._base.total_tokens()

    @property
    def measured_tokens(self) -> int:
        """:attr:`active_tokens` corrected by the provider's last reported usage.

        The difference between the reported input tokens of the last answered
        request and our estimate of that same request is carried forward, so
        the compression checks follow the provider's count, not the estimate.
        """
        return max(0, self._base.total_tokens() + self._usage_offset)

    def active_messages(self) -> list[StoredMessage]:
        with self._lock:
            return list(self._rows)

    # -- operations -----------------------------------------------------------
    def turn(
        self,
        holder: str = "hermes",
        *,
        wait: float | None = None,
        ttl: float | None = None,
    ) -> Turn:
        """Begin a turn: take the session's turn lease (waiting up to ``wait`` seconds)."""
        settings = self.hermes.settings.session
        ttl = settings.lease_ttl if ttl is None else ttl
        wait = settings.lease_wait if wait is None else wait
        store = self.hermes.store()
        self.reload()  # a handle another process rotated away follows the chain here
        for _ in range(MAX_ROTATION_HOPS):
            try:
                lease = store.acquire_lease(self.id, LeaseHolder(name=holder), ttl, timeout=wait)
                break
            except SessionRotated as exc:
                # rotated while we waited for the lease: continue in the live session
                if exc.successor_id is None:
                    raise
                self.reload(force=True)
        else:
            raise SessionRotated(
                f"session {self.id!r}: more than {MAX_ROTATION_HOPS} rotations to follow",
                session_id=self.id,
            )
        try:
            self.reload()
            return Turn(self, lease, ttl)
        except BaseException:
            self.hermes.store().release_lease(lease)
            raise

    def compress(
        self, focus: str | None = None, *, holder: str = "hermes-compress"
    ) -> CompressionOutcome:
        """A manual compression (bypasses the cooldown), under the turn lease."""
        with self.turn(holder) as turn:
            outcome = turn.compress(focus=focus, manual=True)
            turn.commit()
            return outcome

    def search(
        self, query: str, *, limit: int = 20, include_compacted: bool = True
    ) -> list[SearchHit]:
        return self.hermes.store().search(
            query, session_id=self.id, limit=limit, include_compacted=include_compacted
        )

    def end(self, reason: str = "user") -> SessionRecord:
        record = self.hermes.store().end_session(self.id, reason)
        self.record = record
        self.hermes.pm.hook.on_session_end(session=record, reason=reason)
        memory = self.hermes.memory()
        if memory is not None:
            memory.on_session_end(self.id, reason)
        return record

    def _switch_to(self, record: SessionRecord) -> None:
        """After a rotation: continue in the child session."""
        self.record = record
        self._version = None
        self._usage_offset = 0
        self.reload(force=True)


class _Renewer(threading.Thread):
    """Renews the turn lease every ttl/3; on loss it flags the turn as interrupted."""

    def __init__(self, turn: Turn, ttl: float) -> None:
        super().__init__(name=f"hermes-lease-{turn.session.id[:8]}", daemon=True)
        self.turn = turn
        self.ttl = ttl
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.ttl / 3):
            try:
                self.turn.lease = self.turn.session.hermes.store().renew_lease(
                    self.turn.lease, self.ttl
                )
            except LeaseLost as exc:
                self.turn.lost = exc
                return
            except Exception as exc:  # the store hiccupped: try again next period
                log.warning("lease renewal failed for %s: %s", self.turn.session.id, exc)


class Turn:
    """One agent turn under the session's turn lease. Use as a context manager."""

    def __init__(self, session: Session, lease: LeaseGrant, ttl: float) -> None:
        self.session = session
        self.hermes = session.hermes
        self.lease = lease
        self.id = uuid.uuid4().hex
        self.lost: LeaseLost | None = None
        self.pending: list[NewMessage] = []
        self._pending_api: list[dict[str, Any]] = []
        self._open_calls: list[str] = []
        self._calls: dict[str, ToolCall] = {}
        self._answered: set[str] = set()
        self._pending_entry: Any = None
        self._user_text = ""
        self._ledger_state: tuple[Any, ...] | None = None
        self._request_estimate: int | None = None
        #: the mid-turn compressed view (not stored): rows, wire dicts, draft messages it covers
        self._view: list[StoredMessage] | None = None
        self._view_api: list[dict[str, Any]] = []
        self._view_upto = 0
        self._draft_ids = 0
        self._prepared = False
        self._done = False
        self._renewer = _Renewer(self, ttl)
        self._renewer.start()
        self._hygiene()

    # -- lease --------------------------------------------------------------
    def _check(self) -> None:
        if self._done:
            raise ValidationError("this turn is already committed or aborted")
        if self.lost is not None:
            raise LeaseLost(f"turn interrupted: {self.lost}")

    def _finish(self) -> None:
        self._done = True
        self._renewer.stop.set()
        self._drop_unanswered_request()
        with contextlib.suppress(Exception):
            self.hermes.store().release_lease(self.lease)

    # -- steps ----------------------------------------------------------------
    def _add_pending(self, message: Message, api_content: Any = None) -> None:
        message = self.hermes.harness(message)
        tokens = self.hermes.tokens(self.session.model)
        count = tokens.count_message(message, api_content)
        self.pending.append(
            NewMessage(
                message=message,
                api_content=api_content,
                token_count=count,
                turn_id=self.id,
                annotations=self.hermes.annotate(message),
            )
        )
        self._pending_api.append(message.to_api(api_content))

    def _pending_tokens(self) -> int:
        return sum(m.token_count or 0 for m in self.pending)

    def prepare(self, user_message: Any = None) -> PreparedRequest:
        """Build the next request; ``user_message`` (str, parts, dict, Message) starts the turn."""
        self._check()
        if user_message is not None:
            if self._open_calls:
                raise ValidationError(
                    f"cannot add a user message while tool calls are unanswered: {self._open_calls}"
                )
            message = to_message(user_message, "user", "user message")
            self._user_text = message.text()
            api_content = self._inject(message)
            self._add_pending(message, api_content)
        elif not self._prepared:
            raise ValidationError("the first prepare() of a turn needs a user message")
        self._prepared = True
        # a request prepared before and never answered was not a request of the session
        self._drop_unanswered_request()
        compressed = self._maybe_compress(preflight=True)
        apis, chain = self._draft_parts()
        messages = self._select([self.session.system_message(), *apis], self._draft_messages)
        s = self.session
        self._ledger_state = (
            s._last_chain,
            s._last_digest,
            s._last_tokens,
            s._compaction_since,
            s._request_index,
            s._last_prompt_tokens,
        )
        self._request_estimate = chain.total_tokens()
        entry = ledger_entry(
            s.id,
            s._request_index,
            s._last_chain,
            s._last_digest,
            s._last_tokens,
            chain,
            compaction_since=s._compaction_since,
        )
        if s._last_chain is None and s._last_digest is None and s._request_index == 0:
            previous = self.hermes.store().prefix_entries(s.id)
            if previous:
                s._request_index = previous[-1].request_index + 1
                s._last_digest = previous[-1].request_hash
                s._last_tokens = previous[-1].request_tokens
                entry = ledger_entry(
                    s.id,
                    s._request_index,
                    None,
                    s._last_digest,
                    s._last_tokens,
                    chain,
                    compaction_since=False,
                )
        self._pending_entry = entry
        s._last_chain = chain
        s._last_digest = chain.digest
        s._last_tokens = chain.total_tokens()
        s._compaction_since = False
        s._request_index += 1
        s._last_prompt_tokens = chain.total_tokens()
        backend = self.hermes.compaction_backend()
        extra: dict[str, Any] = {}
        if backend is not None:
            settings = self.hermes.settings.table(f"compaction.{backend.name}")
            try:
                if backend.eligible(s.record, s.model, settings):
                    extra = backend.request_options(s.record, s.model, settings)
            except Exception as exc:  # a backend fault must not stop the turn
                log.warning("compaction backend %r request options failed: %s", backend.name, exc)
        # built from validated parts: skip re-validating every message dict (O(history))
        return PreparedRequest.model_construct(
            session_id=s.id,
            turn_id=self.id,
            request_index=entry.request_index,
            model=s.model,
            messages=messages,
            tools=s.prompt.tools,
            prompt_tokens=chain.total_tokens(),
            tokens_exact=self.hermes.tokens(s.model).exact,
            compressed=compressed,
            extra_body=extra,
        )

    def _draft_parts(self) -> tuple[list[dict[str, Any]], RequestChain]:
        """The next request's wire messages after the system prompt, and its ledger chain."""
        s = self.session
        upto = self._view_upto if self._view is not None else 0
        if self._view is None:
            apis = [*s._api]
            chain = s._base.copy()
        else:
            apis = [*self._view_api]
            chain = s._prefix_chain()
            for api, row in zip(self._view_api, self._view, strict=True):
                chain.extend(segment_hash(api), row.token_count or 0)
        for api, pending in zip(self._pending_api[upto:], self.pending[upto:], strict=True):
            apis.append(api)
            chain.extend(segment_hash(api), pending.token_count or 0)
        return apis, chain

    def _draft_messages(self) -> list[Message]:
        """The messages behind :meth:`_draft_parts`' wire dicts (built only when asked: O(n))."""
        upto = self._view_upto if self._view is not None else 0
        rows = self.session._rows if self._view is None else self._view
        return [row.message for row in rows] + [p.message for p in self.pending[upto:]]

    def _inject(self, message: Message) -> Any:
        """Per-turn context for the user message's API content only (None: none)."""
        s = self.session
        pieces: list[str] = []
        for result in self.hermes.pm.hook.pre_llm_call(
            session=s.record, messages=_MessagesView(s._rows), user_message=message
        ):
            if result:
                pieces.append(str(result))
        memory = self.hermes.memory()
        if memory is not None:
            recalled = memory.prefetch(message.text(), s.id)
            if recalled:
                pieces.append(recalled)
        if not pieces:
            return None
        extra = RECALL_HEADER + "\n" + "\n\n".join(pieces)
        if isinstance(message.content, list):
            return [*message.content, {"type": "text", "text": extra}]
        return f"{message.content or ''}\n\n{extra}"

    def _select(
        self, messages: list[dict[str, Any]], draft: Callable[[], list[Message]]
    ) -> list[dict[str, Any]]:
        """Run ``select_context`` only when something besides the default would answer."""
        from hermes_hookspecs import ContextEngine, SelectRequest

        hook = self.hermes.pm.hook.select_context
        engine = self.hermes.engine() if self.hermes.registry.names("engines") else None
        overridden = (
            engine is not None and type(engine).select_context is not ContextEngine.select_context
        )
        if len(hook.get_hookimpls()) <= 1 and not overridden:
            return messages
        # the messages are validated already (stored rows and this turn's): no re-validation
        system = Message(role="system", content=self.session.prompt.text)
        rows = [system, *draft()]
        request = SelectRequest.model_construct(
            session_id=self.session.id,
            messages=rows,
            model=self.session.model,
            settings=self.hermes.compression_settings(self._threshold()),
        )
        chosen = hook(request=request, engine=engine)
        if chosen is None:
            return messages
        # a message the engine kept is sent with its cached wire dict, so its api_content
        # (this turn's injected context) is sent as stored
        by_id = {id(message): api for message, api in zip(rows, messages, strict=True)}
        by_value: dict[str, dict[str, Any]] | None = None
        out: list[dict[str, Any]] = []
        for message in chosen:
            api = by_id.get(id(message))
            if api is None:
                if by_value is None:
                    by_value = {m.model_dump_json(): a for m, a in zip(rows, messages, strict=True)}
                api = by_value.get(message.model_dump_json())
            out.append(api if api is not None else message.to_api())
        return out

    def record_response(self, message: Any, usage: Usage | dict[str, Any] | None = None) -> Message:
        """Record the model's assistant message (wire dict or Message) and its usage."""
        self._check()
        if not self._prepared:
            raise ValidationError("record_response() before prepare()")
        assistant = to_message(message, "assistant", "assistant message")
        for call in assistant.tool_calls or []:
            depth = json_depth(call.function.arguments or "")
            if depth > MAX_ARGUMENT_DEPTH:
                raise ValidationError(
                    f"invalid assistant message: tool call {call.id!r} ({call.function.name}) "
                    f"has arguments nested {depth} deep; at most {MAX_ARGUMENT_DEPTH} are accepted"
                )
        self._add_pending(assistant)
        for call in assistant.tool_calls or []:
            if call.id in self._open_calls or call.id in self._answered:
                raise ValidationError(f"tool call id {call.id!r} is used twice in this turn")
            self._open_calls.append(call.id)
            self._calls[call.id] = call
        parsed: Usage | None
        if usage is None or isinstance(usage, Usage):
            parsed = usage
        else:
            parsed = Usage.from_openai(usage, self.session.model)
        s = self.session
        if parsed is not None:
            self.hermes.store().record_usage(
                UsageRecord(session_id=s.id, turn_id=self.id, usage=parsed)
            )
            if self._pending_entry is not None:
                self._pending_entry.provider_cached_tokens = parsed.cache_read_tokens
            if self.hermes.registry.names("engines"):
                self.hermes.engine().update_usage(s.id, parsed)
            s._last_prompt_tokens = max(s._last_prompt_tokens, parsed.input_tokens)
            if parsed.input_tokens > 0 and self._request_estimate is not None:
                # the provider's count of this request against ours: carried forward
                s._usage_offset = parsed.input_tokens - self._request_estimate
        self._flush_ledger()
        self.hermes.pm.hook.post_llm_call(session=s.record, response=assistant, usage=parsed)
        if s._last_prompt_tokens + (self.pending[-1].token_count or 0) >= self._threshold():
            s._compression_due = True
        return assistant

    def add_tool_result(self, tool_call_id: str, content: Any, *, name: str | None = None) -> None:
        """Record a tool result for an open call of this turn."""
        self._check()
        if tool_call_id not in self._open_calls:
            raise ValidationError(
                f"tool result for unknown call id {tool_call_id!r}; open calls: {self._open_calls}"
            )
        try:
            message = Message(role="tool", tool_call_id=tool_call_id, content=content, name=name)
        except PydanticValidationError as exc:
            raise _validation("tool result", exc) from None
        self._open_calls.remove(tool_call_id)
        self._answered.add(tool_call_id)
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
        toolbox = self.hermes.toolbox()
        left: list[ToolCall] = []
        for call_id in list(self._open_calls):
            call = self._calls[call_id]
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
        if call_id not in self._open_calls:
            raise ValidationError(
                f"no open tool call {call_id!r} in this turn; open calls: {self._open_calls}"
            )
        found = self._calls[call_id]
        toolbox = self.hermes.toolbox()
        if not toolbox.owns(found.function.name):
            raise ValidationError(
                f"tool {found.function.name!r} (call {call_id!r}) is not a framework tool; "
                "run it yourself and record it with add_tool_result()"
            )
        s = self.session
        result = toolbox.run(
            found, session_id=s.id, store=self.hermes.store(), tokens=self.hermes.tokens(s.model)
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
        if self._open_calls:
            self._stub_open_calls()
        s = self.session
        try:
            stored: list[StoredMessage] = []
            if self.pending:
                stored = self.hermes.store().append_messages(s.id, self.pending, lease=self.lease)
                with s._lock:
                    s._extend_cache(stored, self._pending_api)
                messages = [m.message for m in self.pending]
                self.hermes.pm.hook.on_turn_committed(
                    session=s.record, turn_id=self.id, messages=messages
                )
                memory = self.hermes.memory()
                if memory is not None:
                    assistant = next(
                        (m.text() for m in reversed(messages) if m.role == "assistant"), ""
                    )
                    memory.sync_turn(
                        TurnRecord(
                            session_id=s.id,
                            turn_id=self.id,
                            user_text=self._user_text,
                            assistant_text=assistant,
                            messages=messages,
                        )
                    )
            self.pending = []
            self._pending_api = []
            if self._view is not None:
                # the turn ran on a compressed view, so the engine found compression due:
                # the committed history (that turn included) is compressed now, for real
                self._view = None
                s._compaction_since = True  # the next request leaves the view either way
                self.compress(reason="post-response")
            elif s._compression_due:
                self._maybe_compress(preflight=False)
            return stored
        finally:
            self._finish()

    def _stub_open_calls(self) -> None:
        log.warning(
            "session %s: committing a turn with unanswered tool calls %s; stubbed",
            self.session.id,
            ", ".join(self._open_calls),
        )
        for call_id in list(self._open_calls):
            owner = next(
                i
                for i, m in enumerate(self.pending)
                if any(c.id == call_id for c in m.message.tool_calls or [])
            )
            at = owner + 1
            while at < len(self.pending) and self.pending[at].message.role == "tool":
                at += 1
            self.add_tool_result(call_id, UNANSWERED_RESULT)
            if at < len(self.pending) - 1:  # move it from the end to its assistant's results
                self.pending.insert(at, self.pending.pop())
                self._pending_api.insert(at, self._pending_api.pop())

    def abort(self) -> None:
        """Drop the turn's uncommitted messages and release the lease."""
        if not self._done:
            self.pending = []
            self._pending_api = []
            self._finish()

    # -- compression ---------------------------------------------------------
    def _threshold(self) -> int:
        return self.hermes.threshold(self.session.model).threshold_tokens

    def _hygiene(self) -> None:
        """Before a turn: catch sessions that grew while nobody compressed them."""
        s = self.session
        report = self.hermes.threshold(s.model)
        if s.measured_tokens >= report.hygiene_tokens or (
            len(s._rows) >= self.hermes.settings.compression.hygiene_max_messages
        ):
            self.compress(reason="hygiene")

    def _maybe_compress(self, *, preflight: bool) -> bool:
        s = self.session
        # the provider's reported count when there is one (the estimate otherwise)
        if self._view is None:
            total = s.measured_tokens + self._pending_tokens()
        else:
            total = max(0, self._draft_parts()[1].total_tokens() + s._usage_offset)
        threshold = self._threshold()
        due = s._compression_due or total >= threshold
        # in the middle of a turn (the model answered already) the draft is part of what
        # outgrew the window, and it is not stored: compress a view, write nothing
        mid_turn = preflight and any(m.message.role != "user" for m in self.pending)
        if not due or not (s._rows or mid_turn):
            return False
        engines = self.hermes.registry.names("engines")
        if engines and not self.hermes.engine().should_compress(s.id, total, threshold):
            return False
        if mid_turn:
            return self._compress_draft()
        outcome = self.compress(reason="preflight" if preflight else "post-response")
        return outcome.status == "compressed"

    def _compress_draft(self) -> bool:
        """Plan the mid-turn view over the history and the draft (nothing is written)."""
        from .compression import plan_draft_view

        s = self.session
        upto = self._view_upto if self._view is not None else 0
        now = time.time()
        rows = list(self._view if self._view is not None else s._rows)
        for pending in self.pending[upto:]:
            rows.append(self._draft_row(pending, now))
        result = plan_draft_view(self, rows)
        s._compression_due = False
        if result is None:
            return False
        self._view = [self._draft_row(item, now) for item in result.messages]
        self._view_api = [row.to_api() for row in self._view]
        self._view_upto = len(self.pending)
        s._compaction_since = True
        return True

    def _draft_row(self, item: NewMessage, now: float) -> StoredMessage:
        """A message of the turn's draft or view as the engine reads it (a negative id)."""
        self._draft_ids += 1
        return StoredMessage(
            id=-self._draft_ids,
            session_id=self.session.id,
            position=0,
            message=item.message,
            api_content=item.api_content,
            token_count=item.token_count,
            turn_id=item.turn_id,
            origin_id=item.origin_id,
            annotations=item.annotations,
            created_at=now,
        )

    def compress(
        self, *, focus: str | None = None, manual: bool = False, reason: str = "manual"
    ) -> CompressionOutcome:
        """Compress the session's active context now, under this turn's lease."""
        from .compression import run_compression

        if self.lost is not None:
            raise LeaseLost(f"turn interrupted: {self.lost}")
        outcome = run_compression(self, focus=focus, manual=manual, reason=reason)
        self.session._compression_due = False
        return outcome

    def _flush_ledger(self) -> None:
        """Record the answered request in the prefix ledger."""
        if self._pending_entry is not None:
            entry, self._pending_entry = self._pending_entry, None
            self._ledger_state = None
            with contextlib.suppress(Exception):
                self.hermes.store().record_prefix(entry)

    def _drop_unanswered_request(self) -> None:
        """Forget a prepared request that got no response: the ledger never counts it."""
        if self._pending_entry is None or self._ledger_state is None:
            return
        s = self.session
        (
            s._last_chain,
            s._last_digest,
            s._last_tokens,
            s._compaction_since,
            s._request_index,
            s._last_prompt_tokens,
        ) = self._ledger_state
        self._pending_entry = None
        self._ledger_state = None

    # -- context manager --------------------------------------------------------
    def __enter__(self) -> Turn:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._done:
            self.abort()


class AsyncTurn:
    """An asyncio face of :class:`Turn`: each step runs in a worker thread."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn

    @classmethod
    async def begin(cls, session: Session, holder: str = "hermes", **kwargs: Any) -> AsyncTurn:
        return cls(await asyncio.to_thread(session.turn, holder, **kwargs))

    async def prepare(self, user_message: Any = None) -> PreparedRequest:
        return await asyncio.to_thread(self.turn.prepare, user_message)

    async def record_response(self, message: Any, usage: Any = None) -> Message:
        return await asyncio.to_thread(self.turn.record_response, message, usage)

    async def add_tool_result(self, tool_call_id: str, content: Any) -> None:
        await asyncio.to_thread(self.turn.add_tool_result, tool_call_id, content)

    async def run_framework_tools(self) -> list[ToolCall]:
        return await asyncio.to_thread(self.turn.run_framework_tools)

    async def commit(self) -> list[StoredMessage]:
        return await asyncio.to_thread(self.turn.commit)

    async def abort(self) -> None:
        await asyncio.to_thread(self.turn.abort)

    async def __aenter__(self) -> AsyncTurn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self.turn._done:
            await self.abort()


__all__ = ["AsyncTurn", "PreparedRequest", "Session", "Turn"]
