"""What a terminal leaves on screen of a command's captured output.

A tool result keeps every colour code, cursor move and progress-bar frame the
command printed: they cost a model tokens, say nothing, and split the words a
search or an extractor looks for (``\x1b[31merror\x1b[0m:``). Every reader of
tool output (the recall tools, the compressor's facts and identifiers) strips
them here, the same way.
"""

from __future__ import annotations

import re

#: terminal control sequences: CSI (``ESC [``: colours, cursor moves), OSC (``ESC ]``:
#: titles, links), the other escapes (``ESC ( B`` charset choices, ``ESC 7``/``ESC 8``
#: cursor save and restore, ``ESC =``, ``ESC M``, ``ESC c``), and the C0 controls but
#: tab, newline and carriage return
_TERMINAL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: ESC [ parameters intermediates final
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: ESC ] text, ended by BEL or ST
    r"|\x1b[ -/]+[0-~]"  # ESC, intermediates, final: ESC ( B
    r"|\x1b[0-Z\\^_`-~]"  # ESC and one byte: ESC 7, ESC =, ESC M, ESC c
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
)
#: one character that starts a control sequence or is a control (ESC among them)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def plain_text(text: str) -> str:
    """``text`` as a terminal would leave it on screen: control sequences removed,
    and of a line a carriage return rewrote (a progress bar), what was written last.
    A command's captured output keeps its colours, cursor moves and every frame of
    a progress bar, which cost a model tokens and say nothing."""
    if "\r" not in text and _CONTROL.search(text) is None:
        return text
    text = _TERMINAL.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rstrip("\r").rpartition("\r")[2] for line in text.split("\n"))
    return text
