"""Shared helpers: seeded generators and failure messages in the learner's terms."""

from __future__ import annotations

import math
import random

from roadmap_cli import grading_kit as kit

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")


def rng(name: str) -> random.Random:
    """A generator seeded from the test's name and the run's secret seed."""
    return random.Random(kit.seeded(name))


def expect_equal(call: str, got, expected, section: str) -> None:
    """Exact equality of plain data, with a message that names the call, the
    field that differs, both values and the handout section."""
    if isinstance(expected, dict) and isinstance(got, dict):
        missing = [k for k in expected if k not in got]
        if missing:
            raise AssertionError(f"{call} returned no {missing[0]!r} (README.md, section \"{section}\")")
        for key, want in expected.items():
            have = got[key]
            same = math.isclose(have, want, rel_tol=1e-12, abs_tol=1e-12) if isinstance(want, float) \
                and isinstance(have, (int, float)) else have == want
            if not same:
                raise AssertionError(f"{call}: {key} = {have!r}, expected {want!r} "
                                     f"(README.md, section \"{section}\")")
        return
    if isinstance(expected, float) and isinstance(got, (int, float)):
        if not math.isclose(got, expected, rel_tol=1e-12, abs_tol=1e-12):
            raise AssertionError(f"{call} = {got!r}, expected {expected!r} (README.md, section \"{section}\")")
        return
    if got != expected:
        raise AssertionError(f"{call} = {got!r}, expected {expected!r} (README.md, section \"{section}\")")
