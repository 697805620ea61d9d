"""The prefix ledger: how much of each request repeats the previous request byte for byte.

A request is a sequence of segments: the tool schemas, the system prompt,
then each message's wire bytes. A hash chain over the segments
(``h[i] = sha256(h[i-1] + sha256(segment[i]))``) makes "is the previous
request a prefix of this one" a single comparison, and the shared prefix a
walk over two chains. The chain grows by one hash per new message, so the
ledger's cost per request does not grow with the session.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from hermes_hookspecs import PrefixEntry, SessionStore


def segment_hash(payload: Any) -> bytes:
    data = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).digest()


def chain_step(previous: bytes, segment: bytes) -> bytes:
    return hashlib.sha256(previous + segment).digest()


@dataclass
class RequestChain:
    """The chain of one request; ``cum[i]`` is the token cost of the first ``i`` segments."""

    hashes: list[bytes] = field(default_factory=list)
    cum: list[int] = field(default_factory=lambda: [0])

    def extend(self, segment: bytes, tokens: int) -> None:
        previous = self.hashes[-1] if self.hashes else b""
        self.hashes.append(chain_step(previous, segment))
        self.cum.append(self.cum[-1] + tokens)

    def copy(self) -> RequestChain:
        return RequestChain(list(self.hashes), list(self.cum))

    @property
    def digest(self) -> str:
        return self.hashes[-1].hex() if self.hashes else ""

    def total_tokens(self) -> int:
        return self.cum[-1]


def shared_prefix(previous: RequestChain, current: RequestChain) -> int:
    """Number of leading segments the two chains share."""
    n = min(len(previous.hashes), len(current.hashes))
    if n and previous.hashes[n - 1] == current.hashes[n - 1]:
        return n
    lo, hi = 0, n  # chains agree up to lo, disagree at hi-1: binary search on the chain
    while lo < hi:
        mid = (lo + hi) // 2
        if previous.hashes[mid] == current.hashes[mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def ledger_entry(
    session_id: str,
    index: int,
    previous: RequestChain | None,
    previous_digest: str | None,
    previous_tokens: int,
    current: RequestChain,
    *,
    compaction_since: bool,
) -> PrefixEntry:
    """Compare ``current`` with the previous request and describe the result.

    ``previous`` may be None after a process restart; then only the stored
    digest of the previous request is known, which answers "was it a full
    prefix" exactly and nothing finer.
    """
    if previous is None and previous_digest is None:
        return PrefixEntry(
            session_id=session_id,
            request_index=index,
            request_hash=current.digest,
            request_tokens=current.total_tokens(),
            shared_prefix_hash="",
            shared_prefix_tokens=0,
            previous_tokens=0,
            break_reason="first",
        )
    if previous is not None:
        shared = shared_prefix(previous, current)
        full = shared == len(previous.hashes)
    else:
        # after a restart only the previous digest is known: find it in this chain
        wanted = bytes.fromhex(previous_digest or "")
        shared = next((i + 1 for i, h in enumerate(current.hashes) if h == wanted), 0)
        full = shared > 0
    shared_tokens = current.cum[shared]
    reason: str | None = None
    if not full:
        if shared == 0:
            reason = "tools"
        elif shared == 1:
            reason = "system_prompt"
        else:
            reason = "compaction" if compaction_since else "message_rewritten"
    return PrefixEntry(
        session_id=session_id,
        request_index=index,
        request_hash=current.digest,
        request_tokens=current.total_tokens(),
        shared_prefix_hash=current.hashes[shared - 1].hex() if shared else "",
        shared_prefix_tokens=shared_tokens,
        previous_tokens=previous_tokens,
        break_reason=reason,
    )


@dataclass(frozen=True)
class LedgerPosition:
    """Where a session's ledger stands: the last request sent and what came since."""

    chain: RequestChain | None = None
    digest: str | None = None
    tokens: int = 0
    request_index: int = 0
    compaction_since: bool = False


@dataclass
class PendingRequest:
    """A prepared request waiting for its response: its entry and the position before it."""

    entry: PrefixEntry
    before: LedgerPosition


class PrefixLedger:
    """A session's prefix ledger: compares each request with the previous one.

    It owns its position (:class:`LedgerPosition`, replaced on every change);
    the turn asks it for the entry of each prepared request
    (:meth:`prepare`), records the entry once the model answered
    (:meth:`record`), or forgets a request that got no answer
    (:meth:`forget`); the compression path marks a compaction
    (:meth:`mark_compaction`) so the next break is named for it.
    """

    def __init__(self) -> None:
        self.position = LedgerPosition()

    @property
    def request_index(self) -> int:
        return self.position.request_index

    @property
    def compaction_since(self) -> bool:
        return self.position.compaction_since

    def mark_compaction(self) -> None:
        """The active view was rewritten: the next request's break is a compaction."""
        self.position = replace(self.position, compaction_since=True)

    def prepare(self, session_id: str, chain: RequestChain, store: SessionStore) -> PendingRequest:
        """The entry of the request ``chain`` describes; the ledger moves past it.

        After a process restart (nothing sent yet in this process) the
        previous request is read back from ``store``'s stored entries.
        """
        before = self.position
        entry = ledger_entry(
            session_id,
            before.request_index,
            before.chain,
            before.digest,
            before.tokens,
            chain,
            compaction_since=before.compaction_since,
        )
        index = before.request_index
        if before.chain is None and before.digest is None and index == 0:
            previous = store.prefix_entries(session_id)
            if previous:
                index = previous[-1].request_index + 1
                entry = ledger_entry(
                    session_id,
                    index,
                    None,
                    previous[-1].request_hash,
                    previous[-1].request_tokens,
                    chain,
                    compaction_since=False,
                )
        self.position = LedgerPosition(
            chain=chain,
            digest=chain.digest,
            tokens=chain.total_tokens(),
            request_index=index + 1,
            compaction_since=False,
        )
        return PendingRequest(entry, before)

    def forget(self, pending: PendingRequest) -> None:
        """A prepared request got no response: it was never a request of the session."""
        self.position = pending.before

    def record(self, pending: PendingRequest, store: SessionStore) -> None:
        """Store the entry of an answered request (a store fault never stops the turn)."""
        with contextlib.suppress(Exception):
            store.record_prefix(pending.entry)
