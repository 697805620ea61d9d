"""Locating the ``codex`` executable."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from .errors import CodexBinaryNotFoundError

BINARY_ENV_VAR = "HERMES_CODEX_BIN"
#: Where ``npm install --prefix .codex-bin @openai/codex@VERSION`` puts the launcher.
PROJECT_LOCAL_BIN = Path(".codex-bin") / "node_modules" / ".bin" / "codex"
#: The ``@openai/codex`` version the project pins and tests against.
PINNED_CODEX_VERSION = "0.171.0"


def repo_root() -> Path:
    """The checkout this plugin lives in (meaningful for editable installs only)."""
    return Path(__file__).resolve().parents[2]


def find_codex_binary(env: Mapping[str, str] | None = None) -> Path:
    """Find ``codex``: ``$HERMES_CODEX_BIN``, else ``<repo>/.codex-bin/...``, else ``PATH``.

    An explicit ``HERMES_CODEX_BIN`` that does not point at an executable file is
    an error (it is never silently skipped).
    """
    environ = os.environ if env is None else env
    explicit = environ.get(BINARY_ENV_VAR)
    if explicit:
        path = Path(explicit)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise CodexBinaryNotFoundError(f"{BINARY_ENV_VAR}={explicit!r} is not an executable file")
    local = repo_root() / PROJECT_LOCAL_BIN
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which("codex", path=environ.get("PATH"))
    if found:
        return Path(found)
    raise CodexBinaryNotFoundError(
        f"codex binary not found: set {BINARY_ENV_VAR}, or run "
        f"'npm install --prefix {repo_root() / '.codex-bin'} --save-exact "
        f"@openai/codex@{PINNED_CODEX_VERSION}', or put 'codex' on PATH"
    )
