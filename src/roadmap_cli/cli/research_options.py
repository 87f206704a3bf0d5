"""What the research commands share: the option types (`--json`, `--date`,
`--stage`, `--yes`) and the checks and helpers behind them (local dates, stage
and lab ids, the JSON/people output). `paper ...` (research.py) and `log ...`,
`cadence` (research_log.py) both use these; neither imports the other's commands.
"""

# No `from __future__ import annotations`: typer reads the signatures (see research.py).
from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a versioned JSON envelope instead of tables.")]
DateOpt = Annotated[
    Optional[str],
    typer.Option("--date", help="Your local date, YYYY-MM-DD / today / yesterday (default: today; no future dates)."),
]
StageOpt = Annotated[Optional[int], typer.Option("--stage", help="Curriculum stage number this belongs to.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
NewDateOpt = Annotated[
    Optional[str], typer.Option("--date", help="New date: YYYY-MM-DD, today or yesterday (no future dates).")
]


def today_local():
    from roadmap_cli.research.periods import local_today

    return local_today()


def parse_date(text: Optional[str], what: str = "date", *, allow_future: bool = False):
    from roadmap_cli.research.periods import parse_local_date

    return parse_local_date(text, today=today_local(), what=what, allow_future=allow_future) if text else None


def check_stage(stage: Optional[int]) -> None:
    """Refuse a stage the curriculum does not have (skipped if it cannot load)."""
    if stage is None:
        return
    from roadmap_cli.errors import NotFoundError, RoadmapError

    try:
        numbers = [s.number for s in context.current().curriculum().stages]
    except (RoadmapError, ImportError):
        return
    if stage not in numbers:
        raise NotFoundError("stage", str(stage), [str(n) for n in numbers])


def known_stages() -> Optional[set]:
    """The curriculum's stage numbers (None when it cannot load: nothing to check against)."""
    from roadmap_cli.errors import RoadmapError

    try:
        return {s.number for s in context.current().curriculum().stages}
    except (RoadmapError, ImportError):
        return None


def check_lab(lab: Optional[str]) -> None:
    """Refuse a lab id that no shipped lab has (a typo would never match later)."""
    if lab is None:
        return
    from roadmap_cli.errors import NotFoundError, RoadmapError
    from roadmap_cli.paths import labs_root

    try:
        known = sorted(p.parent.name for p in labs_root().glob("*/lab.yaml"))
    except RoadmapError:
        return
    if known and lab not in known:
        raise NotFoundError("lab", lab, known, hint=f"labs: {', '.join(known)}")


def root_options() -> list[str]:
    """The root options this command was given (`--home`, `--curriculum`), for a command a hint suggests:
    without them the suggested command would act on another data home."""
    ctx = context.current()
    words: list[str] = []
    if ctx.home_option:
        words += ["--home", str(ctx.home_option)]
    if ctx.curriculum_option:
        words += ["--curriculum", str(ctx.curriculum_option)]
    return words


def suggested_command(*words: str) -> str:
    """`roadmap [root options] WORDS...` as one shell-quoted line."""
    import shlex

    return " ".join(shlex.quote(w) for w in ("roadmap", *root_options(), *words))


def stdin_is_terminal() -> bool:
    import sys

    return sys.stdin is not None and sys.stdin.isatty()


def confirm_delete(question: str, *, yes: bool, command: tuple[str, ...]) -> None:
    """Ask before deleting (`--yes` skips it). Without a terminal to ask on (a
    script, a pipe, cron) nothing is read from stdin: one line says to add
    --yes, and nothing is deleted (exit 2). Declining: exit 1."""
    if yes:
        return
    from roadmap_cli.errors import UserError

    if not stdin_is_terminal():
        raise UserError(
            f"not deleted: there is no terminal to ask for confirmation on; "
            f"to delete without asking, run: {suggested_command(*command, '--yes')}"
        )
    if not typer.confirm(question, default=False):
        typer.echo("nothing deleted", err=True)
        raise typer.Exit(1)


def emit_result(command: str, data, as_json: bool, render) -> None:
    from roadmap_cli.formats.output import emit

    emit(command, data, as_json=as_json, render=lambda console: render(data, console))
