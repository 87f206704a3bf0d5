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
    from roadmap_cli.tracker.cohort import cohort_status
    from roadmap_cli.formats.output import emit
    from roadmap_cli.formats.timeutil import local_today

    ctx = context.current()
    data = cohort_status(ctx.store(), ctx.curriculum(), today=local_today())

    def render(console):
        from rich.table import Table

        week = data["week"]
        table = Table(title=f"Cohort — week {week['start']} to {week['end']}")
        phases = any(row["phase_checkpoints_total"] for row in data["learners"])
        for column in (
            "learner",
            "stage",
            "checkpoints",
            *(["plan phases"] if phases else []),
            "labs passed",
            "papers",
            "items",
            "hours",
        ):
            table.add_column(column, justify="right" if column not in ("learner", "labs passed", "items") else "left")
        for row in data["learners"]:
            items = ", ".join(f"{k} {v}" for k, v in row["week"]["items"].items()) or "-"
            plan = [f"{row['phase_checkpoints_done']}/{row['phase_checkpoints_total']}"] if phases else []
            table.add_row(
                row["learner"],
                str(row["stage"] or "done"),
                f"{row['checkpoints_done']}/{row['checkpoints_total']}",
                *plan,
                f"{len(row['labs_passed'])}/{row['labs_total']}",
                str(row["week"]["papers"]),
                items,
                f"{row['week']['hours']:g}",
            )
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
    from roadmap_cli.tracker.cohort import lab_board
    from roadmap_cli.formats.output import emit

    data = lab_board(context.current().store(), lab)

    def render(console):
        if not data["devices"] and not data["self_graded"]:
            console.print(f"No graded attempts of {data['lab']} yet.")
            return
        if not data["devices"]:
            console.print(
                f"No verified attempts of {data['lab']} yet (`roadmap submit` has the cohort's worker grade one).",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        # One line per learner, not a table: at a narrow terminal a table cuts learner ids ("…") or squeezes
        # every other column to one letter; a line wraps whole instead.
        for group in data["devices"]:
            console.print(
                f"{data['lab']} on {group['device']}", style="bold", markup=False, highlight=False, soft_wrap=True
            )
            width = max(len(e["learner"]) for e in group["learners"])
            for e in group["learners"]:
                ratio = "-" if e["perf_ratio"] is None else f"{e['perf_ratio']:.2f}x"
                console.print(
                    f"  #{e['rank']} {e['learner']:<{width}}  lab {e['lab_state_text']} "
                    f"({e['lab_parts_passed']}/{e['lab_parts']} parts)  best attempt "
                    f"{e['best_score']:g}/{e['max_score']:g} {e['outcome_text']}  "
                    f"perf vs baseline {ratio}  sandbox {e['sandbox']}  "
                    f"attempts {e['attempts']}  graded {e['graded_at']}",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
        if data["devices"]:
            console.print(
                "Ranks compare results from the same device model only; a strong-sandbox result (graded "
                "behind bubblewrap) ranks above any weak or unknown one."
                + (
                    " Only verified attempts rank: graded by the cohort's worker (`roadmap submit`)."
                    if data["mode"] == "cohort"
                    else ""
                ),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        if data["self_graded"]:
            _render_self_graded(console, data)

    emit("cohort board", data, as_json=as_json, render=render)


def _render_self_graded(console, data: dict) -> None:
    console.print(
        f"{data['lab']}, self-graded (not ranked: the learner's own machine; score, device and "
        "sandbox are their claim)",
        style="bold",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    width = max(len(e["learner"]) for e in data["self_graded"])
    for e in data["self_graded"]:
        claimed = e["claimed"]
        where = f"claimed device {claimed['device']}, sandbox {claimed['sandbox']}"
        if claimed.get("graded_on"):
            where += f", graded on {claimed['graded_on']}"
        console.print(
            f"  {e['learner']:<{width}}  {e['best_score']:g}/{e['max_score']:g}  {e['outcome_text']}  "
            f"{where}  attempts {e['attempts']}  graded {e['graded_at']}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


@cohort_app.command("export")
def export(
    output: Annotated[
        Optional[str], typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Everyone's status and every lab's board as one JSON document (for a course's records)."""
    import json
    from pathlib import Path

    from roadmap_cli.tracker.cohort import cohort_export
    from roadmap_cli.errors import UserError
    from roadmap_cli.formats.output import emit
    from roadmap_cli.formats.timeutil import local_today

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
    emit(
        "cohort export",
        {"written": str(path), "learners": len(data["status"]["learners"])},
        as_json=as_json,
        render=lambda console: console.print(f"exported {len(data['status']['learners'])} learners to {path}"),
    )


@cohort_app.command("add-learner")
def add_learner(
    learner: Annotated[str, typer.Argument(help="The learner's id, e.g. ada@example.org (becomes a database role).")],
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input instead of generating one.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Instructor: a database login for LEARNER that reads the whole cohort and writes only its own rows."""
    import sys

    from roadmap_cli.tracker.cohort import add_learner as add
    from roadmap_cli.errors import UserError
    from roadmap_cli.formats.output import emit

    password = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
        if len(password) < 12:
            raise UserError("the password read from standard input is shorter than 12 characters")
    data = add(context.current().store(), learner, password)

    def render(console):
        console.print(f"Learner {learner} can now log in. Give them this (keep it private: it holds the password):")
        console.print(f"  DATABASE_URL={data['database_url']}", markup=False, soft_wrap=True)
        console.print("Their rows are theirs alone; `roadmap cohort status|board` show everyone.")

    emit("cohort add-learner", data, as_json=as_json, render=render)


@cohort_app.command("remove-learner")
def remove_learner(
    learner: Annotated[str, typer.Argument(help="The learner's id (see `roadmap cohort learners`).")],
    as_json: JsonOpt = False,
) -> None:
    """Instructor: drop LEARNER's database login. Their rows stay, as the cohort's history."""
    from roadmap_cli.tracker.cohort import remove_learner as remove
    from roadmap_cli.formats.output import emit

    data = remove(context.current().store(), learner)
    emit(
        "cohort remove-learner",
        data,
        as_json=as_json,
        render=lambda console: console.print(f"Removed the login of {learner}; their {data['rows_kept']} rows stay."),
    )


@cohort_app.command("learners")
def learners(as_json: JsonOpt = False) -> None:
    """The learners' database logins (each scoped to its own rows)."""
    from roadmap_cli.tracker.cohort import learner_roles
    from roadmap_cli.formats.output import emit

    data = learner_roles(context.current().store())

    def render(console):
        if not data["learners"]:
            console.print("No learner logins yet: `roadmap cohort add-learner ID`.")
            return
        for row in data["learners"]:
            console.print(row["learner"])

    emit("cohort learners", data, as_json=as_json, render=render)
