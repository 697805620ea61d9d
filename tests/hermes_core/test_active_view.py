"""ActiveView: an immutable value; deriving one never changes another."""

from __future__ import annotations

import time

from hermes_core.ledger import segment_hash
from hermes_core.prompt import FrozenPrompt, sha256
from hermes_core.tokens import Tokens
from hermes_core.view import ActiveView, prefix_chain
from hermes_hookspecs import Message, StoredMessage

PROMPT = FrozenPrompt(
    text="You help.",
    prompt_hash=sha256("You help."),
    tools=[],
    tools_json="[]",
    tools_hash=sha256("[]"),
)
TOKENS = Tokens(None, "test-model")


def row(i: int, text: str | None = None) -> StoredMessage:
    return StoredMessage(
        id=i,
        session_id="s",
        position=i,
        message=Message(role="user", content=text or f"message {i}"),
        token_count=10 + i,
        created_at=time.time(),
    )


def snapshot(view: ActiveView) -> tuple[list[int], list[dict[str, object]], str, int]:
    return [r.id for r in view.rows], view.apis.to_list(), view.chain().digest, view.total_tokens


def test_a_built_view_counts_the_prefix_and_every_row() -> None:
    view = ActiveView.build([row(1), row(2)], PROMPT, TOKENS, (1.0, 0))
    prefix = prefix_chain(PROMPT, TOKENS)
    assert view.prefix_tokens == prefix.total_tokens()
    assert view.total_tokens == prefix.total_tokens() + 11 + 12
    chain = prefix.copy()
    for r in (row(1), row(2)):
        chain.extend(segment_hash(r.to_api()), r.token_count or 0)
    assert view.chain().digest == chain.digest
    assert len(view.rows) == 2 and view.rows[-1].id == 2 and bool(view.rows)
    assert not ActiveView().rows and ActiveView().total_tokens == 0


def test_extending_leaves_the_older_view_as_it_was() -> None:
    base = ActiveView.build([row(1)], PROMPT, TOKENS, (1.0, 0))
    before = snapshot(base)
    newer = base.extended([row(2)], [row(2).to_api()], (2.0, 0))
    assert snapshot(base) == before
    assert [r.id for r in newer.rows] == [1, 2]
    assert newer.total_tokens == base.total_tokens + 12
    # extending the older view again parts from the newer line: neither sees the other's rows
    other = base.extended([row(3, "elsewhere")], [row(3, "elsewhere").to_api()], (3.0, 0))
    assert [r.id for r in other.rows] == [1, 3]
    assert [r.id for r in newer.rows] == [1, 2]
    assert snapshot(base) == before
    assert other.chain().digest != newer.chain().digest
    # ... and the two lines grow on independently
    newest = newer.extended([row(4)], [row(4).to_api()], (4.0, 0))
    assert [r.id for r in newest.rows] == [1, 2, 4]
    assert [r.id for r in other.rows] == [1, 3]


def test_a_window_reads_like_a_sequence_and_stops_at_its_length() -> None:
    base = ActiveView.build([row(1), row(2)], PROMPT, TOKENS, None)
    base.extended([row(3)], [row(3).to_api()], None)
    rows = base.rows
    assert [r.id for r in rows] == [1, 2]
    assert [r.id for r in rows[0:5]] == [1, 2]
    assert rows[-1].id == 2
    try:
        rows[2]
    except IndexError:
        pass
    else:
        raise AssertionError("a window must not read past its length")
