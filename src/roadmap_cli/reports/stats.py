"""`roadmap stats`: the four progress charts over the last weeks, as text.

The data is series.Charts (the same the report draws as SVG); `stats_lines`
turns it into plain lines no wider than the width asked for.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Optional

from roadmap_cli.reports.series import Charts, all_charts
from roadmap_cli.reports.textchart import MARKERS, TextSeries, bar_chart, line_chart

MIN_WIDTH = 60


def build_stats(store, curriculum, *, start: Optional[date], today: date, weeks: int = 12) -> Charts:
    """Charts up to today; hours over the last `weeks` ISO weeks."""
    return all_charts(store, curriculum, start=start, first=today - timedelta(weeks=weeks - 1), last=today)


def _day(x: float) -> str:
    return date.fromordinal(int(round(x))).isoformat()


def stats_lines(charts: Charts, width: int = 80) -> list[str]:
    width = max(width, MIN_WIDTH)
    out: list[str] = []
    burn = charts.burnup
    days = [date.fromisoformat(d).toordinal() for d in burn.days]
    series = [TextSeries("done", list(zip(days, burn.done)), "●")]
    if burn.start:
        series.insert(0, TextSeries("plan", list(zip(days, burn.planned)), "·"))
    out += line_chart(
        f"Burn-up: checkpoints done vs the plan ({burn.done[-1] if burn.done else 0} of {burn.total})",
        series,
        x_label="date",
        y_label="checkpoints done",
        width=width,
        x_format=_day,
        y_min=0,
        y_integer=True,
    )
    if not burn.start:
        out.append("  no plan line: set your start date with roadmap init --start-date YYYY-MM-DD")
    out.append("")

    hours = charts.hours
    target = (hours.target_min, hours.target_max) if hours.target_min is not None else None
    title = "Study hours per week" + (f" (target {hours.target_min:g}–{hours.target_max:g} h)" if target else "")
    out += bar_chart(
        title,
        [(w.week, w.hours) for w in hours.weeks],
        unit="h",
        width=width,
        target=target,
        axis_label="ISO week / hours",
    )
    out.append("")

    grade_series = [TextSeries(g.lab_id, g.points, MARKERS[i % len(MARKERS)]) for i, g in enumerate(charts.grades)]
    out += line_chart(
        "Grade score per attempt, per lab",
        grade_series,
        x_label="whole attempt number (per lab)",
        y_label="score (% of gradable points)",
        width=width,
        y_min=0,
        y_max=100,
    )
    if charts.part_attempts:
        n = charts.part_attempts
        out.append(
            f"  {n} part attempt{'s' if n != 1 else ''} (--part, -k, watch) not plotted: see roadmap lab history"
        )
    out.append("")

    loss = charts.loss
    if loss.train or loss.val:
        out += line_chart(
            "MiniGPT loss",
            [TextSeries("train", loss.train, "·"), TextSeries("val", loss.val, "●")],
            x_label="iteration",
            y_label="cross-entropy loss",
            width=width,
        )
        out.append(f"  from {loss.source}"[:width])
    else:
        out += ["MiniGPT loss", f"  {loss.problem}"[:width]]
    return [line[:width] for line in out]
