"""A keyword-recall memory provider storing facts in one JSON file.

What it does with each hook of :class:`hermes_hookspecs.MemoryProvider`:

* ``sync_turn``: pulls facts out of the (already redacted) user text: sentences
  starting with "remember (that)" / "note that", and first-person statements
  ("I prefer ...", "I use ...", "my ... is ..."); stores new ones.
* ``prefetch``: returns the stored facts sharing the most keywords with the
  query (at most ``max_recall``), or None.
* ``on_pre_compress``: returns the facts learned in this session (and in the
  sessions it was rotated from), so the compaction summary keeps them.
* ``on_session_switch``: logs the switch and records it in the file (the
  rotation lineage is what ``on_pre_compress`` follows).
* ``system_prompt_block``: one line saying how many facts are stored.
* tools: ``example_memory_recall`` (search facts) and ``example_memory_forget``.

The file is rewritten atomically (temporary file, fsync, ``os.replace``) under
a lock, so concurrent ``sync_turn`` calls from worker threads are safe.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

from hermes_hookspecs import MemoryProvider, MemorySession, Message, TurnRecord

PROVIDER_NAME = "example-memory"
RECALL_TOOL = "example_memory_recall"
FORGET_TOOL = "example_memory_forget"
MAX_SWITCHES = 200

logger = logging.getLogger("hermes_example_memory")

_STOPWORD_TEXT = """
a about above after again all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers him his how i if in into is it its itself just me more
most my myself no nor not now of off on once only or other our ours out over own same she
should so some such than that the their theirs them then there these they this those through
to too under until up very was we were what when where which while who whom why will with
would you your yours remember note prefer please always never like use uses using want
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD = re.compile(r"[a-z0-9][a-z0-9_+.#-]*[a-z0-9+#]|[a-z0-9]")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_REMEMBER = re.compile(r"^\s*(?:please\s+)?(?:remember|note)(?:\s+that)?[\s,:]+(?P<fact>.+)$", re.I)
_FIRST_PERSON = re.compile(
    r"^\s*(?:I\s+(?:prefer|like|use|always|never|work|am)\b|my\s+\w+(?:\s+\w+)?\s+(?:is|are)\b)",
    re.I,
)


