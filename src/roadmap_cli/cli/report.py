"""`roadmap report`: the monthly or quarterly report as Markdown or HTML (reports/)."""

# No `from __future__ import annotations`: typer reads the signatures.
from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    month: Annotated[Optional[str], typer.Option("--month", help="The month to report, YYYY-MM.")] = None,
    quarter: Annotated[Optional[str], typer.Option("--quarter", help="The quarter to report, YYYY-Qn.")] = None,
    fmt: Annotated[
        str,
        typer.Option("--format", help="md (GitHub Markdown, SVG charts beside it) or html (one self-contained file)."),
    ] = "md",
    out: Annotated[
        Optional[str],
        typer.Option("--output", "-o", help="Write to FILE (Markdown: and FILE-STEM-<chart>.svg beside it)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE and its chart files if they exist.")] = False,
    log: Annotated[
        bool,
        typer.Option(
            "--log",
            help="Also log the written file in the cadence: a `report` entry for a month, a `blog` entry for a quarter.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report's data as a versioned JSON envelope instead.")
    ] = False,
) -> None:
    """Write the report of a month or a quarter: checkpoints, labs, kernel figures, papers, logged work, hours, streaks, charts.

    Without -o, Markdown goes to stdout (without the charts, which need files);
    HTML goes to stdout only when it is redirected, never to a terminal.
    """
    import sys
    from pathlib import Path

    from roadmap_cli.errors import UserError
    from roadmap_cli.formats.output import emit
    from roadmap_cli.reports.gather import build_report, parse_period
    from roadmap_cli.formats.timeutil import local_today, parse_date

    if fmt not in ("md", "html"):
        raise UserError(f"unknown --format {fmt!r} (choose md or html)")
    period = parse_period(month, quarter)
    if as_json and out:
        raise UserError("--json prints the report's data; it writes no file (drop -o, or --json)")
    if log and not out:
        raise UserError("--log needs -o FILE: the cadence entry links to the written file")
    if fmt == "html" and not out and not as_json and sys.stdout.isatty():
        raise UserError("HTML is not for a terminal: write it with -o FILE (or redirect stdout)")
    ctx = context.current()
    store = ctx.store()
    start = ctx.setting("start_date")
    today = local_today()
    data = build_report(
        store,
        ctx.curriculum(),
        period=period,
        lang=ctx.lang,
        start_date=parse_date(start) if start else None,
        today=today,
    )
    if as_json:
        emit("report", data, as_json=True)
        return
    if out is None:
        from roadmap_cli.reports.render import render_html, render_markdown

        cache = ctx.home / "cache"
        sys.stdout.write(render_markdown(data, cache_dir=cache) if fmt == "md" else render_html(data, cache))
        return
    from roadmap_cli.reports.render import write_report

    written = write_report(data, fmt, Path(out).expanduser().resolve(), force=force, cache_dir=ctx.home / "cache")
    typer.echo(f"wrote {written.path}" + (f" and {len(written.charts)} SVG charts beside it" if written.charts else ""))
    if log:
        from roadmap_cli.research.entries import EntryInput, log_entry

        kind = "report" if period.kind == "month" else "blog"
        title = ("Monthly report " if period.kind == "month" else "Quarterly report ") + period.label
        entry = log_entry(
            store, EntryInput(kind=kind, on_date=today, title=title, link=Path(written.path).as_uri()), today=today
        )
        typer.echo(f"logged {kind} #{entry['id']} on {entry['on_date']} -> {entry['link']}")
