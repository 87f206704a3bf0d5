"""Rich rendering for `paper ...`, `log ...` and `cadence` (the commands call these through
`output.emit(..., render=...)`, with the same data the JSON envelope holds)."""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.markup import escape as esc
from rich.table import Table
from rich.text import Text

from roadmap_cli.formats.output import progress_bar

STATUS_STYLE = {"to-read": "dim", "reading": "yellow", "read": "green", "reproduced": "bold green"}


def _ids(p: dict) -> str:
    return f"arXiv:{p['arxiv']}" if p.get("arxiv") else (f"doi:{p['doi']}" if p.get("doi") else "")


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def paper_table(result: dict, console: Console) -> None:
    """Fixed-width lines rather than a rich Table: measuring every cell of a
    Table costs more than the whole query, and `paper list` must start fast."""
    papers = result["papers"]
    if not papers:
        console.print(
            "No papers match." if result["total"] == 0 else f"{result['total']} match; none shown (--limit 0)"
        )
        return
    rows = [
        (
            str(p["id"]),
            p["status"],
            p["read_on"] or "",
            _ids(p),
            ",".join(p["tags"]),
            "" if p["stage"] is None else str(p["stage"]),
            p["title"],
        )
        for p in papers
    ]
    header = ("id", "status", "read on", "arXiv/DOI", "tags", "st", "title")
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(6)]
    widths[4] = min(widths[4], 24)
    title_width = max(console.width - sum(widths) - 2 * 6, 20)
    lines = Text()
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  title\n", style="bold")
    for row in rows:
        lines.append("  ".join(_fit(c, w).ljust(w) for c, w in zip(row[:6], widths)) + "  ")
        lines.append(_fit(row[6], title_width) + "\n")
    console.print(lines, end="", soft_wrap=True, highlight=False)
    if result["shown"] < result["total"]:
        console.print(
            f"[dim]{result['shown']} of {result['total']} shown (newest first); --limit N or --all for more[/]"
        )
    else:
        console.print(f"[dim]{result['total']} paper(s)[/]")


def paper_detail(p: dict, console: Console) -> None:
    console.print(f"[bold]#{p['id']} {esc(p['title'])}[/]", soft_wrap=True)
    rows = [
        ("authors", p.get("authors")),
        ("year", p.get("year")),
        ("venue", p.get("venue")),
        ("arXiv", p.get("arxiv")),
        ("DOI", p.get("doi")),
        ("url", p.get("url")),
        ("pdf", p.get("pdf_url")),
        ("status", p["status"]),
        ("read on", p.get("read_on")),
        ("added on", p.get("added_on")),
        ("stage", p.get("stage")),
        ("rating", "★" * p["rating"] if p.get("rating") else None),
        ("tags", ", ".join(p.get("tags") or []) or None),
    ]
    for name, value in rows:
        if value not in (None, ""):
            console.print(f"  [dim]{name:<9}[/] {esc(str(value))}", soft_wrap=True)
    for entry in p.get("entries") or []:
        console.print(f"  [dim]{entry['kind']:<9}[/] #{entry['id']} {entry['on_date']} {esc(entry['title'] or '')}")
    if p.get("metadata"):
        source = {"arxiv": "arXiv", "crossref": "Crossref", "datacite": "DataCite"}.get(
            p["metadata"]["source"], p["metadata"]["source"]
        )
        console.print(f"  [dim]{'fetched':<9}[/] from {source} on {p['metadata']['fetched_on']}")
    if p.get("abstract"):
        console.print("  [dim]abstract[/]")
        # Wrapped to a terminal's width; piped, one line, never padded (a Padding fills the console's width).
        console.print(f"    {p['abstract']}", markup=False, soft_wrap=not console.is_terminal, highlight=False)
    if p.get("notes"):
        console.print("  [dim]notes[/]")
        for line in p["notes"].splitlines():
            console.print(f"    {line}", markup=False, soft_wrap=True)


def refresh_report(result: dict, console: Console) -> None:
    """`paper refresh`: one line a paper, then the counts."""
    for row in result["papers"]:
        what = {
            "filled": f"[green]filled[/] {', '.join(row.get('fields', []))}",
            "up to date": "up to date",
            "skipped": f"[dim]skipped: {esc(row.get('reason', ''))}[/]",
            "failed": f"[red]failed:[/] {esc(row.get('reason', ''))}",
        }[row["result"]]
        console.print(f"#{row['id']} {esc(row['title'])} — {what}", soft_wrap=True)
    total = len(result["papers"])
    console.print(
        f"[bold]{total} paper{'s' if total != 1 else ''}[/]: {result['filled']} filled, "
        f"{result['up_to_date']} up to date, {result['skipped']} skipped, {result['failed']} failed; "
        f"{result['network_calls']} request{'s' if result['network_calls'] != 1 else ''} to the registries"
    )


