"""What a learner narrows a grade to: `roadmap grade -k/--test/-x/-v`.

Its own small module (no pydantic, no lab spec) so the CLI can build one
before the pre-check runs; runner.py turns it into pytest arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class Focus:
    """What a learner narrows a grade to (`roadmap grade -k/--test/-x/-v`)."""

    keyword: Optional[str] = None  # pytest -k expression
    tests: list[str] = field(default_factory=list)  # node ids (or prefixes) relative to tests/
    first_failure: bool = False  # -x: stop at the first failing test
    verbose: bool = False  # full assertion diff and the learner's frames of the traceback

    @property
    def narrows(self) -> bool:
        """True when a part may run only some of its tests: it cannot pass then."""
        return bool(self.keyword or self.tests)


def focus_pytest_args(focus: Optional["Focus"]) -> list[str]:
    """The extra pytest arguments of a focused grade (the test targets are chosen in start())."""
    if focus is None:
        return []
    args = ["-k", focus.keyword] if focus.keyword else []
    if focus.first_failure:
        args.append("-x")
    if focus.verbose:
        args.append("-vv")  # pytest's full assertion diffs ("Use -v to get more diff")
    return args
