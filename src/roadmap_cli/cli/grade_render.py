"""Rich rendering for `grade`, `watch`'s grades and `doctor` (imported inside command bodies)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape as e  # lab text, test ids and failure messages are data, never markup
from rich.table import Table

from roadmap_cli.labs.device import device_label
from roadmap_cli.labs.history import not_graded_count, outcome_fields, outcome_text
from roadmap_cli.formats.output import err_console

MARK = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[yellow]–[/]"}
PART_MARK = {
    "passed": "[green]✓[/]",
    "failed": "[red]✗[/]",
    "skipped": "[yellow]s[/]",
    "not-graded-here": "[yellow]–[/]",
    "not-run": "[dim]·[/]",
    "focused": "[cyan]~[/]",
}


def first_lines(text: str, n: int) -> str:
    lines = (text or "").strip().splitlines()
    return "\n".join(lines[:n]) + ("\n…" if len(lines) > n else "")


class GradeProgress:
    """Live progress per test on stderr: a bar with the running test, and one
    line per finished test (stdout stays clean for --json)."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("grading"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=err_console,
            transient=True,
        )
        self.task = None
        self.report_console = console  # where a pre-check report goes at once (None: --json, wait for the end)
        self.precheck_shown = False

    def __enter__(self) -> "GradeProgress":
        # The bar appears with the first event (pytest has started): a mistake
        # found before that (unknown lab, bad --part) stays one clean line.
        return self

    def __exit__(self, *exc) -> None:
        if self.task is not None:
            self.progress.__exit__(*exc)

    def on_event(self, event: dict) -> None:
        if event.get("event") == "precheck":
            if self.report_console is not None:
                _precheck_report(self.report_console, event["problem"])
                self.report_console.file.flush()
                self.precheck_shown = True
            return
        if self.task is None:
            self.progress.__enter__()
            self.task = self.progress.add_task("starting pytest…", total=None)
        kind = event.get("event")
        if kind == "collected":
            self.progress.update(self.task, total=len(event.get("tests", [])), description="")
        elif kind == "start":
            self.progress.update(self.task, description=e(event["nodeid"]))
        elif kind == "collect_error":
            self.progress.console.print(f"[red]✗[/] {e(event['nodeid'])} could not be imported", soft_wrap=True)
        elif kind == "result":
            self.progress.advance(self.task)
            mark = {"passed": "[green]✓[/]", "skipped": "[yellow]s[/]"}.get(event["outcome"], "[red]✗[/]")
            first = (event.get("message") or "").strip().splitlines()[:1]
            tail = f"  [dim]{e(first[0])}[/]" if first and event["outcome"] != "passed" else ""
            self.progress.console.print(
                f"{mark} {e(event['nodeid'])} [dim]{event.get('duration_s', 0):.2f}s[/]{tail}",
                soft_wrap=True,
                highlight=False,
            )


def grade_data(outcome) -> dict:
    from roadmap_cli.formats.output import to_jsonable

    data = to_jsonable(outcome.run)
    # "passed" only when every part was graded here; the stored row keeps the engine's word (labs/history.py).
    data.update(outcome_fields(outcome.run.outcome, outcome.run.parts))
    data.update(
        attempt_id=outcome.attempt_id,
        attempt_number=outcome.attempt_number,
        commit_sha=outcome.commit_sha,
        dirty=outcome.dirty,
        checkpoints_marked=outcome.checkpoints_marked,
        exit_code=outcome.run.exit_code,
        not_graded_here=[p.id for p in outcome.run.parts if p.status == "not-graded-here"],
        not_run=[p.id for p in outcome.run.parts if p.status == "not-run"],
        precheck=to_jsonable(outcome.precheck) if outcome.precheck else None,
        cuda_compile=to_jsonable(outcome.cuda_checks),
        hint_offer=outcome.hint_offer,
    )
    return data


