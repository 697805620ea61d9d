"""How to launch ``codex app-server``: its private home, its config.toml, its environment."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
Scalar = str | int | float | bool


class CodexProvider(BaseModel):
    """A ``[model_providers.<id>]`` table: where Codex sends its model requests.

    Note: a provider *named* exactly ``OpenAI`` makes Codex use the remote
    compaction protocol (``compaction_trigger`` input item); any other name
    makes it compact locally with a normal ``POST /responses``.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = "hermes"
    name: str = "hermes"
    base_url: str
    env_key: str = "HERMES_CODEX_API_KEY"
    wire_api: Literal["responses"] = "responses"
    request_max_retries: int = Field(default=0, ge=0)
    stream_max_retries: int = Field(default=0, ge=0)
    stream_idle_timeout_ms: int | None = Field(default=None, gt=0)

    @field_validator("id")
    @classmethod
    def _bare_id(cls, value: str) -> str:
        if not _BARE_KEY.match(value):
            raise ValueError(f"provider id {value!r} must match [A-Za-z0-9_-]+")
        return value


class CodexRuntimeConfig(BaseModel):
    """The ``config.toml`` written into a private ``CODEX_HOME``.

    ``features.plugins = false`` keeps Codex from reaching the internet at
    start-up; ``features.unbounded_connection_retries = false`` lets a dead
    provider fail a turn instead of retrying forever.
    """

    model_config = ConfigDict(extra="forbid")

    model: str = "gpt-5.5"
    provider: CodexProvider | None = None
    approval_policy: Literal["untrusted", "on-request", "never"] = "never"
    sandbox_mode: Literal["read-only", "workspace-write", "danger-full-access"] = "read-only"
    features: dict[str, bool] = Field(
        default_factory=lambda: {"plugins": False, "unbounded_connection_retries": False}
    )
    extra: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict, description="More top-level keys, written verbatim."
    )

    def to_toml(self) -> str:
        lines = [f"model = {_toml(self.model)}"]
        if self.provider is not None:
            lines.append(f"model_provider = {_toml(self.provider.id)}")
        lines.append(f"approval_policy = {_toml(self.approval_policy)}")
        lines.append(f"sandbox_mode = {_toml(self.sandbox_mode)}")
        for key, value in self.extra.items():
            lines.append(f"{_key(key)} = {_toml(value)}")
        if self.provider is not None:
            p = self.provider
            lines += ["", f"[model_providers.{p.id}]"]
            table: dict[str, Any] = p.model_dump(exclude={"id"}, exclude_none=True)
            lines += [f"{_key(k)} = {_toml(v)}" for k, v in table.items()]
        if self.features:
            lines += ["", "[features]"]
            lines += [f"{_key(k)} = {_toml(v)}" for k, v in self.features.items()]
        return "\n".join(lines) + "\n"

    def write(self, codex_home: Path) -> Path:
        """Write ``codex_home/config.toml`` (creating the folder) and return its path."""
        codex_home.mkdir(parents=True, exist_ok=True)
        path = codex_home / "config.toml"
        path.write_text(self.to_toml(), encoding="utf-8")
        return path


class CodexProcessFields(BaseModel):
    """The fields that say how to start a ``codex app-server`` process, shared by the
    ``[compaction.codex]`` settings (:class:`~hermes_plugin_codex_compaction.CodexBackendSettings`)
    and the launch itself (:class:`CodexLaunchSettings`): one definition, one description."""

    model_config = ConfigDict(extra="forbid")

    binary: Path | None = Field(
        default=None, description="codex binary; unset: HERMES_CODEX_BIN, .codex-bin or PATH."
    )
    home: Path | None = Field(
        default=None, description="HOME for the app-server process (unset: codex_home)."
    )
    cwd: Path | None = Field(default=None, description="Working directory of the app-server.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment of the app-server."
    )
    config_overrides: list[str] = Field(
        default_factory=list, description="codex -c key=value overrides."
    )
    start_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description=(
            "How long a starting app-server may take to answer initialize, s: a cold start "
            "of the binary on a loaded machine can take longer than any later request."
        ),
    )


class CodexLaunchSettings(CodexProcessFields):
    """How to spawn one ``codex app-server`` process.

    The process gets a private ``CODEX_HOME`` and ``HOME`` and only the
    variables named in ``inherit_env`` from the parent, plus ``env``.
    """

    codex_home: Path
    inherit_env: tuple[str, ...] = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE")
    request_timeout_s: float = Field(
        default=30.0, gt=0, description="How long one request waits for its reply, s."
    )
    client_name: str = "hermes-core"
    client_version: str = "0.1.0"

    @property
    def effective_home(self) -> Path:
        return self.home if self.home is not None else self.codex_home


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise ValueError(f"cannot write {value!r} ({type(value).__name__}) as a TOML value")
