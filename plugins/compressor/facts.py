"""Facts of the compacted middle: what an engineer resuming the work needs, extracted verbatim.

:func:`extract_facts` reads the ORIGINAL messages of the middle (before
pruning cut their tool output) and returns :class:`HandoffFact` records:

* ``request`` - a real user message (harness text is skipped: see
  :attr:`Message.harness`), whitespace folded, cut at a sentence;
* ``constraint`` - a sentence of a real user message that sets a rule
  (must, never, don't, only, ...);
* ``answer`` - the prose of an assistant message (reasoning blocks removed);
* ``decision`` - an assistant sentence that states a choice or its reason;
* ``command`` - a tool call reduced to what it did (the shell command, the
  file it read or edited, the pattern it searched), with the call's outcome
  attached when its result is short or has a result line;
* ``error`` - an exact error line of a tool result, with the command that
  produced it;
* ``file`` - a file the agent created or edited.

Each fact has a ``score`` (its kind's weight, with small boosts) so a
summarizer can keep the most useful ones within a budget, and the message id
that ``session_open`` opens. The same facts are handed to every summarizer:
the deterministic one renders them, an LLM summarizer is told to keep them
verbatim. Extraction is a few regular expressions over a bounded prefix and
suffix of each tool output, so its cost does not grow with output size.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any

from hermes_core.terminal import plain_text
from hermes_hookspecs import HandoffFact, Message

from .identifiers import COMMIT_LINE

#: base weight of each kind of fact
WEIGHTS = {
    "request": 10.0,
    "constraint": 9.0,
    "error": 8.0,
    "decision": 7.5,
    "answer": 6.0,
    "command": 5.0,
    "file": 4.0,
}
MAX_REQUEST_CHARS = 700
MAX_ANSWER_CHARS = 320
MAX_LINE_CHARS = 200
#: a tool output shorter than this is kept whole as the call's outcome
SHORT_OUTPUT_CHARS = 240
#: only this much of a tool output's start and end is scanned for key lines
SCAN_CHARS = 12_000
MAX_ERRORS_PER_OUTPUT = 3
#: an answer that closed a turn (the agent's last words before the user spoke
#: again) weighs this much more: it is what the user read and answered
CLOSING_BOOST = 2.0
#: an error line names its command in at most this many characters
MAX_FROM_CHARS = 80

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
#: a sentence: a run of text up to an end mark (``.``, ``!``, ``?``, then any closing quote,
#: bracket or emphasis: ``."``, ``.)``, ``.**``) followed by a blank, or up to the line's
#: end. An end mark inside a word (``main.go``, ``v1.2.3``, ``remote.List``) is part of
#: the sentence: ending one there lost the sentence's head and kept its tail as a fragment.
#: A match that has started cannot fail (the run ends at an end mark or the line's end), so
#: the next one starts where it stopped, and nothing is retried (``++``: linear time)
_SENTENCE = re.compile(
    r"(?:[^.!?\n]|[.!?](?![\"'’”)\]*_`]*(?:\s|$)))++(?:[.!?][\"'’”)\]*_`]*(?=\s|$)|$)",
    re.MULTILINE,
)
#: a constraint or decision sentence longer than this is no sentence (a list run together)
MAX_SENTENCE_CHARS = 400
_CONSTRAINT = re.compile(
    r"\b(?:must|never|don't|do not|always|only|should not|shouldn't|avoid|without|make sure|"
    r"required?|instead of|no need|keep)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decided|decide|instead|because|since|chose|choose|the fix|approach|root cause|"
    r"the issue is|the problem is|skip|skipping|won't|will not|rather than|so that|"
    r"going with|dropp?ing|removing|remove|don't know|we don't|not needed|unnecessary)\b",
    re.IGNORECASE,
)
#: a line that reports an error (:func:`_error_line`) holds ``error``, ``Error``, ``failed``,
#: ``FAIL``/``FAILED``, ``fatal``, ``panic``, ``cannot``, ``undefined`` as words, ``ERROR``,
#: ``Traceback``, ``Exception``, ``not found``, ``No such file``, ``[Pp]ermission denied``,
#: ``refused``, ``, want X``, ``has not been`` or ``mismatch``. Every branch opens with its
#: word (a word's start is checked after it, ``(?<!\w...)``), so a search skips to the
#: words instead of trying each branch at every character (ten times faster) ...
_ERROR_LINE = re.compile(
    r"error(?<!\werror)\b|Error(?<!\wError)\b|ERROR|failed(?<!\wfailed)\b|"
    r"FAIL(?<!\wFAIL)(?:ED)?\b|fatal(?<!\wfatal)\b|panic(?<!\wpanic)\b|Traceback|Exception\b|"
    r"not found|No such file|Permission denied|permission denied|refused|"
    r"cannot(?<!\wcannot)\b|undefined(?<!\wundefined)\b|, want \S|has not been|mismatch"
)
#: what precedes an error word that counts none of them (``0 failed``, ``0 FAILED``)
_NONE_BEFORE = re.compile(r"(?<![\w.])0 \Z")


def _names_some(pattern: re.Pattern[str], text: str) -> bool:
    """Whether ``pattern`` finds a failure word in ``text`` that is not a count of none."""
    for match in pattern.finditer(text):
        if not _NONE_BEFORE.search(text, max(0, match.start() - 2), match.start()):
            return True
    return False


#: ... or the words ``want`` and ``got`` in either order, or ``expected `` and later
#: `` got`` or `` but`` (found one after the other: as ``want.*got`` in one pattern, a
#: line of many ``want`` and no ``got`` cost its length for each ``want``)
_WANT = re.compile(r"want(?<!\wwant)\b")
_GOT = re.compile(r"got(?<!\wgot)\b")
_GOT_OR_BUT = re.compile(r" (?:got|but)")


def _error_line(line: str) -> bool:
    """Whether ``line`` reports an error (see :data:`_ERROR_LINE`); linear in its length.

    A count of none (``0 failed``, ``0 FAILED``) reports no error.
    """
    if _names_some(_ERROR_LINE, line):
        return True
    for first, then in ((_WANT, _GOT), (_GOT, _WANT)):
        found = first.search(line)
        if found is not None and then.search(line, found.end()):
            return True
    expected = line.find("expected ")
    return expected >= 0 and _GOT_OR_BUT.search(line, expected + 9) is not None


#: tools whose output is what they found or read, not what happened: no error lines
_LOOKUP_TOOLS = re.compile(r"(?i)read|grep|glob|search|find|list|view|fetch|task|agent|todo")
#: a shell command that shows what is there (a file's text, a search, a listing,
#: history): its output quotes code and logs, so its lines are not errors that happened
_READ_COMMAND = re.compile(
    r"^(?:\w+: )?(?:cd \S+ (?:&&|;) )?(?:env (?:-\S+ )*(?:\w+=\S* )+)?(?:\w+=\S* )*"
    r"(?:sed -n|cat|head|tail|nl|less|more|bat|rg|grep|egrep|ag|ls|find|fd|tree|wc|jq|awk|"
    r"git (?:show|diff|log|blame|grep|ls-files|cat-file))\b"
)
#: an error-looking line that is source code (a signature, a call, a declaration)
_CODE_LINE = re.compile(
    r"(?:[{(,;\[]\s*$|^\s*(?:func|def|class|return|if|else|elif|for|while|var|const|let|"
    r"type|import|from|case|try|catch|except|raise|throw|//|/\*|\*|#\s)\b|:=|=>|\)\s*\{|\s//\s|^\s*[\w.]+\([^()]*\)\s*;?\s*$)"
)
_FENCED = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_NOT_PROSE = re.compile(r"\s*(?:#|\||[-=]{3}|\$ |>\s*\$)|.*\\\s*$")
#: an error line shorter than this (``FAIL``) says only what the command's outcome says
MIN_ERROR_CHARS = 12
#: assistant prose this short beside a tool call only announces the call
STEP_NOTE_CHARS = 160
#: a user message this short only answers the agent (``yes``, ``go on``): its
#: meaning is the closing answer before it, which is kept at a boost
SHORT_REQUEST_CHARS = 24
SHORT_REQUEST_PENALTY = 4.0
#: the words of a reply that only assents or hands the turn back (``yes``, ``ok, now
#: continue``, ``do that``): such a short reply says nothing on its own, it is no fact
_ASSENT_WORDS = (
    "yes yeah yep yup ok okay k sure fine good great cool nice thanks thank you please "
    "pls go on ahead continue proceed keep going do it that this so now then and lets "
    "let's let us what's whats next again right correct agreed perfect done"
)
_ASSENT = frozenset(_ASSENT_WORDS.split())
_WORD = re.compile(r"[\w']+")
#: an output that only acknowledges the call (it adds nothing to the call itself)
_ACK = re.compile(
    r"(?i)^(?:the file \S.{0,300} has been (?:updated|created)(?: successfully)?\.?|"
    r"file created successfully.{0,200}|updated task #?\d+ status|"
    r"todos have been modified successfully.{0,400}|"
    r"success\. (?:updated|added|deleted|modified) the following files:.*|"
    r"(?:ok|done|success|successfully|saved|plan updated)\.?)$"
)
#: assistant prose that only narrates the next step
_NARRATION = re.compile(
    r"(?i)^(?:(?:now|next|first|then|ok(?:ay)?|great|good|perfect)[,!.]?\s+)?"
    r"(?:let me|let's|i'll|i will|i need to|i'm going to|i am going to)\b"
)
#: a result line (:func:`_result_line`) starts ``ok``, ``PASS``, ``FAIL``, ``--- PASS|FAIL``
#: or is a git commit's ``[main 1a2b3c4] msg`` ...
_RESULT_START = re.compile(r"ok\s|PASS\b|FAIL\b|---\s(?:PASS|FAIL)|" + COMMIT_LINE)
#: ... or holds ``exit code|status``, ``Exit code``, ``Success``, or ``succeeded``,
#: ``created``, ``written``, ``updated``, ``committed``, ``merged``, ``pushed`` as words ...
_RESULT_WORD = re.compile(
    r"exit (?:code|status)|Exit code|Success(?<!\wSuccess)|succeeded(?<!\wsucceeded)\b|"
    r"created(?<!\wcreated)\b|written(?<!\wwritten)\b|updated(?<!\wupdated)\b|"
    r"committed(?<!\wcommitted)\b|merged(?<!\wmerged)\b|pushed(?<!\wpushed)\b"
)
#: ... or a count (``3 passed``, ``1 failed``, ``12 tests``) or a duration (``0.5s``)
_RESULT_NUMBER = re.compile(r"\d(?<!\w\d)\d*(?: (?:passed|failed|tests?)\b|(?:\.\d+)?s\b)")


def _result_line(line: str) -> bool:
    """Whether ``line`` is a result line (three patterns, each quick to search, in place of
    one whose branches would be tried at every character)."""
    return bool(
        _RESULT_START.match(line) or _RESULT_WORD.search(line) or _RESULT_NUMBER.search(line)
    )


#: a task runner echoing the command it runs (``[test:ci] $ go test ./...``, ``$ make``)
_ECHO_LINE = re.compile(r"^\s*(?:\[[\w:./-]+\]\s*)?\$ \S")
#: a ``file:line: message`` line (a test assertion, a compiler diagnostic) ...
_LOCATED_LINE = re.compile(r"^\s*[\w./-]+\.\w+:\d+(?::\d+)?: \S")
#: ... is an error line of an output that reports a failure
#: (``^(?:--- )?FAIL(?:ED)?\b|\bfailed\b|\berror\b``, each branch opening with its
#: word and checking what precedes it after, so the search skips to the words fast)
_FAILED_RUN = re.compile(
    r"failed(?<!\wfailed)\b|error(?<!\werror)\b|FAIL(?:(?<=^FAIL)|(?<=^--- FAIL))(?:ED)?\b",
    re.MULTILINE,
)
#: a line of a file listing (``  12→code``, ``12\tcode``): code, not an outcome
_LISTING = re.compile(r"^\s*\d+(?:→|\t)")
#: 12-64 hex digits as a word (``\b[0-9a-f]{12,64}\b``; the first digit comes before
#: the check of what precedes it, so the search skips to hex digits)
_HEXISH = re.compile(r"[0-9a-f](?<!\w[0-9a-f])[0-9a-f]{11,63}\b")
_GREP_PREFIX = re.compile(r"^(\S+?)-(\d+)-")
#: tool-call argument keys that say what a call did, in order of preference
_SUBJECT_KEYS = (
    "command",
    "cmd",
    "file_path",
    "path",
    "notebook_path",
    "pattern",
    "query",
    "url",
    "description",
    "prompt",
)
_EDIT_TOOLS = re.compile(r"(?i)edit|write|patch|create|replace|insert|notebook")


def strip_reasoning(text: str) -> str:
    """``text`` without inline reasoning blocks (``<think>``, ``<thinking>``, ``<reasoning>``)."""
    if "<" not in text:
        return text
    return _THINK.sub("", text).strip()


def _fold(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str, limit: int) -> str:
    """``text`` cut at a sentence or word boundary near ``limit``."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    stop = max(head.rfind(". "), head.rfind("? "), head.rfind("! "))
    if stop > limit // 2:
        return head[: stop + 1] + " …"
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head) + " …"


