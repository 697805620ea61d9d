"""What tiktoken publishes for each OpenAI encoding, read without any download.

tiktoken's own constructors (`tiktoken_ext.openai_public.cl100k_base()` and
friends) hold the regex pattern, the special tokens, the vocabulary size and
the SHA-256 of the BPE file, but calling them downloads the file. Here each
constructor's code is run against a sealed namespace: its module's string
constants plus a stand-in for `load_tiktoken_bpe` that records the file's
address and expected hash instead of fetching it. No builtins and no other
module globals are reachable, so the call cannot touch the network; if a
future tiktoken changes the constructor's shape, `UnsupportedTiktokenError`
is raised instead of guessing.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field
from tiktoken_ext import openai_public

# SHA-256 of each BPE file as published in tiktoken 0.14.0's
# tiktoken_ext/openai_public.py (`expected_hash=`). The hash read from the
# installed tiktoken at load time must agree with this table.
PINNED_SHA256: Mapping[str, str] = types.MappingProxyType(
    {
        "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
        "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    }
)

SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(PINNED_SHA256)

_KNOWN_KEYS = frozenset(
    {"name", "pat_str", "mergeable_ranks", "special_tokens", "explicit_n_vocab"}
)


class UnsupportedTiktokenError(RuntimeError):
    """The installed tiktoken's encoding constructors no longer have the expected shape."""


class PublishedEncoding(BaseModel):
    """Constructor parameters of one encoding, minus the ranks, plus its file's hash."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    pat_str: str
    special_tokens: dict[str, int]
    explicit_n_vocab: int | None = None
    bpe_file_name: str = Field(pattern=r"^[a-z0-9_]+\.tiktoken$")
    expected_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def read_published_encoding(name: str) -> PublishedEncoding:
    """Return tiktoken's published parameters and BPE hash for encoding `name`."""
    if name not in PINNED_SHA256:
        raise ValueError(
            f"encoding name {name!r} is not supported; choose one of {list(SUPPORTED_ENCODINGS)}"
        )
    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if not isinstance(constructor, types.FunctionType):
        raise UnsupportedTiktokenError(
            f"tiktoken_ext.openai_public.ENCODING_CONSTRUCTORS[{name!r}] is missing or not a "
            f"plain function ({constructor!r})"
        )

    requests: list[tuple[str, str | None]] = []
    placeholder: dict[bytes, int] = {}

    def record_request(
        tiktoken_bpe_file: str, expected_hash: str | None = None
    ) -> dict[bytes, int]:
        requests.append((tiktoken_bpe_file, expected_hash))
        return placeholder

    result = _run_sealed(constructor, record_request)

    if len(requests) != 1:
        raise UnsupportedTiktokenError(
            f"tiktoken's {name} constructor asked for {len(requests)} BPE files, expected 1"
        )
    address, expected_hash = requests[0]
    if expected_hash is None:
        raise UnsupportedTiktokenError(f"tiktoken publishes no expected_hash for {name}")
    if expected_hash != PINNED_SHA256[name]:
        raise UnsupportedTiktokenError(
            f"tiktoken publishes expected_hash={expected_hash} for {name}, but this plugin "
            f"was verified against {PINNED_SHA256[name]}"
        )
    file_name = urlparse(address).path.rsplit("/", 1)[-1]
    if file_name != f"{name}.tiktoken":
        raise UnsupportedTiktokenError(
            f"tiktoken's {name} constructor names BPE file {address!r}, expected {name}.tiktoken"
        )
    unknown = set(result) - _KNOWN_KEYS
    if unknown or result.get("mergeable_ranks") is not placeholder or result.get("name") != name:
        raise UnsupportedTiktokenError(
            f"tiktoken's {name} constructor returned unexpected parameters {sorted(result)}"
        )
    return PublishedEncoding(
        name=name,
        pat_str=result["pat_str"],
        special_tokens=result["special_tokens"],
        explicit_n_vocab=result.get("explicit_n_vocab"),
        bpe_file_name=file_name,
        expected_sha256=expected_hash,
    )


def _run_sealed(
    constructor: types.FunctionType, loader: Callable[..., dict[bytes, int]]
) -> dict[str, Any]:
    """Call `constructor`'s code with only string constants and `loader` in reach."""
    code = constructor.__code__
    namespace: dict[str, Any] = {
        key: value for key, value in constructor.__globals__.items() if isinstance(value, str)
    }
    namespace["load_tiktoken_bpe"] = loader
    namespace["__builtins__"] = {}
    reachable = set(namespace) | set(dir(str))
    strays = sorted(set(code.co_names) - reachable)
    if strays or code.co_freevars or code.co_argcount or code.co_kwonlyargcount:
        raise UnsupportedTiktokenError(
            f"tiktoken's {constructor.__name__} constructor refers to {strays or 'arguments'}; "
            "this plugin only knows constructors that call load_tiktoken_bpe and use constants"
        )
    sealed = types.FunctionType(code, namespace, constructor.__name__)
    try:
        result = sealed()
    except (NameError, TypeError) as exc:
        raise UnsupportedTiktokenError(
            f"tiktoken's {constructor.__name__} constructor could not run sealed: {exc}"
        ) from exc
    if not isinstance(result, dict):
        raise UnsupportedTiktokenError(
            f"tiktoken's {constructor.__name__} constructor returned {type(result).__name__}"
        )
    return result
