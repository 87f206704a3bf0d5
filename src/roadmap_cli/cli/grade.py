"""`roadmap grade`, `roadmap watch`, `roadmap doctor`: grading on this machine (or on a remote with --on).

Thin commands: parse, call `roadmap_cli.grading.*`, render (cli/grade_render.py). The engine is
imported inside the command bodies so `roadmap --help` stays fast.
"""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context
from roadmap_cli.cli.workdir import current_dir

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON envelope instead of tables.")]


def _opt(dest: str, **kwargs):
    """A grade option named as grading/options.py declares it (the console script's early start reads the
    command line with the same table; tests/test_grade_options.py holds the two together)."""
    from roadmap_cli.grading.options import flags, option

    number_min = option(dest).number_min
    return typer.Option(*flags(dest), **({"min": number_min} if number_min is not None else {}), **kwargs)


def grade_command(
    lab_id: Annotated[
        Optional[str], typer.Argument(metavar="[ID]", help="Lab id (default: the workspace you are in).")
    ] = None,
    part: Annotated[Optional[str], _opt("part", help="Grade only this part.")] = None,
    keyword: Annotated[
        Optional[str],
        _opt("keyword", help="Only tests matching this pytest -k expression (a filtered run never completes a part)."),
    ] = None,
    test: Annotated[
        Optional[list[str]],
        _opt("test", metavar="NODEID", help="Only this test, e.g. test_model.py::test_causal (repeatable)."),
    ] = None,
    first_failure: Annotated[bool, _opt("first_failure", help="Stop at the first failing test.")] = False,
    verbose: Annotated[
        bool,
        _opt("verbose", help="Full assertion diff and the traceback through your code and the test's check."),
    ] = False,
    watch: Annotated[
        bool, _opt("watch", help="Keep watching: re-grade on every save (same as `roadmap watch`).")
    ] = False,
    timeout: Annotated[
        Optional[float], _opt("timeout", help="Hard time limit in seconds (default: the lab's time_limit_s).")
    ] = None,
    on: Annotated[
        Optional[str],
        _opt(
            "on",
            metavar="REMOTE",
            help="Grade on a remote machine over ssh (see `roadmap remote add`): only changed files are sent; the attempt is recorded here.",
        ),
    ] = None,
    as_json: Annotated[bool, _opt("as_json", help="Print a JSON envelope instead of tables.")] = False,
    events: Annotated[
        bool, _opt("events", hidden=True, help="The far side of --on: JSON lines, signed result.")
    ] = False,
    events_workspace: Annotated[
        Optional[str], _opt("events_workspace", hidden=True, help="The far side's copy of the workspace.")
    ] = None,
    events_key: Annotated[
        Optional[str], _opt("events_key", hidden=True, help="The result key's file (signs the run).")
    ] = None,
    events_nonce: Annotated[
        Optional[str], _opt("events_nonce", hidden=True, help="The near side's nonce for this grade.")
    ] = None,
) -> None:
    """Run the lab's grader on your workspace (or on a remote with --on). Exit 0: every gradable part passes; 1: a test failed; 4: grader error or timeout; 5: remote unreachable or lost; 130: interrupted."""
    from roadmap_cli.cli import grade_render as render
    from roadmap_cli.errors import UserError
    from roadmap_cli.grading.focus import Focus
    from roadmap_cli.grading.grade import grade
    from roadmap_cli.formats.output import console, emit

    if events:
        from pathlib import Path

        from roadmap_cli.grading.remote.far import events_grade

        if not (lab_id and events_workspace and events_key and events_nonce):
            raise UserError(
                "--events is the far side of `grade --on`: it needs ID, --events-workspace, "
                "--events-key and --events-nonce"
            )
        raise typer.Exit(
            events_grade(
                lab_id,
                Path(events_workspace),
                part=part,
                timeout=timeout,
                key_path=Path(events_key),
                nonce=events_nonce,
            )
        )
    ctx = context.current()
    if on is not None:
        if keyword or test or first_failure or verbose:
            raise UserError(
                "--on grades whole parts: combine it with --part, --timeout, --watch and --json only "
                "(not -k, --test, -x or -v)"
            )
        if not watch:
            return _grade_on(ctx, on, lab_id, part, timeout, as_json)
    if watch:
        if as_json:
            from roadmap_cli.errors import UserError

            raise UserError("--watch and --json cannot be combined: watch prints for people")
        return watch_command(lab_id, part, timeout, on)
    focus = Focus(keyword=keyword, tests=list(test or []), first_failure=first_failure, verbose=verbose)
    with render.GradeProgress(None if as_json else console) as progress:
        # The store is opened only once pytest runs (and without SQLAlchemy when it can: store/lite.py);
        # ctx.lang reads a setting from it, so it is asked for after the grade.
        outcome = grade(
            ctx.lean_store,
            ctx.home,
            lab_id,
            current_dir(),
            part=part,
            timeout=timeout,
            on_event=progress.on_event,
            focus=focus,
        )
    data = render.grade_data(outcome)
    emit(
        "grade",
        data,
        as_json=as_json,
        render=lambda c: render.grade_report(
            c, outcome, ctx.lang, verbose=verbose, precheck_shown=progress.precheck_shown
        ),
    )
    if outcome.run.exit_code:
        raise typer.Exit(outcome.run.exit_code)


