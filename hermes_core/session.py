"""A session: created or resumed with its prompt frozen, and its immutable active view.

:meth:`Session.create` builds the prompt once (hooks and memory), stores its
bytes by hash and freezes the session on them; :meth:`Session.resume` reads
the frozen bytes back and never rebuilds them. The session keeps its active
rows as an :class:`~hermes_core.view.ActiveView`, replaced wholesale on
reload, commit and compaction, its :class:`~hermes_core.ledger.PrefixLedger`
and its :class:`~hermes_core.pressure.ContextPressure`. :meth:`Session.turn`
takes the turn lease and hands the session to a
:class:`~hermes_core.turn.Turn`. Every service comes from the
:class:`~hermes_core.services.RuntimeServices` it was created with.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from typing import TYPE_CHECKING, Any

from hermes_hookspecs import (
    LeaseHolder,
    NewSession,
    PromptContext,
    SearchHit,
    SessionRecord,
    SessionRotated,
    StoredMessage,
    ValidationError,
)

from .ledger import PrefixLedger
from .pressure import ContextPressure
from .prompt import FrozenPrompt, build_prompt, canonical_tools
from .turn import Turn
from .view import ActiveView

if TYPE_CHECKING:
    from .compression import CompressionOutcome
    from .services import RuntimeServices

log = logging.getLogger("hermes_core.runtime")

PROMPT_ROUTING_KEY = "hermes.prompt"
#: how many rotations a stale session handle follows before giving up
MAX_ROTATION_HOPS = 64


def frozen_prompt(services: RuntimeServices, record: SessionRecord) -> FrozenPrompt:
    """The session's frozen prompt and tools, read back from their blobs."""
    store = services.store()
    assert record.system_prompt_hash is not None and record.tools_hash is not None
    tools_json = store.get_blob(record.tools_hash)
    return FrozenPrompt(
        text=store.get_blob(record.system_prompt_hash),
        prompt_hash=record.system_prompt_hash,
        tools=json.loads(tools_json),
        tools_json=tools_json,
        tools_hash=record.tools_hash,
    )


def live_record(services: RuntimeServices, record: SessionRecord) -> SessionRecord:
    """``record``, or the session a chain of rotations continued it in."""
    store = services.store()
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


def prompt_context(record: SessionRecord) -> PromptContext:
    """The facts of ``record`` the prompt hooks may use."""
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


def build_session_prompt(services: RuntimeServices, record: SessionRecord) -> FrozenPrompt:
    """Build the prompt from the hooks and memory (refreshing memory's snapshot)."""
    extra_blocks, memory_tools = services.events.prompt_extras(record)
    extra_tools: list[dict[str, Any]] = list(
        record.routing.get(PROMPT_ROUTING_KEY, {}).get("tools", [])
    )
    extra_tools += memory_tools
    extra_tools += services.toolbox().schemas()
    return build_prompt(
        services.pm,
        prompt_context(record),
        services.settings,
        extra_blocks=extra_blocks,
        extra_tools=extra_tools,
    )


def store_prompt_blobs(services: RuntimeServices, prompt: FrozenPrompt) -> None:
    store = services.store()
    prompt_hash = store.put_blob("system_prompt", prompt.text)
    tools_hash = store.put_blob("tools", prompt.tools_json)
    if prompt_hash != prompt.prompt_hash or tools_hash != prompt.tools_hash:
        raise ValidationError("store returned a different SHA-256 than the prompt's own")


def freeze(services: RuntimeServices, record: SessionRecord, prompt: FrozenPrompt) -> SessionRecord:
    """Store ``prompt``'s blobs and record their hashes on the session's row."""
    store_prompt_blobs(services, prompt)
    return services.store().update_session(
        record.id, system_prompt_hash=prompt.prompt_hash, tools_hash=prompt.tools_hash
    )


