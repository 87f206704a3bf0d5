"""Rich rendering for the lab commands (imported inside command bodies)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from roadmap_cli.output import err_console

MARK = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[yellow]–[/]"}


def dev_check_progress(row) -> None:
    err_console.print(f"{MARK[row.ok]} {row.lab:<18} {row.check:<24} {row.got}  [dim]{row.seconds:.1f}s[/]",
                      soft_wrap=True)


def dev_check_table(console: Console, report) -> None:
    table = Table(title=f"dev check on {report.device}", show_lines=False)
    for col in ("", "lab", "check", "expected", "got", "s"):
        table.add_column(col, overflow="fold")
    for row in report.rows:
        table.add_row(MARK[row.ok], row.lab, row.check, row.expected, row.got, f"{row.seconds:.1f}")
    console.print(table)
    for row in report.rows:
        if row.ok is False and row.detail:
            console.print(f"[red]✗ {row.lab} {row.check}:[/] {_first_lines(row.detail, 6)}", markup=True, soft_wrap=True)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    bad = sum(r.ok is False for r in report.rows)
    skipped = sum(r.ok is None for r in report.rows)
    console.print(f"{'[red]' + str(bad) + ' violation(s)[/]' if bad else '[green]all checks passed[/]'}"
                  + (f", {skipped} not checked here (needs a CUDA GPU)" if skipped else ""))


def _first_lines(text: str, n: int) -> str:
    lines = (text or "").strip().splitlines()
    return "\n".join(lines[:n]) + ("\n…" if len(lines) > n else "")