def _line(text: str) -> str:
    # a carriage return inside one line (a progress frame beside it) keeps both
    text = plain_text(text.replace("\r", " ")).strip()
    match = _GREP_PREFIX.match(text)
    if match and ("/" in match.group(1) or "." in match.group(1)):
        text = f"{match.group(1)}:{match.group(2)}: {text[match.end() :]}"
    return _cut(_fold(text), MAX_LINE_CHARS)


_PARAGRAPH = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)]|#{1,6})\s)")
_HEADING = re.compile(r"^(?:#{1,6}\s|\*\*[^*]{1,80}\*\*:?$)")


def _pieces(prose: str) -> list[str]:
    """A long answer as pieces of at most MAX_ANSWER_CHARS: its blocks packed in order.

    Paragraphs and list items are packed into one piece while they fit, and a
    heading opens a new piece, so a heading or a short list item never stands
    alone as a fact (each fact costs its anchor and label, and a bare heading
    says nothing): a list is kept with its heading, a paragraph whole.
    """
    folded = _fold(prose)
    if len(folded) <= MAX_ANSWER_CHARS:
        return [folded]
    out: list[str] = []
    current, body = "", False  # body: the current piece holds more than headings
    for raw in _PARAGRAPH.split(prose):
        block = _fold(raw)
        if not block:
            continue
        heading = bool(_HEADING.match(block))
        if current and ((heading and body) or len(current) + 1 + len(block) > MAX_ANSWER_CHARS):
            if body:
                out.append(current)
            current, body = "", False
        current = f"{current} {block}" if current else block
        body = body or not heading
        while len(current) > MAX_ANSWER_CHARS + 40:  # no scrap of a few words on its own
            cut = _cut(current, MAX_ANSWER_CHARS)
            out.append(cut)
            current = current[len(cut.rstrip(" …")) :].strip()
    if current and body:
        out.append(current)
    return [piece for piece in out if len(piece) >= 8] or [_cut(folded, MAX_ANSWER_CHARS)]


