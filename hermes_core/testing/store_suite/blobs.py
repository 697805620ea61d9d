"""Content-addressed blobs (frozen system prompts, tool schemas)."""

from __future__ import annotations

import hashlib

import pytest

from hermes_hookspecs import (
    NotFoundError,
    SessionStore,
    ValidationError,
)

from .base import SuiteBase


class BlobChecks(SuiteBase):
    """Content-addressed blobs (frozen system prompts, tool schemas)."""

    @pytest.mark.parametrize(
        "text",
        ["You are a helpful agent.\n", "trailing spaces   \r\n\r\n", "ünïcödé — 数据 🚀", ""],
    )
    def test_blob_stored_once_by_sha256(self, store: SessionStore, text: str) -> None:
        digest = store.put_blob("system_prompt", text)
        assert digest == hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert store.put_blob("system_prompt", text) == digest
        assert store.get_blob(digest) == text

    def test_blob_unknown_digest_and_kind(self, store: SessionStore) -> None:
        with pytest.raises(NotFoundError):
            store.get_blob("0" * 64)
        with pytest.raises(ValidationError):
            store.put_blob("nonsense", "text")  # type: ignore[arg-type, unused-ignore]

    def test_blob_text_must_be_unicode(self, store: SessionStore) -> None:
        # a lone surrogate cannot be encoded as UTF-8: no digest, nothing stored
        with pytest.raises(ValidationError, match="blob text"):
            store.put_blob("system_prompt", "half a pair \ud800")
        with pytest.raises(ValidationError, match="blob text"):
            store.put_blob("tools", b"[]")  # type: ignore[arg-type]
