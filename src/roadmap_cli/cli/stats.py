"""`roadmap stats`: progress charts in the terminal (reports/stats.py)."""

# No `from __future__ import annotations`: typer reads the signatures.
from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context


def register(app: typer.Typer) -> None:
    app.command("stats")(stats)


def stats(
    weeks: Annotated[int, typer.Option("--weeks", min=1, max=520, help="Weeks of study hours to show.")] = 12,
    width: Annotated[
        Optional[int],
        typer.Option(
            "--width", min=60, max=400, help="Chart width in columns (default: the terminal's, 80 when piped)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the chart series as a versioned JSON envelope.")
    ] = False,
) -> None:
    """Charts: checkpoints done vs the plan, hours per week vs the target, grade score per attempt, MiniGPT loss."""
    from roadmap_cli.formats.output import emit
    from roadmap_cli.reports.stats import build_stats, stats_lines
    from roadmap_cli.formats.timeutil import local_today, parse_date

    ctx = context.current()
    start = ctx.setting("start_date")
    charts = build_stats(
        ctx.store(), ctx.curriculum(), start=parse_date(start) if start else None, today=local_today(), weeks=weeks
    )

    def render(console):
        from rich.text import Text

        columns = width or (min(console.width, 120) if console.is_terminal else 80)
        for line in stats_lines(charts, columns):
            console.print(Text(line), soft_wrap=True)

    emit("stats", charts, as_json=as_json, render=render)
