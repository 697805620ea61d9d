"""The engine's working unit: a message with its token cost and the row it came from."""

from __future__ import annotations

from dataclasses import dataclass

from hermes_hookspecs import Message, NewMessage, StoredMessage


@dataclass(slots=True)
class Item:
    """One message of the view being compressed.

    ``stored`` is the row the message came from (None for messages the
    engine made: the summary, stubs); ``changed`` is True once the engine
    rewrote it (pruned), so it no longer counts as carried forward unchanged.
    """

    message: Message
    tokens: int
    stored: StoredMessage | None = None
    changed: bool = False

    @property
    def source_id(self) -> int | None:
        """The id of the row this message copies (a turn's draft row: negative, unstored)."""
        if self.stored is None:
            return None
        return self.stored.origin_id if self.stored.origin_id is not None else self.stored.id

    @property
    def recovery_id(self) -> int | None:
        """The message id session search opens for this message's original text.

        None for a row of a turn not committed yet (a negative draft id): it has no
        id that opens it, and quoting none keeps the view the same once it is stored.
        """
        rid = self.source_id
        return rid if rid is not None and rid > 0 else None

    @property
    def is_real_user(self) -> bool:
        """A message the user wrote (:attr:`Message.written_by_user`)."""
        return self.message.written_by_user

    def to_new(self) -> NewMessage:
        """The row to write for this item in the new active view.

        Built without re-validation: every field comes from validated models,
        and the store validates what it writes.
        """
        if self.stored is not None and not self.changed:
            return NewMessage.model_construct(
                message=self.message,
                api_content=self.stored.api_content,
                token_count=self.tokens,
                turn_id=self.stored.turn_id,
                origin_id=self.source_id,
                annotations=self.stored.annotations,
            )
        turn_id = self.stored.turn_id if self.stored is not None else None
        return NewMessage.model_construct(
            message=self.message, token_count=self.tokens, turn_id=turn_id, annotations={}
        )


def recovery_pointer(message_id: int | None) -> str:
    """The call that opens ``message_id`` again (empty when unknown).

    It names the ``session_open`` tool of the ``recall`` plugin with arguments
    that work as written.
    """
    return f"session_open(message_id={message_id})" if message_id is not None else ""
