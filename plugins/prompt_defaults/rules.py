"""Project rule files: find the nearest trusted one from the working directory up, read it safely.

Which file is taken (:func:`find_rule_file`):

* folders are searched from the working directory upwards, nearest first, and
  the search stops at the repository root (the first folder holding ``.git``)
  or at the home folder, whichever comes first; a rule file above either is
  never taken;
* a candidate must be a regular file owned by the current user; files of
  other users, and every file in a world-writable folder (``/tmp``...), are
  skipped and the skip is logged (logger ``hermes_plugin_prompt_defaults``).

Reading (:func:`read_rule_file`) takes at most ``4 * max_chars`` bytes (a
UTF-8 character has at most 4), so a huge file costs no more than the cap.
"""

from __future__ import annotations

import codecs
import logging
import os
import re
import stat
from pathlib import Path

log = logging.getLogger("hermes_plugin_prompt_defaults")

# C0 controls except tab and newline, DEL, and C1 controls; bidi overrides too
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _untrusted(st: os.stat_result) -> str | None:
    """Why a file with this status must not be taken (None: it may)."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by the current user (uid {os.geteuid()})"
    return None


def _world_writable(folder: Path) -> bool:
    try:
        return bool(folder.stat().st_mode & stat.S_IWOTH)
    except OSError:
        return True  # cannot tell: do not trust it


def _home() -> Path | None:
    try:
        return Path(os.path.realpath(Path.home()))
    except (RuntimeError, KeyError):
        return None


def find_rule_file(cwd: str, names: list[str]) -> Path | None:
    """The first trusted file of ``names`` in ``cwd`` or a parent, up to the repo root or home."""
    start = Path(os.path.realpath(Path(cwd).expanduser()))
    home = _home()
    for folder in [start, *start.parents]:
        writable = _world_writable(folder)
        for name in names:
            candidate = folder / name
            try:
                st = candidate.stat()
            except OSError:
                continue
            reason = "its folder is world-writable" if writable else _untrusted(st)
            if reason is None:
                return candidate
            log.warning("project rule file %s skipped: %s", candidate, reason)
        if folder == home or (folder / ".git").exists():
            break
    return None


def read_rule_file(path: Path, max_chars: int) -> str:
    """The file's text, control characters removed, cut at ``max_chars`` with a note.

    At most ``4 * max_chars`` bytes are read; the file is re-checked on the
    open descriptor (a regular file owned by the current user), so a swap
    after :func:`find_rule_file` is refused with an :class:`OSError`.
    """
    limit = max(0, max_chars) * 4
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        reason = _untrusted(os.fstat(handle.fileno()))
        if reason is not None:
            raise OSError(f"project rule file {path}: {reason}")
        raw = handle.read(limit + 1)
    cut = len(raw) > limit
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(raw[:limit], final=not cut).replace("\r\n", "\n")
    cleaned, removed = CONTROL.subn("", text)
    notes = []
    if removed:
        notes.append(f"[{removed} control characters removed]")
    if len(cleaned) > max_chars or cut:
        cleaned = cleaned[:max_chars]
        notes.append(f"[truncated at {max_chars} characters]")
    return cleaned + ("\n" + " ".join(notes) if notes else "")
