"""One compact line (or a few) for this week's cadence on the dashboard.

The cadence summary is produced by `roadmap_cli.research.cadence_summary`;
this only draws it, tolerating missing keys.
"""

from __future__ import annotations

from rich.console import Console


def render_cadence_line(console: Console, summary: dict) -> None:
    label = summary.get("week") or summary.get("label") or ""
    parts = []
    for kind, value in (summary.get("kinds") or summary.get("targets") or {}).items():
        done, target = value.get("done", 0), value.get("target", 0)
        style = "green" if target and done >= target else "yellow"
        parts.append(f"[{style}]{kind} {done}/{target}[/]")
    hours = summary.get("hours")
    if hours:
        low, high = hours.get("min"), hours.get("max")
        goal = (
            f"/{low:g}"
            if low is not None and high in (None, low)
            else (f"/{low:g}–{high:g}" if low is not None else "")
        )
        parts.append(f"hours {hours.get('done') or 0:g}{goal}")
    streak = summary.get("streak")
    if streak is not None:
        parts.append(f"streak {streak}")
    console.print(f"  {label}  " + "  ".join(parts))
