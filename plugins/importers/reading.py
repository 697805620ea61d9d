"""Reading transcript files: transparent gzip, a tolerant JSONL reader, small helpers.

Everything here is pure (no module-level state) and raises
:class:`~hermes_hookspecs.ImportFormatError` naming the file and line.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from hermes_hookspecs import ImportFormatError, Recognition

GZIP_MAGIC = b"\x1f\x8b"
#: how many (decompressed) bytes :func:`read_head` returns by default
HEAD_BYTES = 64 * 1024
#: how many (decompressed) bytes format detection reads: enough for several records
SAMPLE_BYTES = 256 * 1024

_MIB = 1024 * 1024
#: the most decompressed bytes produced by one step of :func:`_gunzip_capped`
_STEP = 4 * _MIB


@dataclass(frozen=True)
class ImportLimits:
    """Caps on what an importer reads, so a hostile file cannot exhaust memory or the stack.

    Each limit can be raised for one run with an environment variable (read
    by :meth:`from_env`, which every importer uses by default) or passed to
    an importer's constructor (``ClaudeCodeImporter(limits=ImportLimits(...))``).

    :param max_bytes: decompressed size of the whole file
        (``HERMES_CORE_IMPORT_MAX_BYTES``, default 256 MiB).
    :param max_line_bytes: length of one JSONL line or one JSON document
        line (``HERMES_CORE_IMPORT_MAX_LINE_BYTES``, default 64 MiB).
    :param max_depth: nesting depth of arrays and objects in one JSON value
        (``HERMES_CORE_IMPORT_MAX_DEPTH``, default 200).
    """

    max_bytes: int = 256 * _MIB
    max_line_bytes: int = 64 * _MIB
    max_depth: int = 200

    ENV: ClassVar[dict[str, str]] = {
        "max_bytes": "HERMES_CORE_IMPORT_MAX_BYTES",
        "max_line_bytes": "HERMES_CORE_IMPORT_MAX_LINE_BYTES",
        "max_depth": "HERMES_CORE_IMPORT_MAX_DEPTH",
    }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ImportLimits:
        """The defaults, overridden by the ``HERMES_CORE_IMPORT_MAX_*`` variables."""
        environ = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for field_name, variable in cls.ENV.items():
            raw = environ.get(variable, "").strip()
            if not raw:
                continue
            try:
                number = int(raw.replace("_", ""))
            except ValueError:
                raise ImportFormatError(
                    f"{variable}={raw!r} is not a whole number (a byte count or depth)"
                ) from None
            if number <= 0:
                raise ImportFormatError(f"{variable}={raw!r} must be positive")
            values[field_name] = number
        return cls(**values)

    def exceeded(
        self, path: Path | str, field_name: str, what: str, line: int | None = None
    ) -> ImportFormatError:
        """An :class:`ImportFormatError` naming the limit that was hit and how to raise it."""
        limit = getattr(self, field_name)
        spot = f"{path}:{line}" if line else str(path)
        return ImportFormatError(
            f"{spot}: {what} exceeds the import limit {field_name}={limit};"
            f" raise it with {self.ENV[field_name]}=<n> or ImportLimits({field_name}=...)"
        )


def _limits(limits: ImportLimits | None) -> ImportLimits:
    return ImportLimits.from_env() if limits is None else limits


def is_gzip(path: Path) -> bool:
    """Whether ``path`` starts with the gzip magic bytes."""
    with path.open("rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def _gunzip_capped(path: Path, handle: BinaryIO, cap: int, limits: ImportLimits) -> bytes:
    """Decompress a (possibly multi-member) gzip stream, never holding more than ``cap`` bytes.

    Output is produced in steps of at most :data:`_STEP` bytes, so the peak is
    the cap plus one step, whatever the compression ratio.
    """
    out = bytearray()
    decompressor = zlib.decompressobj(wbits=31)
    pending = b""
    while True:
        if not pending:
            pending = handle.read(1 << 16)
            if not pending:
                break
        try:
            out += decompressor.decompress(pending, min(_STEP, cap + 1 - len(out)))
        except zlib.error as exc:
            raise ImportFormatError(f"{path}: broken gzip stream: {exc}") from None
        if len(out) > cap:
            raise limits.exceeded(path, "max_bytes", "the decompressed transcript")
        pending = decompressor.unconsumed_tail
        if decompressor.eof:
            rest = decompressor.unused_data or handle.read(1 << 16)
            while rest and not rest.strip(b"\0"):  # zero padding after the stream
                rest = handle.read(1 << 16)
            if not rest:
                return bytes(out)
            rest = rest.lstrip(b"\0")
            if rest[:2] != GZIP_MAGIC:
                raise ImportFormatError(f"{path}: trailing garbage after the gzip stream")
            decompressor = zlib.decompressobj(wbits=31)  # a multi-member stream
            pending = rest
    raise ImportFormatError(
        f"{path}: broken gzip stream: compressed file ended before the end-of-stream marker"
        " (truncated download or copy?)"
    )


def read_bytes(path: Path, limits: ImportLimits | None = None) -> bytes:
    """The whole file, decompressed when it is gzip, within ``limits.max_bytes``."""
    limits = _limits(limits)
    try:
        with path.open("rb") as handle:
            start = handle.read(2)
            handle.seek(0)
            if start == GZIP_MAGIC:
                return _gunzip_capped(path, handle, limits.max_bytes, limits)
            raw = handle.read(limits.max_bytes + 1)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read transcript: {exc}") from None
    if len(raw) > limits.max_bytes:
        raise limits.exceeded(path, "max_bytes", "the transcript")
    return raw


def read_text(path: Path, limits: ImportLimits | None = None) -> str:
    """The whole file as UTF-8 text (gzip-transparent, within ``limits``)."""
    data = read_bytes(path, limits)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ImportFormatError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (strings ignored), in linear time."""
    if text.count("[") + text.count("{") < 2:
        return 1 if ("[" in text or "{" in text) else 0
    bare = _JSON_STRING.sub("", text)
    steps = (_DEPTH_STEP[m.group()] for m in _BRACKETS.finditer(bare))
    return max(accumulate(steps), default=0)


