"""Which importer reads a transcript: every importer judges a sample of several records.

:func:`detect_importer` reads the file's first :data:`SAMPLE_BYTES`
(decompressed when the file is gzip, tolerant of a truncated stream) and asks
every importer's :meth:`~hermes_hookspecs.Importer.recognise`. One match wins;
several are settled by score or refused with their names; none gives an error
naming the closest format and why it did not match.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

from hermes_hookspecs import Importer, ImportFormatError, Recognition

#: decompressed bytes detection reads: several records of any bundled format
SAMPLE_BYTES = 256 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


def read_sample(path: Path, size: int = SAMPLE_BYTES) -> bytes:
    """The first ``size`` decompressed bytes of ``path``; a damaged gzip gives what decoded."""
    with path.open("rb") as handle:
        if handle.read(2) != _GZIP_MAGIC:
            handle.seek(0)
            return handle.read(size)
        handle.seek(0)
        decompressor = zlib.decompressobj(wbits=31)
        out = bytearray()
        while len(out) < size and not decompressor.eof:
            chunk = decompressor.unconsumed_tail or handle.read(1 << 16)
            if not chunk:
                break
            try:
                out += decompressor.decompress(chunk, size - len(out))
            except zlib.error:
                break
        return bytes(out)


def _judge(importer: Importer, path: Path, sample: bytes) -> Recognition:
    try:
        verdict = importer.recognise(path, sample)
    except Exception as exc:  # a plugin's detector must not break detection of the others
        return Recognition(matched=False, reason=f"its detector failed: {exc!r:.200}")
    return verdict if isinstance(verdict, Recognition) else Recognition(matched=bool(verdict))


def detect_importer(path: Path, importers: Sequence[Importer], name: str | None = None) -> Importer:
    """The importer called ``name``, or the one that recognises ``path``.

    :raises ImportFormatError: for an unknown ``name``, a missing or empty
        file, a file no importer recognises (naming the closest format and
        its reason), or one that several importers accept equally (naming
        them; pass a format name to choose).
    """
    path = Path(path)
    known = ", ".join(sorted(importer.name for importer in importers)) or "(none registered)"
    if name:
        for importer in importers:
            if importer.name == name:
                return importer
        raise ImportFormatError(f"unknown transcript format {name!r}; known formats: {known}")
    if not path.is_file():
        raise ImportFormatError(f"transcript not found: {path}")
    try:
        if path.stat().st_size == 0:
            raise ImportFormatError(f"{path}:1: empty file")
        sample = read_sample(path)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read transcript: {exc}") from None
    if not sample.strip():
        raise ImportFormatError(
            f"{path}:1: no transcript text (an empty file, or a gzip stream that decodes to"
            " nothing or is damaged at its start)"
        )
    verdicts = [(importer, _judge(importer, path, sample)) for importer in importers]
    matched = [(imp, v) for imp, v in verdicts if v.matched]
    if len(matched) == 1:
        return matched[0][0]
    if matched:
        matched.sort(key=lambda pair: -pair[1].score)
        best = matched[0][1].score
        top = [imp for imp, v in matched if v.score == best]
        if len(top) == 1:
            return top[0]
        names = ", ".join(imp.name for imp in top)
        raise ImportFormatError(
            f"{path}: several importers accept this file ({names}); name one with --format"
        )
    closest = max(verdicts, key=lambda pair: pair[1].score, default=None)
    if closest is None:
        raise ImportFormatError(f"{path}: no importer is registered")
    importer, verdict = closest
    why = verdict.reason or "it does not match"
    hint = f"closest format: {importer.name} ({why})" if verdict.score > 0 else "none comes close"
    raise ImportFormatError(
        f"{path}:1: no importer recognises this file; {hint}; known formats: {known}"
    )
