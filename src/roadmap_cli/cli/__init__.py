"""The `roadmap` command line: typer apps that parse, call a service, render.

Each command group lives in its own module and registers itself here. Modules
in this package import only typer/rich at top level; services (and anything
heavy) are imported inside the command functions.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import __version__, context
from roadmap_cli.errors import RoadmapError

app = typer.Typer(
    name="roadmap",
    help="Learning tracker and lab runner for engineers becoming LLM-systems / AI-infra engineers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"roadmap {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    home: Annotated[Optional[str], typer.Option("--home", help="Data home (default: $ROADMAP_HOME, then the user data dir).")] = None,
    curriculum: Annotated[Optional[str], typer.Option("--curriculum", help="Curriculum YAML to use instead of the built-in one.")] = None,
    lang: Annotated[Optional[str], typer.Option("--lang", help="Language for curriculum text: en or zh (default: from the locale).")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")] = False,
) -> None:
    """Learning tracker and lab runner for engineers becoming LLM-systems / AI-infra engineers."""
    if lang is not None and lang not in context.LANGS:
        raise RoadmapError(f"unknown language {lang!r} (choose en or zh)")
    context.reset(home_option=home, curriculum_option=curriculum, lang_option=lang)


def _register_commands() -> None:
    # Each module adds its commands/groups to `app`. Imported here (not lazily
    # per command) because typer needs the signatures for --help; the modules
    # themselves keep their heavy imports inside function bodies.
    from roadmap_cli.cli import core, curriculum, db, labs, research

    for module in (core, curriculum, db, labs, research):
        module.register(app)


_register_commands()


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point: run the app; user errors become one line and an exit code.

    typer (standalone mode) already turns usage errors into a message and exit
    code 2 and exits with a command's typer.Exit code; RoadmapError is ours.
    """
    from roadmap_cli.output import error_line

    try:
        app(args=argv, prog_name="roadmap")
    except RoadmapError as exc:
        error_line(exc.message, exc.details)
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        error_line("interrupted")
        sys.exit(130)
