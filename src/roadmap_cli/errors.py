"""Domain errors and the exit codes they map to.

Services raise these; the CLI turns them into one line on stderr and an exit
code at exactly one place (`roadmap_cli.cli.main`). Anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

import difflib
from enum import IntEnum
from typing import Iterable


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # a grade ran and some test failed
    USAGE = 2  # the user asked for something that does not exist or is malformed
    STORE = 3  # the database or data home cannot be used
    GRADER = 4  # the grader itself errored or timed out


class RoadmapError(Exception):
    """An error meant for the user: one clear line, no traceback."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, details: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        # Extra lines (e.g. every `file:line:col` problem of a validation run).
        self.details = list(details)


class UserError(RoadmapError):
    exit_code = ExitCode.USAGE


class NotFoundError(UserError):
    """An id the user typed does not exist; carries a did-you-mean."""

    def __init__(self, kind: str, value: str, choices: Iterable[str], *, hint: str | None = None) -> None:
        choices = list(choices)
        close = difflib.get_close_matches(value, choices, n=3, cutoff=0.5)
        if close:
            hint = f"did you mean {', '.join(repr(c) for c in close)}?"
        # `hint` (e.g. "see `roadmap paper list`") helps where no id is close,
        # as with numeric ids: the user still learns where the real ones are.
        super().__init__(f"unknown {kind} {value!r}" + (f" ({hint})" if hint else ""))
        self.suggestions = close


class ValidationError(UserError):
    """A file the user wrote (curriculum, lab spec) has problems at known places."""


class StoreError(RoadmapError):
    exit_code = ExitCode.STORE


class GraderError(RoadmapError):
    exit_code = ExitCode.GRADER