def _tests_word(p) -> str:
    return f"{p.tests_passed}/{p.tests_total} test{'s' if p.tests_total != 1 else ''}"


def _precheck_report(console: Console, problem) -> None:
    # One report at file:line:col, the line and a caret; pytest never started.
    console.print(f"[red]✗ pre-check:[/] {e(problem.file)} does not load, no test ran", soft_wrap=True)
    console.print("  " + problem.report().replace("\n", "\n  "), markup=False, soft_wrap=True, highlight=False)


def grade_report(console: Console, outcome, lang: str, verbose: bool = False, precheck_shown: bool = False) -> None:
    run = outcome.run
    color = {"passed": "green", "failed": "red"}.get(run.outcome, "magenta")
    if not_graded_count(run.parts) and run.outcome == "passed":
        color = "yellow"  # passed on CPU: never shown as a plain pass
    if outcome.precheck is not None:
        if not precheck_shown:
            _precheck_report(console, outcome.precheck)
        _footer(console, outcome)
        return
    not_run = [p for p in run.parts if p.status == "not-run"]
    shown = [p for p in run.parts if p.status != "not-run"]
    if not_run:
        # A --part/-k/-x grade reports what it ran, never a headline for the whole lab.
        for p in (p for p in shown if p.status != "not-graded-here"):
            word = {
                "passed": "[green]passed[/]",
                "failed": "[red]failed[/]",
                "focused": "[cyan]selected tests passed[/]",
            }.get(p.status, p.status)
            points = f", {p.points:g}/{p.max_points:g} points" if p.status == "passed" else ""
            console.print(f"[bold]{e(p.id)}[/]: {word} ({_tests_word(p)}{points})", soft_wrap=True)
        console.print(
            f"[dim]{len(not_run)} other part{'s' if len(not_run) != 1 else ''} not run "
            f"({e(', '.join(p.id for p in not_run))})[/]",
            soft_wrap=True,
        )
    else:
        table = Table(
            title=f"{e(run.lab_id)}: [{color}]{outcome_text(run.outcome, run.parts)}[/] — "
            f"{run.score:g}/{run.max_score:g} points"
        )
        # The part's id and title and the details wrap; the mark, points and tests never do (at 80 columns a
        # long part title took the whole width and the points column shrank to nothing).
        table.add_column("", no_wrap=True, width=1)
        table.add_column("part", overflow="fold", ratio=3)
        table.add_column("points", no_wrap=True, min_width=6)
        table.add_column("tests", no_wrap=True, min_width=5)
        table.add_column("details", overflow="fold", ratio=2)
        for p in shown:
            title = p.title.get(lang) or p.title.get("en")
            points = "—" if p.status in ("not-graded-here", "focused") else f"{p.points:g}/{p.max_points:g}"
            tests = f"{p.tests_passed}/{p.tests_total}" if p.tests_total else ""
            details = {"passed": "", "failed": "failed (see below)"}.get(p.status, p.message or p.status)
            table.add_row(PART_MARK.get(p.status, "?"), f"{e(p.id)}\n[dim]{e(title)}[/]", points, tests, e(details))
        console.print(table)
    for p in shown:
        if p.status == "focused" and not_run:
            console.print(f"  [dim]{e(p.message or '')}[/]", soft_wrap=True)
    # Failures below, unwrapped: the first failing test of each part (in full with -v).
    for p in run.parts:
        if p.status == "failed" and p.message:
            console.print(f"[red]✗ {e(p.id)}[/]", soft_wrap=True)
            text = p.message if verbose else first_lines(p.message, 8)
            console.print("  " + text.replace("\n", "\n  "), markup=False, soft_wrap=True, highlight=False)
    skipped = [p.id for p in run.parts if p.status == "not-graded-here"]
    if skipped:
        # Wrapped between words on a terminal (never when piped: that console does not wrap).
        console.print(
            f"[yellow]Not graded here (needs a CUDA GPU): {', '.join(skipped)}.[/] "
            "The score counts only the parts gradable on this machine."
        )
    for check in outcome.cuda_checks:
        mark = {"compiled, not run": "[yellow]~[/]", "compile error": "[red]✗[/]"}.get(check.status, "[dim]·[/]")
        console.print(
            f"{mark} nvcc {e(check.file)}: {check.status}"
            + (f" — {e(check.message)}" if check.message and check.status != "compile error" else ""),
            soft_wrap=True,
        )
        if check.status == "compile error" and check.message:
            console.print("  " + check.message.replace("\n", "\n  "), markup=False, soft_wrap=True, highlight=False)
    if run.perf:
        perf = Table(title="performance", show_edge=False)
        for col in ("test", "figure", "value"):
            perf.add_column(col, overflow="fold")
        for f in run.perf:
            perf.add_row(e(f["test"]), e(f["name"]), e(f"{f['value']:.4g} {f['unit']}"))
        console.print(perf)
    if run.message:
        console.print(f"[{color}]{e(run.message)}[/]", soft_wrap=True)
    if run.log_tail and run.outcome == "error":
        console.print("[dim]last lines of the grader's output:[/]")
        console.print(first_lines("\n".join(run.log_tail.splitlines()[-12:]), 12), markup=False, soft_wrap=True)
    if run.outcome == "failed" and not verbose:
        console.print(
            "[dim]more detail: roadmap grade -v; one test: roadmap grade --test FILE::TEST -x[/]", soft_wrap=True
        )
    _footer(console, outcome)


