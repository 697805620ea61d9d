"""How the CLI prints: JSON untouched, tables through rich, stored text with controls made visible.

Stored text (messages, titles, snippets, tool output) can hold terminal
escape sequences: a transcript or a tool result is not trusted. Human output
shows every control character (C0, DEL, C1) and the bidirectional overrides
as a visible escape (``\\x1b``, ``\\u202e``) so nothing the store holds can
move the cursor, write the clipboard or reorder a line. ``--json`` prints the
stored bytes exactly (JSON escapes controls itself).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any

import click

#: bidirectional formatting characters that reorder what a terminal shows
_BIDI = {0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def _is_control(code: int) -> bool:
    return code < 0x20 or 0x7F <= code < 0xA0 or code in _BIDI


def visible(text: Any, *, keep_newlines: bool = False) -> str:
    """``text`` with control characters shown as escapes (``\\x1b``); newlines kept if asked."""
    value = "" if text is None else str(text)
    out: list[str] = []
    for ch in value:
        code = ord(ch)
        if keep_newlines and ch in "\n\t":
            out.append(ch)
        elif _is_control(code):
            out.append(_escape(ch))
        else:
            out.append(ch)
    return "".join(out)


def one_line(text: Any, limit: int | None = None) -> str:
    """Stored text on one line: newlines and tabs as spaces, controls escaped, cut at ``limit``."""
    value = ("" if text is None else str(text)).replace("\r\n", " ").replace("\n", " ")
    value = value.replace("\t", " ")
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + "…"
    return visible(value)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def say_empty(what: str, source: str) -> None:
    """An empty result: say so (on stderr, so pipes stay clean) and name what was read."""
    click.echo(f"no {what} in {source}", err=True)


def when(timestamp: float | None) -> str:
    """A stored UNIX time as local ``YYYY-MM-DD HH:MM`` (blank when unset)."""
    if not timestamp:
        return ""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def _width() -> int:
    """The terminal's width; piped output is never folded (one row per line, for grep)."""
    if not sys.stdout.isatty():
        return 10_000
    return max(80, shutil.get_terminal_size((120, 24)).columns)


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    right: Sequence[str] = (),
    title: str | None = None,
) -> None:
    """A table with a header row (rich); cells are escaped and never read as markup."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, box=None, pad_edge=False, header_style="bold", title_justify="left")
    for name in columns:
        table.add_column(name, justify="right" if name in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*(Text(visible(cell)) for cell in row))
    console = Console(width=_width(), soft_wrap=False, highlight=False)
    with console.capture() as captured:
        console.print(table)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))
