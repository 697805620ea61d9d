"""Reading transcript files: transparent gzip, a tolerant JSONL reader, small helpers.

Everything here is pure (no module-level state) and raises
:class:`~hermes_hookspecs.ImportFormatError` naming the file and line.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_hookspecs import ImportFormatError

GZIP_MAGIC = b"\x1f\x8b"
#: how many (decompressed) bytes :func:`read_head` returns by default
HEAD_BYTES = 64 * 1024


def is_gzip(path: Path) -> bool:
    """Whether ``path`` starts with the gzip magic bytes."""
    with path.open("rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def read_bytes(path: Path) -> bytes:
    """The whole file, decompressed when it is gzip."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read transcript: {exc}") from None
    if raw[:2] == GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise ImportFormatError(f"{path}: broken gzip stream: {exc}") from None
    return raw


def read_text(path: Path) -> str:
    """The whole file as UTF-8 text (gzip-transparent)."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ImportFormatError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None


def decode_head(head: bytes) -> bytes:
    """``head`` decompressed if it is the start of a gzip stream (best effort)."""
    if head[:2] != GZIP_MAGIC:
        return head
    try:
        return zlib.decompressobj(wbits=31).decompress(head, HEAD_BYTES)
    except zlib.error:
        return b""


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` decompressed bytes of ``path`` (gzip-transparent)."""
    with path.open("rb") as handle:
        start = handle.read(2)
        handle.seek(0)
        if start == GZIP_MAGIC:
            try:
                with gzip.open(handle) as unzipped:
                    return unzipped.read(size)
            except (OSError, EOFError, zlib.error):
                return b""
        return handle.read(size)


@dataclass(frozen=True)
class JsonRecord:
    """One JSON value of a JSONL file and the 1-based line it sits on."""

    line: int
    value: Any
    #: position of the value on its line (0 normally, 1+ for torn lines)
    part: int = 0


def iter_jsonl(path: Path) -> Iterator[JsonRecord]:
    """Every JSON value of a JSONL file, with its line number.

    Blank lines are skipped. A "torn" line holding several JSON values
    back to back (a writer lost a newline) yields each value with the same
    line number and increasing ``part``. Anything that is not JSON raises
    :class:`ImportFormatError` naming the line and column.
    """
    decoder = json.JSONDecoder()
    text = read_text(path)
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        position = 0
        part = 0
        while position < len(stripped):
            try:
                value, end = decoder.raw_decode(stripped, position)
            except json.JSONDecodeError as exc:
                shown = stripped[exc.pos : exc.pos + 40]
                raise ImportFormatError(
                    f"{path}:{number}: invalid JSON at column {exc.pos + 1}: {exc.msg}"
                    f" (near {shown!r})"
                ) from None
            yield JsonRecord(number, value, part)
            part += 1
            position = end
            while position < len(stripped) and stripped[position].isspace():
                position += 1


def load_json_document(path: Path) -> Any:
    """Parse a whole-file JSON document; errors name line and column."""
    text = read_text(path)
    if not text.strip():
        raise ImportFormatError(f"{path}:1: empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"{path}:{exc.lineno}: invalid JSON at column {exc.colno}: {exc.msg}"
        ) from None


def first_json_key(head: bytes) -> str | None:
    """The first key of a JSON object document, read from its first bytes."""
    text = head.lstrip()
    if not text.startswith(b"{"):
        return None
    decoder = json.JSONDecoder()
    body = text[1:].lstrip().decode("utf-8", errors="replace")
    if not body.startswith('"'):
        return None
    try:
        key, _ = decoder.raw_decode(body)
    except json.JSONDecodeError:
        return None
    return key if isinstance(key, str) else None


def first_line(head: bytes) -> bytes:
    """The first non-blank line of ``head`` (possibly cut short by the head size)."""
    for line in head.split(b"\n"):
        if line.strip():
            return line.strip()
    return b""


def parse_first_record(head: bytes) -> dict[str, Any] | None:
    """The first JSONL record if it fits in ``head`` and is an object, else None."""
    line = first_line(head)
    if not line.startswith(b"{"):
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(line.decode("utf-8", errors="replace"))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def flatten_content(content: Any) -> str:
    """Message content (a string or a list of parts) as plain text.

    Text parts (``text``, ``input_text``, ``output_text``) are joined with a
    newline; any other part becomes ``[type]`` (for example ``[image]``).
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return flatten_content([content])
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    pieces: list[str] = []
    for part in content:
        if isinstance(part, str):
            pieces.append(part)
            continue
        if not isinstance(part, dict):
            pieces.append(json.dumps(part, ensure_ascii=False))
            continue
        kind = part.get("type")
        text = part.get("text")
        if isinstance(text, str) and kind in (None, "text", "input_text", "output_text"):
            pieces.append(text)
        elif kind == "image_url" or kind == "input_image":
            pieces.append("[image]")
        else:
            pieces.append(f"[{kind}]")
    return "\n".join(pieces)


def json_arguments(value: Any) -> str:
    """Tool-call arguments as a JSON string (objects are encoded, strings kept)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty dict (for optional sub-objects)."""
    return value if isinstance(value, dict) else {}


def require_dict(value: Any, where: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an :class:`ImportFormatError` at ``where``."""
    if not isinstance(value, dict):
        raise ImportFormatError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value
