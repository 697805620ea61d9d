"""The on-disk format of ``MEMORY.md`` and ``USER.md``: entries separated by a ``§`` line.

A file holds zero or more entries. Entries are separated by a line holding
only the section sign ``§`` (surrounding spaces are ignored when reading)::

    The project uses uv, not pip.
    §
    Run the tests with `make check` before committing;
    the CI runs the same target.
    §
    The staging database is read-only on Fridays.

An entry may span several lines, but no line of an entry may itself be a
lone ``§``. Blank entries are dropped. The file is written as the entries
joined by ``"\\n§\\n"`` plus a final newline, so its size in characters
(the figure the caps apply to) is the sum of the entry lengths plus 3 per
delimiter.
"""

from __future__ import annotations

DELIMITER = "§"
SEPARATOR = f"\n{DELIMITER}\n"


class EntryError(ValueError):
    """An entry cannot be stored as given (empty, or holds a delimiter line)."""


def parse_entries(text: str) -> list[str]:
    """The entries of a file's text, in file order (blank entries dropped)."""
    entries: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.strip() == DELIMITER:
            entries.append("\n".join(current))
            current = []
        else:
            current.append(line)
    entries.append("\n".join(current))
    return [entry.strip() for entry in entries if entry.strip()]


def render_entries(entries: list[str]) -> str:
    """The file text for ``entries`` (empty string for no entries)."""
    if not entries:
        return ""
    return SEPARATOR.join(entries) + "\n"


def entries_size(entries: list[str]) -> int:
    """Characters the caps count: entries plus delimiters, without the final newline."""
    if not entries:
        return 0
    return sum(len(entry) for entry in entries) + len(SEPARATOR) * (len(entries) - 1)


def clean_entry(text: str) -> str:
    """``text`` stripped and checked; raises :class:`EntryError` naming the problem."""
    entry = text.strip()
    if not entry:
        raise EntryError("the entry is empty")
    for number, line in enumerate(entry.splitlines(), start=1):
        if line.strip() == DELIMITER:
            raise EntryError(
                f"line {number} of the entry is a lone {DELIMITER!r}, which is the entry "
                "delimiter; reword that line"
            )
    return entry
