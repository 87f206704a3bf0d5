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
    REMOTE = 5  # a remote machine (roadmap remote ...) could not be reached, or failed there
    NETWORK = 6  # a public registry (arXiv, Crossref, DataCite) could not be reached or would not answer


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
        close = _close_matches(value, list(choices))
        if close:
            hint = f"did you mean {', '.join(repr(c) for c in close)}?"
        # `hint` (e.g. "see `roadmap paper list`") helps where no id is close,
        # as with numeric ids: the user still learns where the real ones are.
        super().__init__(f"unknown {kind} {value!r}" + (f" ({hint})" if hint else ""))
        self.suggestions = close


def _close_matches(value: str, choices: list[str]) -> list[str]:
    """Up to 3 choices close to `value`, best first, ignoring case and stray
    spaces (`S1-DRAW-...` finds `s1-draw-...`). A long id typed in part, with
    a typo (`s1-explain-transfomer`), matches on its beginning too."""
    by_key: dict[str, str] = {}
    for choice in choices:
        by_key.setdefault(choice.strip().lower(), choice)
    key = value.strip().lower()
    scored = []
    for candidate in by_key:
        score = difflib.SequenceMatcher(None, key, candidate).ratio()
        if len(key) >= 2 and candidate.startswith(key):
            score = max(score, 0.9)  # the beginning of an id, typed exactly
        elif len(candidate) > len(key) >= 4:
            prefix = difflib.SequenceMatcher(None, key, candidate[: len(key)]).ratio()
            if prefix >= 0.75:
                score = max(score, prefix)
        if score >= 0.5:
            scored.append((-score, candidate))
    return [by_key[k] for _, k in sorted(scored)[:3]]


class ValidationError(UserError):
    """A file the user wrote (curriculum, lab spec) has problems at known places."""


class StoreError(RoadmapError):
    exit_code = ExitCode.STORE


class NetworkError(RoadmapError):
    exit_code = ExitCode.NETWORK


class GraderError(RoadmapError):
    exit_code = ExitCode.GRADER
