"""Charts as plain text lines, for `roadmap stats`: never wider than `width`.

Hand-drawn on a character grid rather than through a plotting library: the
output must fit 80 columns exactly, read the same without colour, and cost
nothing to import. A line chart looks like

    Burn-up: checkpoints done vs the plan
    checkpoints
       46 ┤                           ···
          │                  ····●●●●
          │        ·····●●●●●
        0 ┼●●●●●●●●───────────────────────
          2026-01-05              2026-06-01
                        date
          ● done   · plan
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

MARKERS = ("●", "·", "+", "x", "o", "*", "#", "%")


@dataclass
class TextSeries:
    label: str
    points: Sequence[tuple[float, float]]
    marker: str = "●"


def _fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value != int(value) else f"{int(value)}"


def line_chart(
    title: str,
    series: list[TextSeries],
    *,
    x_label: str,
    y_label: str,
    width: int = 80,
    height: int = 10,
    x_format: Callable[[float], str] = _fmt,
    y_min: Optional[float] = None,
    y_max: Optional[float] = None,
    y_integer: bool = False,
) -> list[str]:
    """A chart of points joined column by column; later series draw over earlier ones. `y_integer`: the
    y axis counts things (checkpoints): its ends are whole numbers, however fractional a plan line is."""
    points = [p for s in series for p in s.points]
    if not points:
        return [title, "  (no data yet)"]
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    lo = min(ys) if y_min is None else y_min
    hi = max(ys) if y_max is None else y_max
    if y_integer:
        lo, hi = math.floor(lo), math.ceil(hi)
    if hi <= lo:
        hi = lo + 1
    top, bottom = _fmt(hi), _fmt(lo)
    gutter = max(len(top), len(bottom)) + 2  # "  46 ┤"
    cols = max(width - gutter - 1, 10)
    grid = [[" "] * cols for _ in range(height)]

    def cell(x: float, y: float) -> tuple[int, int]:
        col = 0 if x1 == x0 else round((x - x0) / (x1 - x0) * (cols - 1))
        row = round((min(max(y, lo), hi) - lo) / (hi - lo) * (height - 1))
        return height - 1 - row, col

    for s in series:
        pts = sorted(s.points)
        for (xa, ya), (xb, yb) in zip(pts, pts[1:]):  # fill the columns between two points
            ra, ca = cell(xa, ya)
            rb, cb = cell(xb, yb)
            for c in range(ca, cb + 1):
                t = 0.0 if cb == ca else (c - ca) / (cb - ca)
                grid[round(ra + (rb - ra) * t)][c] = s.marker
        for x, y in pts:
            r, c = cell(x, y)
            grid[r][c] = s.marker

    lines = [title[:width], y_label[:width]]
    for i, row in enumerate(grid):
        label = top if i == 0 else (bottom if i == height - 1 else "")
        axis = "┤" if i == 0 else ("┼" if i == height - 1 else "│")
        body = "".join(row)
        if i == height - 1:
            body = "".join(ch if ch != " " else "─" for ch in body)
        lines.append(f"{label:>{gutter - 2}} {axis}{body}".rstrip())
    left, right = x_format(x0), x_format(x1)
    span = " " * gutter + left + " " * max(cols - len(left) - len(right), 1) + right
    lines.append(span[:width].rstrip())
    lines.append((" " * gutter + x_label.center(cols)).rstrip()[:width])
    lines += legend_lines([f"{s.marker} {s.label}" for s in series], gutter, width)
    return lines


def legend_lines(items: list[str], indent: int, width: int) -> list[str]:
    """Legend entries three spaces apart, as many lines as they need: an entry is never
    dropped for want of room (a ninth lab's name is as much a fact as the first's); only
    one longer than the whole width is cut."""
    lines: list[str] = []
    line = ""
    for item in items:
        if line and indent + len(line) + 3 + len(item) > width:
            lines.append(" " * indent + line)
            line = ""
        line = f"{line}   {item}" if line else item
    if line:
        lines.append(" " * indent + line)
    return [text[:width].rstrip() for text in lines]


def bar_chart(
    title: str,
    rows: list[tuple[str, float]],
    *,
    unit: str,
    width: int = 80,
    target: Optional[tuple[float, float]] = None,
    axis_label: str = "",
) -> list[str]:
    """Horizontal bars, one per row; a target range is drawn as `|` marks at its
    ends and each row says whether it reached the minimum."""
    if not rows:
        return [title, "  (no data yet)"]
    label_w = max(len(label) for label, _ in rows)
    value_w = max(len(f"{v:g} {unit}") for _, v in rows)
    status_w = 3 if target else 0
    bar_w = max(width - label_w - value_w - status_w - 4, 10)
    scale_max = max(max(v for _, v in rows), target[1] if target else 0) or 1.0
    lines = [title[:width]]
    if axis_label:
        lines.append((" " * (label_w + 1) + axis_label)[:width])
    for label, value in rows:
        filled = round(value / scale_max * bar_w)
        bar = ["█"] * filled + [" "] * (bar_w - filled)
        if target:
            for mark in target:
                i = min(round(mark / scale_max * bar_w), bar_w - 1)
                if bar[i] == " ":
                    bar[i] = "|"
        text = f"{label:<{label_w}} {''.join(bar)} {f'{value:g} {unit}':>{value_w}}"
        if target:
            text += " ✓" if value >= target[0] else "  "
        lines.append(text.rstrip()[:width])
    if target:
        # The legend states facts about these rows: "✓" is explained only when one is drawn, and the
        # last row (this week) says how it stands, so a 2.5 h week never sits above "minimum reached".
        legend = [f"| target {target[0]:g}–{target[1]:g} {unit}"]
        if any(v >= target[0] for _, v in rows):
            legend.append("✓ = minimum reached")
        last, value = rows[-1]
        legend.append(
            f"{last}: minimum reached"
            if value >= target[0]
            else f"{last}: {value:g} {unit}, {target[0] - value:g} {unit} short of the minimum"
        )
        lines += legend_lines(legend, label_w + 1, width)
    return lines