def _grade_on(ctx, remote: str, lab_id, part, timeout, as_json: bool) -> None:
    from rich.markup import escape

    from roadmap_cli.cli import grade_render as render
    from roadmap_cli.grading.remote.near import grade_on
    from roadmap_cli.formats.output import console, emit, err_console

    def progress_line(line: str) -> None:
        err_console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    with render.GradeProgress(None if as_json else console) as progress:
        outcome = grade_on(
            ctx.lean_store,
            ctx.home,
            remote,
            lab_id,
            current_dir(),
            part=part,
            timeout=timeout,
            on_event=progress.on_event,
            on_progress=progress_line,
        )
    data = render.grade_data(outcome)
    data.update(graded_on=outcome.graded_on, sent=outcome.sent)
    emit(
        "grade",
        data,
        as_json=as_json,
        render=lambda c: render.grade_report(c, outcome, ctx.lang, precheck_shown=progress.precheck_shown),
    )
    if outcome.run.exit_code:
        raise typer.Exit(outcome.run.exit_code)


def watch_command(
    lab_id: Annotated[
        Optional[str], typer.Argument(metavar="[ID]", help="Lab id (default: the workspace you are in).")
    ] = None,
    part: Annotated[
        Optional[str], typer.Option("--part", help="Start with this part (default: the first part not passed yet).")
    ] = None,
    timeout: Annotated[
        Optional[float], typer.Option("--timeout", min=1, help="Hard time limit of each grade in seconds.")
    ] = None,
    on: Annotated[
        Optional[str],
        typer.Option(
            "--on",
            metavar="REMOTE",
            help="Grade on a remote machine over ssh (see `roadmap remote add`): each save sends only the changed files; attempts are recorded here.",
        ),
    ] = None,
) -> None:
    """Re-grade on every save, the part you are on first; keys: h hint, r re-run, a all parts, q quit."""
    from roadmap_cli.grading.watch import Watcher

    ctx = context.current()
    raise typer.Exit(Watcher(ctx, lab_id, current_dir(), part=part, timeout=timeout, on=on).run())


def doctor_command(
    as_json: JsonOpt = False,
    sandbox: Annotated[
        bool,
        typer.Option(
            "--sandbox", help="Print only what learner code sees behind the OS wall (the allow-list), path by path."
        ),
    ] = False,
) -> None:
    """Check python, torch, triton, CUDA, the GPU, nvcc and git; say which lab parts can be graded here."""
    from roadmap_cli.cli import grade_render as render
    from roadmap_cli.grading.doctor import run_doctor, sandbox_report
    from roadmap_cli.formats.output import emit

    if sandbox:
        view = sandbox_report()
        emit("doctor sandbox", view, as_json=as_json, render=lambda c: render.sandbox_view(c, view))
        return
    report = run_doctor()
    emit("doctor", report, as_json=as_json, render=lambda c: render.doctor(c, report))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("grade")(grade_command)
    app.command("watch")(watch_command)
    app.command("doctor")(doctor_command)
