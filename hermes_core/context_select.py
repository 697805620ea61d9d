"""Which messages one request sends: the ``select_context`` hook, when anything answers it.

``select_context`` replaces the messages of ONE request; nothing stored
changes. The core's own implementation (the selected engine's, answering
last) leaves them as they are unless the engine overrides it, so the hook
is skipped entirely in the common case (no per-request cost).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hermes_hookspecs import ContextEngine, Message, SelectRequest

if TYPE_CHECKING:
    from .services import RuntimeServices


def select_messages(
    services: RuntimeServices,
    messages: list[dict[str, Any]],
    draft: Callable[[], list[Message]],
    *,
    session_id: str,
    model: str,
    system_prompt: str,
    threshold: Callable[[], int],
) -> list[dict[str, Any]]:
    """The wire messages to send: ``messages``, or the ``select_context`` hook's choice.

    The hook runs only when something besides the default would answer (a
    plugin implementing it, or an engine overriding ``select_context``);
    ``draft`` builds the messages behind ``messages`` and ``threshold``
    gives the compression threshold, both only then. A message
    the hook kept is sent with its cached wire dict, so its ``api_content``
    (a turn's injected context) is sent as stored.
    """
    hook = services.pm.hook.select_context
    engine = services.engine() if services.has_engine() else None
    overridden = (
        engine is not None and type(engine).select_context is not ContextEngine.select_context
    )
    if len(hook.get_hookimpls()) <= 1 and not overridden:
        return messages
    # the messages are validated already (stored rows and this turn's): no re-validation
    system = Message(role="system", content=system_prompt)
    rows = [system, *draft()]
    request = SelectRequest.model_construct(
        session_id=session_id,
        messages=rows,
        model=model,
        settings=services.compression_settings(threshold()),
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
