"""Research log commands: `log KIND|hours|list|edit|delete` and `cadence`.

Thin, like `paper ...` in research.py; the option types and helpers (dates,
stage and lab checks, --json) come from research_options.py.
"""

# No `from __future__ import annotations`: typer reads the signatures (see research.py).
from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context
from roadmap_cli.cli.research_options import (
    DateOpt,
    JsonOpt,
    NewDateOpt,
    StageOpt,
    YesOpt,
    check_lab,
    check_stage,
    confirm_delete,
    parse_date,
    emit_result,
    today_local,
)

log_app = typer.Typer(
    name="log",
    help="Log cadence items (reproduction, experiment, ...) and study hours; list/edit/delete them.",
    no_args_is_help=True,
)


# --- log -----------------------------------------------------------------------


def _item_command(kind: str, what: str):
    def log_item(
        title: Annotated[str, typer.Argument(help="What it was: a short title.")],
        link: Annotated[Optional[str], typer.Option("--link", help="URL of the repo, post, report or PR.")] = None,
        file: Annotated[
            Optional[str],
            typer.Option(
                "--file", help="A local file it produced (e.g. `roadmap report -o FILE`): stored as a file:// link."
            ),
        ] = None,
        paper: Annotated[
            Optional[str], typer.Option("--paper", help="Paper id it is about (a reproduction marks it reproduced).")
        ] = None,
        lab: Annotated[Optional[str], typer.Option("--lab", help="Lab id it belongs to.")] = None,
        stage: StageOpt = None,
        date: DateOpt = None,
        note: Annotated[Optional[str], typer.Option("--note", help="A note.")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        from roadmap_cli.research.entries import EntryInput, log_entry
        from roadmap_cli.research.papers import parse_paper_id

        check_stage(stage)
        check_lab(lab)
        if file is not None:
            from roadmap_cli.research.entries import file_link

            if link is not None:
                from roadmap_cli.errors import UserError

                raise UserError("give --link or --file, not both")
            link = file_link(file)
        inp = EntryInput(
            kind=kind,
            on_date=parse_date(date) or today_local(),
            title=title,
            link=link,
            stage=stage,
            lab_id=lab,
            paper_id=parse_paper_id(paper) if paper else None,
            note=note,
        )
        entry = log_entry(context.current().store(), inp, today=today_local())
        emit_result(
            f"log {kind}", entry, as_json, lambda e, c: c.print(f"logged {e['kind']} #{e['id']} on {e['on_date']}")
        )

    log_item.__doc__ = f"Log {what} (dated today or --date)."
    return log_item


# Each item kind with the phrase its help uses (the article matters: "an experiment").
_ITEM_HELP = (
    ("reproduction", "a deep reproduction of a paper"),
    ("experiment", "an experiment"),
    ("benchmark", "a benchmark"),
    ("report", "a technical report"),
    ("blog", "a blog post"),
    ("oss", "an open-source project or contribution"),
    ("workshop-paper", "a workshop paper"),
)
for _kind, _what in _ITEM_HELP:
    log_app.command(_kind)(_item_command(_kind, _what))


# ignore_unknown_options: `roadmap log hours -1` reaches our range check
# ("hours must be more than 0") instead of click's "No such option: -1".
@log_app.command("hours", context_settings={"ignore_unknown_options": True})
def log_hours(
    hours: Annotated[float, typer.Argument(help="Hours studied, e.g. 2.5.")],
    stage: StageOpt = None,
    date: DateOpt = None,
    note: Annotated[Optional[str], typer.Option("--note", help="What you worked on.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Log study hours (the plan asks for 10-15 a week)."""
    from roadmap_cli.research.entries import EntryInput, log_entry

    check_stage(stage)
    inp = EntryInput(kind="hours", on_date=parse_date(date) or today_local(), hours=hours, stage=stage, note=note)
    entry = log_entry(context.current().store(), inp, today=today_local())
    emit_result(
        "log hours", entry, as_json, lambda e, c: c.print(f"logged {e['hours']:g} h on {e['on_date']} (#{e['id']})")
    )


@log_app.command("list")
def log_list(
    kind: Annotated[Optional[str], typer.Option("--kind", help="Only this kind (reproduction, ..., hours).")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="On or after YYYY-MM-DD.")] = None,
    until: Annotated[Optional[str], typer.Option("--until", help="On or before YYYY-MM-DD.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Show at most N entries.")] = 50,
    show_all: Annotated[bool, typer.Option("--all", help="Show every entry.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List logged cadence entries, newest first."""
    from roadmap_cli.research.entries import list_entries
    from roadmap_cli.cli.research_render import entry_table

    from roadmap_cli.errors import UserError

    first, last = parse_date(since, "since date", allow_future=True), parse_date(until, "until date", allow_future=True)
    if first and last and first > last:
        raise UserError(f"--since {first.isoformat()} is after --until {last.isoformat()}: nothing could match")
    result = list_entries(
        context.current().store(), kind=kind, since=first, until=last, limit=None if show_all else max(limit, 0)
    )
    emit_result("log list", result, as_json, entry_table)


@log_app.command("edit")
def log_edit(
    entry_id: Annotated[str, typer.Argument(help="Entry id (see `log list`).")],
    title: Annotated[Optional[str], typer.Option("--title", help="New title.")] = None,
    hours: Annotated[Optional[float], typer.Option("--hours", help="New hours (hours entries).")] = None,
    link: Annotated[Optional[str], typer.Option("--link", help="New link.")] = None,
    paper: Annotated[Optional[str], typer.Option("--paper", help="Paper id it is about.")] = None,
    lab: Annotated[Optional[str], typer.Option("--lab", help="Lab id.")] = None,
    stage: StageOpt = None,
    date: NewDateOpt = None,
    note: Annotated[Optional[str], typer.Option("--note", help="New note.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Change an entry's fields (only those given)."""
    from roadmap_cli.research.entries import edit_entry, parse_entry_id
    from roadmap_cli.research.papers import parse_paper_id

    check_stage(stage)
    check_lab(lab)
    given = {
        "title": title,
        "hours": hours,
        "link": link,
        "lab_id": lab,
        "stage": stage,
        "note": note,
        "on_date": parse_date(date),
        "paper_id": parse_paper_id(paper) if paper else None,
    }
    changes = {k: v for k, v in given.items() if v is not None}
    entry = edit_entry(context.current().store(), parse_entry_id(entry_id), changes, today=today_local())
    emit_result("log edit", entry, as_json, lambda e, c: c.print(f"updated {e['kind']} #{e['id']} ({e['on_date']})"))


@log_app.command("delete")
def log_delete(entry_id: Annotated[str, typer.Argument(help="Entry id.")], yes: YesOpt = False) -> None:
    """Delete an entry (asks first unless --yes)."""
    from roadmap_cli.research.entries import delete_entry, get_entry, parse_entry_id

    store, eid = context.current().store(), parse_entry_id(entry_id)
    entry = get_entry(store, eid)
    what = f"{entry['hours']:g} h" if entry["kind"] == "hours" else repr(entry["title"])
    confirm_delete(
        f"delete {entry['kind']} #{eid} {what} of {entry['on_date']}?", yes=yes, command=("log", "delete", str(eid))
    )
    delete_entry(store, eid)
    typer.echo(f"deleted {entry['kind']} #{eid}")


# --- cadence -------------------------------------------------------------------


def cadence(
    week: Annotated[bool, typer.Option("--week", help="This ISO week (the default).")] = False,
    month: Annotated[bool, typer.Option("--month", help="This month.")] = False,
    quarter: Annotated[bool, typer.Option("--quarter", help="This quarter.")] = False,
    at: Annotated[
        Optional[str], typer.Option("--at", help="Look at the period holding this date instead of today.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Targets vs logged for the ISO week/month/quarter, streaks, and a 52-week calendar.

    A paper counts on its read date once read or reproduced; every other item on
    its date. A week is met when every weekly target and the weekly hours minimum
    are reached; a streak is the run of met periods up to now (the period under
    way extends it once met, and does not break it before it ends).
    """
    from roadmap_cli.errors import UserError
    from roadmap_cli.research.cadence import cadence_report
    from roadmap_cli.cli.research_render import cadence as render_cadence

    if week + month + quarter > 1:
        raise UserError("choose one of --week, --month, --quarter")
    period = "month" if month else "quarter" if quarter else "week"
    ctx, today = context.current(), today_local()
    report = cadence_report(
        ctx.store(), ctx.curriculum(), period=period, at=parse_date(at, "--at date") or today, today=today
    )
    emit_result("cadence", report, as_json, render_cadence)