def _arguments(arguments: str) -> dict[str, object]:
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {"input": value}


#: a patch's file headers (``*** Update File: path``, ``*** Move to: path``: the
#: ``apply_patch`` format)
_PATCH_FILE = re.compile(r"^\*\*\* (?:(Update|Add|Delete) File|(Move) to): (.*\S)", re.MULTILINE)


def _patch_files(name: str, args: Mapping[str, object]) -> list[tuple[str, str]]:
    """The (action, path) pairs the patch a patch tool's call carries names, in order
    (none for another tool, or an argument that is no patch)."""
    if "patch" not in name.lower():
        return []
    out: list[tuple[str, str]] = []
    for value in args.values():
        if isinstance(value, str) and value.lstrip().startswith("*** Begin Patch"):
            out += [(m[1] or m[2], m[3]) for m in _PATCH_FILE.finditer(value)]
    return list(dict.fromkeys(out))


def call_subject(name: str, arguments: str) -> str:
    """What a tool call did, in a few words: ``Bash: go test ./...``, ``Edit: path/x.go``,
    ``apply_patch: Update x.go, Add y.go`` (a patch by the files it changes)."""
    args = _arguments(arguments)
    patched = _patch_files(name, args)
    if patched:
        return f"{name}: " + _cut(", ".join(f"{a} {p}" for a, p in patched), MAX_LINE_CHARS)
    pattern, where = args.get("pattern"), args.get("path")
    if isinstance(pattern, str) and isinstance(where, str):
        return f"{name}: {_cut(_fold(pattern), 120)} in {_cut(where.strip(), 120)}"
    for key in _SUBJECT_KEYS:
        value = args.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value.strip():
            return f"{name}: {_cut(_fold(value), MAX_LINE_CHARS)}"
    for value in args.values():
        if isinstance(value, str) and value.strip():
            return f"{name}: {_cut(_fold(value), 120)}"
    return name