def suggestions(result: dict, console: Console) -> None:
    stage = result["current_stage"]
    console.print(
        f"[bold]Reading list[/] — current stage: {stage if stage is not None else 'all done'}; "
        f"{result['total_unread']} unread"
    )
    for s in result["suggestions"]:
        link = f"arXiv:{s['arxiv']}" if s.get("arxiv") else (s.get("url") or "")
        console.print(f"  [cyan]stage {s['stage']}[/] {esc(s['title'])} [dim]{esc(link)}[/]", soft_wrap=True)
    if result["suggestions"]:
        first = result["suggestions"][0]
        hint = (
            f" --arxiv {first['arxiv']}"
            if first.get("arxiv")
            else (f" --url {shlex.quote(first['url'])}" if first.get("url") else "")
        )
        hint += f" --authors {shlex.quote(first['authors'])}" if first.get("authors") else ""
        hint += f" --year {first['year']}" if first.get("year") else ""
        console.print(
            f"[dim]log one: roadmap paper log {esc(shlex.quote(first['title']))}{hint} --stage {first['stage']}[/]"
        )
    waiting = result.get("on_your_list", 0)
    if waiting:
        console.print(
            f"[dim]{waiting} more already logged to read (not suggested again): roadmap paper list --status to-read[/]"
        )


def entry_table(result: dict, console: Console) -> None:
    if not result["entries"]:
        console.print("No entries.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("id", "date", "kind", "title / hours", "paper", "link"):
        table.add_column(name, overflow="fold" if name.startswith("title") else "ellipsis")
    for e in result["entries"]:
        what = f"{e['hours']:g} h" if e["kind"] == "hours" else (e["title"] or "")
        table.add_row(
            str(e["id"]),
            e["on_date"],
            e["kind"],
            Text(what),
            f"#{e['paper_id']}" if e["paper_id"] else "",
            Text(e["link"] or e["lab_id"] or ""),
        )
    console.print(table)
    if result["shown"] < result["total"]:
        console.print(f"[dim]{result['shown']} of {result['total']} shown; --limit N or --all for more[/]")


def import_report(result: dict, console: Console) -> None:
    console.print(f"imported {len(result['imported'])} paper(s) from {esc(result['source'])}")
    for d in result["duplicates"]:
        console.print(f"  [yellow]skipped[/] {esc(d['key'])}: already logged as #{d['existing_id']} ({d['reason']})")
    for problem in result["problems"]:
        console.print(f"  [red]skipped[/] {esc(problem)}", soft_wrap=True)


def cadence(report: dict, console: Console) -> None:
    from roadmap_cli.research.calendar import render_calendar

    line = report["line"]
    verdict = {True: "[green]all targets met[/]", False: "[yellow]not yet[/]", None: "[dim]no targets[/]"}[line["met"]]
    console.print(f"[bold]{line['label']}[/] ({line['start']} – {line['end']}): {verdict}")
    for k in line["kinds"]:
        frac = k["done"] / k["target"] if k["target"] else 1.0
        mark = "[green]✓[/]" if k["met"] else " "
        console.print(f"  {k['kind']:<15} {progress_bar(frac, 15)} {k['done']:>3}/{k['target']:<3} {mark}")
    hours = line["hours"]
    if hours["min"] is not None:
        frac = hours["done"] / hours["min"] if hours["min"] else 1.0
        mark = "[green]✓[/]" if hours["done"] >= hours["min"] else " "
        goal = f"{hours['min']:g}" if hours["max"] in (None, hours["min"]) else f"{hours['min']:g}–{hours['max']:g}"
        console.print(f"  {'hours':<15} {progress_bar(frac, 15)} {hours['done']:>3g}/{goal} {mark}")
    elif hours["done"]:
        console.print(f"  {'hours':<15} {hours['done']:g}")
    for kind, n in line["other"].items():
        console.print(f"  [dim]{kind:<15} {n} (no {line['period']}ly target)[/]")
    s = report["streak"]
    end = f", ended {s['longest_end']}" if s["longest_end"] else ""
    console.print(f"streak: {s['current']} {s['period']}(s) in a row meeting every target; longest {s['longest']}{end}")
    console.print()
    for i, text in enumerate(render_calendar(report["calendar"])):
        console.print(Text(text, style="green" if 0 < i < 8 else ""))
