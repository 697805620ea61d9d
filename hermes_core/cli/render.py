"""Human-readable output for the CLI: the replay report and its chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hermes_hookspecs import DISTRIBUTION, ConfigError

from .output import visible


def replay_warnings(report: Any) -> list[str]:
    """What the reader must not miss: a final context over the window."""
    out: list[str] = []
    if report.final_active_tokens > report.context_length:
        out.append(
            f"the final context ({report.final_active_tokens} tokens) is over the "
            f"{report.context_length}-token window: the next request would not fit"
        )
    return out


def print_replay_report(report: Any) -> None:
    r = report
    exact = "exact" if r.tokens_exact else "ESTIMATED (chars/4)"
    click.echo(f"replay of {visible(r.transcript)} ({r.format})")
    click.echo(f"  session            {r.session_id}")
    click.echo(f"  engine             {visible(r.engine) or '-'}")
    click.echo(f"  imported messages  {r.imported_messages} in {r.turns} turns")
    click.echo(f"  requests           {r.requests}")
    click.echo(f"  window / trigger   {r.context_length} / {r.threshold_tokens} tokens ({exact})")
    click.echo(f"  compressions       {len(r.compressions)}")
    for c in r.compressions:
        fb = ", fallback" if c.fallback_used else ""
        click.echo(
            f"    before request {c.request_index:>4}: {c.tokens_before:>7} → {c.tokens_after:>7} "
            f"tokens ({c.trigger}, {c.backend}, summarizer {c.summarizer or '-'}{fb})"
        )
    skipped = getattr(r, "skipped_compressions", [])
    click.echo(f"  skipped attempts   {len(skipped) or 'none'}")
    if skipped:
        for c in skipped:
            click.echo(
                f"    before request {c.request_index:>4}: {c.status} at {c.tokens_before:>7} "
                f"tokens ({c.trigger}): {visible(c.reason) or 'no reason given'}"
            )
    click.echo(
        f"  final active       {r.final_active_tokens} tokens in {r.final_active_messages} messages"
    )
    breaks = ", ".join(f"{k}: {v}" for k, v in sorted(r.prefix_breaks.items())) or "none"
    click.echo(f"  prefix-cache reuse {r.prefix_reuse:.1%} (breaks: {breaks})")
    ids = r.identifiers
    click.echo(
        f"  identifiers        {ids.compacted} in compacted history; {ids.kept_in_active} kept in "
        f"the active context ({ids.kept_ratio:.1%}); with one search {ids.recoverable_ratio:.1%} "
        f"recoverable (sampled {ids.searched})"
    )
    if r.probes:
        closed = sum(p.closed_book for p in r.probes)
        searched = sum(p.one_search for p in r.probes)
        n = len(r.probes)
        click.echo(
            f"  probes             closed-book {closed}/{n}, one-search {searched}/{n} "
            f"(in the places found, in full: {r.recall.one_search_windows:.0%})"
        )


def nice_ticks(top: float, count: int = 5) -> list[int]:
    """Round axis values from 0 to at most ``top`` (steps of 1, 2 or 5 times a power of ten)."""
    if top <= 0:
        return [0]
    raw = top / count
    power = 10 ** max(0, len(str(int(raw))) - 1)
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return list(range(0, int(top) + 1, max(1, int(step))))


def _svg(report: Any) -> str:
    width, height, pad = 900, 360, 60
    values = report.request_tokens or [0]
    top = max(max(values), report.threshold_tokens) * 1.1 or 1
    n = max(1, len(values) - 1)

    def x(i: float) -> float:
        return pad + (width - 2 * pad) * i / n

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * v / top

    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
    ]
    for tick in nice_ticks(top):
        parts.append(
            f'<line x1="{pad - 4}" y1="{y(tick):.1f}" x2="{pad}" y2="{y(tick):.1f}" '
            'stroke="black"/>'
        )
        parts.append(
            f'<text class="y-tick" x="{pad - 6}" y="{y(tick) + 4:.1f}" '
            f'text-anchor="end">{tick}</text>'
        )
    for tick in nice_ticks(n, count=8):
        parts.append(
            f'<line x1="{x(tick):.1f}" y1="{height - pad}" x2="{x(tick):.1f}" '
            f'y2="{height - pad + 4}" stroke="black"/>'
        )
        parts.append(
            f'<text class="x-tick" x="{x(tick):.1f}" y="{height - pad + 16}" '
            f'text-anchor="middle">{tick}</text>'
        )
    parts += [
        f'<line x1="{pad}" y1="{y(report.threshold_tokens):.1f}" x2="{width - pad}" '
        f'y2="{y(report.threshold_tokens):.1f}" stroke="red" stroke-dasharray="6,4"/>',
        f'<text x="{width - pad}" y="{y(report.threshold_tokens) - 4:.1f}" text-anchor="end" '
        f'fill="red">threshold {report.threshold_tokens}</text>',
    ]
    for c in report.compressions:
        xi = x(max(0, c.request_index - 0.5))
        parts.append(
            f'<line x1="{xi:.1f}" y1="{pad}" x2="{xi:.1f}" y2="{height - pad}" '
            'stroke="grey" stroke-dasharray="2,3"/>'
        )
    parts += [
        f'<polyline fill="none" stroke="steelblue" stroke-width="1.5" points="{points}"/>',
        f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle">request</text>',
        f'<text x="15" y="{height / 2}" transform="rotate(-90 15 {height / 2})" '
        'text-anchor="middle">prompt tokens</text>',
        f'<text x="{pad}" y="{pad - 10}">tokens per request; dashed grey: compaction</text>',
        "</svg>",
    ]
    return "\n".join(parts)


def chart_file(report: Any, path: Path) -> None:
    """Write the chart as SVG (built in) or PNG (needs matplotlib: the ``charts`` extra)."""
    suffix = path.suffix.lower()
    if suffix == ".svg":
        path.write_text(_svg(report), encoding="utf-8")
        return
    if suffix != ".png":
        raise ConfigError(f"--chart {path}: expected a .png or .svg file name")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(
            f"--chart FILE.png needs matplotlib (pip install '{DISTRIBUTION}[charts]'); "
            "or write an .svg"
        ) from None
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot(range(len(report.request_tokens)), report.request_tokens, label="prompt tokens")
    ax.axhline(report.threshold_tokens, color="red", linestyle="--", label="threshold")
    for c in report.compressions:
        ax.axvline(max(0, c.request_index - 0.5), color="grey", linestyle=":")
    ax.set_xlabel("request")
    ax.set_ylabel("tokens")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