#: an outcome that shows nothing: no output, or no letter or digit of any script (a
#: spinner's frame, a cursor move); a number (a count, a percentage) is output
_SHOWS_NOTHING = re.compile(r"\(no output\)|[\W_]*")
#: the arguments naming the running process a call polls (Codex ``write_stdin``'s
#: ``session_id``, Claude Code ``BashOutput``'s ``bash_id``)
_PROCESS_KEYS = ("session_id", "bash_id")
#: a tool output saying its command still runs, with the id later calls name it by
#: (Codex ``exec_command`` and ``write_stdin``; Claude Code's ``Bash`` run in background)
_STILL_RUNNING = re.compile(
    r"^(?:Process running with session ID (\d+)"
    r"|Command running in background with ID: ([\w.-]+))\s*$",
    re.MULTILINE,
)


def polled_process(arguments: str) -> str | None:
    """The id of the process a call polls: it names one and sends it nothing (a
    ``write_stdin`` with ``chars`` to type is input, not a poll).

    The call is a poll (:func:`extract_facts`) only when an earlier output reported
    that id running or the call's own output is an execution envelope: an argument
    of that name alone makes none.
    """
    args = _arguments(arguments)
    key = next((k for k in _PROCESS_KEYS if k in args), None)
    value = args.get(key) if key is not None else None
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip():
        return None
    # a filter narrows what a poll shows (BashOutput's ``filter``): still a poll
    shown = (key, "filter") if key == "bash_id" else (key,)
    sends = any(isinstance(v, str) and v for k, v in args.items() if k not in shown)
    return None if sends else str(value).strip()


def still_running(text: str) -> str | None:
    """The id of the process a tool output says is still running."""
    match = _STILL_RUNNING.search(text[:2_000])
    return (match.group(1) or match.group(2)) if match is not None else None


