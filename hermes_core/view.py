"""A session's active view: the stored rows a request sends, as one immutable value.

:class:`ActiveView` holds the active rows, their wire dicts and the ledger
chain of the request they make (tools, system prompt, then every row), so the
runtime's cost per step does not grow with the session's length. A view is
never changed in place: a reload or a compaction builds a new one
(:meth:`ActiveView.build`), a commit derives one with the turn's rows
appended (:meth:`ActiveView.extended`), and the session swaps its reference.
A reader holding a view keeps a consistent one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hermes_hookspecs import Message, StoredMessage

from .ledger import RequestChain, segment_hash
from .prompt import FrozenPrompt
from .tokens import Tokens

#: a view's version: the session row's ``(updated_at, compression_count)``
Version = tuple[float, int]


def prefix_chain(prompt: FrozenPrompt, tokens: Tokens) -> RequestChain:
    """The chain of a request's fixed prefix: the tool schemas, then the system prompt."""
    chain = RequestChain()
    chain.extend(segment_hash({"tools": prompt.tools_json}), tokens.count_text(prompt.tools_json))
    chain.extend(
        segment_hash({"role": "system", "content": prompt.text}),
        tokens.count_message(Message(role="system", content=prompt.text)),
    )
    return chain


@dataclass(frozen=True)
class ActiveView:
    """The active rows of a session with their wire dicts and request chain (immutable)."""

    rows: tuple[StoredMessage, ...] = ()
    apis: tuple[dict[str, Any], ...] = ()
    #: the chain of the tools and system prompt only
    prefix: RequestChain = field(default_factory=RequestChain)
    #: ``prefix`` extended by every row
    chain: RequestChain = field(default_factory=RequestChain)
    version: Version | None = None

    @classmethod
    def build(
        cls,
        rows: Sequence[StoredMessage],
        prompt: FrozenPrompt,
        tokens: Tokens,
        version: Version | None,
    ) -> ActiveView:
        """The view of freshly read ``rows`` (rows without a token count are counted)."""
        missing = [row for row in rows if row.token_count is None]
        if missing:
            counts = tokens.count_messages([row.message for row in missing])
            for row, count in zip(missing, counts, strict=True):
                row.token_count = count
        apis = tuple(row.to_api() for row in rows)
        prefix = prefix_chain(prompt, tokens)
        chain = prefix.copy()
        for api, row in zip(apis, rows, strict=True):
            chain.extend(segment_hash(api), row.token_count or 0)
        return cls(tuple(rows), apis, prefix, chain, version)

    def extended(
        self,
        rows: Sequence[StoredMessage],
        apis: Sequence[dict[str, Any]],
        version: Version | None,
    ) -> ActiveView:
        """A new view: this one with ``rows`` (sent as ``apis``) appended."""
        chain = self.chain.copy()
        for row, api in zip(rows, apis, strict=True):
            chain.extend(segment_hash(api), row.token_count or 0)
        return ActiveView(
            self.rows + tuple(rows), self.apis + tuple(apis), self.prefix, chain, version
        )

    @property
    def total_tokens(self) -> int:
        """Tokens of a request made of this view alone (tools + system + rows)."""
        return self.chain.total_tokens()

    @property
    def prefix_tokens(self) -> int:
        """Tokens of the tools and the system prompt."""
        return self.prefix.total_tokens()

    def messages(self) -> list[Message]:
        return [row.message for row in self.rows]
