"""Core commands: init, status, next, check, uncheck."""

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a versioned JSON envelope instead of tables.")]


def register(app: typer.Typer) -> None:
    app.command("init")(init)
    app.command("status")(status)
    app.command("next")(next_steps)
    app.command("check")(check)
    app.command("uncheck")(uncheck)


def init(
    start_date: Annotated[
        Optional[str], typer.Option("--start-date", help="When you started (YYYY-MM-DD); enables the schedule view.")
    ] = None,
    curriculum: Annotated[
        Optional[str],
        typer.Option(
            "--use-curriculum",
            help="Make this curriculum YAML the default for this home (`default`: the built-in one).",
        ),
    ] = None,
    lang: Annotated[Optional[str], typer.Option("--set-lang", help="Default language for this home: en or zh.")] = None,
    weekly_hours: Annotated[
        Optional[float], typer.Option("--weekly-hours", help="Hours a week you plan to study (the plan says 10-15).")
    ] = None,
    learner: Annotated[
        Optional[str],
        typer.Option("--learner", help="Your learner id in a cohort (default: git user.email, else `local`)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create the data home and database, and save your settings (all optional)."""
    from pathlib import Path

    from roadmap_cli.curriculum import load_curriculum
    from roadmap_cli.errors import UserError
    from roadmap_cli.formats.output import emit
    from roadmap_cli.store.settings import all_settings, delete_setting, set_setting
    from roadmap_cli.formats.timeutil import parse_date

    ctx = context.current()
    if learner is not None:
        from roadmap_cli.store.learners import set_learner, validate_learner

        validate_learner(learner, source="--learner")  # before the store is even opened
        set_learner(ctx.store(), learner)
    store = ctx.store()
    if start_date is not None:
        set_setting(store, "start_date", parse_date(start_date, what="start date").isoformat())
    if curriculum == "default":
        delete_setting(store, "curriculum")
    elif curriculum is not None:
        path = Path(curriculum).expanduser().resolve()
        load_curriculum(path, cache_dir=ctx.home / "cache")  # refuse a broken file now, not later
        set_setting(store, "curriculum", str(path))
    if lang is not None:
        if lang not in context.LANGS:
            raise UserError(f"unknown language {lang!r} (choose en or zh)")
        set_setting(store, "lang", lang)
    if weekly_hours is not None:
        if not 0 < weekly_hours <= 100:
            raise UserError("--weekly-hours must be between 0 and 100")
        set_setting(store, "weekly_hours", weekly_hours)
    data = {
        "home": str(ctx.home),
        "database": str(store.path or store.url),
        "learner": store.learner,
        "settings": all_settings(store),
    }

    def render(console):
        console.print(f"[bold]roadmap home[/] {data['home']}")
        console.print(f"database      {data['database']}")
        console.print(f"learner       {data['learner']}")
        for key, value in data["settings"].items():
            console.print(f"{key:<13} {value}")
        console.print("Next: [bold]roadmap status[/]")

    emit("init", data, as_json=as_json, render=render)


def status(as_json: JsonOpt = False) -> None:
    """Where you stand: stages, milestones, schedule, labs, this week's cadence, next steps."""
    from roadmap_cli.formats.output import emit
    from roadmap_cli.tracker.status import build_status
    from roadmap_cli.formats.timeutil import local_today, parse_date

    ctx = context.current()
    store = ctx.store()
    start = ctx.setting("start_date")
    from roadmap_cli.labs.spec import use_cache

    use_cache(ctx.home / "cache")  # the labs section reads every lab's spec: validated once, then from cache/
    try:
        report = build_status(
            store,
            ctx.curriculum(),
            lang=ctx.lang,
            start_date=parse_date(start) if start else None,
            today=local_today(),
        )
    finally:
        use_cache(None)  # only this command: another in the same process (tests) reads the specs afresh

    def render(console):
        from roadmap_cli.cli.status_render import render_status

        render_status(console, report)

    emit("status", report, as_json=as_json, render=render)


def next_steps(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many suggestions.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """The next unfinished checkpoints, each with the command that advances it."""
    from roadmap_cli.formats.output import emit
    from roadmap_cli.tracker.progress import completed, next_actions

    from roadmap_cli.labs.service import started_labs

    ctx = context.current()
    store = ctx.store()
    actions = next_actions(ctx.curriculum(), completed(store), ctx.lang, limit=limit, started_labs=started_labs(store))

    def render(console):
        from rich.markup import escape  # curriculum text is data, never markup

        if not actions:
            console.print("Every checkpoint is done. Time for the research cadence: [bold]roadmap cadence[/]")
        for a in actions:
            where = f"Stage {a.stage}" if a.stage is not None else f"Phase: {escape(a.phase_title or a.phase or '')}"
            console.print(f"[bold]{where}[/] [dim]{a.kind}[/] {escape(a.text)}  [dim]({a.checkpoint_id})[/]")
            console.print(f"    [cyan]{escape(a.command)}[/]")

    emit("next", actions, as_json=as_json, render=render)


def check(
    checkpoint_id: Annotated[
        str, typer.Argument(help="Checkpoint id, e.g. s1-explain-qkv (see `roadmap stage show N`).")
    ],
    note: Annotated[
        Optional[str], typer.Option("--note", help="A note to keep with the checkpoint (repeatable over time).")
    ] = None,
    evidence: Annotated[
        Optional[str], typer.Option("--evidence", help="A link to evidence: a blog post, a repo, a gist.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Check a build checkpoint by hand (work done outside roadmap).")
    ] = False,
) -> None:
    """Mark a checkpoint done (the first completion date is kept)."""
    from roadmap_cli.formats.output import console
    from roadmap_cli.tracker.progress import check as do_check

    ctx = context.current()
    result = do_check(ctx.store(), ctx.curriculum(), checkpoint_id, note=note, evidence=evidence, force=force)
    if result.already_done:
        console.print(
            f"{result.checkpoint_id} was already done on {result.completed_at[:10]}"
            + ("; note added" if result.note_added else "")
        )
    else:
        console.print(f"[green]✓[/] {result.checkpoint_id} done" + (" (note saved)" if result.note_added else ""))


def uncheck(
    checkpoint_id: Annotated[str, typer.Argument(help="Checkpoint id to mark as not done (its notes are kept).")],
) -> None:
    """Mark a checkpoint not done again."""
    from roadmap_cli.formats.output import console
    from roadmap_cli.tracker.progress import uncheck as do_uncheck

    ctx = context.current()
    was_done = do_uncheck(ctx.store(), ctx.curriculum(), checkpoint_id)
    console.print(f"{checkpoint_id} marked not done" if was_done else f"{checkpoint_id} was not done; nothing changed")
