"""Rich rendering for `dev check`, `dev rules` and `dev mutate` (imported inside command bodies)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape as e  # lab ids, checks, file names and diffs are data, never markup
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


# ------------------------------------------------------------------ dev mutate

MUTANT_STYLE = {
    "killed": "green",
    "survived": "red",
    "equivalent-suspect": "yellow",
    "explained": "cyan",
    "invalid": "dim",
    "not-gradable-here": "dim",
    "error": "magenta",
}


class MutateProgress:
    """A bar on stderr (stdout stays clean for --json), one line per survivor as it is found."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("mutants"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=err_console,
            transient=True,
        )
        self.task = None

    def __enter__(self) -> "MutateProgress":
        return self

    def __exit__(self, *exc) -> None:
        if self.task is not None:
            self.progress.__exit__(*exc)

    def on_start(self, total: int) -> None:
        self.progress.__enter__()
        self.task = self.progress.add_task("grading the reference first…", total=total)

    def on_result(self, row) -> None:
        self.progress.update(self.task, advance=1, description=e(f"{row.file}:{row.line} {row.status}"))
        if row.status == "survived" and not row.cached:
            self.progress.console.print(f"[red]survived[/] {e(row.id)} {e(row.label)}", soft_wrap=True)


def mutate_report(console: Console, rep, show_survivors: bool) -> None:
    console.print(
        f"dev mutate {e(rep.lab)} on {e(rep.device)}: {len(rep.results)} mutant(s) of {rep.generated} "
        f"generated, {rep.graded_now} graded now (the rest from the cache), {rep.seconds:.0f}s"
    )
    table = Table(title="kill rate per part", show_lines=False)
    for col in ("part", "killed", "survived", "score"):
        table.add_column(col, justify="left" if col == "part" else "right")
    for part, stats in rep.part_stats.items():
        score = "–" if stats["score"] is None else f"{stats['score']:.0%}"
        table.add_row(e(part), str(stats["killed"]), str(stats["survived"]), score)
    console.print(table)
    counts = ", ".join(f"[{MUTANT_STYLE.get(k, 'white')}]{v} {k}[/]" for k, v in rep.counts.items() if v)
    console.print(f"mutants: {counts or 'none'}")
    survivors = [r for r in rep.results if r.status == "survived"]
    others = [r for r in rep.results if r.status in ("equivalent-suspect", "explained")]
    for row in survivors + (others if show_survivors else []):
        where = f"{row.file}:{row.line}" + (f" ({row.function})" if row.function else "")
        parts = ", ".join(row.covered_by) or "no part"
        extra = f" [dim]— {e(row.reason or row.message)}[/]" if row.status != "survived" else f" [dim]({e(parts)})[/]"
        console.print(
            f"[{MUTANT_STYLE[row.status]}]{row.status}[/] {e(row.id)} {e(where)}: {e(row.operator)} "
            f"{e(row.description)}{extra}",
            soft_wrap=True,
        )
        if show_survivors:
            console.print(e(row.diff.rstrip()), soft_wrap=True, highlight=False)
    for row in rep.results:
        if row.status == "error":
            console.print(f"[magenta]grader error[/] {e(row.id)} {e(row.label)}: {e(row.message)}", soft_wrap=True)
    for note in rep.notes:
        console.print(f"[dim]note: {e(note)}[/]", soft_wrap=True)
    if rep.rules_untouched:  # a hint, not a failure: the mutator may be blind there (docs/labs.md, "Rules")
        console.print(
            f"[yellow]rules no killed mutant touched ({len(rep.rules_untouched)}):[/] "
            f"{e(', '.join(rep.rules_untouched))}",
            soft_wrap=True,
        )
    if rep.score is None:
        console.print("score: no gradable mutants")
    else:
        verdict = "[green]meets[/]" if rep.ok else "[red]below[/]"
        console.print(
            f"score: {rep.score:.1%} killed of {rep.counts['killed'] + rep.counts['survived']} "
            f"(target {rep.target:.0%}: {verdict})"
            + ("" if show_survivors or not survivors else "; --show-survivors prints their diffs")
        )
