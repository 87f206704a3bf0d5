"""Calendar maths for the cadence: ISO weeks, months, quarters, and streaks.

Weeks are ISO 8601 weeks (Monday to Sunday, numbered by the ISO year, so
2021-01-03 is in 2020-W53 and 2024-12-30 is in 2025-W01). Months and
quarters are calendar ones. All dates are the learner's local dates.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Callable, Iterable, Iterator, Optional

from roadmap_cli.errors import UserError

PERIOD_KINDS = ("week", "month", "quarter")


@dataclass(frozen=True, order=True)
class Period:
    start: date  # first day, inclusive
    end: date  # last day, inclusive
    kind: str  # week | month | quarter
    label: str  # 2020-W53 | 2020-12 | 2020-Q4

    def contains(self, day: date) -> bool:
        return self.start <= day <= self.end

    def next(self) -> "Period":
        return period_of(self.kind, self.end + timedelta(days=1))

    def previous(self) -> "Period":
        return period_of(self.kind, self.start - timedelta(days=1))


def _week(day: date) -> Period:
    year, week, weekday = day.isocalendar()
    start = day - timedelta(days=weekday - 1)
    return Period(start, start + timedelta(days=6), "week", f"{year}-W{week:02d}")


def _month_end(year: int, month: int) -> date:
    first_of_next = date(year + month // 12, month % 12 + 1, 1)
    return first_of_next - timedelta(days=1)


def _month(day: date) -> Period:
    return Period(day.replace(day=1), _month_end(day.year, day.month), "month", f"{day.year}-{day.month:02d}")


def _quarter(day: date) -> Period:
    quarter = (day.month - 1) // 3 + 1
    first_month = 3 * (quarter - 1) + 1
    return Period(
        date(day.year, first_month, 1), _month_end(day.year, first_month + 2), "quarter", f"{day.year}-Q{quarter}"
    )


_BUILDERS: dict[str, Callable[[date], Period]] = {"week": _week, "month": _month, "quarter": _quarter}


def period_of(kind: str, day: date) -> Period:
    """The week, month or quarter that contains `day`."""
    try:
        return _BUILDERS[kind](day)
    except KeyError:
        raise UserError(f"unknown period {kind!r} (choose week, month or quarter)") from None


def periods_back(kind: str, until: date, count: int) -> list[Period]:
    """`count` consecutive periods, oldest first, the last one containing `until`."""
    periods = [period_of(kind, until)]
    while len(periods) < count:
        periods.append(periods[-1].previous())
    return periods[::-1]


def periods_between(kind: str, first: date, last: date) -> Iterator[Period]:
    """Every period from the one holding `first` to the one holding `last`."""
    period = period_of(kind, first)
    while period.start <= last:
        yield period
        period = period.next()


@dataclass(frozen=True)
class Streaks:
    current: int  # consecutive periods meeting every target, up to now
    longest: int
    longest_end: Optional[str]  # label of the last period of the longest run


def streaks(kind: str, met: Iterable[str], today: date, first: Optional[date]) -> Streaks:
    """Current and longest run of consecutive periods whose label is in `met`.

    The period holding `today` is still under way: it extends the current
    streak once it meets its targets, but not meeting them *yet* does not break
    the streak (the run is then counted up to the previous period). `first`
    is the earliest day with any activity (None: nothing logged).
    """
    met = set(met)
    if first is None or not met:
        return Streaks(0, 0, None)
    now = period_of(kind, today)
    longest, longest_end, run = 0, None, 0
    for period in periods_between(kind, min(first, now.start), now.end):
        if period.label in met:
            run += 1
            if run > longest:
                longest, longest_end = run, period.label
        elif period != now:
            run = 0
    # `run` is now the run ending at the current period (or the previous one
    # when the current period has not met its targets yet).
    return Streaks(run, longest, longest_end)


def parse_local_date(text: str, *, today: date, what: str = "date", allow_future: bool = False) -> date:
    """YYYY-MM-DD, `today` or `yesterday`; a future date is refused with a clear line.

    Dates are the learner's local dates; logging something in the past is fine.
    """
    value = text.strip().lower()
    if value == "today":
        result = today
    elif value == "yesterday":
        result = today - timedelta(days=1)
    else:
        try:
            result = date.fromisoformat(value)
        except ValueError as exc:
            from roadmap_cli.formats.timeutil import describe_bad_date

            raise UserError(describe_bad_date(text, what, exc, "expected YYYY-MM-DD, 'today' or 'yesterday'")) from None
    if not allow_future and result > today:
        # the hint fits a date being logged, not one being looked at (--at)
        hint = ": log things once they happen" if what == "date" else ""
        raise UserError(f"{what} {result.isoformat()} is in the future (today is {today.isoformat()}){hint}")
    return result


def local_today() -> date:
    """Today in the learner's local time zone."""
    return datetime.now().astimezone().date()
