"""Rich rendering for the lab commands (imported inside command bodies)."""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.markup import escape as e  # lab text, test ids and failure messages are data, never markup
from rich.table import Table

from roadmap_cli.cli.status_view import best_text
from roadmap_cli.labs.device import device_label
from roadmap_cli.labs.history import not_graded_count, outcome_fields, outcome_text
from roadmap_cli.formats.output import err_console

MARK = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[yellow]–[/]"}


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
                f"[red]✗ {e(row.lab)} {e(row.check)}:[/] {e(_first_lines(row.detail, 6))}", markup=True, soft_wrap=True
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


def _first_lines(text: str, n: int) -> str:
    lines = (text or "").strip().splitlines()
    return "\n".join(lines[:n]) + ("\n…" if len(lines) > n else "")


# ------------------------------------------------------------------ lab list / status

STATE_STYLE = {
    "passed": "green",
    "passed-on-cpu": "yellow",
    "partial": "yellow",
    "in-progress": "cyan",
    "not-started": "dim",
}
PART_MARK = {
    "passed": "[green]✓[/]",
    "failed": "[red]✗[/]",
    "skipped": "[yellow]s[/]",
    "not-graded-here": "[yellow]–[/]",
    "not-run": "[dim]·[/]",
    "focused": "[cyan]~[/]",
}


def _gradable(value) -> str:
    return {True: "yes", False: "[yellow]partly (GPU)[/]", None: "?"}[value]


def lab_list(console: Console, data: dict) -> None:
    from rich.cells import cell_len

    from roadmap_cli.formats.output import PIPED_TABLE_WIDTH

    table = Table(title=f"Labs (grading on {data['device']})")
    # The state ("passed on CPU (1 part needs a CUDA GPU)") stays on one line while the title
    # column, which folds, keeps at least 12 columns; on a narrower screen it wraps between words.
    width = console.width if console.is_terminal else min(console.width, PIPED_TABLE_WIDTH)
    longest = {
        key: max((cell_len(str(r.get(key) or "")) for r in data["labs"]), default=0) for key in ("id", "state_text")
    }
    whole_state = width - (longest["id"] + 5 + longest["state_text"] + 5 + 13 + 3 * 6 + 1) >= 12
    for col in ("id", "stage", "title", "state", "best", "gradable here"):
        # Ids are typed back into commands: never break one over two lines.
        table.add_column(col, overflow="fold", no_wrap=col == "id" or (col == "state" and whole_state))
    for row in data["labs"]:
        style = STATE_STYLE.get(row["state"], "")
        table.add_row(
            e(row["id"]),
            str(row["stage"]),
            e(row.get("title_text") or row["title"]["en"]),
            f"[{style}]{row.get('state_text') or row['state']}[/]",
            f"{row['best_score']:g}/{row['max_score']:g}" if row.get("attempts") else "[dim]—[/]",
            _gradable(row["gradable_here"]),
        )
    console.print(table)
    if any(r["parts_not_gradable_here"] for r in data["labs"]):
        console.print("[dim]partly (GPU): the parts that need a CUDA GPU are not graded or scored here.[/]")
    for lab, problems in data.get("invalid", {}).items():
        console.print(
            f"[yellow]warning:[/] lab {e(lab)} is not listed: {e(problems[1] if len(problems) > 1 else problems[0])}",
            soft_wrap=True,
            markup=True,
        )


def lab_status(console: Console, data: dict) -> None:
    if not data["labs"]:
        console.print("No lab started yet: `roadmap lab list`, then `roadmap lab start ID`.")
        return
    for lab in data["labs"]:
        style = STATE_STYLE.get(lab["state"], "")
        console.print(
            f"[bold]{e(lab['id'])}[/] [{style}]{lab.get('state_text') or lab['state']}[/] "
            + best_text(lab)
            + (f"  workspace {e(lab['workspace'])}" if lab.get("workspace") else ""),
            soft_wrap=True,
        )
        if lab.get("hints_total"):
            console.print(f"  hints seen: {lab['hints_seen']}/{lab['hints_total']}")
        if lab["parts_not_gradable_here"]:
            console.print(f"  not graded here (needs a CUDA GPU): {', '.join(lab['parts_not_gradable_here'])}")
        if not lab["history"]:
            console.print("  no attempts yet: run `roadmap grade` in the workspace")
            continue
        attempt_table(console, lab["id"], lab["history"], last_column="perf", skipped_said=True)


