"""A session's active view: the stored rows a request sends, as one immutable value.

:class:`ActiveView` holds the active rows, their wire dicts and the ledger
chain of the request they make (tools, system prompt, then every row), so the
runtime's cost per step does not grow with the session's length. A view is
never changed: a reload or a compaction builds a new one
(:meth:`ActiveView.build`), a commit derives one with the turn's rows
appended (:meth:`ActiveView.extended`), and the session swaps its reference.
A reader holding a view keeps a consistent one.

Deriving a view does not copy the session's history: views derived one from
another share append-only buffers, and each sees only its own first ``n``
entries (:class:`Window`), which nothing ever changes. Only extending a view
that is not the newest of its line copies (then the two lines part).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar, overload

from hermes_hookspecs import Message, StoredMessage

from .ledger import RequestChain, segment_hash
from .prompt import FrozenPrompt
from .tokens import Tokens

T = TypeVar("T")

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


class Window(Sequence[T]):
    """The first ``length`` items of an append-only list, read-only (no copy)."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[T], length: int) -> None:
        self._items = items
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return self._items[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("view index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._length)

    def to_list(self) -> list[T]:
        """A list of the items (one C-level slice)."""
        return self._items[: self._length]

    def __bool__(self) -> bool:
        return self._length > 0

    def __repr__(self) -> str:
        return f"Window({self._items[: self._length]!r})"


@dataclass(frozen=True)
class _Line:
    """The append-only buffers a line of views shares."""

    rows: list[StoredMessage] = field(default_factory=list)
    apis: list[dict[str, Any]] = field(default_factory=list)
    #: the request chain: tools, system prompt, then one segment per row
    chain: RequestChain = field(default_factory=RequestChain)


@dataclass(frozen=True)
class ActiveView:
    """The active rows of a session with their wire dicts and request chain (immutable)."""

    _line: _Line = field(default_factory=_Line)
    #: how many rows of the line this view holds
    length: int = 0
    #: the chain of the tools and system prompt only
    prefix: RequestChain = field(default_factory=RequestChain)
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
        apis = [row.to_api() for row in rows]
        prefix = prefix_chain(prompt, tokens)
        chain = prefix.copy()
        for api, row in zip(apis, rows, strict=True):
            chain.extend(segment_hash(api), row.token_count or 0)
        return cls(_Line(list(rows), apis, chain), len(rows), prefix, version)

    def extended(
        self,
        rows: Sequence[StoredMessage],
        apis: Sequence[dict[str, Any]],
        version: Version | None,
    ) -> ActiveView:
        """A new view: this one with ``rows`` (sent as ``apis``) appended.

        O(len(rows)) when this view is the newest of its line (the usual
        case: the session's current view), a copy of the line otherwise.
        """
        line = self._line
        if len(line.rows) != self.length:  # a later view extended the line: part from it
            line = _Line(line.rows[: self.length], line.apis[: self.length], self._chain_copy(line))
        for row, api in zip(rows, apis, strict=True):
            line.rows.append(row)
            line.apis.append(api)
            line.chain.extend(segment_hash(api), row.token_count or 0)
        return ActiveView(line, self.length + len(rows), self.prefix, version)

    def _chain_copy(self, line: _Line) -> RequestChain:
        segments = len(self.prefix.hashes) + self.length
        return RequestChain(line.chain.hashes[:segments], line.chain.cum[: segments + 1])

    # -- reading ----------------------------------------------------------------
    @property
    def rows(self) -> Window[StoredMessage]:
        """The active rows, oldest first."""
        return Window(self._line.rows, self.length)

    @property
    def apis(self) -> Window[dict[str, Any]]:
        """The rows' wire dicts, as sent."""
        return Window(self._line.apis, self.length)

    def chain(self) -> RequestChain:
        """A copy of the request chain of this view (tools, system prompt, rows)."""
        return self._chain_copy(self._line)

    @property
    def total_tokens(self) -> int:
        """Tokens of a request made of this view alone (tools + system + rows)."""
        return self._line.chain.cum[len(self.prefix.hashes) + self.length]

    @property
    def prefix_tokens(self) -> int:
        """Tokens of the tools and the system prompt."""
        return self.prefix.total_tokens()

    def messages(self) -> list[Message]:
        return [row.message for row in self.rows]
