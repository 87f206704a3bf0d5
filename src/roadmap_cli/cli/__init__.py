"""The `roadmap` command line: typer apps that parse, call a service, render.

Each command group lives in its own module and registers itself here. Modules
in this package import only typer/rich at top level; services (and anything
heavy) are imported inside the command functions.
"""

import sys
from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import __version__, context
from roadmap_cli.formats.argv import command_name, hoist_root_options  # noqa: F401 - part of this module's API
from roadmap_cli.errors import RoadmapError

app = typer.Typer(
    name="roadmap",
    help="Learning tracker and lab runner for engineers becoming LLM-systems / AI-infra engineers.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish); values: cli/completion.py
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"roadmap {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    home: Annotated[
        Optional[str], typer.Option("--home", help="Data home (default: $ROADMAP_HOME, then the user data dir).")
    ] = None,
    curriculum: Annotated[
        Optional[str], typer.Option("--curriculum", help="Curriculum YAML to use instead of the built-in one.")
    ] = None,
    lang: Annotated[
        Optional[str], typer.Option("--lang", help="Language for curriculum text: en or zh (default: from the locale).")
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Learning tracker and lab runner for engineers becoming LLM-systems / AI-infra engineers."""
    if lang is not None and lang not in context.LANGS:
        raise RoadmapError(f"unknown language {lang!r} (choose en or zh)")
    context.reset(home_option=home, curriculum_option=curriculum, lang_option=lang)


# Which module registers which top-level command. Only the module a command
# needs is imported and registered: building typer's whole command tree (about
# a hundred commands) on every run would cost `roadmap status` more than its
# own work. `--help`, no command, or an unknown one registers everything.
COMMAND_MODULES = {
    "init": "core",
    "status": "core",
    "next": "core",
    "check": "core",
    "uncheck": "core",
    "curriculum": "curriculum",
    "stages": "curriculum",
    "stage": "curriculum",
    "db": "db",
    "export": "db",
    "import": "db",
    "lab": "lab",
    "grade": "grade",
    "watch": "grade",
    "doctor": "grade",
    "dev": "dev",
    "paper": "research",
    "log": "research",
    "cadence": "research",
    "quiz": "quiz",
    "review": "quiz",
    "stats": "stats",
    "report": "report",
    "cohort": "cohort",
    "remote": "remote",
    "submit": "queue",
    "worker": "queue",
    "submissions": "queue",
}
_registered: set[str] = set()


def _register(module_name: str) -> None:
    if module_name in _registered:
        return
    import importlib

    importlib.import_module(f"roadmap_cli.cli.{module_name}").register(app)
    _registered.add(module_name)


def register_all() -> typer.Typer:
    """Register every command group (for --help, tests, docs); returns the app."""
    # `roadmap --help` lists commands and groups in the order they were registered: by module name,
    # except that the `dev` group (lab authors) follows the `lab` group it serves.
    for module_name in sorted(set(COMMAND_MODULES.values()), key=lambda name: "lab~" if name == "dev" else name):
        _register(module_name)
    return app


def register_for(argv: list[str]) -> None:
    module_name = COMMAND_MODULES.get(command_name(argv) or "")
    if module_name is None or "-h" in argv[:1] or "--help" in argv[:1]:
        register_all()
    else:
        _register(module_name)


def _complete(args: list[str]) -> None:
    import os

    """A TAB in the shell: typer's completion, with our completers for lab,
    part, checkpoint and stage ids attached to the command tree."""
    from typer.main import get_command

    from roadmap_cli.cli.completion import COMPLETE_VAR, attach

    # Only the group being completed is built (typer's tree of ~100 commands
    # costs more than the completion itself); the command name itself needs all.
    words = os.environ.get("COMP_WORDS", "").split()
    try:
        done = words[1 : int(os.environ.get("COMP_CWORD", len(words)))]
    except ValueError:
        done = words[1:]
    module_name = COMMAND_MODULES.get(command_name(done) or "")
    if module_name is None:
        register_all()
    else:
        _register(module_name)
    command = get_command(app)
    attach(command)
    command.main(args=args, prog_name="roadmap", complete_var=COMPLETE_VAR)


def main(argv: Optional[list[str]] = None) -> None:
    """The command line run in-process (tests, `python -c`): the console script's
    run (roadmap_cli/entry.py) without its early start of `roadmap grade`'s
    grader, which is the console script's alone. The root options given after
    the command move in front of it by the same function the console script uses."""
    run(hoist_root_options(list(sys.argv[1:] if argv is None else argv)))


def run(args: list[str]) -> None:
    """Run the app on `args` (root options already hoisted); user errors become
    one line and an exit code.

    typer runs outside its standalone mode so that its usage errors (exit 2)
    are one line here too; a command's typer.Exit code is the exit code;
    RoadmapError is ours. With _ROADMAP_COMPLETE set it is a shell's TAB.
    """
    import os

    if os.environ.get("_ROADMAP_COMPLETE"):
        _complete(args)  # a TAB: no output module, only the group being completed
        return
    _run(args)


def _plain_status(args: list[str]):
    """`roadmap [--home H] [--curriculum C] [--lang L] status [--json]` (nothing else): the status command,
    called without typer parsing the line. typer coerces every parameter through a pydantic TypeAdapter,
    and importing pydantic for that cost `status` a third of its budget (1.3x `import sqlmodel, typer,
    rich`). Anything else (--help, another option, a typo) returns None: typer parses it as usual."""
    root_opts: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i] != "status":
        name, eq, value = args[i].partition("=")
        if name not in ("--home", "--curriculum", "--lang") or name[2:] in root_opts:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value, i = args[i + 1], i + 1
        root_opts[name[2:]] = value
        i += 1
    rest = args[i + 1 :]
    if i >= len(args) or rest not in ([], ["--json"]):
        return None

    def run() -> None:
        from roadmap_cli.cli.core import status

        root(home=root_opts.get("home"), curriculum=root_opts.get("curriculum"), lang=root_opts.get("lang"))
        status(as_json=bool(rest))

    return run


def _run(args: list[str]) -> None:
    from roadmap_cli.formats.output import error_line

    plain = _plain_status(args)
    if plain is None:
        register_for(args)
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
    from typer.exceptions import Abort

    try:
        # Not standalone: usage errors come back here, to be one line like every other mistake.
        code = plain() if plain is not None else app(args=args, prog_name="roadmap", standalone_mode=False)
    except NoArgsIsHelpError as exc:
        # `roadmap lab`: typer has printed the group's help already (while raising this).
        sys.exit(exc.exit_code)
    except ClickException as exc:
        # "No such option", "Missing argument", a bad value: one line, and where to look.
        ctx = getattr(exc, "ctx", None)
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        error_line(exc.format_message().replace("\n", " ") + where)
        sys.exit(exc.exit_code)
    except Abort:  # Ctrl-C at a prompt
        error_line("interrupted")
        sys.exit(130)
    except RoadmapError as exc:
        error_line(exc.message, exc.details)
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        error_line("interrupted")
        sys.exit(130)
    except Exception as exc:
        # A malformed row already in the database (hand-edited, old version)
        # crashes whichever reader meets it: name the row instead of a
        # traceback. Anything else is a bug and keeps its traceback.
        from roadmap_cli.portable.rowcheck import explain_crash

        explained = explain_crash(exc, getattr(context.current(), "_store", None))
        if explained is None:
            raise
        error_line(explained.message)
        sys.exit(int(explained.exit_code))
    # Like typer's standalone mode: always exit, with a command's typer.Exit(code).
    sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)
