"""The shared ranking rules of hermes_core.searchkit and hermes_core.answer_kinds, on
candidates built by hand (the store conformance suite checks them through both stores)."""

from __future__ import annotations

import time

import pytest

from hermes_core.answer_kinds import (
    DURATION,
    ERROR,
    HEX_ID,
    HTTP_STATUS,
    REQUEST,
    asked_kinds,
    holds_any,
)
from hermes_core.identifiers import SHA_WORD, extract, looks_like_sha
from hermes_core.searchkit import NEAR_CHARS, Candidate, TermMatcher, rank

FILLER = " ".join(f"filler{i}" for i in range(120))  # about 1,000 characters


def candidate(
    message_id: int, text: str, *, role: str = "assistant", relevance: float = 1.0
) -> Candidate:
    return Candidate(
        message_id=message_id,
        session_id="s",
        role=role,
        active=True,
        compacted=False,
        created_at=float(message_id),
        root=message_id,
        text=text,
        relevance=relevance,
    )


def test_count_near_counts_the_terms_within_the_span() -> None:
    matcher = TermMatcher(["alpha", "beta", "gamma", "session.go"])
    text = f"alpha {FILLER} beta gamma {FILLER} session go"
    assert matcher.count(text) == 4
    assert matcher.count_near(text, NEAR_CHARS) == 2  # beta and gamma, together
    assert matcher.count_near(text, 10 * len(text)) == 4
    assert matcher.count_near("nothing here", NEAR_CHARS) == 0
    # a term's words apart count at the position they start
    assert matcher.count_near(f"{FILLER} session go alpha", NEAR_CHARS) == 2


def test_rank_prefers_terms_near_each_other_over_terms_pages_apart() -> None:
    terms = ["walrus", "narwhal", "beluga", "orca", "manatee"]
    spread = candidate(1, f"walrus {FILLER} narwhal {FILLER} beluga {FILLER} orca")
    together = candidate(2, f"the walrus, the narwhal and the beluga {FILLER}")
    # the spread row covers four of the five terms, the other three: but those three
    # sit in one passage, the four are a page apart each
    assert [hit.message_id for hit in rank([spread, together], terms, 5)] == [2, 1]


def test_rank_tier_still_follows_the_whole_row() -> None:
    terms = ["walrus", "narwhal"]
    every = candidate(1, f"walrus {FILLER} narwhal")
    some = candidate(2, "walrus walrus walrus")
    hits = rank([every, some], terms, 5)
    assert [hit.message_id for hit in hits] == [1, 2]
    assert hits[0].score >= 1.0 > hits[1].score


@pytest.mark.parametrize(
    ("query", "kinds"),
    [
        ("long nightly build", {"duration"}),
        ("elapsed migration runtime", {"duration"}),
        ("exception worker crashed", {"error"}),
        ("traceback celery task", {"error"}),
        ("constraint deploy window", {"request"}),
        ("require staging approval", {"request"}),
        ("HEAD go-git main before NAK test", {"hex_id"}),
        ("sha release tag", {"hex_id"}),
        # a word with another common sense is no cue
        ("plan command failed no-thin", set()),  # a circumstance, not the answer
        ("approach did we take", set()),
        ("git status output after rebase", set()),
        ("status migration", set()),
        ("integration test package", set()),
        ("commit message of the fix", set()),  # a commit is not always its id
        ("HTTP status came back endpoint", {"http_status"}),
        ("which status code did the upload return", {"http_status"}),
        ("response code of the webhook", {"http_status"}),
        ("http client library", set()),  # one word of a pair alone
        ("status of the response", {"http_status"}),  # the pair in either order
    ],
)
def test_asked_kinds(query: str, kinds: set[str]) -> None:
    assert {kind.name for kind in asked_kinds(query.split())} == kinds


