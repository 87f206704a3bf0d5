"""The `roadmap` console script, and the one owner of its fast path.

Two things happen here before the CLI module is imported, and nowhere else:
the root options given after a command are hoisted in front of it
(formats/argv.py), and `roadmap grade`'s grader is started (or, for `grade
--on NAME`, its ssh session opened). typer alone costs ~0.1 s of start-up, and
every tenth of a second before pytest starts is a tenth the learner waits
(issue 13; grading/prestart.py says what is started and how the grade command
takes it over). Then roadmap_cli.cli.run parses and runs the command; a job
or session nobody took is killed when it returns.

roadmap_cli.cli.main (what tests and `python -c` call) is the same run
without this early start: the command grades the same, only later.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Optional


def main(argv: Optional[list[str]] = None) -> None:
    from roadmap_cli.formats.argv import hoist_root_options

    args = hoist_root_options(list(sys.argv[1:] if argv is None else argv))
    release = _start_early(args[1:]) if args[:1] == ["grade"] and not os.environ.get("_ROADMAP_COMPLETE") else None
    try:
        from roadmap_cli.cli import run

        run(args)
    finally:
        if release is not None:
            release()


def _start_early(grade_args: list[str]) -> Optional[Callable[[], None]]:
    """Start what `roadmap grade GRADE_ARGS` will need first; the function that
    kills it if the command never takes it (it failed before grading), or None."""
    from roadmap_cli.grading import options

    read = options.read(grade_args)
    if read is None:
        return None  # not a plain form (--help, --watch, a typo...): typer's business, nothing starts early
    if read["on"] is None:
        from roadmap_cli.grading import prestart

        return prestart.discard if prestart.start(read) else None
    from roadmap_cli.grading.remote import near

    return near.discard_early if near.start_early_args(read) else None
