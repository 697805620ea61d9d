"""What a terminal leaves on screen of a command's captured output.

A tool result keeps every colour code, cursor move and progress-bar frame the
command printed: they cost a model tokens, say nothing, and split the words a
search or an extractor looks for (``\x1b[31merror\x1b[0m:``). Every reader of
tool output (the recall tools, the compressor's facts and identifiers) strips
them here, the same way. Output that moves the cursor about (a full-screen
program's spinner, redrawn in place hundreds of times in one poll) is laid out on a
screen, so what is read is what was left on it, once.
"""

from __future__ import annotations

import re

#: the control sequences but CSI, and the C0 controls but tab, newline and carriage
#: return: OSC (``ESC ]``: titles, links), the other escapes (``ESC ( B`` charset
#: choices, ``ESC 7``/``ESC 8`` cursor save and restore, ``ESC =``, ``ESC M``, ``ESC c``)
_OTHER_CONTROLS = (
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: ESC ] text, ended by BEL or ST
    r"|\x1b[ -/]+[0-~]"  # ESC, intermediates, final: ESC ( B
    r"|\x1b[0-Z\\^_`-~]"  # ESC and one byte: ESC 7, ESC =, ESC M, ESC c
    r"|[\x00-\x07\x0b\x0c\x0e-\x1f\x7f]"  # C0 controls (backspace apart, in _TERMINAL)
)
#: terminal control sequences: CSI (``ESC [``: colours, cursor moves), backspace and
#: :data:`_OTHER_CONTROLS`
_TERMINAL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x08|" + _OTHER_CONTROLS)
#: one character that starts a control sequence or is a control (ESC among them)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


#: a CSI sequence that moves the cursor to another place or erases the screen: text
#: drawn after one is laid out on a screen (:func:`_screen`), not in the order written
_ADDRESSING = re.compile(r"\x1b\[[0-9;]*[HfABCDEFGdJ]")
#: the screen's tokens: a CSI sequence (its parameters and final byte captured), another
#: control sequence or control, a line end, a carriage return, a backspace, or a run of text
_TOKEN = re.compile(
    r"\x1b\[([0-?]*)[ -/]*([@-~])"
    r"|(\r?\n)|(\r)|(\x08)|" + _OTHER_CONTROLS + r"|([^\x00-\x08\x0a-\x1f\x7f]+)"
)
#: a cursor address beyond this row or column is taken as this one (a hostile
#: ``ESC [ 99999999 ; 99999999 H`` draws no screen of that size)
MAX_ROWS = 5_000
MAX_COLUMNS = 2_000
#: a screen's rows with nothing on them, between two that show text, are shown as at
#: most this many blank lines (a far cursor move leaves no page of blank lines)
MAX_BLANK_ROWS = 2


def plain_text(text: str) -> str:
    """``text`` as a terminal would leave it on screen: control sequences removed,
    and of a line a carriage return rewrote (a progress bar), what was written last.
    A command's captured output keeps its colours, cursor moves and every frame of
    a progress bar, which cost a model tokens and say nothing.

    Output that moves the cursor (a full-screen program's spinner and redraws:
    ``ESC [ 2 ; 23 H``, cursor up, erase line) is laid out on a screen as the cells
    were left (:func:`_screen`), so each redrawn frame does not add itself to the text.
    """
    if "\r" not in text and _CONTROL.search(text) is None:
        return text
    if _ADDRESSING.search(text) is not None:
        return _screen(text)
    return _lines(text)


def _lines(text: str) -> str:
    text = _TERMINAL.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rstrip("\r").rpartition("\r")[2] for line in text.split("\n"))
    return text


def _number(params: str, default: int = 1) -> int:
    first = params.split(";", 1)[0]
    return int(first) if first.isdigit() and int(first) > 0 else default


def _screen(text: str) -> str:
    """The text a screen shows after ``text`` is written to it from its top left corner.

    The rows are the text's lines. An absolute address (``H``, ``f``, ``d``) counts
    rows from the row where the first one was met (the start of the next row when the
    cursor stood inside one): the program drew its screen from there, and what was
    printed before (a harness's header) scrolled above it. A line end moves to the
    start of the next row (a terminal's output translation);
    carriage return, backspace, cursor position (``H``, ``f``), up, down, forward, back,
    next and previous line, column and row (``A``-``G``, ``d``), erase line (``K``) and
    erase display (``J``) move and erase as a terminal does; text overwrites the cells
    it is written on, with no wrap at any width. Every other control sequence is dropped.
    An address or a move goes at most :data:`MAX_ROWS` rows and :data:`MAX_COLUMNS`
    columns, and padding rows to a column adds at most 10,000 blanks or twice the
    text's size; the rows are returned with their trailing blanks removed, without the empty
    rows above and below the text, and at most :data:`MAX_BLANK_ROWS` blank lines
    between two rows.
    """
    rows: dict[int, list[str]] = {}
    row = col = 0
    top: int | None = None  # the row an absolute address counts from
    # blanks the screen may add to lay text out (padding a row to a column): a hostile
    # stream of far cursor moves gets no more than a few times its own size
    padding = max(10_000, 2 * len(text))

    def cells(at: int) -> list[str]:
        return rows.setdefault(at, [])

    for match in _TOKEN.finditer(text):
        params, final, newline, carriage, backspace, run = match.groups()
        if run is not None:
            line = cells(row)
            if len(line) < col:
                pad = min(col - len(line), padding)
                padding -= pad
                line.extend(" " * pad)
                col = len(line)
            line[col : col + len(run)] = run
            col += len(run)
        elif newline is not None:
            row, col = row + 1, 0
        elif carriage is not None:
            col = 0
        elif backspace is not None:
            col = max(0, col - 1)
        elif final is None:
            continue  # another escape or a control: nothing on screen
        elif final in "Hfd":
            if top is None:
                top = row + 1 if col else row
            parts = [*params.split(";"), "", ""][:2]
            row = top + min(_number(parts[0]), MAX_ROWS) - 1
            if final != "d":
                col = min(_number(parts[1]), MAX_COLUMNS) - 1
        elif final in "ABEF":
            step = _number(params)
            row = max(0, row - step) if final in "AF" else row + min(step, MAX_ROWS)
            col = 0 if final in "EF" else col
        elif final == "C":
            col = min(col + _number(params), MAX_COLUMNS - 1)
        elif final == "D":
            col = max(0, col - _number(params))
        elif final == "G":
            col = min(_number(params), MAX_COLUMNS) - 1
        elif final == "K":
            line = cells(row)
            mode = _number(params, 0)
            if mode == 0:
                del line[col:]
            elif mode == 1:
                line[: col + 1] = " " * min(len(line), col + 1)
            else:
                line.clear()
        elif final == "J":
            mode = _number(params, 0)
            if mode == 0:
                del cells(row)[col:]
                rows = {r: cells_ for r, cells_ in rows.items() if r <= row}
            elif mode == 1:
                rows = {r: cells_ for r, cells_ in rows.items() if r >= row}
                line = cells(row)
                line[: col + 1] = " " * min(len(line), col + 1)
            else:
                rows = {}
    shown: list[str] = []
    last = -1
    for at in sorted(rows):
        text_row = "".join(rows[at]).rstrip()
        if not text_row:
            continue
        if shown:  # the rows nothing was drawn on between, at most MAX_BLANK_ROWS of them
            shown.extend([""] * min(at - last - 1, MAX_BLANK_ROWS))
        shown.append(text_row)
        last = at
    return "\n".join(shown)
