"""Cohort commands: cohort status, cohort board LAB, cohort export (every learner in one database)."""

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a versioned JSON envelope instead of tables.")]

cohort_app = typer.Typer(
    help="Every learner in a shared database (DATABASE_URL=postgresql+psycopg://...): status, lab boards, export.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(cohort_app, name="cohort")


@cohort_app.command("status")
def status(as_json: JsonOpt = False) -> None:
    """Each learner's stage, checkpoints done, labs passed and this week's cadence."""
    from roadmap_cli.cohort import cohort_status
    from roadmap_cli.output import emit
    from roadmap_cli.timeutil import local_today

    ctx = context.current()
    data = cohort_status(ctx.store(), ctx.curriculum(), today=local_today())

    def render(console):
        from rich.table import Table

        week = data["week"]
        table = Table(title=f"Cohort — week {week['start']} to {week['end']}")
        for column in ("learner", "stage", "checkpoints", "labs passed", "papers", "items", "hours"):
            table.add_column(column, justify="right" if column not in ("learner", "labs passed", "items") else "left")
        for row in data["learners"]:
            items = ", ".join(f"{k} {v}" for k, v in row["week"]["items"].items()) or "-"
            table.add_row(row["learner"], str(row["stage"] or "done"),
                          f"{row['checkpoints_done']}/{row['checkpoints_total']}",
                          f"{len(row['labs_passed'])}/{row['labs_total']}", str(row["week"]["papers"]), items,
                          f"{row['week']['hours']:g}")
        if not data["learners"]:
            console.print("No learners in this database yet.")
            return
        console.print(table)

    emit("cohort status", data, as_json=as_json, render=render)


@cohort_app.command("board")
def board(
    lab: Annotated[str, typer.Argument(help="Lab id (see `roadmap lab list`).")],
    as_json: JsonOpt = False,
) -> None:
    """Best score per learner for a lab; GPU results ranked only against the same device model."""
    from roadmap_cli.cohort import lab_board
    from roadmap_cli.output import emit

    data = lab_board(context.current().store(), lab)

    def render(console):
        from rich.table import Table

        if not data["devices"]:
            console.print(f"No graded attempts of {data['lab']} yet.")
            return
        for group in data["devices"]:
            table = Table(title=f"{data['lab']} on {group['device']}")
            for column in ("#", "learner", "best score", "outcome", "perf vs baseline", "sandbox", "attempts",
                           "graded at"):
                table.add_column(column)
            for e in group["learners"]:
                ratio = "-" if e["perf_ratio"] is None else f"{e['perf_ratio']:.2f}x"
                table.add_row(str(e["rank"]), e["learner"], f"{e['best_score']:g}/{e['max_score']:g}",
                              e["outcome_text"], ratio, e["sandbox"], str(e["attempts"]), e["graded_at"])
            console.print(table)
        console.print("Ranks compare results from the same device model only; a strong-sandbox result (graded "
                      "behind bubblewrap) ranks above any weak or unknown one.")

    emit("cohort board", data, as_json=as_json, render=render)


@cohort_app.command("export")
def export(
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Everyone's status and every lab's board as one JSON document (for a course's records)."""
    import json
    from pathlib import Path

    from roadmap_cli.cohort import cohort_export
    from roadmap_cli.errors import UserError
    from roadmap_cli.output import emit
    from roadmap_cli.timeutil import local_today

    ctx = context.current()
    data = cohort_export(ctx.store(), ctx.curriculum(), today=local_today())
    if output is None:
        # Always JSON: the document is the point; --json wraps it in the envelope.
        if as_json:
            emit("cohort export", data, as_json=True)
        else:
            typer.echo(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True))
        return
    path = Path(output).expanduser()
    try:
        with open(path, "x", encoding="utf-8") as fh:
            fh.write(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n")
    except FileExistsError:
        raise UserError(f"{path} exists; choose another file (exports never overwrite)") from None
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    emit("cohort export", {"written": str(path), "learners": len(data["status"]["learners"])}, as_json=as_json,
         render=lambda console: console.print(f"exported {len(data['status']['learners'])} learners to {path}"))
