"""`roadmap lab ...`, `roadmap grade`, `roadmap doctor`, `roadmap dev check`.

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


# ------------------------------------------------------------------ dev check


@dev_app.command("check")
def dev_check(
    lab_id: Annotated[Optional[str], typer.Argument(metavar="[ID]", help="Only this lab (default: every lab).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Checks to run at once (each is one pytest process).")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Prove every lab: the starter fails, the reference solution passes, every wrong/ variant fails."""
    from roadmap_cli.cli import labs_render as render
    from roadmap_cli.labs.devcheck import run_dev_check
    from roadmap_cli.labs.spec import all_labs, find_lab

    specs = [find_lab(lab_id)] if lab_id else all_labs()
    report = run_dev_check(specs, jobs=jobs, on_row=render.dev_check_progress)
    from roadmap_cli.output import emit

    emit("dev check", report, as_json=as_json, render=lambda c: render.dev_check_table(c, report))
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(lab_app)
    app.add_typer(dev_app)
