"""The ``builtin`` memory provider: ``MEMORY.md`` and ``USER.md`` under ``memory.home``.

* ``MEMORY.md`` (target ``memory``) holds the agent's own notes; ``USER.md``
  (target ``user``) what it learned about the user. The format is described in
  :mod:`hermes_plugin_memory_builtin.entries` (entries separated by a line
  holding only ``§``).
* Caps: ``memory.memory_char_limit`` (default 8000) and
  ``memory.user_char_limit`` (default 4000) characters per file, counted as
  entries plus 3 characters per delimiter. A write that would leave a file
  over its cap *and* larger than before is refused with a message naming the
  file, the size it would reach, the cap and the setting; shrinking writes are
  always allowed, so an over-full file (edited by hand, or after lowering a
  cap) can be cleaned up.
* Snapshot: :meth:`initialize` (and :meth:`refresh`, and
  :meth:`on_session_switch` for the new session id) reads both files and
  freezes the prompt text for that session. :meth:`system_prompt_block`
  returns that frozen text, so writes made during a session show up only at
  the next rebuild, which keeps the prompt prefix (and the provider's cache)
  stable.
* Writes hit the disk at once: read-modify-write under a folder lock (threads
  and, on POSIX, other processes), then an atomic replace (temporary file,
  fsync, :func:`os.replace`, fsync of the folder).

The provider holds no module-level state; every instance is independent.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Literal

from hermes_hookspecs import MemoryProvider, MemoryProviderError, MemorySession
from hermes_hookspecs.settings import MemorySettings

from .entries import DELIMITER, EntryError, clean_entry, entries_size, parse_entries, render_entries
from .files import FolderLock, atomic_write, read_text
from .settings import BuiltinMemorySettings
from .tool import TOOL_NAME, memory_tool_schema, parse_tool_call

Target = Literal["memory", "user"]

FILE_NAMES: dict[Target, str] = {"memory": "MEMORY.md", "user": "USER.md"}
_CAP_SETTINGS: dict[Target, str] = {
    "memory": "memory.memory_char_limit",
    "user": "memory.user_char_limit",
}
_TITLES: dict[Target, str] = {
    "memory": "your notes",
    "user": "about the user",
}


class MemoryWriteRefused(MemoryProviderError):
    """A memory write was refused (over the cap, no or several matching entries, bad entry)."""


class BuiltinMemoryProvider(MemoryProvider):
    """``MEMORY.md`` / ``USER.md`` memory with a frozen per-session prompt snapshot.

    :param settings: the core's ``[memory]`` settings (the home folder).
    :param limits: the provider's own keys of ``[memory]`` (the caps; defaults when omitted).
    """

    name = "builtin"

    def __init__(
        self, settings: MemorySettings, limits: BuiltinMemorySettings | None = None
    ) -> None:
        self._settings = limits or BuiltinMemorySettings()
        self._home = settings.home_path()
        self._lock = FolderLock(self._home)
        self._snapshots: dict[str, str | None] = {}
        self._snapshots_lock = threading.Lock()

    # -- files --------------------------------------------------------------
    @property
    def home(self) -> Path:
        """The folder holding ``MEMORY.md`` and ``USER.md`` (created on first write)."""
        return self._home

    def path(self, target: Target) -> Path:
        """The file behind ``target`` (``memory`` or ``user``)."""
        return self._home / FILE_NAMES[_check_target(target)]

    def cap(self, target: Target) -> int:
        """The size cap of ``target``'s file, in characters."""
        if _check_target(target) == "memory":
            return self._settings.memory_char_limit
        return self._settings.user_char_limit

    def entries(self, target: Target) -> list[str]:
        """The entries on disk now (not the session snapshot)."""
        return parse_entries(read_text(self.path(target)))

    # -- writes -------------------------------------------------------------
    def add(self, target: Target, content: str) -> str:
        """Append an entry; returns a confirmation, raises :class:`MemoryWriteRefused`."""
        entry = _clean(content)
        with self._lock.hold():
            entries = self.entries(target)
            if entry in entries:
                return f"{self._file(target)} already holds that entry; nothing changed. " + (
                    self._usage(target, entries)
                )
            self._commit(target, entries, [*entries, entry])
            return f"Added to {self._file(target)}. {self._usage(target, [*entries, entry])}"

    def replace(self, target: Target, old_text: str, content: str) -> str:
        """Replace the one entry containing ``old_text`` with ``content``."""
        entry = _clean(content)
        with self._lock.hold():
            entries = self.entries(target)
            index = self._find(target, entries, old_text)
            updated = [*entries[:index], entry, *entries[index + 1 :]]
            if entry in entries and entries.index(entry) != index:
                updated = [*entries[:index], *entries[index + 1 :]]  # merge a duplicate
            self._commit(target, entries, updated)
            return f"Replaced an entry in {self._file(target)}. {self._usage(target, updated)}"

    def remove(self, target: Target, old_text: str) -> str:
        """Remove the one entry containing ``old_text``."""
        with self._lock.hold():
            entries = self.entries(target)
            index = self._find(target, entries, old_text)
            updated = [*entries[:index], *entries[index + 1 :]]
            self._commit(target, entries, updated)
            return f"Removed an entry from {self._file(target)}. {self._usage(target, updated)}"

    def _commit(self, target: Target, before: list[str], after: list[str]) -> None:
        size, cap = entries_size(after), self.cap(target)
        if size > cap and size > entries_size(before):
            raise MemoryWriteRefused(
                f"{self._file(target)} would grow to {size} characters, over its cap of "
                f"{cap} ({_CAP_SETTINGS[target]}); nothing was written. Remove or shorten "
                "entries first (actions 'remove' / 'replace')."
            )
        atomic_write(self.path(target), render_entries(after))

    def _find(self, target: Target, entries: list[str], old_text: str) -> int:
        needle = old_text.strip()
        if not needle:
            raise MemoryWriteRefused("old_text is empty; give a unique part of the entry")
        matches = [i for i, entry in enumerate(entries) if needle in entry]
        if not matches:
            raise MemoryWriteRefused(f"no entry in {self._file(target)} contains {needle!r}")
        if len({entries[i] for i in matches}) > 1:
            raise MemoryWriteRefused(
                f"{needle!r} matches {len(matches)} entries in {self._file(target)}; "
                "give more of the entry's text so that exactly one matches"
            )
        return matches[0]

    def _file(self, target: Target) -> str:
        return FILE_NAMES[target]

    def _usage(self, target: Target, entries: list[str]) -> str:
        count = len(entries)
        noun = "entry" if count == 1 else "entries"
        return (
            f"It now holds {count} {noun}, {entries_size(entries)}/{self.cap(target)} "
            "characters; the change shows in the system prompt from the next session "
            "(or compaction) on."
        )

    # -- snapshot -------------------------------------------------------------
    def render_snapshot(self) -> str | None:
        """The prompt text for the files as they are on disk now (None when both are empty)."""
        sections: list[str] = []
        for target in ("memory", "user"):
            entries = self.entries(target)
            if not entries:
                continue
            cap = self.cap(target)
            shown: list[str] = []
            for entry in entries:
                if entries_size([*shown, entry]) > cap:
                    break
                shown.append(entry)
            noun = "entry" if len(entries) == 1 else "entries"
            header = (
                f"## {FILE_NAMES[target]} ({_TITLES[target]}) "
                f"[{len(entries)} {noun}, {entries_size(entries)}/{cap} chars]"
            )
            body = f"\n{DELIMITER}\n".join(shown)
            omitted = len(entries) - len(shown)
            if omitted:
                body += f"\n({omitted} more entries over the {cap}-character cap not shown)"
            sections.append(f"{header}\n{body}")
        if not sections:
            return None
        intro = (
            "# Persistent memory\n"
            f"Saved with the `{TOOL_NAME}` tool; entries are separated by lines holding "
            f"only {DELIMITER}. This snapshot was taken when the prompt was built."
        )
        return "\n\n".join([intro, *sections])

    def refresh(self, session_id: str) -> None:
        """Take a new snapshot for ``session_id`` (the next prompt rebuild shows it)."""
        text = self.render_snapshot()
        with self._snapshots_lock:
            self._snapshots[session_id] = text

    # -- MemoryProvider hooks -------------------------------------------------
    def initialize(self, session: MemorySession) -> None:
        self.refresh(session.session_id)

    def system_prompt_block(self, session_id: str) -> str | None:
        with self._snapshots_lock:
            if session_id in self._snapshots:
                return self._snapshots[session_id]
        self.refresh(session_id)  # never initialised: freeze now
        with self._snapshots_lock:
            return self._snapshots.get(session_id)

    def on_session_switch(self, old_session_id: str, new_session_id: str, reason: str) -> None:
        self.refresh(new_session_id)
        if old_session_id != new_session_id:
            with self._snapshots_lock:
                self._snapshots.pop(old_session_id, None)

    def on_session_end(self, session_id: str, reason: str) -> None:
        with self._snapshots_lock:
            self._snapshots.pop(session_id, None)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [memory_tool_schema()]

    def handle_tool_call(self, name: str, arguments: dict[str, Any], session_id: str) -> str:
        if name != TOOL_NAME:
            raise NotImplementedError(f"memory provider {self.name!r} has no tool {name!r}")
        call = parse_tool_call(arguments)
        if isinstance(call, str):
            return call
        try:
            if call.action == "add":
                return self.add(call.target, call.content or "")
            if call.action == "replace":
                return self.replace(call.target, call.old_text or "", call.content or "")
            return self.remove(call.target, call.old_text or "")
        except MemoryWriteRefused as exc:
            return f"Error: {exc}"


def _check_target(target: str) -> Target:
    if target == "memory":
        return "memory"
    if target == "user":
        return "user"
    raise ValueError(f"target={target!r}: expected 'memory' or 'user'")


def _clean(content: str) -> str:
    try:
        return clean_entry(content)
    except EntryError as exc:
        raise MemoryWriteRefused(f"entry refused: {exc}") from None
