"""What a terminal leaves on screen (:mod:`hermes_core.terminal`), as every reader of tool
output sees it: the recall tools, the compressor's facts and its identifier index."""

from __future__ import annotations

import pytest

from hermes_core.terminal import plain_text
from hermes_hookspecs import Message
from hermes_plugin_compressor.facts import message_facts
from hermes_plugin_compressor.identifiers import clean_error_line


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[38;2;80;250;123mok\x1b[m", "ok"),
        ("\x1b=Hello", "Hello"),  # an escape's byte is not taken from the text after it
        ("\x1bMReverse", "Reverse"),
        ("\x1b7saved\x1b8", "saved"),
        ("\x1b(Bplain", "plain"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("10%\r50%\r100% done\r\nnext", "100% done\nnext"),  # a progress bar's last frame
        ("tab\tand\nlines", "tab\tand\nlines"),
    ],
)
def test_plain_text_is_what_a_terminal_leaves_on_screen(raw: str, shown: str) -> None:
    assert plain_text(raw) == shown


def test_the_compressor_reads_tool_output_as_the_screen_shows_it() -> None:
    """A colour code the old pattern missed (``ESC [38:5:196m``, the colon form) and a
    progress bar's frames no longer reach an error line or an outcome."""
    raw = "\x1b[38:5:196merror\x1b[m: linker failed W9321"
    assert clean_error_line(raw) == "error: linker failed W9321"
    # a progress frame after the error on the same line does not replace it
    assert clean_error_line("error: build failed\r 42%") == "error: build failed  42%"
    output = "building 10%\rbuilding 100%\n--- FAIL: TestSync (0.01s)\n" + "x\n" * 3
    message = Message(role="tool", tool_call_id="c1", content=output)
    facts = str(message_facts(message))
    assert "10%" not in facts and "\r" not in facts, facts
