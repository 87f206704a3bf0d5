"""Timestamps and dates in one place: UTC instants for records, the learner's
local date for anything calendar-like (cadence weeks, start dates)."""

from __future__ import annotations

from datetime import date, datetime, timezone

from roadmap_cli.errors import UserError


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def local_today() -> date:
    return datetime.now().astimezone().date()


def describe_bad_date(text: str, what: str, exc: ValueError, expected: str) -> str:
    """Why `text` is not a date: a well-formed date that does not exist
    (2026-02-30) is told apart from a wrong format, so nobody is told to use
    YYYY-MM-DD when they did."""
    import re

    if re.fullmatch(r"\s*\d{4}-\d{2}-\d{2}\s*", text):
        return f"invalid {what} {text!r}: no such day ({exc})"
    return f"invalid {what} {text!r}: {expected}"


def parse_date(text: str, *, what: str = "date", allow_future: bool = True) -> date:
    """Parse YYYY-MM-DD (or 'today'/'yesterday'); a clear error otherwise."""
    from datetime import timedelta

    value = text.strip().lower()
    if value == "today":
        result = local_today()
    elif value == "yesterday":
        result = local_today() - timedelta(days=1)
    else:
        try:
            result = date.fromisoformat(value)
        except ValueError as exc:
            raise UserError(describe_bad_date(text, what, exc, "expected YYYY-MM-DD")) from None
    if not allow_future and result > local_today():
        raise UserError(f"{what} {result.isoformat()} is in the future")
    return result
