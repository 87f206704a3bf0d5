"""The report's charts as small, self-contained SVG documents.

Every piece of text that reaches an SVG (titles, labels, lab ids, week labels)
goes through `esc`: a paper or entry title is the learner's data and may hold
`<script>`; escaped, it is shown as text and never parsed as markup. Numbers are
formatted here, never interpolated raw. No external fonts, images or scripts,
so the same file works inline in the HTML report and beside the Markdown one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from html import escape
from typing import Callable, Optional, Sequence

WIDTH, HEIGHT = 640, 300
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 16, 36, 56
PALETTE = ("#1f6feb", "#8c959f", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7b83")
FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"'


def esc(text: object) -> str:
    """Text for an SVG/XML text node or attribute value."""
    return escape(str(text), quote=True)


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _tick(value: float) -> str:
    return f"{value:.3g}" if value != int(value) else f"{int(value)}"


@dataclass
class SvgSeries:
    label: str
    points: Sequence[tuple[float, float]]
    color: str = PALETTE[0]
    dashed: bool = False


def _open(title: str, width: int = WIDTH, height: int = HEIGHT) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
        f"<title>{esc(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width / 2:.0f}" y="22" text-anchor="middle" font-size="15" font-weight="600" {FONT}>{esc(title)}</text>',
    ]


def _empty(title: str, message: str) -> str:
    parts = _open(title, height=90)
    parts.append(
        f'<text x="{WIDTH / 2:.0f}" y="58" text-anchor="middle" font-size="13" fill="#57606a" {FONT}>'
        f"{esc(message)}</text>"
    )
    return "\n".join(parts + ["</svg>"]) + "\n"


def line_chart(
    title: str,
    series: list[SvgSeries],
    *,
    x_label: str,
    y_label: str,
    x_format: Callable[[float], str] = _tick,
    y_min: Optional[float] = None,
    empty: str = "no data yet",
    y_integer: bool = False,
) -> str:
    """`y_integer`: the y axis counts things (checkpoints): its five ticks are whole numbers."""
    points = [p for s in series for p in s.points]
    if not points:
        return _empty(title, empty)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    lo = min(ys) if y_min is None else min(y_min, min(ys))
    hi = max(ys)
    if hi <= lo:
        hi = lo + 1
    if y_integer:  # four steps between five ticks: a whole step each
        lo = math.floor(lo)
        hi = lo + 4 * math.ceil((hi - lo) / 4)
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def px(x: float) -> float:
        return MARGIN_LEFT + (0.5 if x1 == x0 else (x - x0) / (x1 - x0)) * plot_w

    def py(y: float) -> float:
        return MARGIN_TOP + (1 - (y - lo) / (hi - lo)) * plot_h

    parts = _open(title)
    bottom = MARGIN_TOP + plot_h
    for i in range(5):  # horizontal grid lines with y ticks
        value = lo + (hi - lo) * i / 4
        y = py(value)
        parts.append(
            f'<line x1="{MARGIN_LEFT}" y1="{_num(y)}" x2="{MARGIN_LEFT + plot_w}" y2="{_num(y)}" stroke="#eaeef2"/>'
        )
        parts.append(
            f'<text x="{MARGIN_LEFT - 6}" y="{_num(y + 4)}" text-anchor="end" font-size="11" {FONT}>{esc(_tick(round(value, 3)))}</text>'
        )
    parts.append(f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{bottom}" stroke="#57606a"/>')
    parts.append(f'<line x1="{MARGIN_LEFT}" y1="{bottom}" x2="{MARGIN_LEFT + plot_w}" y2="{bottom}" stroke="#57606a"/>')
    for x, anchor in ((x0, "start"), (x1, "end")):
        parts.append(
            f'<text x="{_num(px(x))}" y="{bottom + 16}" text-anchor="{anchor}" font-size="11" {FONT}>{esc(x_format(x))}</text>'
        )
    parts.append(
        f'<text x="{MARGIN_LEFT + plot_w / 2:.0f}" y="{bottom + 34}" text-anchor="middle" font-size="12" {FONT}>{esc(x_label)}</text>'
    )
    parts.append(
        f'<text transform="translate(14 {MARGIN_TOP + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle" '
        f'font-size="12" {FONT}>{esc(y_label)}</text>'
    )
    for s in series:
        if not s.points:
            continue
        coords = " ".join(f"{_num(px(x))},{_num(py(y))}" for x, y in sorted(s.points))
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<polyline fill="none" stroke="{esc(s.color)}" stroke-width="2"{dash} points="{coords}"/>')
        if len(s.points) == 1:
            x, y = s.points[0]
            parts.append(f'<circle cx="{_num(px(x))}" cy="{_num(py(y))}" r="3" fill="{esc(s.color)}"/>')
    legend_x = MARGIN_LEFT
    for s in series:  # the legend along the bottom edge
        parts.append(f'<rect x="{legend_x}" y="{HEIGHT - 12}" width="12" height="4" fill="{esc(s.color)}"/>')
        parts.append(f'<text x="{legend_x + 16}" y="{HEIGHT - 6}" font-size="11" {FONT}>{esc(s.label)}</text>')
        legend_x += 28 + 7 * len(s.label)
    return "\n".join(parts + ["</svg>"]) + "\n"


def bar_chart(
    title: str,
    rows: list[tuple[str, float]],
    *,
    unit: str,
    y_label: str,
    target: Optional[tuple[float, float]] = None,
    empty: str = "no data yet",
) -> str:
    """Vertical bars (one per week); a target range is a shaded band."""
    if not rows:
        return _empty(title, empty)
    top = max(max(v for _, v in rows), target[1] if target else 0) or 1.0
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    bottom = MARGIN_TOP + plot_h

    def py(v: float) -> float:
        return MARGIN_TOP + (1 - v / top) * plot_h

    parts = _open(title)
    if target:
        parts.append(
            f'<rect x="{MARGIN_LEFT}" y="{_num(py(target[1]))}" width="{plot_w}" '
            f'height="{_num(max(py(target[0]) - py(target[1]), 1))}" fill="#dafbe1"/>'
        )
        parts.append(
            f'<text x="{MARGIN_LEFT + plot_w - 4}" y="{_num(py(target[1]) - 4)}" text-anchor="end" font-size="11" '
            f'fill="#1a7f37" {FONT}>target {esc(_tick(target[0]))}–{esc(_tick(target[1]))} {esc(unit)}</text>'
        )
    for i in range(5):
        value = top * i / 4
        parts.append(
            f'<text x="{MARGIN_LEFT - 6}" y="{_num(py(value) + 4)}" text-anchor="end" font-size="11" {FONT}>{esc(_tick(round(value, 1)))}</text>'
        )
    slot = plot_w / len(rows)
    for i, (label, value) in enumerate(rows):
        x = MARGIN_LEFT + i * slot + slot * 0.15
        met = target is None or value >= target[0]
        parts.append(
            f'<rect x="{_num(x)}" y="{_num(py(value))}" width="{_num(slot * 0.7)}" height="{_num(bottom - py(value))}" '
            f'fill="{PALETTE[0] if met else "#afb8c1"}"><title>{esc(label)}: {esc(_tick(value))} {esc(unit)}</title></rect>'
        )
        if len(rows) <= 16 or i % max(len(rows) // 8, 1) == 0:
            parts.append(
                f'<text x="{_num(x + slot * 0.35)}" y="{bottom + 14}" text-anchor="middle" font-size="10" {FONT}>{esc(label)}</text>'
            )
    parts.append(f'<line x1="{MARGIN_LEFT}" y1="{bottom}" x2="{MARGIN_LEFT + plot_w}" y2="{bottom}" stroke="#57606a"/>')
    parts.append(
        f'<text transform="translate(14 {MARGIN_TOP + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle" '
        f'font-size="12" {FONT}>{esc(y_label)}</text>'
    )
    parts.append(
        f'<text x="{MARGIN_LEFT + plot_w / 2:.0f}" y="{bottom + 34}" text-anchor="middle" font-size="12" {FONT}>ISO week</text>'
    )
    return "\n".join(parts + ["</svg>"]) + "\n"


CELL = 11  # px per day square, with a 2 px gap


def calendar(title: str, cal: dict) -> str:
    """The cadence calendar (research/calendar.build_calendar's data): a column
    per ISO week, a row per weekday, shaded by the things logged that day."""
    from roadmap_cli.research.calendar import MONTHS

    weeks = cal["weeks"]
    left, top = 36, 48
    width = left + len(weeks) * (CELL + 2) + 16
    height = top + 7 * (CELL + 2) + 40
    parts = _open(title, width=max(width, 320), height=height)
    shades = ("#ebedf0", "#9be9a8", "#40c463", "#30a14e", "#216e39")
    for row, name in ((0, "Mon"), (2, "Wed"), (4, "Fri")):
        parts.append(
            f'<text x="{left - 6}" y="{top + row * (CELL + 2) + 9}" text-anchor="end" font-size="9" {FONT}>{name}</text>'
        )
    for i, col in enumerate(weeks):
        x = left + i * (CELL + 2)
        start = col["start"] if isinstance(col["start"], date) else date.fromisoformat(col["start"])
        firsts = [start + timedelta(days=d) for d in range(7) if (start + timedelta(days=d)).day == 1]
        if firsts:
            parts.append(f'<text x="{x}" y="{top - 6}" font-size="9" {FONT}>{MONTHS[firsts[0].month - 1]}</text>')
        for d, count in enumerate(col["days"]):
            if count is None:
                continue  # not lived yet
            level = 0 if count <= 0 else 1 if count == 1 else 2 if count == 2 else 3 if count <= 4 else 4
            day = start + timedelta(days=d)
            parts.append(
                f'<rect x="{x}" y="{top + d * (CELL + 2)}" width="{CELL}" height="{CELL}" rx="2" '
                f'fill="{shades[level]}"><title>{day.isoformat()}: {int(count)} logged</title></rect>'
            )
        if col["met"]:
            parts.append(
                f'<circle cx="{x + CELL / 2}" cy="{top + 7 * (CELL + 2) + 6}" r="3" fill="#1a7f37">'
                f"<title>{esc(col['label'])} met every weekly target</title></circle>"
            )
    days = int(cal["active_days"])
    parts.append(
        f'<text x="{left}" y="{height - 8}" font-size="11" {FONT}>{int(cal["total"])} logged on '
        f"{days} day{'' if days == 1 else 's'}; {int(cal['weeks_met'])} of {len(weeks)} "
        f"week{'' if len(weeks) == 1 else 's'} met every target (●)</text>"
    )
    return "\n".join(parts + ["</svg>"]) + "\n"
