"""Project rule files: find the first one from the working directory upwards, read it safely."""

from __future__ import annotations

import re
from pathlib import Path

# C0 controls except tab and newline, DEL, and C1 controls; bidi overrides too
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def find_rule_file(cwd: str, names: list[str]) -> Path | None:
    """The first of ``names`` found in ``cwd``, then its parents (nearest wins)."""
    start = Path(cwd).expanduser()
    for folder in [start, *start.parents]:
        for name in names:
            candidate = folder / name
            if candidate.is_file():
                return candidate
    return None


def read_rule_file(path: Path, max_chars: int) -> str:
    """The file's text, control characters removed, cut at ``max_chars`` with a note."""
    raw = path.read_bytes()[: max_chars * 4]
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
    cleaned, removed = CONTROL.subn("", text)
    notes = []
    if removed:
        notes.append(f"[{removed} control characters removed]")
    if len(cleaned) > max_chars:
        cleaned = cleaned[:max_chars]
        notes.append(f"[truncated at {max_chars} characters]")
    return cleaned + ("\n" + " ".join(notes) if notes else "")
