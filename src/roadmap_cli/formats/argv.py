"""The command line's words before typer sees them (no typer import here:
the console script, roadmap_cli/entry.py, reads them before the CLI loads)."""

from __future__ import annotations

from typing import Optional

ROOT_OPTIONS_WITH_VALUE = {"--home", "--curriculum", "--lang"}


def command_name(argv: list[str]) -> Optional[str]:
    """The first argument that is not a root option (or its value)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ROOT_OPTIONS_WITH_VALUE:
            skip = True
            continue
        if arg.startswith("-"):
            continue
        return arg
    return None


def hoist_root_options(argv: list[str]) -> list[str]:
    """`roadmap status --lang zh` means `roadmap --lang zh status`: root options
    given after the command move in front of it (no command has options of
    these names, so nothing else can mean them)."""
    name = command_name(argv)
    if name is None:
        return argv
    at = next(i for i, arg in enumerate(argv) if arg == name and (i == 0 or argv[i - 1] not in ROOT_OPTIONS_WITH_VALUE))
    moved, kept, rest, i = [], [], argv[at + 1 :], 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            kept += rest[i:]
            break
        if arg in ROOT_OPTIONS_WITH_VALUE and i + 1 < len(rest):
            moved += rest[i : i + 2]
            i += 2
            continue
        (moved if arg.split("=", 1)[0] in ROOT_OPTIONS_WITH_VALUE and "=" in arg else kept).append(arg)
        i += 1
    return argv[:at] + moved + [argv[at]] + kept  # after the ones before it: the later one wins
