"""Conformance suite for transcript importers.

Subclass :class:`ImporterSuite` and provide an ``importer`` fixture and a
``sample_files`` fixture (paths of real transcripts in your format)::

    class TestAcmeImporter(ImporterSuite):
        @pytest.fixture
        def importer(self):
            return AcmeImporter()

        @pytest.fixture
        def sample_files(self, tmp_path):
            return [Path(__file__).parent / "data" / "session.acme"]

It checks the contract of :class:`hermes_hookspecs.Importer`: a named
importer that recognises its samples from their first bytes and does not
claim other formats' files (``foreign_files``, overridable), loads each
sample into conversations tagged with its name whose tool results answer
earlier calls, and refuses a damaged file with
:class:`~hermes_hookspecs.ImportFormatError` (never another exception).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_hookspecs import ImportedConversation, Importer, ImportFormatError

#: bytes of a file's head handed to ``sniff``
HEAD_BYTES = 4096


def head_of(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(HEAD_BYTES)


def tool_problems(messages: list[object]) -> list[str]:
    """Tool results that answer no call of an earlier assistant message."""
    calls: set[str] = set()
    problems: list[str] = []
    for index, message in enumerate(messages):
        role = getattr(message, "role", "")
        if role == "assistant":
            calls |= {c.id for c in getattr(message, "tool_calls", None) or []}
        elif role == "tool" and getattr(message, "tool_call_id", None) not in calls:
            problems.append(
                f"message {index}: tool result for {getattr(message, 'tool_call_id', None)!r}, "
                "which no earlier assistant message called"
            )
    return problems


class ImporterSuite:
    """Subclass and provide ``importer`` and ``sample_files`` fixtures."""

    @pytest.fixture
    def sample_files(self) -> list[Path]:
        raise NotImplementedError(
            f"{type(self).__name__} must define a 'sample_files' fixture returning the paths "
            "of transcripts in the importer's format"
        )

    @pytest.fixture
    def foreign_files(self, tmp_path: Path) -> list[Path]:
        """Files of other formats the importer must not claim."""
        files = {
            "notes.txt": "just some notes\nnothing to import\n",
            "settings.json": json.dumps({"unrelated": True, "items": [1, 2, 3]}),
            "events.jsonl": json.dumps({"type": "unrelated", "payload": {}}) + "\n",
            "empty.json": "",
        }
        out = []
        for name, text in files.items():
            path = tmp_path / "foreign" / name
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
            out.append(path)
        return out

    def test_importer_has_a_name(self, importer: Importer) -> None:
        assert isinstance(importer.name, str) and importer.name, (
            f"expected a non-empty name on {type(importer).__name__}, got {importer.name!r}"
        )

    def test_samples_are_recognised(self, importer: Importer, sample_files: list[Path]) -> None:
        assert sample_files, "expected at least one sample file"
        for path in sample_files:
            assert importer.sniff(path, head_of(path)), (
                f"expected {importer.name!r} to recognise its sample {path.name}"
            )

    def test_other_formats_are_not_claimed(
        self, importer: Importer, foreign_files: list[Path]
    ) -> None:
        for path in foreign_files:
            assert not importer.sniff(path, head_of(path)), (
                f"expected {importer.name!r} not to claim {path.name}, a file of another format"
            )

    def test_samples_load_into_valid_conversations(
        self, importer: Importer, sample_files: list[Path]
    ) -> None:
        for path in sample_files:
            conversations = importer.load(path)
            assert conversations, f"expected at least one conversation in {path.name}"
            for conv in conversations:
                assert isinstance(conv, ImportedConversation)
                assert conv.source_format == importer.name, (
                    f"expected source_format {importer.name!r}, got {conv.source_format!r}"
                )
                assert conv.messages, f"expected messages in {path.name}"
                problems = tool_problems(list(conv.messages))
                assert not problems, f"{path.name}: " + "; ".join(problems)

    def test_a_damaged_file_is_an_import_format_error(
        self, importer: Importer, sample_files: list[Path], tmp_path: Path
    ) -> None:
        original = sample_files[0].read_bytes()
        damaged = tmp_path / f"damaged{sample_files[0].suffix}"
        damaged.write_bytes(original[: max(1, len(original) // 2)] + b"\x00{{{ not json")
        try:
            importer.load(damaged)
        except ImportFormatError:
            return
        except Exception as exc:
            raise AssertionError(
                f"expected ImportFormatError for a damaged file, got {type(exc).__name__}: {exc}"
            ) from exc
        # loading what survives is also fine: it must still be valid
        for conv in importer.load(damaged):
            assert not tool_problems(list(conv.messages))


__all__ = ["ImporterSuite", "head_of", "tool_problems"]
