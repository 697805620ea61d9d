"""``POST /v1/chat/completions``: JSON and SSE answers."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from .behaviours import Reply
from .wire import _Dropped, _Handler, _Wire


class ChatCompletions(_Wire):
    """The chat-completions endpoint."""

    # ---- /v1/chat/completions

    @staticmethod
    def _usage_chat(body: dict[str, Any], text: str) -> dict[str, int]:
        prompt = max(1, len(json.dumps(body.get("messages", ""))) // 4)
        completion = max(1, len(text) // 4) if text else 0
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _reported_chat_usage(self, body: dict[str, Any], text: str, b: Reply) -> dict[str, Any]:
        """:meth:`_usage_chat` (a subclass may override it), scaled and overridden by ``b``."""
        usage: dict[str, Any] = dict(self._usage_chat(body, text))
        ratio = self.chars_per_token
        if ratio != 4.0:
            usage["prompt_tokens"] = max(1, int(len(json.dumps(body.get("messages", ""))) / ratio))
            usage["completion_tokens"] = max(1, int(len(text) / ratio)) if text else 0
        if b.usage:
            usage.update(b.usage)
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return usage

    @staticmethod
    def _chat_tool_calls(b: Reply) -> list[dict[str, Any]]:
        return [
            {
                "id": call.id or f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for call in b.tool_calls or []
        ]

    def _send_chat(self, h: _Handler, body: dict[str, Any], b: Reply) -> None:
        text = b.refusal or b.text
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if b.refusal or (b.tool_calls and not b.text) else b.text,
            "refusal": b.refusal,
            "annotations": [],
        }
        finish: str = b.finish_reason
        if b.tool_calls:
            message["tool_calls"] = self._chat_tool_calls(b)
            finish = "tool_calls"
        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model", "unknown")),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": self._reported_chat_usage(body, text, b),
            "system_fingerprint": "fp_fake",
        }
        self._send_json(h, "chat.completions", payload, self._validators.chat_completion)

    def _stream_chat(
        self, h: _Handler, body: dict[str, Any], b: Reply, drop_after: int | None
    ) -> None:
        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        model = str(body.get("model", "unknown"))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        field = "refusal" if b.refusal is not None else "content"
        text = b.refusal if b.refusal is not None else b.text

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            c: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                c["usage"] = None
            return c

        chunks = [chunk({"role": "assistant", "content": "", "refusal": None}, None)]
        chunks += [
            chunk({field: text[i : i + b.chunk_chars]}, None)
            for i in range(0, len(text), b.chunk_chars)
        ]
        # one delta per call, carrying its id, name and whole arguments
        chunks += [
            chunk({"tool_calls": [{"index": index, **call}]}, None)
            for index, call in enumerate(self._chat_tool_calls(b))
        ]
        chunks.append(chunk({}, "tool_calls" if b.tool_calls else b.finish_reason))
        if include_usage:
            chunks.append(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "system_fingerprint": "fp_fake",
                    "choices": [],
                    "usage": self._reported_chat_usage(body, text, b),
                }
            )
        self._start_stream(h)
        for i, c in enumerate(chunks):
            if drop_after is not None and i >= drop_after:
                raise _Dropped
            self._validate_model("chat.completions", self._validators.chat_chunk, c)
            self._write_chunk(h, f"data: {json.dumps(c)}\n\n".encode())
        self._write_chunk(h, b"data: [DONE]\n\n")
        self._end_stream(h)
