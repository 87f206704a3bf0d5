"""Rich rendering for `dev check` and `dev rules` (imported inside command bodies; `dev mutate`'s is
mutate_render.py)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape as e  # lab ids, checks and grader output are data, never markup
from rich.table import Table

from roadmap_cli.cli.grade_render import MARK, first_lines
from roadmap_cli.formats.output import err_console


def dev_check_start(specs, jobs: int) -> None:
    runs = sum(2 + len(s.wrong) for s in specs)
    err_console.print(
        f"dev check: {len(specs)} lab(s), {runs} grader runs, {jobs} at a time "
        "(starter, solution, each wrong variant)…",
        soft_wrap=True,
    )


def dev_check_progress(row) -> None:
    err_console.print(
        f"{MARK[row.ok]} {e(f'{row.lab:<18} {row.check:<24} {row.got}')}  [dim]{row.seconds:.1f}s[/]", soft_wrap=True
    )


def dev_check_table(console: Console, report) -> None:
    table = Table(title=f"dev check on {report.device}", show_lines=False)
    for col in ("", "lab", "check", "expected", "got", "s"):
        table.add_column(col, overflow="fold")
    for row in report.rows:
        table.add_row(MARK[row.ok], e(row.lab), e(row.check), e(row.expected), e(row.got), f"{row.seconds:.1f}")
    console.print(table)
    for row in report.rows:
        if row.ok is False and row.detail:
            console.print(
                f"[red]✗ {e(row.lab)} {e(row.check)}:[/] {e(first_lines(row.detail, 6))}", markup=True, soft_wrap=True
            )
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {e(warning)}", soft_wrap=True)
    bad = sum(r.ok is False for r in report.rows)
    skipped = sum(r.ok is None for r in report.rows)
    if report.device.startswith("dry run"):  # dev check --gpu --dry-run: a plan, nothing ran
        listed = sum(r.got == "would run" for r in report.rows)
        console.print(
            f"dry run: {listed} check(s) would run on a GPU, {skipped - listed} skipped (interpreter-only); nothing ran"
        )
        return
    console.print(
        f"{'[red]' + str(bad) + ' violation(s)[/]' if bad else '[green]all checks passed[/]'}"
        + (f", {skipped} not checked here (needs a CUDA GPU)" if skipped else "")
    )


def dev_rules(console: Console, verdicts) -> None:
    """`dev rules`: per lab, the counts, then each bad quote and gap on its own line."""
    for v in verdicts:
        state = "required" if v.enforced else "pending"
        mark = "[red]✗[/]" if v.problems else ("[yellow]![/]" if v.gaps else "[green]✓[/]")
        console.print(
            f"{mark} {e(v.lab)} (quotes {state}): {v.rules} rules, {v.normative} normative sentences, "
            f"{len(v.uncovered)} uncovered, {len(v.unquoted_rules)} rules without a quote, "
            f"{len(v.bad_quotes)} bad quote(s)",
            soft_wrap=True,
        )
        for line in v.bad_quotes + v.gaps:
            console.print(f"  {e(line)}", soft_wrap=True)