def keywords(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (stop words dropped), in first-seen order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in _STOPWORDS and len(word) > 1:
            seen.setdefault(word, None)
    return list(seen)


def extract_facts(text: str) -> list[str]:
    """The facts stated in a user message, as stored sentences."""
    facts: list[str] = []
    for match in _SENTENCE.finditer(text):
        sentence = match.group(0).strip()
        remembered = _REMEMBER.match(sentence)
        if remembered:
            fact = remembered.group("fact").strip()
        elif _FIRST_PERSON.match(sentence):
            fact = sentence
        else:
            continue
        fact = fact.rstrip(".!? ")
        if fact and keywords(fact):
            facts.append(fact[0].upper() + fact[1:] + ".")
    return facts


class KeywordMemoryProvider(MemoryProvider):
    """Facts in a JSON file, recalled by keyword overlap.

    :param path: the JSON file (created on the first write).
    :param max_recall: facts returned per recall.
    """

    name = PROVIDER_NAME

    def __init__(self, path: Path, max_recall: int = 3) -> None:
        self.path = Path(path)
        self.max_recall = max_recall
        self._lock = threading.Lock()

    # -- storage ---------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        data: dict[str, Any]
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        data.setdefault("version", 1)
        data.setdefault("facts", [])
        data.setdefault("switches", [])
        return data

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, ensure_ascii=False, indent=1, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def facts(self) -> list[dict[str, Any]]:
        """Every stored fact (``text``, ``keywords``, ``session_id``, ``turn_id``)."""
        with self._lock:
            return list(self._load()["facts"])

    def switches(self) -> list[dict[str, str]]:
        """The recorded session switches, oldest first."""
        with self._lock:
            return list(self._load()["switches"])

    def remember(self, text: str, session_id: str, turn_id: str = "") -> bool:
        """Store one fact; False when an equal fact is already stored."""
        with self._lock:
            data = self._load()
            if any(f["text"].lower() == text.lower() for f in data["facts"]):
                return False
            data["facts"].append(
                {
                    "text": text,
                    "keywords": keywords(text),
                    "session_id": session_id,
                    "turn_id": turn_id,
                }
            )
            self._save(data)
            return True

    def search(self, query: str, limit: int | None = None) -> list[str]:
        """Facts sharing keywords with ``query``, best first (ties: most recent first)."""
        wanted = set(keywords(query))
        if not wanted:
            return []
        scored = []
        for index, fact in enumerate(self.facts()):
            score = len(wanted & set(fact["keywords"]))
            if score:
                scored.append((-score, -index, fact["text"]))
        scored.sort()
        return [text for _score, _index, text in scored[: limit or self.max_recall]]

    def _lineage(self, session_id: str, switches: list[dict[str, str]]) -> set[str]:
        sessions = {session_id}
        changed = True
        while changed:
            changed = False
            for switch in switches:
                if (
                    switch["new"] in sessions
                    and switch["old"]
                    and switch["old"] not in sessions
                    and switch["reason"] in ("compression", "branch")
                ):
                    sessions.add(switch["old"])
                    changed = True
        return sessions

    # -- MemoryProvider hooks ----------------------------------------------------
    def is_available(self) -> bool:
        return not self.path.is_dir()

    def initialize(self, session: MemorySession) -> None:
        logger.debug("example-memory: session %s started (cwd=%s)", session.session_id, session.cwd)

    def system_prompt_block(self, session_id: str) -> str | None:
        count = len(self.facts())
        if not count:
            return None
        return (
            f"Long-term memory (example-memory) holds {count} remembered facts; relevant ones "
            f"are attached to user messages, and `{RECALL_TOOL}` searches them."
        )

    def prefetch(self, query: str, session_id: str) -> str | None:
        found = self.search(query)
        if not found:
            return None
        return "Recalled facts (example-memory):\n" + "\n".join(f"- {fact}" for fact in found)

    def sync_turn(self, turn: TurnRecord) -> None:
        for fact in extract_facts(turn.user_text):
            self.remember(fact, turn.session_id, turn.turn_id)

    def on_pre_compress(self, session_id: str, messages: list[Message]) -> list[str]:
        with self._lock:
            data = self._load()
        sessions = self._lineage(session_id, data["switches"])
        learned = [f["text"] for f in data["facts"] if f["session_id"] in sessions]
        for message in messages:  # facts stated but not yet synced
            if message.role == "user":
                for fact in extract_facts(message.text()):
                    if fact.lower() not in {t.lower() for t in learned}:
                        learned.append(fact)
        return [f"User stated (keep verbatim): {fact}" for fact in learned]

    def on_session_switch(self, old_session_id: str, new_session_id: str, reason: str) -> None:
        logger.info(
            "example-memory: session switch %r -> %r (%s)", old_session_id, new_session_id, reason
        )
        with self._lock:
            data = self._load()
            data["switches"].append(
                {"old": old_session_id, "new": new_session_id, "reason": reason}
            )
            data["switches"] = data["switches"][-MAX_SWITCHES:]
            self._save(data)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": RECALL_TOOL,
                    "description": "Search the facts the user asked you to remember.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "query": {"type": "string", "description": "Keywords to look for."}
                        },
                        "required": ["query"],
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": FORGET_TOOL,
                    "description": "Forget every remembered fact containing the given text.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string", "description": "Text of the fact."}
                        },
                        "required": ["text"],
                    },
                },
            },
        ]

    def handle_tool_call(self, name: str, arguments: dict[str, Any], session_id: str) -> str:
        if name == RECALL_TOOL:
            found = self.search(str(arguments.get("query", "")), limit=10)
            return "\n".join(f"- {fact}" for fact in found) if found else "No matching facts."
        if name == FORGET_TOOL:
            needle = str(arguments.get("text", "")).strip().lower()
            if not needle:
                return "Error: 'text' is empty."
            with self._lock:
                data = self._load()
                kept = [f for f in data["facts"] if needle not in f["text"].lower()]
                removed = len(data["facts"]) - len(kept)
                if removed:
                    data["facts"] = kept
                    self._save(data)
            return f"Forgot {removed} fact(s)."
        raise NotImplementedError(f"memory provider {self.name!r} has no tool {name!r}")