def _footer(console: Console, outcome) -> None:
    run = outcome.run
    device = device_label(run.device, run.interpret_mode, run.lab_id)
    if getattr(outcome, "graded_where", None):  # `grade --on NAME`: the device is the remote's
        device += f" · {outcome.graded_where}"
    if run.sandbox == "weak":
        device += " · weak sandbox (no bubblewrap: see `roadmap doctor`)"
    commit = (outcome.commit_sha or "no git")[:10] + (" +uncommitted changes" if outcome.dirty else "")
    number = outcome.attempt_number or outcome.attempt_id
    console.print(
        f"[dim]attempt #{number} of {e(run.lab_id)} · {run.duration_s:.1f}s · {e(device)} · commit {commit}[/]",
        soft_wrap=True,
    )
    if outcome.checkpoints_marked:
        console.print(f"[green]Checkpoints completed:[/] {', '.join(outcome.checkpoints_marked)}", soft_wrap=True)
    if outcome.hint_offer:
        console.print(f"[cyan]{e(outcome.hint_offer)}[/]", soft_wrap=True)


# ------------------------------------------------------------------ doctor


def doctor(console: Console, report) -> None:
    table = Table(title="roadmap doctor", show_header=False)
    table.add_column("")
    table.add_column("check")
    table.add_column("value", overflow="fold")
    for check in report.checks:
        table.add_row(MARK[check.ok], e(check.name), e(check.value))
    console.print(table)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {e(note)}", soft_wrap=True)
    if report.labs:
        labs = Table(title="what can be graded here (the other parts need a CUDA GPU)")
        for col in ("lab", "parts graded here", "not graded here"):
            labs.add_column(col, overflow="fold")
        for lab in report.labs:
            labs.add_row(e(lab["id"]), e(", ".join(lab["gradable"]) or "—"), e(", ".join(lab["not_gradable"]) or "—"))
        console.print(labs)


def sandbox_view(console: Console, report: dict) -> None:
    console.print(e(report["line"]), soft_wrap=True)
    if not report["view"]:
        return
    table = Table(title=f"what learner code sees (uid {report['uid']}, HOME {report['home']}); nothing else exists")
    for col in ("access", "path", "why"):
        table.add_column(col, overflow="fold")
    for row in report["view"]:
        table.add_row(e(row["access"]), e(row["path"]), e(row["why"]))
    console.print(table)
