"""Failure messages that name the quantity, the expected value, the learner's value
and the README section (issue 10: no bare `assert a == b`)."""

from __future__ import annotations


def section(name: str) -> str:
    return f'README.md, section "{name}"'


def expect(quantity: str, expected, got, where: str, why: str = "") -> None:
    """Fail unless got == expected: '<quantity>: expected X, got Y (why) (README.md, section "...")'."""
    if got != expected:
        reason = f"; {why}" if why else ""
        raise AssertionError(f"{quantity}: expected {expected!r}, got {got!r}{reason} ({section(where)})")


def require(condition: bool, message: str, where: str) -> None:
    """Fail with `message` (which already states expected and actual) unless condition holds."""
    if not condition:
        raise AssertionError(f"{message} ({section(where)})")