def check_depth(text: str, path: Path | str, line: int | None, limits: ImportLimits) -> None:
    """Raise the ``max_depth`` error when ``text`` nests deeper than the limit."""
    if text.count("[") + text.count("{") > limits.max_depth and json_depth(text) > limits.max_depth:
        raise limits.exceeded(path, "max_depth", "JSON nesting depth", line)


def decode_head(head: bytes, size: int = SAMPLE_BYTES) -> bytes:
    """``head`` decompressed if it is the start of a gzip stream (best effort, at most ``size``)."""
    if head[:2] != GZIP_MAGIC:
        return head
    try:
        return zlib.decompressobj(wbits=31).decompress(head, size)
    except zlib.error:
        return b""


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` decompressed bytes of ``path`` (gzip-transparent).

    A truncated or damaged gzip stream gives what decompressed before the damage.
    """
    with path.open("rb") as handle:
        start = handle.read(2)
        handle.seek(0)
        if start != GZIP_MAGIC:
            return handle.read(size)
        decompressor = zlib.decompressobj(wbits=31)
        out = bytearray()
        while len(out) < size:
            chunk = decompressor.unconsumed_tail or handle.read(1 << 16)
            if not chunk:
                break
            try:
                out += decompressor.decompress(chunk, size - len(out))
            except zlib.error:
                break
            if decompressor.eof:
                break
        return bytes(out)


@dataclass(frozen=True)
class JsonRecord:
    """One JSON value of a JSONL file and the 1-based line it sits on."""

    line: int
    value: Any
    #: position of the value on its line (0 normally, 1+ for torn lines)
    part: int = 0


def iter_jsonl(path: Path, limits: ImportLimits | None = None) -> Iterator[JsonRecord]:
    """Every JSON value of a JSONL file, with its line number.

    Blank lines are skipped. A "torn" line holding several JSON values
    back to back (a writer lost a newline) yields each value with the same
    line number and increasing ``part``. Anything that is not JSON raises
    :class:`ImportFormatError` naming the line and column; a line longer
    than ``limits.max_line_bytes`` or nested deeper than
    ``limits.max_depth`` raises it naming the limit.
    """
    limits = _limits(limits)
    decoder = json.JSONDecoder()
    text = read_text(path, limits)
    start = 0
    number = 0
    size = len(text)
    while start <= size:
        end = text.find("\n", start)
        if end < 0:
            end = size
        number += 1
        line = text[start:end]
        start = end + 1
        if len(line) > limits.max_line_bytes:
            raise limits.exceeded(
                path, "max_line_bytes", f"a line of {len(line)} characters", number
            )
        stripped = line.strip()
        if not stripped:
            continue
        check_depth(stripped, path, number, limits)
        position = 0
        part = 0
        while position < len(stripped):
            try:
                value, end_at = decoder.raw_decode(stripped, position)
            except json.JSONDecodeError as exc:
                shown = stripped[exc.pos : exc.pos + 40]
                raise ImportFormatError(
                    f"{path}:{number}: invalid JSON at column {exc.pos + 1}: {exc.msg}"
                    f" (near {shown!r})"
                ) from None
            except RecursionError:
                raise limits.exceeded(path, "max_depth", "JSON nesting depth", number) from None
            yield JsonRecord(number, value, part)
            part += 1
            position = end_at
            while position < len(stripped) and stripped[position].isspace():
                position += 1


def load_json_document(path: Path, limits: ImportLimits | None = None) -> Any:
    """Parse a whole-file JSON document within ``limits``; errors name line and column."""
    limits = _limits(limits)
    text = read_text(path, limits)
    if not text.strip():
        raise ImportFormatError(f"{path}:1: empty file")
    check_depth(text, path, None, limits)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"{path}:{exc.lineno}: invalid JSON at column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise limits.exceeded(path, "max_depth", "JSON nesting depth") from None


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


def sample_records(sample: bytes, limit: int = 200) -> tuple[list[Any], int]:
    """The JSON values on the complete lines of ``sample`` (a file's first bytes).

    Returns ``(values, bad)``: up to ``limit`` parsed values (torn lines give
    each of their values) and how many non-blank lines did not parse. The
    last line is ignored when ``sample`` does not end with a newline (it may
    be cut short by the sample size), unless it is the only line.
    """
    data = decode_head(sample)
    lines = data.split(b"\n")
    if len(lines) > 1 and not data.endswith(b"\n"):
        lines = lines[:-1]
    decoder = json.JSONDecoder()
    values: list[Any] = []
    bad = 0
    for raw in lines:
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        if len(values) >= limit:
            break
        position = 0
        while position < len(text):
            try:
                value, position = decoder.raw_decode(text, position)
            except (json.JSONDecodeError, RecursionError):
                bad += 1
                break
            values.append(value)
            while position < len(text) and text[position].isspace():
                position += 1
    return values, bad


#: the share of sampled records that must be a format's own for a file to be that format
MAJORITY = 0.8


def judge_sample(
    objects: list[dict[str, Any]],
    own: list[dict[str, Any]],
    bad: int,
    *,
    what: str,
    near_score: float,
    none_reason: str,
    matched_reason: str,
) -> Recognition:
    """The verdict on a sample whose ``own`` records are the format's (one rule for every
    JSONL importer): none is a miss scored ``near_score``; under :data:`MAJORITY` of the
    records is a miss naming a stranger record; otherwise a match scored by the share."""
    score = len(own) / (len(objects) + bad)
    if not own:
        return Recognition(matched=False, score=near_score, reason=none_reason)
    if len(own) < MAJORITY * len(objects):
        odd = next(v for v in objects if v not in own)
        return Recognition(
            matched=False,
            score=score,
            reason=f"{len(objects) - len(own)} of {len(objects)} records are not {what}"
            f" records (e.g. type {str(odd.get('type'))[:40]!r})",
        )
    return Recognition(matched=True, score=score, reason=matched_reason)
