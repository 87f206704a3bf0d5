"""The 52-week contribution calendar, GitHub style, in plain characters.

One column per ISO week (oldest on the left, the week of the chosen date on
the right), one row per weekday (Mon at the top). A cell's shade says how many
things were logged that day; a last row marks the weeks that met every weekly
target. It is one character per cell so 52 weeks fit in 60 columns, and it
reads the same without colour:

         Jan   Feb    Mar ...
    Mon  ·░·▒ ...
    ...
    met  ●  ● ...
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Iterable

from roadmap_cli.research.periods import period_of

EMPTY, FUTURE, MET = "·", " ", "●"
SHADES = ("░", "▒", "▓", "█")  # 1, 2, 3-4, 5+ things logged that day
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
LABELLED_WEEKDAYS = ("Mon", "Wed", "Fri")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
GUTTER = 4  # "Mon " before the cells


def shade(count: int | None) -> str:
    """The character for a day with `count` things logged (None: after the end date)."""
    if count is None:
        return FUTURE
    if count <= 0:
        return EMPTY
    if count == 1:
        return SHADES[0]
    if count == 2:
        return SHADES[1]
    if count <= 4:
        return SHADES[2]
    return SHADES[3]


def build_calendar(daily: dict[date, int], *, end: date, weeks: int = 52, met_weeks: Iterable[str] = ()) -> dict:
    """The calendar's data: `weeks` ISO weeks ending with the week of `end`.

    Days after `end` are None (not yet lived), so the current week is drawn
    up to today only.
    """
    met_weeks = set(met_weeks)
    last = period_of("week", end)
    first_monday = last.start - timedelta(weeks=weeks - 1)
    columns = []
    for i in range(weeks):
        monday = first_monday + timedelta(weeks=i)
        days = [monday + timedelta(days=d) for d in range(7)]
        label = period_of("week", monday).label
        columns.append(
            {
                "label": label,
                "start": monday,
                "days": [daily.get(d, 0) if d <= end else None for d in days],
                "met": label in met_weeks,
            }
        )
    counts = [c for col in columns for c in col["days"] if c]
    return {
        "end": end,
        "weeks": columns,
        "total": sum(counts),
        "active_days": len(counts),
        "weeks_met": sum(1 for col in columns if col["met"]),
    }


def _month_row(columns: list[dict]) -> str:
    """Month names above the first week that holds the 1st of that month."""
    row = [" "] * (len(columns) + 2)  # a label on the last weeks may run past the grid
    free_from = 0
    for i, col in enumerate(columns):
        start = col["start"] if isinstance(col["start"], date) else date.fromisoformat(col["start"])
        first_of_month = next(
            (start + timedelta(days=d) for d in range(7) if (start + timedelta(days=d)).day == 1), None
        )
        if first_of_month is None or i < free_from:
            continue
        name = MONTHS[first_of_month.month - 1]
        row[i : i + len(name)] = list(name)
        free_from = i + len(name) + 1
    return " " * GUTTER + "".join(row).rstrip()


def render_calendar(calendar: dict) -> list[str]:
    """The calendar as plain text lines (months, 7 weekday rows, met row, legend, totals)."""
    columns = calendar["weeks"]
    lines = [_month_row(columns)]
    for d, name in enumerate(WEEKDAYS):
        gutter = f"{name:<{GUTTER}}" if name in LABELLED_WEEKDAYS else " " * GUTTER
        lines.append(gutter + "".join(shade(col["days"][d]) for col in columns).rstrip())
    lines.append(f"{'met':<{GUTTER}}" + "".join(MET if col["met"] else " " for col in columns).rstrip())
    lines.append(f"{'':<{GUTTER}}less {EMPTY} {' '.join(SHADES)} more   {MET} week met every target")
    days = calendar["active_days"]
    lines.append(
        f"{'':<{GUTTER}}{calendar['total']} logged on {days} day{'' if days == 1 else 's'}; "
        f"{calendar['weeks_met']} of {len(columns)} week{'' if len(columns) == 1 else 's'} met every target"
    )
    return lines
