"""The `roadmap` console script.

For `roadmap grade` the grader is started here, before the CLI module is
imported: typer alone costs ~0.1 s of start-up, and every tenth of a second
before pytest starts is a tenth the learner waits (issue 13; grading/prestart.py
says what is started and how the CLI takes it over). Every other command goes
straight to roadmap_cli.cli.main, which does the rest (including this early
start, when it is called directly).
"""

from __future__ import annotations

import os
import sys
from typing import Optional


def main(argv: Optional[list[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not os.environ.get("_ROADMAP_COMPLETE"):
        from roadmap_cli.formats.argv import hoist_root_options

        hoisted = hoist_root_options(args)
        if hoisted[:1] == ["grade"]:
            from roadmap_cli.grading import prestart

            prestart.start(hoisted[1:])
            if any(a == "--on" or a.startswith("--on=") for a in hoisted):
                # `grade --on NAME`: the ssh session opens now instead (grading/remote/near.start_early).
                from roadmap_cli.grading.remote import near

                near.start_early_args(hoisted[1:])
    from roadmap_cli.cli import main as cli_main

    cli_main(args)
