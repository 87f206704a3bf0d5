"""`roadmap dev check|rules|build-starter|mutate`: commands for lab authors and CI.

Thin commands: parse, call `roadmap_cli.authoring.*`, render (cli/dev_render.py).
Anything heavy is imported inside the command bodies so `roadmap --help` stays fast.
"""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context

dev_app = typer.Typer(name="dev", help="Commands for lab authors and CI.", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON envelope instead of tables.")]


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
    from roadmap_cli.cli import dev_render as render
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
    from roadmap_cli.cli import dev_render as render
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
    from roadmap_cli.cli import dev_render as render
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
    from roadmap_cli.cli import dev_render as render
    from roadmap_cli.authoring.mutate import report_dict, run_mutate
    from roadmap_cli.labs.spec import find_lab
    from roadmap_cli.formats.output import emit

    spec = find_lab(lab_id)
    with render.MutateProgress() as progress:
        rep = run_mutate(
            spec,
            context.current().home,
            jobs=jobs,
            sample=sample,
            seed=seed,
            part=part,
            timeout=timeout,
            on_start=progress.on_start,
            on_result=progress.on_result,
        )
    emit("dev mutate", report_dict(rep), as_json=as_json, render=lambda c: render.mutate_report(c, rep, show_survivors))
    if not rep.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(dev_app)
