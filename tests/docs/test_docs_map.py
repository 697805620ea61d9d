"""docs/index.md maps every page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([^)#]+)\)", index))
    pages = {page.name for page in (ROOT / "docs").glob("*.md") if page.name != "index.md"}
    assert pages - linked == set(), f"pages missing from docs/index.md: {sorted(pages - linked)}"
