"""Rows, targets and the one table the comparison prints.

A :class:`Row` is one measured quantity: our value, the reference value (or
the same-run baseline it is compared with), their ratio, and an optional
:class:`Target` that decides pass/fail. Everything is a pydantic model so the
JSON written next to the table has a fixed shape.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Verdict = Literal["pass", "FAIL", "info", "skipped"]


class Target(BaseModel):
    """A pass/fail rule on the row's ``ours`` value or its ``ratio``."""

    model_config = ConfigDict(extra="forbid")

    on: Literal["ours", "ratio"]
    op: Literal["<", "<=", ">", ">="]
    value: float
    text: str
    source: str = Field(description="the issue that sets it")

    def check(self, ours: float | None, ratio: float | None) -> Verdict:
        value = ours if self.on == "ours" else ratio
        if value is None or math.isnan(value):
            return "skipped"
        ok = {
            "<": value < self.value,
            "<=": value <= self.value,
            ">": value > self.value,
            ">=": value >= self.value,
        }[self.op]
        return "pass" if ok else "FAIL"


class Row(BaseModel):
    """One line of the table."""

    model_config = ConfigDict(extra="forbid")

    key: str
    metric: str
    unit: str = ""
    ours: float | None = None
    theirs: float | None = None
    baseline: str = Field(default="hermes-agent 0.19.0", description="what 'theirs' is")
    ratio: float | None = None
    target: Target | None = None
    verdict: Verdict = "info"
    ours_text: str | None = None
    theirs_text: str | None = None
    note: str = ""

    def finish(self) -> Row:
        """Fill ``ratio`` (ours/theirs) when absent and the verdict."""
        if self.ratio is None and self.ours is not None and self.theirs:
            self.ratio = self.ours / self.theirs
        if self.target is not None:
            self.verdict = self.target.check(self.ours, self.ratio)
        return self


class Section(BaseModel):
    """The rows of one part plus everything measured on the way (for the JSON)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    rows: list[Row] = Field(default_factory=list)
    detail: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50 (median), p95 (nearest rank) and max of seconds, in milliseconds."""
    if not samples:
        return {"p50_ms": math.nan, "p95_ms": math.nan, "max_ms": math.nan, "n": 0}
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p95_ms": p95 * 1000,
        "max_ms": ordered[-1] * 1000,
        "n": len(ordered),
    }


def fmt(value: float | None, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit in ("msg/s", "tok/s"):
        return f"{value:,.0f}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def render(sections: Sequence[Section]) -> str:
    """The one table: metric, ours, theirs/baseline, ratio, target, verdict."""
    header = ("metric", "unit", "ours", "theirs / baseline", "ours/theirs", "target", "verdict")
    lines: list[tuple[str, ...]] = []
    for section in sections:
        if section.error:
            lines.append(
                (f"[{section.name}] ERROR: {section.error[:90]}", "", "", "", "", "", "FAIL")
            )
            continue
        for row in section.rows:
            ours = row.ours_text or fmt(row.ours, row.unit)
            theirs = row.theirs_text or fmt(row.theirs, row.unit)
            if row.baseline != "hermes-agent 0.19.0" and theirs != "-":
                theirs = f"{theirs} ({row.baseline})"
            ratio = "-" if row.ratio is None else f"{row.ratio:.3g}x"
            lines.append(
                (
                    row.metric,
                    row.unit,
                    ours,
                    theirs,
                    ratio,
                    row.target.text if row.target else "",
                    row.verdict,
                )
            )
    widths = [
        max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
        for i, h in enumerate(header)
    ]
    widths = [min(w, 60) for w in widths]

    def cut(text: str, width: int) -> str:
        return text if len(text) <= width else text[: width - 1] + "…"

    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    for line in lines:
        out.append(
            "  ".join(cut(c, w).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        )
    return "\n".join(out)


def notes(sections: Sequence[Section]) -> str:
    """Numbered notes under the table (rows with a note)."""
    out = []
    for section in sections:
        for row in section.rows:
            if row.note:
                out.append(f"- {row.metric}: {row.note}")
    return "\n".join(out)
