"""ISO weeks (incl. week 53), months, quarters, year changes, streaks."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import given, strategies as st

from roadmap_cli.errors import UserError
from roadmap_cli.research.periods import parse_local_date, period_of, periods_back, streaks


@pytest.mark.parametrize(
    "day, label, start, end",
    [
        (date(2020, 12, 31), "2020-W53", date(2020, 12, 28), date(2021, 1, 3)),
        (date(2021, 1, 3), "2020-W53", date(2020, 12, 28), date(2021, 1, 3)),  # a Sunday in January, ISO year 2020
        (date(2021, 1, 4), "2021-W01", date(2021, 1, 4), date(2021, 1, 10)),
        (date(2024, 12, 30), "2025-W01", date(2024, 12, 30), date(2025, 1, 5)),  # a Monday in December, ISO year 2025
        (date(2026, 12, 28), "2026-W53", date(2026, 12, 28), date(2027, 1, 3)),
    ],
)
def test_iso_week_boundaries(day, label, start, end):
    week = period_of("week", day)
    assert (week.label, week.start, week.end) == (label, start, end)
    assert week.next().start == end + timedelta(days=1)
    assert week.previous().end == start - timedelta(days=1)


def test_week_53_follows_week_52_and_precedes_week_1():
    w53 = period_of("week", date(2020, 12, 30))
    assert w53.previous().label == "2020-W52"
    assert w53.next().label == "2021-W01"


@pytest.mark.parametrize(
    "day, label, start, end",
    [
        (date(2024, 2, 29), "2024-02", date(2024, 2, 1), date(2024, 2, 29)),  # leap year
        (date(2023, 2, 28), "2023-02", date(2023, 2, 1), date(2023, 2, 28)),
        (date(2020, 12, 31), "2020-12", date(2020, 12, 1), date(2020, 12, 31)),
        (date(2021, 1, 1), "2021-01", date(2021, 1, 1), date(2021, 1, 31)),
    ],
)
def test_month_boundaries(day, label, start, end):
    month = period_of("month", day)
    assert (month.label, month.start, month.end) == (label, start, end)


@pytest.mark.parametrize(
    "day, label, start, end",
    [
        (date(2020, 12, 31), "2020-Q4", date(2020, 10, 1), date(2020, 12, 31)),
        (date(2021, 1, 1), "2021-Q1", date(2021, 1, 1), date(2021, 3, 31)),
        (date(2021, 3, 31), "2021-Q1", date(2021, 1, 1), date(2021, 3, 31)),
        (date(2021, 4, 1), "2021-Q2", date(2021, 4, 1), date(2021, 6, 30)),
        (date(2021, 9, 30), "2021-Q3", date(2021, 7, 1), date(2021, 9, 30)),
    ],
)
def test_quarter_boundaries(day, label, start, end):
    quarter = period_of("quarter", day)
    assert (quarter.label, quarter.start, quarter.end) == (label, start, end)
    assert quarter.next().start == end + timedelta(days=1)


@given(
    st.dates(min_value=date(1990, 1, 1), max_value=date(2100, 12, 31)), st.sampled_from(["week", "month", "quarter"])
)
def test_periods_tile_the_calendar(day, kind):
    period = period_of(kind, day)
    assert period.contains(day)
    assert period_of(kind, period.start) == period == period_of(kind, period.end)
    assert period.next().start == period.end + timedelta(days=1)
    assert period.previous().next() == period


def test_periods_back_are_consecutive_and_end_with_the_given_day():
    weeks = periods_back("week", date(2021, 1, 10), 3)
    assert [w.label for w in weeks] == ["2020-W52", "2020-W53", "2021-W01"]


def test_unknown_period_kind():
    with pytest.raises(UserError, match="unknown period"):
        period_of("year", date(2021, 1, 1))


# --- streaks ------------------------------------------------------------------------

FIRST = date(2020, 12, 1)


def test_streak_counts_consecutive_weeks_across_week_53():
    met = ["2020-W51", "2020-W52", "2020-W53", "2021-W01"]
    s = streaks("week", met, date(2021, 1, 6), FIRST)  # today is in 2021-W01
    assert (s.current, s.longest, s.longest_end) == (4, 4, "2021-W01")


def test_current_period_not_met_yet_does_not_break_the_streak():
    s = streaks("week", ["2020-W52", "2020-W53"], date(2021, 1, 6), FIRST)
    assert (s.current, s.longest) == (2, 2)


def test_a_missed_past_period_breaks_the_streak():
    met = ["2020-W49", "2020-W50", "2020-W51", "2020-W53"]
    s = streaks("week", met, date(2021, 1, 6), FIRST)
    assert (s.current, s.longest, s.longest_end) == (1, 3, "2020-W51")
    s = streaks("week", met, date(2021, 1, 13), FIRST)  # 2021-W01 was missed too
    assert s.current == 0


def test_month_and_quarter_streaks_across_the_year_change():
    s = streaks("month", ["2020-11", "2020-12", "2021-01"], date(2021, 2, 10), date(2020, 11, 3))
    assert (s.current, s.longest) == (3, 3)
    s = streaks("quarter", ["2020-Q3", "2020-Q4", "2021-Q1"], date(2021, 3, 31), date(2020, 7, 1))
    assert (s.current, s.longest) == (3, 3)


def test_no_activity_no_streak():
    assert streaks("week", [], date(2021, 1, 6), None).current == 0


# --- dates --------------------------------------------------------------------------


def test_future_dates_refused_past_allowed():
    today = date(2026, 12, 2)
    assert parse_local_date("2020-02-29", today=today) == date(2020, 2, 29)
    assert parse_local_date("yesterday", today=today) == date(2026, 12, 1)
    with pytest.raises(UserError, match="in the future"):
        parse_local_date("2026-12-03", today=today)
    with pytest.raises(UserError, match="expected YYYY-MM-DD"):
        parse_local_date("02/12/2026", today=today)