def test_text_holds_a_kind_without_its_author() -> None:
    kinds = asked_kinds(["constraint", "long", "error"])
    assert {kind.name for kind in kinds} == {"request", "duration", "error"}
    assert holds_any(kinds, "", "- #12 ran: go test ./... -> ok e2e 71.643s")
    assert holds_any(kinds, "", "- #9 error: fatal: refusing to merge")
    # the user's words hold a request only through their author, unknown on a summary line
    assert not holds_any(kinds, "", "- #3 user: keep the API stable")
    assert holds_any(kinds, "user", "keep the API stable")
    assert REQUEST.held_by("user", "keep the API stable")
    assert not holds_any((), "", "71.643s")


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("PASS\nok  \texample.com/svc/api\t12.004s", True),
        ("--- FAIL: TestX (0.00s)", True),
        ("took 1m4s", True),
        ("retried for 1h2m3s before giving up", True),
        ("done in 250ms", True),
        ("Wall time: 0.6120 seconds", False),  # a wrapper's timing, spelled out
        ("version 1.2.3 of the 5s plan", True),
        ("sha 1a2b3c4s", False),
        ("upload of 5MB", False),
        ("nothing timed", False),
    ],
)
def test_duration_is_a_number_with_a_unit(text: str, held: bool) -> None:
    assert DURATION.held_by("tool", text) is held


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("error: could not lock config file .git/config", True),
        ("fatal: not a git repository", True),
        ("panic: runtime error: index out of range", True),
        ("ValueError: bad input", True),
        ("--- FAIL: TestRun (0.33s)", True),
        ("FAILED tests/test_api.py::test_login - AssertionError", True),
        ("HTTP/1.1 503 Service Unavailable", True),
        ("HTTP/1.1 200 OK", False),
        ('GET "http://127.0.0.1:9/v1/items" status code: 404', True),
        ("Process exited with code 1", True),
        ("Process exited with code 0", False),
        ("func decode(r io.Reader) error {\n\treturn err\n}", False),
        ("the error handling looks fine", False),
        ("upstream answered HTTP 502 twice", True),
        # a message template is code that would report an error, not one that happened
        ('\t\tt.Fatalf("marshalOutput returned error: %v", err)', False),
        ('return fmt.Errorf("push error: %w", err)', False),
        ('log.error(f"fatal: {exc!r}")', False),
        ('raise RuntimeError("sync error: {}".format(name))', False),
        ('t.Fatalf("bad: %v", err)\nerror: push rejected', True),  # the next line printed one
    ],
)
def test_error_is_an_error_line(text: str, held: bool) -> None:
    assert ERROR.held_by("tool", text) is held


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ('requesting "http://127.0.0.1:9/repo.git/git-receive-pack" status code: 500', True),
        ("HTTP/1.1 200 OK", True),
        ("curl: HTTP 404 on /v1/items", True),
        ("response status 301", True),
        ("git status: 3 files changed", False),
        ("HTTP/2 stream reset", False),
        ("status code: 1234", False),  # no three-digit code
        ("exit status 1", False),
    ],
)
def test_http_status_is_a_code_as_tools_print_it(text: str, held: bool) -> None:
    assert HTTP_STATUS.held_by("tool", text) is held


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("ba8e2c6f Merge pull request #1947", True),
        ("HEAD is now at 37f2981 Add fetch smoke command", True),
        ("[soph/replicate a9b1834] Add CLI tests", True),
        ("commit 9d5dbc1f0e2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c", True),  # a full SHA-1
        ("1234567 rows", False),  # digits only
        ("a defaced page", False),  # letters only
        ("0x1f2e3d4c5b", False),  # a hex literal, not an id word
        ("token " + "ab12" * 20, False),  # 80 hex digits: a blob, not an id
        ("Ba8e2c6f", False),  # git prints ids in lower case
        ("ba8e2c", False),  # six: too short
        ("x1f2e3d4c5b", False),  # after a letter: part of a word
        ("café1f2e3d4c5b", True),  # é is no ASCII word character, as the pattern reads
    ],
)
def test_hex_id_is_a_commit_like_word(text: str, held: bool) -> None:
    assert HEX_ID.held_by("tool", text) is held
    # one SHA rule: the replay's identifier report and the compressor's index find the same
    assert bool(extract(text).get("sha")) is held
    assert any(looks_like_sha(m.group()) for m in SHA_WORD.finditer(text)) is held


def test_kind_tests_take_linear_time_on_hostile_rows() -> None:
    """A 200 KB run of digits or of one letter, 32 query terms: no rescan per position
    (the duration test took 22 s on 32 KB of digits, the proximity scan 1.8 s a row)."""
    digits = "7" * 200_000
    start = time.perf_counter()
    assert not DURATION.held_by("tool", digits)
    assert not ERROR.held_by("tool", digits)
    assert not HEX_ID.held_by("tool", digits) and not HEX_ID.held_by("tool", "a1" * 100_000)
    # one 200 KB line of error marks, each a template's
    assert not ERROR.held_by("tool", "x error: %v " * 16_000)
    assert not HTTP_STATUS.held_by("tool", "status " * 30_000)
    matcher = TermMatcher(["a" * n for n in range(3, 35)])
    assert matcher.count_near("a" * 200_000, NEAR_CHARS) == 32
    assert time.perf_counter() - start < 5.0


def test_request_is_held_by_the_user() -> None:
    assert REQUEST.held_by("user", "only git primitives, no local clone")
    assert not REQUEST.held_by("assistant", "only git primitives, no local clone")


def test_kind_bonus_keeps_the_order_of_typed_rows() -> None:
    terms = ["error", "push", "mirror", "refs", "retry"]
    better = candidate(1, "error: push to mirror refs rejected", role="tool")
    worse = candidate(2, "error: push failed", role="tool")
    prose = candidate(3, "the push to the mirror refs needs a retry")
    hits = rank([better, worse, prose], terms, 5)
    # the error lines first, in their own order (not tied at the top of the tier)
    assert [hit.message_id for hit in hits] == [1, 2, 3]
    assert hits[0].score > hits[1].score > hits[2].score
