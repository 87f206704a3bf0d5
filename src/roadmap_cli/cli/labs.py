"""`roadmap lab ...`, `roadmap grade`, `roadmap doctor`, `roadmap dev check|rules|build-starter|mutate`.

Thin commands: parse, call `roadmap_cli.labs.*`, render. The lab engine (and
anything heavy: pydantic models, gitpython, sqlmodel) is imported inside the
command bodies so `roadmap --help` stays fast.
"""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

lab_app = typer.Typer(name="lab", help="Hands-on labs: list, start, hints, status, solution.", no_args_is_help=True)
dev_app = typer.Typer(name="dev", help="Commands for lab authors and CI.", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON envelope instead of tables.")]


# ------------------------------------------------------------------ lab ...


def _ctx():
    from roadmap_cli import context

    return context.current()


def _cwd():
    """The current directory; if it was deleted under the shell (a removed
    workspace), the shell's $PWD, so the command can say which workspace is gone."""
    import os
    from pathlib import Path

    from roadmap_cli.errors import UserError

    try:
        return Path.cwd()
    except FileNotFoundError:
        pwd = os.environ.get("PWD")
        if pwd and os.path.isabs(pwd):
            return Path(pwd)
        raise UserError("the current directory no longer exists: cd to another one") from None


@lab_app.command("list")
def lab_list(as_json: JsonOpt = False) -> None:
    """Every lab: stage, state, best score, and whether it can be fully graded on this machine."""
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.labs import service
    from roadmap_cli.formats.output import emit

    ctx = _ctx()
    data = service.lab_list(ctx.store(), ctx.lang)
    emit("lab list", data, as_json=as_json, render=lambda c: render.lab_list(c, data))


@lab_app.command("show")
def lab_show(
    lab_id: Annotated[str, typer.Argument(metavar="ID", help="Lab id (see `roadmap lab list`).")],
    no_pager: Annotated[
        bool, typer.Option("--no-pager", help="Print the handout instead of opening it in $PAGER.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show the lab's handout (README.md): paged on a terminal, plain text when piped."""
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.labs import service
    from roadmap_cli.formats.output import emit

    lang = _ctx().lang
    data = service.show(lab_id, lang)
    emit("lab show", data, as_json=as_json, render=lambda c: render.handout(c, data, lang, pager=not no_pager))


@lab_app.command("start")
def lab_start(
    lab_id: Annotated[str, typer.Argument(metavar="ID", help="Lab id (see `roadmap lab list`).")],
    directory: Annotated[
        Optional[str], typer.Option("--dir", help="Workspace folder (default: <data home>/labs/ID).")
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Start over in a non-empty folder (old work is committed or moved aside first)."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Copy the starter into a workspace (a git repository) and record it."""
    from roadmap_cli.labs import service
    from roadmap_cli.formats.output import emit

    ctx = _ctx()
    spec, result = service.start_lab(ctx.store(), ctx.home, lab_id, directory, force, ctx.lang)
    data = {
        "lab": spec.id,
        "path": result.path,
        "commit_sha": result.commit_sha,
        "moved_aside": result.moved_aside,
        "saved_commit": result.saved_commit,
    }

    def render(console) -> None:
        from rich.markup import escape  # a folder may be called `work[1]`

        if result.saved_commit:
            console.print(
                f"Your previous work is saved in commit {result.saved_commit[:10]} (git log in the workspace)."
            )
        if result.moved_aside:
            console.print(f"Your previous files were moved to {escape(str(result.moved_aside))}")
            here = _cwd().resolve()
            if here == result.moved_aside or result.moved_aside in here.parents:
                # The shell followed the folder it was in: what it edits now is the old copy.
                console.print(
                    f"[yellow]Your shell is still in the old folder:[/] cd {escape(str(result.path))}", soft_wrap=True
                )
        console.print(f"Started [bold]{spec.id}[/] in {escape(str(result.path))}", soft_wrap=True)
        console.print(
            "Next: read the handout (README.md in the workspace, or `roadmap lab show "
            f"{spec.id}`), edit the files, then run `roadmap watch` (or `roadmap grade`) there.",
            soft_wrap=True,
        )

    emit("lab start", data, as_json=as_json, render=render)


@lab_app.command("status")
def lab_status(
    lab_id: Annotated[
        Optional[str],
        typer.Argument(metavar="[ID]", help="Lab id (default: the workspace you are in, else every lab you tried)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Attempt history: when, score per part, commit, device, key performance figures."""
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.labs import service
    from roadmap_cli.formats.output import emit

    ctx = _ctx()
    data = service.lab_status(ctx.store(), lab_id, _cwd(), ctx.lang)
    emit("lab status", data, as_json=as_json, render=lambda c: render.lab_status(c, data))


@lab_app.command("hint")
def lab_hint(
    lab_id: Annotated[
        Optional[str], typer.Argument(metavar="[ID]", help="Lab id (default: the workspace you are in).")
    ] = None,
    part: Annotated[
        Optional[str],
        typer.Option(
            "--part", "-p", help="A hint for this part (default: the first part, in the lab's order, still failing)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the next hint for the first part still failing, in the lab's order (hints used are recorded).

    Once that part's hints are used up it says so, and only then gives a hint
    for another part, naming the part."""
    from roadmap_cli.labs import hints, service
    from roadmap_cli.formats.output import emit

    ctx = _ctx()
    store = ctx.store()
    data = service.next_hint(store, service.lab_here(store, lab_id, _cwd()), ctx.lang, part)

    def render(console) -> None:
        from rich.markup import escape  # hint text is data: `A[m, k]` must not be read as markup

        for line in hints.lines(data):
            console.print(escape(line), soft_wrap=True)

    emit("lab hint", data, as_json=as_json, render=render)


@lab_app.command("reset")
def lab_reset(
    lab_id: Annotated[
        Optional[str], typer.Argument(metavar="[ID]", help="Lab id (default: the workspace you are in).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Put the starter back, after committing your current work (recover it with git)."""
    from roadmap_cli.labs import service
    from roadmap_cli.formats.output import emit

    ctx = _ctx()
    spec, path, saved, head = service.reset_lab(ctx.store(), ctx.home, lab_id, _cwd(), ctx.lang)
    data = {"lab": spec.id, "path": path, "saved_commit": saved, "commit_sha": head}

    def render(console) -> None:
        from rich.markup import escape

        if saved:
            console.print(
                f"Your work is saved in commit {saved[:10]} (`git show {saved[:10]}` in {escape(str(path))})."
            )
        console.print(f"{spec.id}: back to the starter in {escape(str(path))}")

    emit("lab reset", data, as_json=as_json, render=render)


@lab_app.command("solution")
def lab_solution(
    lab_id: Annotated[
        Optional[str], typer.Argument(metavar="[ID]", help="Lab id (default: the workspace you are in).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the reference solution (only once the lab has passed)."""
    from roadmap_cli.labs import service
    from roadmap_cli.formats.output import emit

    store = _ctx().store()
    data = service.solution(store, service.lab_here(store, lab_id, _cwd()))

    def render(console) -> None:
        from rich.syntax import Syntax

        for rel, text in data["files"].items():
            console.rule(rel)
            console.print(Syntax(text, "python" if rel.endswith(".py") else "text", line_numbers=False))

    emit("lab solution", data, as_json=as_json, render=render)


@lab_app.command("path")
def lab_path(lab_id: Annotated[str, typer.Argument(metavar="ID", help="Lab id.")]) -> None:
    """Print the workspace folder of a lab (e.g. `cd $(roadmap lab path ID)`)."""
    from roadmap_cli.labs import service

    ctx = _ctx()
    typer.echo(str(service.lab_path(ctx.store(), ctx.home, lab_id)))


# ------------------------------------------------------------------ grade, doctor


def _opt(dest: str, **kwargs):
    """A grade option named as grading/options.py declares it (the console script's early start reads the
    command line with the same table; tests/test_grade_options.py holds the two together)."""
    from roadmap_cli.grading.options import flags, option

    number_min = option(dest).number_min
    return typer.Option(*flags(dest), **({"min": number_min} if number_min is not None else {}), **kwargs)


def grade(
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
    from roadmap_cli.cli import labs_render as render
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
    ctx = _ctx()
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
            _cwd(),
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

    from roadmap_cli.cli import labs_render as render
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
            _cwd(),
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

    ctx = _ctx()
    raise typer.Exit(Watcher(ctx, lab_id, _cwd(), part=part, timeout=timeout, on=on).run())


@lab_app.command("history")
def lab_history(
    lab_id: Annotated[
        Optional[str], typer.Argument(metavar="[ID]", help="Lab id (default: the workspace you are in).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Show the last N attempts.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Attempts of one lab, numbered per lab: outcome, score per part, device (and the remote it was graded on), commit, duration."""
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.labs import history, service
    from roadmap_cli.formats.output import emit

    store = _ctx().store()
    data = history.lab_history(store, service.lab_here(store, lab_id, _cwd()), limit)
    emit("lab history", data, as_json=as_json, render=lambda c: render.lab_history(c, data))


@lab_app.command("diff")
def lab_diff(
    first: Annotated[int, typer.Argument(metavar="A", help="Attempt number (as in `roadmap lab history`).")],
    second: Annotated[int, typer.Argument(metavar="B", help="Another attempt number.")],
    lab_id: Annotated[Optional[str], typer.Option("--lab", help="Lab id (default: the workspace you are in).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Which tests changed outcome between attempts A and B of a lab."""
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.labs import history, service
    from roadmap_cli.formats.output import emit

    store = _ctx().store()
    data = history.diff(store, service.lab_here(store, lab_id, _cwd()), first, second)
    emit("lab diff", data, as_json=as_json, render=lambda c: render.lab_diff(c, data))


def doctor(
    as_json: JsonOpt = False,
    sandbox: Annotated[
        bool,
        typer.Option(
            "--sandbox", help="Print only what learner code sees behind the OS wall (the allow-list), path by path."
        ),
    ] = False,
) -> None:
    """Check python, torch, triton, CUDA, the GPU, nvcc and git; say which lab parts can be graded here."""
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.grading.doctor import run_doctor, sandbox_report
    from roadmap_cli.formats.output import emit

    if sandbox:
        view = sandbox_report()
        emit("doctor sandbox", view, as_json=as_json, render=lambda c: render.sandbox_view(c, view))
        return
    report = run_doctor()
    emit("doctor", report, as_json=as_json, render=lambda c: render.doctor(c, report))


# ------------------------------------------------------------------ dev check


@dev_app.command("check")
def dev_check(
    lab_id: Annotated[Optional[str], typer.Argument(metavar="[ID]", help="Only this lab (default: every lab).")] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", min=1, help="Checks to run at once (each is one pytest process).")
    ] = 1,
    walk: Annotated[
        bool,
        typer.Option(
            "--walk",
            help="Instead: solve the starter one file at a time, forward and "
            "in reverse, grading after each step; every subset must grade cleanly.",
        ),
    ] = False,
    cold: Annotated[
        bool,
        typer.Option(
            "--cold",
            help="Start every grader as a new Python instead of forking a warm one (slower; to compare the two).",
        ),
    ] = False,
    cold_learners: Annotated[
        bool,
        typer.Option(
            "--cold-learners",
            help="Start every learner process as bubblewrap "
            "+ a new Python instead of forking the run's warm learner (slower; "
            "--cold implies it).",
        ),
    ] = False,
    gpu: Annotated[
        bool,
        typer.Option(
            "--gpu",
            help="On a CUDA machine: doctor, every part whose code runs "
            "differently on a GPU (references pass, wrong variants that are not "
            "interpreter-only fail), load_inline behind the wall, an is_cuda round trip "
            "and the kernel benchmarks, in one table (about 10 minutes).",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --gpu: list what it would run; runs nothing (no GPU needed).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Prove every lab: the starter fails, the reference solution passes, every wrong/ variant fails."""
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.authoring.devcheck import run_dev_check
    from roadmap_cli.labs.spec import all_labs, find_lab, load_all

    if dry_run and not gpu:
        from roadmap_cli.errors import UserError

        raise UserError("--dry-run goes with --gpu: `roadmap dev check --gpu --dry-run`")
    if gpu:
        _dev_check_gpu([find_lab(lab_id)] if lab_id else all_labs(), jobs, dry_run, as_json)
        return
    if walk:
        _dev_walk([find_lab(lab_id)] if lab_id else all_labs(), jobs, as_json)
        return
    specs, broken = ([find_lab(lab_id)], {}) if lab_id else load_all()
    render.dev_check_start(specs, jobs)
    report = run_dev_check(
        specs,
        jobs=jobs,
        on_row=render.dev_check_progress,
        invalid=broken,
        cold_graders=cold,
        cold_learners=cold or cold_learners,
    )
    from roadmap_cli.formats.output import emit

    emit("dev check", report, as_json=as_json, render=lambda c: render.dev_check_table(c, report))
    if not report.ok:
        raise typer.Exit(1)


def _dev_check_gpu(specs: list, jobs: int, dry_run: bool, as_json: bool) -> None:
    """`dev check --gpu [--dry-run]`: one table (authoring/gpucheck.py)."""
    from roadmap_cli.authoring import gpucheck
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.formats.output import emit

    if dry_run:
        report = gpucheck.dry_run(specs)
    else:
        report = gpucheck.run_gpu_check(specs, jobs=max(jobs, 4), on_row=render.dev_check_progress)
    emit("dev check gpu", report, as_json=as_json, render=lambda c: render.dev_check_table(c, report))
    if not report.ok:
        raise typer.Exit(1)


def _dev_walk(specs: list, jobs: int, as_json: bool) -> None:
    """`dev check --walk`: one line per graded state, then the problems."""
    from dataclasses import asdict

    from rich.markup import escape

    from roadmap_cli.authoring.walk import run_walk
    from roadmap_cli.labs.device import detect_device
    from roadmap_cli.formats.output import console, emit

    device = detect_device()

    def line(st) -> None:
        if not as_json:
            statuses = " ".join(f"{p}:{s}" for p, s in st.statuses.items())
            console.print(f"  {escape(st.name)} ({st.seconds:.0f}s): {st.outcome}  {escape(statuses)}", soft_wrap=True)

    reports = []
    for spec in specs:
        if not as_json:
            console.print(f"{spec.id}: walking {jobs} at a time")
        reports.append(run_walk(spec, device, jobs=jobs, on_state=line))

    def render(c) -> None:
        for rep in reports:
            mark = "[green]ok[/]" if rep.ok else "[red]problems[/]"
            c.print(f"{rep.lab}: {mark} ({len(rep.states)} states, {rep.seconds:.0f}s; order {', '.join(rep.order)})")
            for problem in rep.problems:
                c.print(f"  {escape(problem)}", soft_wrap=True)

    emit("dev check walk", {"labs": [asdict(r) for r in reports]}, as_json=as_json, render=render)
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


@dev_app.command("rules")
def dev_rules(
    lab_ids: Annotated[
        Optional[list[str]], typer.Argument(metavar="[ID...]", help="Labs (default: every lab).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List what the handout says that no rule quotes: rules without `quote:`, quotes not in README.md, and
    normative README.md sentences no rule or not_rule covers. Exit 1 on a bad quote, or a gap in a lab whose
    quotes are required."""
    from dataclasses import asdict

    from roadmap_cli.authoring.handout import check_handout
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.labs.spec import all_labs, find_lab
    from roadmap_cli.formats.output import emit

    verdicts = [check_handout(s) for s in ([find_lab(i) for i in lab_ids] if lab_ids else all_labs())]
    data = {"labs": [{**asdict(v), "problems": v.problems} for v in verdicts]}
    emit("dev rules", data, as_json=as_json, render=lambda c: render.dev_rules(c, verdicts))
    if any(v.problems for v in verdicts):
        raise typer.Exit(1)


@dev_app.command("build-starter")
def dev_build_starter(
    lab_ids: Annotated[
        Optional[list[str]], typer.Argument(metavar="[ID...]", help="Labs (default: every lab).")
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 listing starter files that are stale.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Generate each lab's starter/ from its single source (the solution with BEGIN/END SOLUTION markers)."""
    from rich.markup import escape

    from roadmap_cli.labs import starter_build
    from roadmap_cli.labs.spec import all_labs, find_lab
    from roadmap_cli.formats.output import emit

    specs = [find_lab(i) for i in lab_ids] if lab_ids else all_labs()
    if check:
        data = {"check": True, "labs": {s.id: starter_build.stale_files(s) for s in specs}}
    else:
        data = {"check": False, "labs": {s.id: starter_build.build_starter(s) for s in specs}}

    def render(console) -> None:
        for lab, files in data["labs"].items():
            if check:
                status = "[green]up to date[/]" if not files else f"[red]{len(files)} stale[/]"
            else:
                status = f"{len(files)} file(s) written" if files else "already up to date"
            console.print(f"{escape(lab)}: {status}")
            for line in files:
                console.print(f"  {escape(line if check else 'starter/' + line)}")

    emit("dev build-starter", data, as_json=as_json, render=render)
    if check and any(data["labs"].values()):
        raise typer.Exit(1)


@dev_app.command("mutate")
def dev_mutate(
    lab_id: Annotated[str, typer.Argument(metavar="ID", help="Lab id.")],
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Mutants graded at once (one pytest each).")] = 2,
    sample: Annotated[
        Optional[int], typer.Option("--sample", min=1, help="Grade only N mutants, picked reproducibly.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --sample and of the graders' secret seeds.")] = 0,
    part: Annotated[
        Optional[str], typer.Option("--part", help="Grade only this part (kill rate of its tests).")
    ] = None,
    timeout: Annotated[
        Optional[float],
        typer.Option("--timeout", min=1, help="Seconds per mutant (default: 4x the reference grade, at least 20)."),
    ] = None,
    show_survivors: Annotated[
        bool, typer.Option("--show-survivors", help="Print each survivor's diff (and the equivalent/explained ones).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Grade mechanical mutants of the reference solution: kill rate per part; exit 1 below 95%."""
    from roadmap_cli.cli import mutate_render as render
    from roadmap_cli.authoring.mutate import report_dict, run_mutate
    from roadmap_cli.labs.spec import find_lab
    from roadmap_cli.formats.output import emit

    spec = find_lab(lab_id)
    with render.MutateProgress() as progress:
        rep = run_mutate(
            spec,
            _ctx().home,
            jobs=jobs,
            sample=sample,
            seed=seed,
            part=part,
            timeout=timeout,
            on_start=progress.on_start,
            on_result=progress.on_result,
        )
    emit("dev mutate", report_dict(rep), as_json=as_json, render=lambda c: render.report(c, rep, show_survivors))
    if not rep.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(lab_app)
    app.add_typer(dev_app)
    app.command("grade")(grade)
    app.command("watch")(watch_command)
    app.command("doctor")(doctor)
