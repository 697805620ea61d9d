"""Test-only loader: an OpenAI chat-format transcript file -> a list of plain messages.

This exists only to feed the reference-side runners while testing them; the
project's real importers live elsewhere.  It reads files shaped like
``shared/transcripts/openai-chat/*.json``: an object with ``messages`` (OpenAI
chat messages whose ``content`` may be a list of parts) and optionally
``response`` (a chat.completion whose first choice is the final assistant
message).  Content parts are flattened to one string; keys other than the
standard chat ones (e.g. ``cache_control``) are dropped.

Standard library only, so it runs under either venv.  As a script:
``python transcript_loader.py IN.json OUT.json [--no-response]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

KEPT_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
KNOWN_ROLES = frozenset({"system", "user", "assistant", "tool"})
PART_SEPARATOR = "\n"


class TranscriptFormatError(ValueError):
    """The transcript does not have the expected shape; the message says where."""


def flatten_content(content: Any, where: str) -> str | None:
    """Join text parts into one string; non-text parts become a short placeholder."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise TranscriptFormatError(f"{where}.content: expected str, list or null, got {content!r}")
    texts: list[str] = []
    for j, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict) or "type" not in part:
            raise TranscriptFormatError(f"{where}.content[{j}]: expected an object with 'type'")
        if part["type"] in ("text", "input_text", "output_text"):
            text = part.get("text")
            if not isinstance(text, str):
                raise TranscriptFormatError(f"{where}.content[{j}].text: expected a string")
            texts.append(text)
        else:
            texts.append(f"[{part['type']} omitted]")
    return PART_SEPARATOR.join(texts)


def clean_tool_calls(tool_calls: Any, where: str) -> list[dict[str, Any]] | None:
    """Keep id/type/function of each tool call (drops provider extras such as ``index``)."""
    if tool_calls is None:
        return None
    if not isinstance(tool_calls, list):
        raise TranscriptFormatError(f"{where}.tool_calls: expected a list")
    cleaned = []
    for j, call in enumerate(tool_calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise TranscriptFormatError(f"{where}.tool_calls[{j}].function.name missing")
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        cleaned.append(
            {
                "id": str(call.get("id", "")),
                "type": call.get("type", "function"),
                "function": {"name": fn["name"], "arguments": args},
            }
        )
    return cleaned or None


def normalize_message(raw: Any, where: str) -> dict[str, Any]:
    """One plain OpenAI chat message with string (or null) content."""
    if not isinstance(raw, dict):
        raise TranscriptFormatError(f"{where}: expected an object")
    role = raw.get("role")
    if role not in KNOWN_ROLES:
        raise TranscriptFormatError(f"{where}.role: unknown role {role!r}")
    msg: dict[str, Any] = {"role": role, "content": flatten_content(raw.get("content"), where)}
    tool_calls = clean_tool_calls(raw.get("tool_calls"), where)
    if tool_calls:
        msg["tool_calls"] = tool_calls
    for key in ("tool_call_id", "name"):
        if isinstance(raw.get(key), str):
            msg[key] = raw[key]
    return msg


def load_openai_chat_transcript(path: Path, include_response: bool = True) -> list[dict[str, Any]]:
    """Messages of an openai-chat transcript file, plus the response's message if asked."""
    raw = Path(path).read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TranscriptFormatError(f"{path}: expected an object with a 'messages' list")
    messages = [normalize_message(m, f"messages[{i}]") for i, m in enumerate(data["messages"])]
    response = data.get("response")
    if include_response and isinstance(response, dict) and response.get("choices"):
        messages.append(normalize_message(response["choices"][0].get("message"), "response"))
    return messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Flatten an openai-chat transcript to a list.")
    parser.add_argument("source", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--no-response", action="store_true", help="skip the final response")
    args = parser.parse_args(argv)
    messages = load_openai_chat_transcript(args.source, include_response=not args.no_response)
    args.dest.write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")
    print(f"{len(messages)} messages -> {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