def edited_files(name: str, arguments: str) -> list[str]:
    """The files an edit-like call changed, when it names them (a patch: each file it names)."""
    if not _EDIT_TOOLS.search(name):
        return []
    args = _arguments(arguments)
    for key in ("file_path", "path", "notebook_path", "filename", "file"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return [value.strip()]
    patched = _patch_files(name, args)
    return list(dict.fromkeys(path for action, path in patched if action != "Delete"))


def _scan_region(text: str) -> str:
    """The part of a tool output that is scanned: all of it, or its start and end."""
    if len(text) <= 2 * SCAN_CHARS:
        return text
    return text[:SCAN_CHARS] + "\n" + text[-SCAN_CHARS:]


#: a literal that every match of :func:`_error_line`, :func:`_result_line` (but for
#: its line-start branches) or :data:`_ECHO_LINE` contains: a line without one of
#: these, a digit before ``s`` or ``: `` (:data:`_LOCATED_LINE`, durations) or a
#: line start of :data:`_LINE_START` is none of them, so it is not searched line
#: by line. Keep it a superset when those patterns change (the tests compare the
#: scan with a line-by-line one).
_CANDIDATE = re.compile(
    r"rror|ERROR|fail|FAIL|fatal|panic|Traceback|Exception|not found|No such file|"
    r"ermission denied|refused|cannot|undefined|want|expected |has not been|mismatch|"
    r" passed| test|exit |Exit code|Success|succeeded|created|written|updated|committed|"
    r"merged|pushed|\$ "
)
_CANDIDATE_DIGIT = re.compile(r"\d(?:s|: )")
#: the characters :meth:`str.splitlines` ends a line at
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: the line-start branches of :func:`_result_line` (``ok``, ``PASS``, ``---``, ``[``)
_RESULT_STARTS = ("ok", "PASS", "---", "[")
_LINE_START = re.compile(f"[{_LINE_BREAKS}](?:ok|PASS|---|\\[)")


def _candidate_lines(region: str, starts: list[int]) -> list[int]:
    """Indexes (into ``region.splitlines()``, whose offsets are ``starts``) of the lines
    that may hold an error, result or echo line: every other line holds none."""
    hits = [m.start() for m in _CANDIDATE.finditer(region)]
    hits += [m.start() for m in _CANDIDATE_DIGIT.finditer(region)]
    hits += [m.start() + 1 for m in _LINE_START.finditer(region)]
    if region.startswith(_RESULT_STARTS):
        hits.append(0)
    return sorted({bisect_right(starts, hit) - 1 for hit in hits})


#: an execution envelope around a command's output (Codex ``exec_command``:
#: ``Command:``, ``Chunk ID:``, ``Wall time:``, ``Process exited with code N``,
#: ``Original token count:``, then ``Output:`` and the output itself; Codex
#: ``apply_patch``: ``Exit code: N``, ``Wall time:``, ``Output:``)
_ENVELOPE = re.compile(
    r"\A(?:Command: (?s:.{0,4000}?)\n(?=Chunk ID: |Wall time: |Process ))?"
    r"(?:(?:Chunk ID|Wall time|Original token count|Session ID): [^\n]*\n"
    r"|Process (?:exited with code (?P<code>-?\d+)|(?P<running>running)[^\n]*)\n"
    r"|Exit code: (?P<exit>-?\d+)\n)+Output:\n?"
)


#: Claude Code ``BashOutput``'s envelope: a ``<status>`` then tagged parts, each once
_TAGGED = re.compile(r"<(status|exit_code|stdout|stderr|timestamp)>\n?(.*?)\n?</\1>\s*", re.DOTALL)


def _unwrap_tagged(text: str) -> tuple[str, int | None, str | None] | None:
    """A ``BashOutput`` result's output (stdout, then stderr), exit code and the shell's
    state (see :func:`unwrap_output`); None when ``text`` is not that envelope (all of
    it tagged parts)."""
    parts: dict[str, str] = {}
    at = 0
    while at < len(text):
        match = _TAGGED.match(text, at)
        if match is None or match.group(1) in parts:
            return None
        parts[match.group(1)] = match.group(2)
        at = match.end()
    status = parts.get("status", "").strip()
    code = parts.get("exit_code", "").strip()
    body = "\n".join(p for p in (parts.get("stdout"), parts.get("stderr")) if p and p.strip())
    if status not in ("running", "completed", "failed") and not code:
        body = f"{status}\n{body}".strip()  # killed: that is what happened
    exit_code = int(code) if re.fullmatch(r"-?\d+", code) else None
    if exit_code is not None or status not in ("", "running"):
        state: str | None = "ended"
    else:
        state = "running" if status else None
    return body, exit_code, state


def unwrap_output(text: str) -> tuple[str, int | None, str | None]:
    """A tool output without its execution envelope, the exit code the envelope gave,
    and the command's state the envelope gives: ``"running"``, ``"ended"`` (an exit
    code, or a ``<status>`` other than running), or None (it says neither).

    The envelope repeats the call and timing around every output; only the exit
    code and the output say what happened. Codex's (``Command:``, ``Chunk ID:``,
    ``Process exited with code N`` ... ``Output:``) and Claude Code ``BashOutput``'s
    (``<status>``, ``<exit_code>``, ``<stdout>``, ``<stderr>``, ``<timestamp>``).
    """
    if text.startswith("<status>"):
        return _unwrap_tagged(text.strip()) or (text, None, None)
    if not text.startswith(("Command: ", "Chunk ID: ", "Exit code: ")):
        return text, None, None
    match = _ENVELOPE.match(text)
    if match is None:
        return text, None, None
    code = match.group("code") or match.group("exit")
    state = "ended" if code is not None else "running" if match.group("running") else None
    return text[match.end() :], int(code) if code is not None else None, state


def _outcome(text: str) -> tuple[str, list[str], float]:
    """A tool output's outcome, its error lines, and how telling the outcome is (a boost).

    The outcome is the output itself when it is short, else its result lines
    (test summaries, durations, exit codes) or its first line; a file listing
    is reduced to its size.
    """
    text = text.strip()
    if not text:
        return "(no output)", [], 0.0
    region = _scan_region(text)
    every = region.splitlines()
    lines = [line for line in every if line.strip()]
    errors: list[str] = []
    results: list[str] = []
    listing = sum(1 for line in lines[:20] if _LISTING.match(line)) > len(lines[:20]) // 2
    if listing:  # a file's text: its lines are code, not errors or results
        return f"{len(lines)} lines, starting {_line(lines[0])}", [], -1.0
    failed = _names_some(_FAILED_RUN, text[:SCAN_CHARS]) or _names_some(
        _FAILED_RUN, text[-SCAN_CHARS:]
    )
    # the line-by-line tests below, on the only lines that can pass one of them
    starts = list(accumulate((len(line) for line in region.splitlines(keepends=True)), initial=0))
    echo = ""
    for index in _candidate_lines(region, starts):
        raw = every[index]
        if (
            len(errors) < MAX_ERRORS_PER_OUTPUT
            and len(raw.strip()) >= MIN_ERROR_CHARS
            and (_error_line(raw) or (failed and _LOCATED_LINE.match(raw)))
            and not _CODE_LINE.search(raw)
        ):
            line = _line(raw)
            if line not in errors:
                errors.append(line)
        elif len(results) < 2 and _result_line(raw):
            results.append(_line(raw))
        elif not echo and _ECHO_LINE.match(raw):
            echo = _line(raw)
    boost = 2.5 if errors or results else 0.0
    results = list(dict.fromkeys(results))  # ``FAIL | FAIL`` says no more than ``FAIL``
    if echo and echo not in results:  # the command the runner ran, before what it printed
        results.insert(0, echo)
    if len(text) <= SHORT_OUTPUT_CHARS:
        return _fold(plain_text(text)), errors if len(lines) > 1 else [], max(boost, 1.0)
    hexes = [h for h in dict.fromkeys(_HEXISH.findall(text[:SCAN_CHARS]))][:2]
    parts = results or [_line(lines[0])]
    if hexes and not any(h in " ".join(parts) for h in hexes):
        parts.append("ids " + ", ".join(hexes))
    return " | ".join(parts), errors, boost


def _tool_outcome(text: str) -> tuple[str, int | None, str | None, str, list[str], float]:
    """A tool output's body (envelope removed), the envelope's exit code, the command's
    state it gives (:func:`unwrap_output`), the outcome, error lines and boost."""
    body, code, state = unwrap_output(text)
    outcome, errors, boost = _outcome(body)
    if code:
        outcome, boost = f"exit {code}: {outcome}", max(boost, 1.0)
    if _ACK.match(outcome):
        outcome, boost = "ok", -3.0  # an acknowledgement says nothing the call did not
    return body, code, state, outcome, errors, boost


def tool_outcome(message: Message, annotations: Mapping[str, Any] | None = None) -> str:
    """What a tool result said, in a line (its recorded outcome when ``annotations`` hold it)."""
    entry = _recorded(annotations)
    if entry is not None and isinstance(entry.get("outcome"), str):
        return str(entry["outcome"])
    return _tool_outcome(message.text())[3]


#: where :func:`message_facts` results are kept with a row (``annotate_message``)
KEY = "compressor_facts"
#: bump when :func:`message_facts` changes what it returns
VERSION = 17


def message_facts(message: Message) -> dict[str, Any]:
    """What one message contributes, on its own, JSON-ready (``{}`` for none).

    The costly part of fact extraction (regular expressions over the text)
    done once per message: the runtime stores it with the row through the
    ``annotate_message`` hook, so a compression only assembles it.
    """
    if message.kind != "message":
        return {}
    if message.harness in RESULT_HARNESS:
        return _notice_facts(message.text())
    if message.harness is not None:
        return {}
    if message.role == "user":
        text = _fold(message.text())
        if not text or assent_only(text):
            return {}
        constraints = [
            _fold(sentence)
            for sentence in _SENTENCE.findall(message.text())
            if 12 <= len(_fold(sentence)) <= MAX_SENTENCE_CHARS
            and _CONSTRAINT.search(sentence)
            and not sentence.rstrip().endswith("?")  # "why keep v1 for push?" sets no rule
        ]
        return {"request": _cut(text, MAX_REQUEST_CHARS), "constraints": constraints}
    if message.role == "assistant":
        out: dict[str, Any] = {}
        prose = strip_reasoning(message.text())
        if prose.strip():
            sentences = [s for s in _SENTENCE.findall(prose) if s.strip()]
            # a short note beside a tool call announces the call ("Now run the tests:"),
            # which is a fact of its own: narration, like "let me ..." prose
            step_note = bool(message.tool_calls) and len(_fold(prose)) <= STEP_NOTE_CHARS
            out["narration"] = step_note or all(_NARRATION.match(_fold(s)) for s in sentences)
            # decisions are prose: not a line of a code block, a table row or a heading
            stated = [
                s for s in _SENTENCE.findall(_FENCED.sub("\n", prose)) if not _NOT_PROSE.match(s)
            ]
            out["decisions"] = [
                _fold(s)
                for s in stated
                if 20 <= len(_fold(s)) <= MAX_SENTENCE_CHARS
                and len(s.split()) >= 5
                and _DECISION.search(s)
                and not _fold(s).endswith(("?", ":"))  # a question or a list's lead-in
            ][:3]
            out["pieces"] = _pieces(prose)
        calls = []
        for call in message.tool_calls or []:
            calls.append(
                {
                    "id": call.id,
                    "tool": call.function.name,
                    "subject": call_subject(call.function.name, call.function.arguments),
                    "files": edited_files(call.function.name, call.function.arguments),
                    "polls": polled_process(call.function.arguments),
                }
            )
        if calls:
            out["calls"] = calls
        return out
    if message.role == "tool":
        text = message.text()
        body, _code, state, outcome, errors, boost = _tool_outcome(text)
        out = {
            "call_id": message.tool_call_id,
            "running": still_running(text),
            "alive": state == "running",  # the envelope says the command still runs
            "enveloped": len(body) != len(text),  # an execution envelope was removed
            "exited": state == "ended",  # an exit code, or a status that is not running
            "outcome": outcome,
            "errors": errors,
            "boost": boost,
            "long": len(body) > SHORT_OUTPUT_CHARS,
        }
        answers = user_answers(text)
        if answers:  # the user's own choices, in a tool's result: rules set, not an outcome
            out.update(outcome="answered", answers=answers)
        return out
    return {}


#: how a harness hands the user's answers to the agent's questions back as a tool's
#: result (Claude Code's ``AskUserQuestion``): ``"question"="answer"`` pairs
_ANSWERED = re.compile(
    r"\A\s*(?:Your questions have been answered|User has answered your questions):"
)
_ANSWER_PAIR = re.compile(r'"(.{1,500}?)"="(.{1,1000}?)"(?=, "|\.\s|\.?\s*\Z)', re.DOTALL)


def user_answers(text: str) -> list[str]:
    """The user's answers a tool result carries, each as ``question → answer`` (else [])."""
    if _ANSWERED.match(text) is None:
        return []
    return [
        f"{_fold(question)} → {_fold(answer)}" for question, answer in _ANSWER_PAIR.findall(text)
    ]


def assent_only(text: str) -> bool:
    """A short reply made only of assent and hand-back words (``yes``, ``go on``).

    A reply naming one of the options offered (``do 2``, ``yes, 1 and 3``) is a
    choice, not an assent: which option was taken is a fact of its own.
    """
    if len(text) >= SHORT_REQUEST_CHARS:
        return False
    return all(w in _ASSENT for w in _WORD.findall(text.lower()))


#: harness notices that carry the result of work done outside the turn (Claude Code's
#: ``<task-notification>``: a background agent's or command's report): the agent reads
#: them as answers, so their summary and result are facts like an answer's
RESULT_HARNESS = frozenset({"claude_code.task_notification"})
_NOTICE_PART = re.compile(r"<(summary|result)>(.*?)(?:</\1>|\Z)", re.DOTALL)


#: a notice's status, and an exit code its summary gives
_NOTICE_STATUS = re.compile(r"<status>\s*(\w+)\s*</status>")
_NOTICE_EXIT = re.compile(r"\bexit code (-?\d+)")


def _notice_facts(text: str) -> dict[str, Any]:
    """The answer pieces of a result notice: its summary line, then its result.

    A notice that only says its task ended well (no result, status completed or none,
    no non-zero exit code: ``Background command "..." completed (exit code 0)``, a
    monitor's event or its stream ending) is routine: the command's own fact says what
    ran, so its pieces rank low.
    """
    found = [(tag, body.strip()) for tag, body in _NOTICE_PART.findall(text) if body.strip()]
    if not found:
        return {}
    prose = strip_reasoning("\n\n".join(body for _tag, body in found))
    status = _NOTICE_STATUS.search(text)
    codes = [int(code) for code in _NOTICE_EXIT.findall(prose)]
    routine = (
        all(tag != "result" for tag, _body in found)
        and (status is None or status.group(1) == "completed")
        and not any(codes)
    )
    return {
        "notice": True,
        "routine": routine,
        "narration": False,
        "decisions": [],
        "pieces": _pieces(prose),
    }


def annotation(message: Message) -> dict[str, Any] | None:
    """The ``annotate_message`` result: :func:`message_facts` under :data:`KEY`."""
    facts = message_facts(message)
    return {KEY: {"v": VERSION, **facts}} if facts else None


def _recorded(annotations: Mapping[str, Any] | None) -> dict[str, Any] | None:
    entry = (annotations or {}).get(KEY)
    if isinstance(entry, dict) and entry.get("v") == VERSION:
        return entry
    return None


def closing_answers(messages: Sequence[Message]) -> set[int]:
    """Positions of the answers that closed a turn: the last assistant prose before a user turn.

    Harness text is not a user turn; tool calls without prose are not answers.
    """
    out: set[int] = set()
    last: int | None = None
    for position, message in enumerate(messages):
        if message.kind != "message" or message.harness is not None:
            continue
        if message.role == "assistant" and message.text().strip():
            last = position
        elif message.role == "user" and last is not None:
            out.add(last)
            last = None
    return out


def _anchor(mid: int | None) -> dict[str, int | None]:
    """A fact's ``message_id`` and ``draft_id`` from a recovery id (negative: a draft row)."""
    if mid is not None and mid < 0:
        return {"message_id": None, "draft_id": mid}
    return {"message_id": mid or None, "draft_id": None}


def extract_facts(
    messages: Sequence[Message],
    ids: Sequence[int | None],
    annotations: Sequence[Mapping[str, Any] | None] | None = None,
) -> list[HandoffFact]:
    """Facts of ``messages`` (oldest first; ``ids`` their recovery ids), oldest first.

    A negative id is a draft row of a turn not committed yet: its facts quote
    no message id and keep it as :attr:`HandoffFact.draft_id`, which the turn's
    commit maps to the stored id.

    :param annotations: the rows' stored annotations, when the messages come
        from the store; a row carrying :data:`KEY` of this :data:`VERSION` is
        not scanned again (rows without it, from importers or older versions,
        are). The result is the same either way.
    """
    facts: list[HandoffFact] = []
    calls: dict[str, tuple[int, str, str]] = {}  # call id -> (fact index, subject, tool)
    running: set[str] = set()  # ids of processes an output said still run
    naming: dict[int, str] = {}  # the fact of a call naming a process id -> that id
    idle: set[int] = set()  # the facts of polls that saw nothing new
    total = max(1, len(messages))
    stored = list(annotations) if annotations is not None else [None] * len(messages)

    def add(kind: str, text: str, position: int, mid: int | None, boost: float = 0.0) -> int:
        # mild recency: the newest facts of the middle weigh up to one point more
        score = WEIGHTS[kind] + boost + position / total
        facts.append(
            HandoffFact(
                kind=kind,  # type: ignore[arg-type]
                text=text,
                position=position,
                score=round(score, 3),
                **_anchor(mid),
            )
        )
        return len(facts) - 1

    closing = closing_answers(messages)
    for position, (message, mid, notes) in enumerate(zip(messages, ids, stored, strict=True)):
        if message.kind != "message":
            continue
        if message.harness is not None and message.harness not in RESULT_HARNESS:
            continue
        entry = _recorded(notes)
        part = entry if entry is not None else message_facts(message)
        if not part:
            continue
        if part.get("notice"):
            routine = -3.0 if part.get("routine") else 0.0  # a status, like an acknowledgement
            for order, piece in enumerate(part["pieces"]):
                add("answer", piece, position, mid, boost=routine - min(2.0, 0.5 * order))
        elif message.role == "user":
            short = len(part["request"]) < SHORT_REQUEST_CHARS
            add("request", part["request"], position, mid, -SHORT_REQUEST_PENALTY * short)
            for sentence in part["constraints"]:
                add("constraint", sentence, position, mid)
        elif message.role == "assistant":
            for sentence in part.get("decisions", []):
                add("decision", sentence, position, mid)
            for order, piece in enumerate(part.get("pieces", [])):
                # later pieces of a long answer weigh a little less than its opening
                if position in closing:
                    boost = CLOSING_BOOST - min(2.0, 0.5 * order)
                else:
                    boost = (-3.0 if part.get("narration") else 0.0) - min(2.0, 0.5 * order)
                add("answer", piece, position, mid, boost=boost)
            for call in part.get("calls", []):
                index = add("command", call["subject"], position, mid)
                calls[call["id"]] = (index, call["subject"], call["tool"])
                if call["polls"]:
                    naming[index] = call["polls"]
                for path in call["files"]:
                    add("file", path, position, mid)
        elif message.role == "tool":
            found = calls.get(part["call_id"] or "")
            errors = part["errors"]
            boost = part["boost"]
            if (
                found is not None
                and part["long"]
                and (_LOOKUP_TOOLS.search(found[2]) or _READ_COMMAND.match(found[1]))
            ):
                errors = []
                if _READ_COMMAND.match(found[1]):  # a file shown by the shell: its lines
                    boost = min(boost, 0.0)  # are the file's text, not what happened
            if found is not None:
                index, subject, _tool = found
                fact = facts[index]
                # a poll: it names a process an earlier output said runs, or its own output
                # is that process's (an execution envelope: the start may be compacted already)
                poll = index in naming and (naming[index] in running or part["enveloped"])
                if (
                    poll
                    and not part["exited"]  # the process ended: that is news
                    and not errors
                    and _SHOWS_NOTHING.fullmatch(part["outcome"])
                ):
                    idle.add(index)  # a poll that saw nothing new (a spinner frame): no fact
                # the outcome's message is the one to open (a result of a draft row: its
                # draft id, for commit to map)
                facts[index] = fact.model_copy(
                    update={
                        "text": f"{subject} → {part['outcome']}",
                        **(_anchor(mid) if mid is not None else {}),
                        "score": round(fact.score + boost, 3),
                    }
                )
                if part["running"]:
                    running.add(part["running"])
                elif poll and not part.get("alive"):  # the process it polled ended
                    running.discard(naming[index])
            for answer in part.get("answers", []):  # never the goal: a choice, not a task
                add("constraint", answer, position, mid)
            for line in errors:
                where = f" (from {_cut(found[1], MAX_FROM_CHARS)})" if found is not None else ""
                add("error", _cut(line + where, MAX_LINE_CHARS + 120), position, mid)
    return [fact for index, fact in enumerate(facts) if index not in idle]


#: a fact this many characters long costs twice what its score alone says
DENSITY_CHARS = 240


def priority(fact: HandoffFact) -> float:
    """Score per cost: a short fact of a kind beats a long one (many facts fit, not few)."""
    return fact.score / (1.0 + len(fact.text) / DENSITY_CHARS)


_DIGITS = re.compile(r"\d+")
#: an outcome saying a run passed (its numbers are timings and counts, not the result),
#: when it says nothing failed (``1 failed, 12 passed`` is a failing run)
_PASSING = re.compile(r"(?i)(?:^|\W)(?:ok|pass(?:ed)?|succe(?:ss|ssful|eded)|\d+ passed)(?:\W|$)")
_FROM = re.compile(r" \(from [^()]*(?:\([^()]*\)[^()]*)*\)$")


def shape(fact: HandoffFact) -> str:
    """What makes a fact a repeat: its text, and for an error line its text without numbers.

    A failure that recurs over reruns prints the same line with other ports,
    line numbers and timings, and from other commands; the newest copy stands
    for all of them. So does a command run again that passes again but for its
    numbers (a test run passing in another time): the same command, exactly,
    and its passing outcome without numbers. Any other outcome keeps its
    numbers: ``cat VERSION → 1.2.3`` and a later ``→ 1.3.0`` are two facts.
    """
    key = fact.text.strip()
    if fact.kind == "command" and " → " in key:
        subject, outcome = key.split(" → ", 1)
        passing = not outcome.startswith("exit ") and not _names_some(_FAILED_RUN, outcome)
        if passing and _PASSING.search(outcome):
            return f"{subject} → {_DIGITS.sub('#', outcome)}"
        return key
    if fact.kind != "error":
        return key
    return _DIGITS.sub("#", _FROM.sub("", key))


def select_facts(facts: Sequence[HandoffFact], budget_chars: int) -> list[HandoffFact]:
    """The best facts within ``budget_chars`` (by :func:`priority`), returned oldest first.

    A fact whose text another chosen fact already holds is dropped as a
    duplicate, so one line never costs twice: the same text (or the same
    error line, see :func:`shape`, newest first) anywhere, or, from
    the same message, a text inside another's (a decision sentence inside the
    answer piece it came from). When a longer fact of the message is chosen
    after the shorter one it contains, the shorter one is dropped and its cost
    refunded.
    """
    chosen: dict[int, HandoffFact] = {}
    by_message: dict[int | None, list[int]] = {}
    seen: set[str] = set()
    used = 0
    ranked = sorted(facts, key=lambda f: (-priority(f), -f.position * (f.kind == "error")))
    for order, fact in enumerate(ranked):
        key = fact.text.strip()
        if not key or shape(fact) in seen:
            continue
        siblings = by_message.setdefault(fact.message_id, [])
        if any(key in chosen[other].text for other in siblings):
            continue
        inside = [other for other in siblings if chosen[other].text.strip() in key]
        refund = sum(len(chosen[other].text.strip()) + 12 for other in inside)
        cost = len(key) + 12
        if used - refund + cost > budget_chars:
            continue
        for other in inside:
            siblings.remove(other)
            del chosen[other]
        used -= refund
        seen.add(shape(fact))
        chosen[order] = fact
        siblings.append(order)
        used += cost
    return sorted(chosen.values(), key=lambda f: (f.position, -f.score))
