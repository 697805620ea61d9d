"""The tool-call ordering rules every imported conversation must satisfy."""

from __future__ import annotations

from collections.abc import Sequence

from hermes_hookspecs import Message


def check_sequence(messages: Sequence[Message], *, allow_open_end: bool = False) -> list[str]:
    """Problems with the tool-call ordering of ``messages`` (empty when valid).

    The one validator every importer's output passes (the builder runs it;
    ``tests/test_importers.py`` runs it over every bundled transcript). The
    rules (chat-completions semantics):

    * every ``tool`` message answers a call of the assistant message right
      before its run of tool messages (tool messages are contiguous), so no
      message sits between a call and its result;
    * a call is answered at most once;
    * an assistant message's calls are all answered before the next
      non-tool message, and by the end of the conversation (importers stub
      a call the transcript never answered); with ``allow_open_end`` the
      final assistant message, with nothing but its own tool messages after
      it, may keep unanswered calls (a live turn waiting for its tools);
    * call ids are unique within the conversation;
    * an assistant message has text or tool calls.
    """
    problems: list[str] = []
    seen_ids: dict[str, int] = {}
    open_index: int | None = None
    open_calls: dict[str, bool] = {}

    def close_block(at: int) -> None:
        nonlocal open_index, open_calls
        if open_index is not None:
            missing = [call_id for call_id, answered in open_calls.items() if not answered]
            if missing:
                problems.append(
                    f"message {open_index}: calls {missing} are unanswered but the"
                    f" conversation goes on at message {at}"
                )
        open_index = None
        open_calls = {}

    for index, message in enumerate(messages):
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            if open_index is None:
                problems.append(
                    f"message {index}: tool result for {call_id!r} does not follow an"
                    " assistant message with tool calls"
                )
            elif call_id not in open_calls:
                problems.append(
                    f"message {index}: tool result answers unknown call id {call_id!r}"
                    f" (assistant message {open_index} made {sorted(open_calls)})"
                )
            elif open_calls[call_id]:
                problems.append(f"message {index}: second tool result for call id {call_id!r}")
            else:
                open_calls[call_id] = True
            continue
        close_block(index)
        if message.role != "assistant":
            continue
        calls = message.tool_calls or []
        if not calls and not message.text():
            problems.append(f"message {index}: assistant message has neither text nor tool calls")
        for call in calls:
            if call.id in seen_ids:
                problems.append(
                    f"message {index}: call id {call.id!r} already used by message"
                    f" {seen_ids[call.id]}"
                )
            seen_ids[call.id] = index
        if calls:
            open_index = index
            open_calls = {call.id: False for call in calls}
    if open_index is not None and not allow_open_end:
        missing = [call_id for call_id, answered in open_calls.items() if not answered]
        if missing:
            problems.append(
                f"message {open_index}: calls {missing} are never answered (the conversation"
                " ends with them open)"
            )
    return problems
