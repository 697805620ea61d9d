"""A loopback fake of the OpenAI HTTP API for tests.

``FakeOpenAIServer`` is a real ``http.server.ThreadingHTTPServer`` bound to
127.0.0.1 on an ephemeral port, served from a background thread. It speaks the
wire formats of:

- ``POST /v1/chat/completions`` (JSON, or SSE ``chat.completion.chunk`` frames
  ending with ``data: [DONE]`` when ``stream`` is true),
- ``POST /v1/responses`` (JSON, or SSE events ``response.created``,
  ``response.in_progress``, ``response.output_item.added``,
  ``response.content_part.added``, ``response.output_text.delta``/``done``,
  ``response.content_part.done``, ``response.output_item.done`` and one of
  ``response.completed`` / ``response.incomplete`` / ``response.failed``),
- ``POST /v1/responses/compact`` (a ``response.compaction`` object: the kept
  items followed by one opaque ``{"type": "compaction", "encrypted_content"}``
  item),
- ``GET /v1/models``.

Behaviour is scripted per endpoint with a FIFO queue of behaviour objects
(:class:`Reply`, :class:`ErrorReply`, :class:`Malformed`, :class:`Drop`,
:class:`Failed`, :class:`Compact`) or a callable that receives the recorded
request and returns one; when the queue is empty the endpoint's default is
used. A :class:`Reply` can make function calls (``tool_calls``, chat and
Responses, JSON and streaming) and report chosen ``usage``; :class:`Rules`
answers by the request's last message ("when the last message is a tool
result, reply with text; when it contains X, call tool Y").

Standalone: ``python -m hermes_core.testing.fake_openai --port 8099
[--script FILE.json]`` serves until interrupted (see ``__main__``).

The package is split by concern: ``behaviours`` (what to answer), ``validation``
(the SDK's types), ``wire`` (HTTP and SSE framing), ``chat`` and ``responses``
(the endpoints), ``server`` (lifecycle, scripting, routing). Every request is
recorded (method, path, headers, raw bytes, parsed JSON).

Faithfulness: every request body is validated against the official ``openai``
package's request ``TypedDict`` for the endpoint (keys the SDK does not know
are reported too, since pydantic would silently drop them), and every JSON
document the fake sends is validated against the SDK's pydantic model
(``ChatCompletion``, ``ChatCompletionChunk``, ``Response``, each
``ResponseStreamEvent``, ``CompactedResponse``, ``Model``, ``ErrorObject``).
Problems are recorded as :class:`ValidationIssue` and raised by
:meth:`FakeOpenAIServer.check` (called on context-manager exit by default).

One documented deviation: the SDK types ``CompactedResponse.output`` as a list
of *output* items, whose ``message`` variant is assistant-only, while the API
documents the output as "all user messages, followed by a single compaction
item". Kept user messages are therefore validated as
``ResponseInputMessageItem`` (the SDK's type for a stored user message item)
and every other output item as ``ResponseOutputItem``.
"""

from .behaviours import (
    Behaviour,
    Compact,
    Drop,
    Endpoint,
    ErrorReply,
    Failed,
    Malformed,
    Reply,
    Rule,
    Rules,
    ToolCallReply,
)
from .server import FakeOpenAIServer, fake_openai_fixture
from .validation import FakeOpenAIValidationError, RecordedRequest, ValidationIssue

__all__ = [
    "Behaviour",
    "Compact",
    "Drop",
    "Endpoint",
    "ErrorReply",
    "Failed",
    "FakeOpenAIServer",
    "FakeOpenAIValidationError",
    "Malformed",
    "RecordedRequest",
    "Reply",
    "Rule",
    "Rules",
    "ToolCallReply",
    "ValidationIssue",
    "fake_openai_fixture",
]
