"""The SQLite store's keys, in the ``[session]`` table beside the core's."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import platformdirs
from pydantic import Field

from hermes_hookspecs import SettingsSection
from hermes_hookspecs.settings import APP_NAME


class SqliteStoreSettings(SettingsSection):
    """Where the ``sqlite`` store keeps its file (``session.fts_index_cap`` is the core's)."""

    config_section: ClassVar[str] = "session"

    path: str = Field(
        default="", description="SQLite file; empty: sessions.db under the user data dir."
    )

    def sqlite_path(self) -> Path:
        """The SQLite file in force (the user data dir when ``path`` is empty)."""
        if self.path:
            return Path(self.path).expanduser()
        return Path(platformdirs.user_data_dir(APP_NAME)) / "sessions.db"

    def resolved_values(self) -> dict[str, str]:
        return {"path": str(self.sqlite_path())}
