"""`roadmap lab ...`: list, show, start, status, hint, reset, solution, path, history, diff.

Thin commands: parse, call `roadmap_cli.labs.*`, render (cli/lab_render.py). The lab engine (and
anything heavy: pydantic models, gitpython, sqlmodel) is imported inside the
command bodies so `roadmap --help` stays fast.
"""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context
from roadmap_cli.cli.workdir import current_dir

lab_app = typer.Typer(name="lab", help="Hands-on labs: list, start, hints, status, solution.", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON envelope instead of tables.")]


@lab_app.command("list")
def lab_list(as_json: JsonOpt = False) -> None:
    """Every lab: stage, state, best score, and whether it can be fully graded on this machine."""
    from roadmap_cli.cli import lab_render as render
    from roadmap_cli.labs import service
    from roadmap_cli.formats.output import emit

    ctx = context.current()
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
    from roadmap_cli.cli import lab_render as render
    from roadmap_cli.labs import service
    from roadmap_cli.formats.output import emit

    lang = context.current().lang
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

    ctx = context.current()
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
            here = current_dir().resolve()
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
    from roadmap_cli.cli import lab_render as render
    from roadmap_cli.labs import service
    from roadmap_cli.formats.output import emit

    ctx = context.current()
    data = service.lab_status(ctx.store(), lab_id, current_dir(), ctx.lang)
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

    ctx = context.current()
    store = ctx.store()
    data = service.next_hint(store, service.lab_here(store, lab_id, current_dir()), ctx.lang, part)

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

    ctx = context.current()
    spec, path, saved, head = service.reset_lab(ctx.store(), ctx.home, lab_id, current_dir(), ctx.lang)
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

    store = context.current().store()
    data = service.solution(store, service.lab_here(store, lab_id, current_dir()))

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

    ctx = context.current()
    typer.echo(str(service.lab_path(ctx.store(), ctx.home, lab_id)))


@lab_app.command("history")
def lab_history(
    lab_id: Annotated[
        Optional[str], typer.Argument(metavar="[ID]", help="Lab id (default: the workspace you are in).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Show the last N attempts.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Attempts of one lab, numbered per lab: outcome, score per part, device (and the remote it was graded on), commit, duration."""
    from roadmap_cli.cli import lab_render as render
    from roadmap_cli.labs import history, service
    from roadmap_cli.formats.output import emit

    store = context.current().store()
    data = history.lab_history(store, service.lab_here(store, lab_id, current_dir()), limit)
    emit("lab history", data, as_json=as_json, render=lambda c: render.lab_history(c, data))


@lab_app.command("diff")
def lab_diff(
    first: Annotated[int, typer.Argument(metavar="A", help="Attempt number (as in `roadmap lab history`).")],
    second: Annotated[int, typer.Argument(metavar="B", help="Another attempt number.")],
    lab_id: Annotated[Optional[str], typer.Option("--lab", help="Lab id (default: the workspace you are in).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Which tests changed outcome between attempts A and B of a lab."""
    from roadmap_cli.cli import lab_render as render
    from roadmap_cli.labs import history, service
    from roadmap_cli.formats.output import emit

    store = context.current().store()
    data = history.diff(store, service.lab_here(store, lab_id, current_dir()), first, second)
    emit("lab diff", data, as_json=as_json, render=lambda c: render.lab_diff(c, data))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(lab_app)