class Session:
    """A session with its frozen prompt and an immutable active view."""

    #: warn when the system prompt and tools take more than this share of the threshold
    PROMPT_ROOM_WARNING = 0.5

    def __init__(
        self, services: RuntimeServices, record: SessionRecord, prompt: FrozenPrompt
    ) -> None:
        self.services = services
        self.record = record
        self.prompt = prompt
        self.model = record.model or services.settings.model.name
        self._lock = threading.RLock()
        self._view = ActiveView()
        self.ledger = PrefixLedger()
        self.pressure = ContextPressure()
        self._room_checked: str | None = None
        self.reload()

    # -- creation / resume --------------------------------------------------
    @classmethod
    def create(
        cls,
        services: RuntimeServices,
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
        started: dt.date | None = None,
    ) -> Session:
        """Create a session, build its prompt once, freeze and store it by hash.

        ``started`` is the date (or a datetime, dated in UTC) the prompt's session
        info gives; None is today, UTC. A replay passes the transcript's own
        start, so replaying it on another day builds the same prompt.
        """
        settings = services.settings
        if started is not None and not isinstance(started, dt.date):
            raise ValidationError(f"started must be a date, not {type(started).__name__}")
        if isinstance(started, dt.datetime):  # an aware one is dated in UTC, like today's
            started = (started.astimezone(dt.UTC) if started.tzinfo else started).date()
        inputs = {
            "caller_message": caller_message,
            "platform": platform if platform is not None else settings.prompt.platform,
            "started_date": (started or dt.datetime.now(dt.UTC).date()).isoformat(),
            "tools": canonical_tools(list(tools or []))[0],
        }
        record = services.store().create_session(
            NewSession(
                id=session_id,
                title=title,
                cwd=cwd,
                goal=goal,
                model=model or settings.model.name,
                provider=provider,
                routing={**(routing or {}), PROMPT_ROUTING_KEY: inputs},
            )
        )
        prompt = build_session_prompt(services, record)
        record = freeze(services, record, prompt)
        session = cls(services, record, prompt)
        services.events.session_started(record, resumed=False)
        return session

    @classmethod
    def resume(cls, services: RuntimeServices, session_id: str) -> Session:
        """Reopen a stored session with its frozen prompt bytes (never rebuilt here)."""
        record = live_record(services, services.store().get_session(session_id))
        if record.system_prompt_hash is None or record.tools_hash is None:
            prompt = build_session_prompt(services, record)
            record = freeze(services, record, prompt)
        else:
            prompt = frozen_prompt(services, record)
            services.events.session_activated(record)
        session = cls(services, record, prompt)
        services.events.session_started(record, resumed=True)
        return session

    @property
    def hermes(self) -> RuntimeServices:
        """The host's services (the :class:`~hermes_core.host.Hermes` that opened the session)."""
        return self.services

    # -- the prompt --------------------------------------------------------------
    def stage_prompt(self, record: SessionRecord) -> FrozenPrompt:
        """Build the prompt ``record`` gets and store its blobs, writing no session row.

        A compression stages the continuing session's prompt this way and
        writes its hashes inside ``archive_and_compact``'s transaction, then
        calls :meth:`compacted`.
        """
        prompt = build_session_prompt(self.services, record)
        store_prompt_blobs(self.services, prompt)
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

    def compacted(self, prompt: FrozenPrompt, child: SessionRecord | None = None) -> bool:
        """A compaction committed: continue in ``child`` (a rotation) with ``prompt``.

        The view is rebuilt, the last usage (which measured the old view) is
        forgotten and the ledger names the next break a compaction. True when
        the prompt's bytes changed.
        """
        with self._lock:
            if child is not None:
                self.record = child
            self.ledger.mark_compaction()
            self.pressure.view_replaced()
            return self.adopt_prompt(prompt)

    def restore_memory(self) -> None:
        """Memory providers serve this session again (a staged rotation was not committed)."""
        self.services.events.session_activated(self.record)

    def rebuild_prompt(self) -> bool:
        """Invalidate and rebuild the prompt (compaction boundary). True when bytes changed."""
        with self._lock:
            record = self.services.store().get_session(self.record.id)
            prompt = build_session_prompt(self.services, record)
            if (prompt.prompt_hash, prompt.tools_hash) == (
                self.prompt.prompt_hash,
                self.prompt.tools_hash,
            ):
                return False
            self.record = freeze(self.services, record, prompt)
            self.prompt = prompt
            self.reload(force=True)
            return True

    # -- the active view ---------------------------------------------------------
    @property
    def id(self) -> str:
        return self.record.id

    @property
    def view(self) -> ActiveView:
        """The active view (immutable; a reload, commit or compaction replaces it)."""
        return self._view

    def system_message(self) -> dict[str, Any]:
        return {"role": "system", "content": self.prompt.text}

    def reload(self, force: bool = False) -> None:
        """Reload the active view from the store when it changed (or when forced)."""
        with self._lock:
            services = self.services
            store = services.store()
            record = store.get_session(self.record.id)
            if record.end_reason is not None:
                live = live_record(services, record)
                if live.id != record.id:  # another process rotated it: a stale handle follows
                    record, force = live, True
                    if live.system_prompt_hash is not None and live.tools_hash is not None:
                        self.prompt = frozen_prompt(services, live)
                    services.events.session_activated(live)
                    self.pressure.view_replaced()
            version = (record.updated_at, record.compression_count)
            if not force and version == self._view.version:
                return
            self.record = record
            view = ActiveView.build(
                store.active_messages(record.id),
                self.prompt,
                services.tokens(self.model),
                version,
            )
            self._check_prompt_room(view)
            self._view = view

    def _check_prompt_room(self, view: ActiveView) -> None:
        """Warn (once per prompt) when the prompt leaves compressions little room to work in."""
        if self._room_checked == self.prompt.prompt_hash:
            return
        self._room_checked = self.prompt.prompt_hash
        prompt_tokens = view.prefix_tokens
        threshold = self.services.threshold(self.model).threshold_tokens
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

    def append_to_view(self, rows: list[StoredMessage], apis: list[dict[str, Any]]) -> None:
        """A turn committed ``rows`` (sent as ``apis``): the view with them appended."""
        with self._lock:
            record = self.services.store().get_session(self.record.id)
            self.record = record
            self._view = self._view.extended(
                rows, apis, (record.updated_at, record.compression_count)
            )

    @property
    def active_tokens(self) -> int:
        """Tokens of the whole next request without new messages (tools + system + history)."""
        return self._view.total_tokens

    @property
    def measured_tokens(self) -> int:
        """:attr:`active_tokens` corrected by the provider's last reported usage.

        The difference between the reported input tokens of the last answered
        request and our estimate of that same request is carried forward, so
        the compression checks follow the provider's count, not the estimate.
        """
        return self.pressure.measured(self._view.total_tokens)

    def active_messages(self) -> list[StoredMessage]:
        return self._view.rows.to_list()

    # -- operations -----------------------------------------------------------
    def turn(
        self,
        holder: str = "hermes",
        *,
        wait: float | None = None,
        ttl: float | None = None,
    ) -> Turn:
        """Begin a turn: take the session's turn lease (waiting up to ``wait`` seconds)."""
        settings = self.services.settings.session
        ttl = settings.lease_ttl if ttl is None else ttl
        wait = settings.lease_wait if wait is None else wait
        store = self.services.store()
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
            store.release_lease(lease)
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
        return self.services.store().search(
            query, session_id=self.id, limit=limit, include_compacted=include_compacted
        )

    def end(self, reason: str = "user") -> SessionRecord:
        record = self.services.store().end_session(self.id, reason)
        self.record = record
        self.services.events.session_ended(record, reason)
        return record
