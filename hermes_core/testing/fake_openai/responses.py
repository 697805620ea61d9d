"""``POST /v1/responses`` and ``/v1/responses/compact``: JSON and SSE answers."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from .behaviours import Compact, Failed, Reply
from .wire import _Dropped, _Handler, _Wire


class ResponsesAPI(_Wire):
    """The Responses endpoints."""

    # ---- /v1/responses

    @staticmethod
    def _usage_responses(
        body: dict[str, Any], text: str, b: Reply | Failed | None = None, ratio: float = 4.0
    ) -> dict[str, Any]:
        prompt = max(1, int(len(json.dumps(body.get("input", ""))) / ratio))
        out = max(1, int(len(text) / ratio)) if text else 0
        if isinstance(b, Reply) and b.usage:
            prompt = b.usage.get("input_tokens", b.usage.get("prompt_tokens", prompt))
            out = b.usage.get("output_tokens", b.usage.get("completion_tokens", out))
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + out,
        }

    @staticmethod
    def _response_envelope(body: dict[str, Any], rid: str, status: str) -> dict[str, Any]:
        instructions = body.get("instructions")
        return {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": str(body.get("model", "unknown")),
            "output": [],
            "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": [],
            "instructions": instructions if isinstance(instructions, str) else None,
            "previous_response_id": body.get("previous_response_id"),
            "metadata": body.get("metadata") or {},
            "error": None,
            "incomplete_details": None,
            "usage": None,
        }

    def _response_items(self, b: Reply | Failed) -> list[dict[str, Any]]:
        if isinstance(b, Failed):
            return []
        if b.output_items is not None:
            return [dict(item) for item in b.output_items]
        status = "incomplete" if b.finish_reason == "length" else "completed"
        part: dict[str, Any]
        if b.refusal is not None:
            part = {"type": "refusal", "refusal": b.refusal}
        else:
            part = {"type": "output_text", "text": b.text, "annotations": [], "logprobs": []}
        items: list[dict[str, Any]] = []
        if not b.tool_calls or b.text or b.refusal is not None:
            items.append(
                {
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "type": "message",
                    "role": "assistant",
                    "status": status,
                    "content": [part],
                }
            )
        for call in b.tool_calls or []:
            items.append(
                {
                    "id": f"fc_{uuid.uuid4().hex[:24]}",
                    "type": "function_call",
                    "call_id": call.id or f"call_{uuid.uuid4().hex[:24]}",
                    "name": call.name,
                    "arguments": call.arguments_json(),
                    "status": "completed",
                }
            )
        return items

    def _final_response(
        self, body: dict[str, Any], rid: str, b: Reply | Failed, items: list[dict[str, Any]]
    ) -> dict[str, Any]:
        text = "" if isinstance(b, Failed) else (b.refusal or b.text)
        if isinstance(b, Failed):
            resp = self._response_envelope(body, rid, "failed")
            resp["error"] = {"code": b.code, "message": b.message}
        elif b.finish_reason == "length":
            resp = self._response_envelope(body, rid, "incomplete")
            resp["incomplete_details"] = {"reason": "max_output_tokens"}
        else:
            resp = self._response_envelope(body, rid, "completed")
        resp["output"] = items
        resp["usage"] = self._usage_responses(body, text, b, self.chars_per_token)
        return resp

    def _send_response(self, h: _Handler, body: dict[str, Any], b: Reply | Failed) -> None:
        rid = f"resp_{uuid.uuid4().hex[:24]}"
        payload = self._final_response(body, rid, b, self._response_items(b))
        self._send_json(h, "responses", payload, self._validators.response)

    def _stream_response(
        self, h: _Handler, body: dict[str, Any], b: Reply | Failed, drop_after: int | None
    ) -> None:
        rid = f"resp_{uuid.uuid4().hex[:24]}"
        items = self._response_items(b)
        events: list[dict[str, Any]] = [
            {
                "type": "response.created",
                "response": self._response_envelope(body, rid, "in_progress"),
            },
            {
                "type": "response.in_progress",
                "response": self._response_envelope(body, rid, "in_progress"),
            },
        ]
        chunk = b.chunk_chars if isinstance(b, Reply) else 8
        for index, item in enumerate(items):
            events.extend(self._item_events(item, index, chunk))
        final = self._final_response(body, rid, b, items)
        final_type = {
            "completed": "response.completed",
            "incomplete": "response.incomplete",
            "failed": "response.failed",
        }[final["status"]]
        events.append({"type": final_type, "response": final})
        self._start_stream(h)
        for seq, event in enumerate(events):
            if drop_after is not None and seq >= drop_after:
                raise _Dropped
            event["sequence_number"] = seq
            self._validate_model("responses", self._validators.stream_event, event)
            frame = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
            self._write_chunk(h, frame.encode())
        self._end_stream(h)

    @staticmethod
    def _item_events(item: dict[str, Any], index: int, chunk: int) -> list[dict[str, Any]]:
        is_message = item.get("type") == "message" and item.get("role") == "assistant"
        if not is_message:
            return [
                {"type": "response.output_item.added", "output_index": index, "item": item},
                {"type": "response.output_item.done", "output_index": index, "item": item},
            ]
        item_id = str(item["id"])
        added = {**item, "status": "in_progress", "content": []}
        events: list[dict[str, Any]] = [
            {"type": "response.output_item.added", "output_index": index, "item": added}
        ]
        for ci, part in enumerate(item.get("content", [])):
            where = {"item_id": item_id, "output_index": index, "content_index": ci}
            if part.get("type") == "refusal":
                full = str(part.get("refusal", ""))
                events.append(
                    {
                        "type": "response.content_part.added",
                        **where,
                        "part": {"type": "refusal", "refusal": ""},
                    }
                )
                events += [
                    {"type": "response.refusal.delta", **where, "delta": full[i : i + chunk]}
                    for i in range(0, len(full), chunk)
                ]
                events.append({"type": "response.refusal.done", **where, "refusal": full})
            else:
                full = str(part.get("text", ""))
                events.append(
                    {
                        "type": "response.content_part.added",
                        **where,
                        "part": {
                            "type": "output_text",
                            "text": "",
                            "annotations": [],
                            "logprobs": [],
                        },
                    }
                )
                events += [
                    {
                        "type": "response.output_text.delta",
                        **where,
                        "delta": full[i : i + chunk],
                        "logprobs": [],
                    }
                    for i in range(0, len(full), chunk)
                ]
                events.append(
                    {"type": "response.output_text.done", **where, "text": full, "logprobs": []}
                )
            events.append({"type": "response.content_part.done", **where, "part": part})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        return events

    # ---- /v1/responses/compact

    def _send_compact(self, h: _Handler, body: dict[str, Any], b: Compact) -> None:
        if b.kept is not None:
            kept = [dict(item) for item in b.kept]
        else:
            kept = _kept_user_messages(body.get("input"))
        token = b.encrypted_content or (
            "enc_" + uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(body, sort_keys=True)).hex
        )
        compaction = {
            "id": f"cmp_{uuid.uuid4().hex[:24]}",
            "type": "compaction",
            "encrypted_content": token,
        }
        text = json.dumps(body.get("input", ""))
        payload = {
            "id": f"resp_{uuid.uuid4().hex[:24]}",
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*kept, compaction],
            "usage": self._usage_responses(body, text[: len(text) // 10]),
        }
        self._validate_compacted(payload)
        self._send_json_bytes(h, 200, json.dumps(payload).encode())

    def _validate_compacted(self, payload: dict[str, Any]) -> None:
        v = self._validators
        envelope = {
            **payload,
            "output": [item for item in payload["output"] if not _is_input_message(item)],
        }
        self._validate_model("responses.compact", v.compacted, envelope)
        for item in payload["output"]:
            if _is_input_message(item):
                self._validate_model("responses.compact", v.input_message_item, item)
        if not payload["output"] or payload["output"][-1].get("type") != "compaction":
            self._issue(
                "response",
                "responses.compact",
                "CompactedResponse",
                "output must end with exactly one compaction item",
            )
        if sum(1 for item in payload["output"] if item.get("type") == "compaction") != 1:
            self._issue(
                "response",
                "responses.compact",
                "CompactedResponse",
                "output must hold exactly one compaction item",
            )


def _is_input_message(item: Mapping[str, Any]) -> bool:
    return item.get("type") == "message" and item.get("role") in ("user", "system", "developer")


def _kept_user_messages(items: Any) -> list[dict[str, Any]]:
    """The request's user messages, shaped as stored input message items."""
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    kept: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        if item.get("type", "message") != "message":
            continue
        content = item.get("content")
        if isinstance(content, str):
            content = [{"type": "input_text", "text": content}]
        kept.append(
            {
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "role": "user",
                "status": "completed",
                "content": content,
            }
        )
    return kept
