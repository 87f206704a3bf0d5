"""Timestamps and dates in one place: UTC instants for records, the learner's
local date for anything calendar-like (cadence weeks, start dates)."""

from __future__ import annotations

from datetime import date, datetime, timezone

from roadmap_cli.errors import UserError


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def local_today() -> date:
    return datetime.now().astimezone().date()


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
        except ValueError:
            raise UserError(f"invalid {what} {text!r}: expected YYYY-MM-DD") from None
    if not allow_future and result > local_today():
        raise UserError(f"{what} {result.isoformat()} is in the future")
    return result
