"""The prefix ledger: how much of each request repeats the previous request byte for byte.

A request is a sequence of segments: the tool schemas, the system prompt,
then each message's wire bytes. A hash chain over the segments
(``h[i] = sha256(h[i-1] + sha256(segment[i]))``) makes "is the previous
request a prefix of this one" a single comparison, and the shared prefix a
walk over two chains. The chain grows by one hash per new message, so the
ledger's cost per request does not grow with the session.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from hermes_hookspecs import PrefixEntry


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
