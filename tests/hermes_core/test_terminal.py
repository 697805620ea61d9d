"""What a terminal leaves on screen (:mod:`hermes_core.terminal`), as every reader of tool
output sees it: the recall tools, the compressor's facts and its identifier index."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


SPINNER = "".join(
    f"\x1b[2;23H{frame}  running  {tenth / 10:.1f}s\x1b[K"
    for tenth, frame in zip(range(10, 340), "⢿⡿⣟⣯⣷⣾⣽⣻" * 50, strict=False)
)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # a full-screen program's spinner, redrawn in place: its last frame, once
        ("Output:\n" + SPINNER, "Output:\n\n" + " " * 22 + "⡿  running  33.9s"),
        # cursor up over lines printed before (a multi-line progress display)
        ("a 10%\nb 20%\n\x1b[2Aa 100%\x1b[K\nb 100%\x1b[K\n", "a 100%\nb 100%"),
        # an absolute address counts from where the program began drawing, not over
        # the header a harness printed before it
        ("Chunk ID: 1\nOutput:\n\x1b[1;1Hscreen", "Chunk ID: 1\nOutput:\nscreen"),
        ("hdr\x1b[H\x1b[2Jclean\nscreen", "clean\nscreen"),  # home, clear the screen
        ("abc\x1b[2Dx\x1b[1Cy\tz", "axcy\tz"),  # back, forward; a tab is text
        ("name: old\x1b[6Gnew\x1b[K", "name:new"),  # to a column, erase the rest
        ("a\n\n\nb\x1b[1Ac", "a\n\n c\nb"),  # blank lines kept; up into one
        ("x\x1b[9999;1Hy", "x\n\n\ny"),  # rows with nothing drawn: at most two blank lines
    ],
)
def test_output_that_moves_the_cursor_is_shown_as_the_screen_was_left(raw: str, shown: str) -> None:
    assert plain_text(raw) == shown


def test_far_cursor_moves_cannot_blow_the_screen_up() -> None:
    for hostile in (
        "\x1b[1999Gx\n" * 20_000,  # every row padded to a far column
        "\x1b[99999999;99999999Hx" * 1_000,  # addresses past every limit
        "\x1b[5000Bx" * 20_000,  # rows far apart
    ):
        assert len(plain_text(hostile)) <= 3 * len(hostile) + 20_000  # its text, twice in blanks


def test_a_polled_spinner_is_one_short_outcome_in_the_facts() -> None:
    """A Codex poll of a full-screen program (``write_stdin``) printed 330 frames of a
    spinner redrawn in place; the handoff's fact was its first
    frames run together, cut, and said nothing of where the program stood."""
    output = f"Chunk ID: f8f597\nProcess running with session ID 42755\nOutput:\n{SPINNER}"
    message = Message(role="tool", tool_call_id="c1", content=output)
    facts = str(message_facts(message))
    assert "33.9s" in facts and "1.0s" not in facts, facts


_PIECES = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
    st.sampled_from(["\n", "\r", "\r\n", "\x08", "\t", "\x1b[K", "\x1b[2J", "\x1b[1K", "\x1b[m"]),
    st.builds(
        lambda n, m, final: f"\x1b[{n};{m}{final}" if final in "Hf" else f"\x1b[{n}{final}",
        st.integers(0, 10**9),
        st.integers(0, 10**9),
        st.sampled_from("HfABCDEFGdJK"),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=60).map("".join))
def test_any_stream_becomes_bounded_text_without_controls(raw: str) -> None:
    shown = plain_text(raw)
    assert not any((ch < " " and ch not in "\t\n") or ch == "\x7f" for ch in shown), shown
    assert len(shown) <= 3 * len(raw) + 10_000 + 2 * raw.count("\x1b")
    # what is on screen is text that was written, not invented
    written = set(raw)
    assert set(shown) <= written | {" ", "\n"}