def attempt_table(
    console: Console,
    lab_id: str,
    attempts: list[dict],
    *,
    last_column: str,
    title: Optional[str] = None,
    skipped_said: bool = False,
) -> None:
    """`lab status`/`lab history`: one row per attempt, readable on an 80-column terminal.

    What every row shares is said once above the table (the device, the parts this machine cannot
    grade), so the columns left keep their width: the date and the outcome are never squeezed to
    nothing. `last_column` is "perf" (lab status) or "s" (lab history: seconds).
    """
    if title:
        console.print(f"[bold]{title}[/]", soft_wrap=True)
    devices = {_device_cell(a, lab_id) for a in attempts}
    one_device = len(devices) == 1
    if one_device:
        console.print(f"[dim]device: {e(next(iter(devices)).replace(chr(10), ', '))}[/]", soft_wrap=True)
    skipped = sorted({p["id"] for a in attempts for p in a["parts"] if p["status"] == "not-graded-here"})
    if skipped and not skipped_said:
        console.print(f"[dim]not graded here (needs a CUDA GPU): {e(', '.join(skipped))}[/]", soft_wrap=True)
    perf = last_column == "perf" and any(a.get("perf") for a in attempts)
    columns = [
        "#",
        "when (UTC)",
        "outcome",
        "score",
        "parts",
        "commit",
        *([] if one_device else ["device"]),
        *(["perf"] if perf else ["s"] if last_column == "s" else []),
    ]
    table = Table(show_edge=False)
    for col in columns:
        # "#" is the lab's own attempt number (`roadmap lab diff A B` takes it). The date, the score,
        # part ids and shas stay whole (one part per line); the outcome wraps between words; free text folds.
        table.add_column(
            col,
            overflow="fold",
            no_wrap=col in ("#", "when (UTC)", "score", "parts", "commit", "s"),
            min_width=len(col) if col in ("when (UTC)", "outcome", "score", "parts", "commit") else None,
        )
    for a in attempts:
        # Parts that need a GPU are named once above the table, not in every row.
        parts = "\n".join(f"{p['id']} {_part_cell(p)}" for p in a["parts"] if p["status"] != "not-graded-here")
        commit = (a["commit_sha"] or "")[:8] + ("\n+dirty" if a["dirty"] else "")
        # "passed-on-cpu (1 part not graded here)": the honest word with its count, wrapped between
        # words when the terminal is narrow
        outcome = a["outcome_text"] + ("" if a.get("counted", True) else " (not counted)")
        if a.get("kind") in ("verified", "self-graded"):
            # A cohort: whether the server vouches for it (the worker graded it) or it is the learner's claim.
            outcome += f"\n{a['kind']}"
        cells = [
            str(a.get("number") or a["id"]),
            (a["started_at"] or "").replace("T", " ")[5:16],
            e(outcome),
            f"{a['score']:g}/{a['max_score']:g}",
            e(parts),
            e(commit),
        ]
        if not one_device:
            cells.append(e(_device_cell(a, lab_id)))
        if perf:
            cells.append(e("; ".join(f"{f['name']}={f['value']:.4g} {f['unit']}" for f in a["perf"][:3])))
        elif last_column == "s":
            cells.append(f"{a['duration_s'] or 0:.1f}")
        table.add_row(*cells)
    console.print(table)


def _device_cell(a: dict, lab_id: str) -> str:
    device = device_label(a["device"], a["interpret_mode"], lab_id, short=True)
    if a.get("graded_on"):
        device += f"\non remote {a['graded_on']}"  # `grade --on NAME`: graded there, recorded here
    if a.get("sandbox") == "weak":
        device += "\nweak sandbox"  # graded without the OS wall (no bubblewrap there)
    return device


def _part_cell(p: dict) -> str:
    if p["status"] == "not-graded-here":
        return "not graded here"
    if p["status"] in ("not-run", "focused"):
        return "–"
    return f"{p['points']:g}/{p['max_points']:g}"


# ------------------------------------------------------------------ grade


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
            text = p.message if verbose else _first_lines(p.message, 8)
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
        console.print(_first_lines("\n".join(run.log_tail.splitlines()[-12:]), 12), markup=False, soft_wrap=True)
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


def lab_history(console: Console, data: dict) -> None:
    if not data["attempts"]:
        console.print(f"{data['lab']}: no attempts yet: run `roadmap grade` in the workspace")
        return
    attempt_table(
        console,
        data["lab"],
        data["attempts"],
        last_column="s",
        title=f"{e(data['lab'])}: {data['total']} attempt(s), newest first",
    )


def lab_diff(console: Console, data: dict) -> None:
    a, b = data["a"], data["b"]
    console.print(
        f"[bold]{e(data['lab'])}[/] attempt #{a['number']} ({a['outcome_text']} {a['score']:g}/{a['max_score']:g}) "
        f"→ #{b['number']} ({b['outcome_text']} {b['score']:g}/{b['max_score']:g})",
        soft_wrap=True,
    )
    if not data["changed"]:
        console.print(
            f"no test changed outcome ({data['unchanged']} the same, {data['not_comparable']} ran in only one of them)"
        )
        return
    mark = {"fixed": "[green]+[/]", "broken": "[red]-[/]", "other": "[yellow]~[/]"}
    for c in data["changed"]:
        console.print(f"{mark[c['kind']]} {e(c['test'])}: {c['a']} → {c['b']}", soft_wrap=True, highlight=False)
    s = data["summary"]
    console.print(
        f"[dim]{s['fixed']} fixed, {s['broken']} broken, {s['other']} other change(s); "
        f"{data['unchanged']} unchanged; {data['not_comparable']} ran in only one of them[/]"
    )


# ------------------------------------------------------------------ lab show


def handout(console: Console, data: dict, lang: str, pager: bool = True) -> None:
    """The handout: through $PAGER (`less -R` by default, exits at once when
    it fits, like git) on a terminal; the Markdown source as plain text when
    piped, so code blocks are never wrapped or re-flowed."""
    if lang != "en" and not data.get("translated"):
        # The handout is written in English: the title and summary come first in the chosen language.
        head = f"{data['title'].get(lang) or data['title']['en']}\n{data['summary'].get(lang) or data['summary']['en']}\n\n"
    else:
        head = ""
    if not console.is_terminal:
        console.file.write(head + data["readme"].rstrip("\n") + "\n")
        return
    from rich.markdown import Markdown

    if not pager:
        console.print(head, markup=False, end="")
        console.print(Markdown(data["readme"]))
        return
    import io
    import os
    import shlex
    import subprocess

    buffer = io.StringIO()
    Console(file=buffer, force_terminal=True, width=console.width, color_system=console.color_system).print(
        e(head), Markdown(data["readme"])
    )
    command = shlex.split(os.environ.get("PAGER") or "less -R")
    env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
    try:
        subprocess.run(command, input=buffer.getvalue(), text=True, env=env, check=False)
    except (OSError, ValueError):  # no pager installed: print it
        console.file.write(buffer.getvalue())


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
