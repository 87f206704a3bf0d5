"""`roadmap grade`'s options, declared once.

Two readers need them: the typer command (cli/grade.py declares each option
with `flags(dest)`, so its names come from here) and the console script's
early start (roadmap_cli/entry.py), which reads the command line with `read`
before typer is even imported. tests/test_grade_options.py holds the typer
command against this table for every option (names, aliases, takes a value,
repeatable, bounds), so the two cannot drift apart.

No typer here: this module is on the path that runs before it loads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class GradeOption:
    dest: str  # the grade command's parameter name, and `read`'s key
    flags: tuple[str, ...]  # as typed: the name first, then its aliases
    takes_value: bool = False  # False: a flag (True when given)
    repeatable: bool = False  # each use adds a value (a list)
    number_min: Optional[float] = None  # a number, at least this (typer's min=); None: text
    early: bool = True  # False: the early start leaves the command to typer (it starts nothing)


GRADE_OPTIONS: tuple[GradeOption, ...] = (
    GradeOption("part", ("--part",), takes_value=True),
    GradeOption("keyword", ("-k",), takes_value=True),
    GradeOption("test", ("--test",), takes_value=True, repeatable=True),
    GradeOption("first_failure", ("-x", "--first-failure")),
    GradeOption("verbose", ("-v", "--verbose")),
    GradeOption("watch", ("--watch",), early=False),  # a watch loop, not one grade
    GradeOption("timeout", ("--timeout",), takes_value=True, number_min=1),
    GradeOption("on", ("--on",), takes_value=True),
    GradeOption("as_json", ("--json",)),
    # The far side of `grade --on` (hidden): started by the near side over ssh, never by a learner.
    GradeOption("events", ("--events",), early=False),
    GradeOption("events_workspace", ("--events-workspace",), takes_value=True, early=False),
    GradeOption("events_key", ("--events-key",), takes_value=True, early=False),
    GradeOption("events_nonce", ("--events-nonce",), takes_value=True, early=False),
)
LAB_ID = "lab_id"  # the one argument, [ID]
# What the near side of `grade --on` puts on the far side's command line (grading/remote/near.py), which the
# far side's early start (grading/remote/far.events_main) reads with `read(args, accept=FAR_SIDE)`.
FAR_SIDE = frozenset({"part", "timeout", "events_workspace", "events_key", "events_nonce"})
_BY_FLAG = {flag: option for option in GRADE_OPTIONS for flag in option.flags}
_BY_DEST = {option.dest: option for option in GRADE_OPTIONS}


def flags(dest: str) -> tuple[str, ...]:
    """The option's names as the command declares them (a KeyError is a typo in the command)."""
    return _BY_DEST[dest].flags


def option(dest: str) -> GradeOption:
    return _BY_DEST[dest]


def defaults() -> dict:
    """What `read` gives for `roadmap grade` with no arguments (the command's defaults)."""
    out: dict = {LAB_ID: None}
    for opt in GRADE_OPTIONS:
        out[opt.dest] = [] if opt.repeatable else (None if opt.takes_value else False)
    return out


def read(args: list[str], *, accept: Optional[frozenset[str]] = None) -> Optional[dict]:
    """The values of `roadmap grade ARGS` (root options already hoisted out), keyed by dest; None for
    anything the early start leaves to typer: --help, an option it does not `accept` (by default the
    `early` ones: not --watch, not the far side's), an unknown one, a value typer would refuse, `--`,
    bundled short flags (-xv), a second ID."""
    out = defaults()
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        opt = _BY_FLAG.get(name)
        if opt is None:
            if arg.startswith("-") or out[LAB_ID] is not None:
                return None
            out[LAB_ID] = arg
            i += 1
            continue
        if not (opt.early if accept is None else opt.dest in accept):
            return None
        if not opt.takes_value:
            if eq:
                return None  # --json=1: typer's error to give
            out[opt.dest] = True
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args):
                return None  # a missing value: typer says so
            value = args[i + 1]
            i += 1
        i += 1
        if opt.number_min is not None:
            try:
                number = float(value)
            except ValueError:
                return None
            if math.isnan(number) or number < opt.number_min:
                return None
            value = number
        if opt.repeatable:
            out[opt.dest].append(value)
        else:
            out[opt.dest] = value  # given twice: the last one wins, as in typer
    return out
