"""How much of the recall probes the handoff's facts could answer with no budget at all.

``python -m benchmarks facts-ceiling``: for each probe session, the facts
:func:`hermes_plugin_compressor.facts.extract_facts` finds in the whole imported
session (harness text marked as the runtime marks it), and the share of probes one
of those facts answers. This is the ceiling of closed-book recall for a handoff
made of facts; the handoff's budget decides how much of it a compaction keeps.
"""

from __future__ import annotations

from pathlib import Path

from hermes_core import Hermes
from hermes_core.config import settings_from
from hermes_core.recall import load_probes
from hermes_core.replay import pick_importer
from hermes_plugin_compressor.facts import extract_facts

REPO = Path(__file__).resolve().parents[2]
PROBES = REPO / "transcripts" / "probes"


def main() -> None:
    hermes = Hermes(settings_from({"session": {"path": ":memory:"}}))
    try:
        for probe_file in sorted(PROBES.glob("*.json")):
            found = sorted(REPO.glob(f"transcripts/*/{probe_file.stem}.jsonl*"))
            if not found:
                continue
            conversation = pick_importer(hermes.importers(), found[0]).load(found[0])[0]
            messages = [hermes.harness(m) for m in conversation.messages]
            facts = extract_facts(messages, list(range(len(messages))))
            text = "\n".join(fact.text for fact in facts)
            probes = load_probes(probe_file)
            answered = sum(probe.hit(text) for probe in probes)
            print(
                f"{probe_file.stem}: {len(facts)} facts, {len(text):,} chars, "
                f"answer {answered}/{len(probes)} probes ({answered / len(probes):.2f})"
            )
    finally:
        hermes.close()


if __name__ == "__main__":
    main()
