"""`roadmap cadence`, `cadence_summary` (for `roadmap status`) and the calendar.

The curriculum is a small fake of the same shape as the real one
(`cadence.targets`, `cadence.weekly_hours`), so these tests do not depend on
curriculum.yaml; "today" is pinned.
"""

from __future__ import annotations

from datetime import date, timedelta
from types import SimpleNamespace

import pytest

from roadmap_cli.research.calendar import EMPTY, MET, SHADES, build_calendar, render_calendar, shade

TODAY = date(2021, 1, 6)  # a Wednesday in 2021-W01, just after 2020-W53


def _target(period, kind, count):
    return SimpleNamespace(period=period, kind=kind, count=count)


def fake_curriculum(reading_list=(), stages=()):
    targets = [
        _target("week", "paper", 5),
        _target("week", "reproduction", 1),
        _target("month", "experiment", 1),
        _target("month", "benchmark", 1),
        _target("month", "report", 1),
        _target("quarter", "oss", 1),
        _target("quarter", "blog", 1),
        _target("quarter", "workshop-paper", 1),
    ]
    return SimpleNamespace(
        cadence=SimpleNamespace(targets=targets, weekly_hours=SimpleNamespace(min=10.0, max=15.0)),
        reading_list=list(reading_list),
        stages=list(stages),
    )


@pytest.fixture
def curriculum(monkeypatch):
    from roadmap_cli import context
    from roadmap_cli.research import periods

    cur = fake_curriculum()
    monkeypatch.setattr(context.AppContext, "curriculum", lambda self: cur)
    monkeypatch.setattr(periods, "local_today", lambda: TODAY)
    return cur


@pytest.fixture
def store(roadmap_home):
    from roadmap_cli.store import open_store

    roadmap_home.mkdir(parents=True, exist_ok=True)
    return open_store(roadmap_home)


def _meet_week(store, monday: date, *, papers=5, hours=10.0):
    """Log a week that meets the weekly targets (through the services: fast)."""
    from roadmap_cli.research.entries import EntryInput, log_entry
    from roadmap_cli.research.papers import PaperInput, log_paper

    for i in range(papers):
        log_paper(store, PaperInput(title=f"paper {monday} {i}", read_on=monday + timedelta(days=i % 7)), today=TODAY)
    log_entry(
        store, EntryInput(kind="reproduction", title=f"repro {monday}", on_date=monday + timedelta(days=6)), today=TODAY
    )
    log_entry(store, EntryInput(kind="hours", hours=hours, on_date=monday + timedelta(days=2)), today=TODAY)


def test_week_53_targets_met_and_counted_in_the_right_iso_week(run_cli, curriculum, store):
    _meet_week(store, date(2020, 12, 28))  # 2020-W53 runs to Sunday 2021-01-03
    result = run_cli("cadence", "--at", "2021-01-03", "--json")
    assert result.exit_code == 0, result
    line = result.json()["data"]["line"]
    assert (line["label"], line["start"], line["end"]) == ("2020-W53", "2020-12-28", "2021-01-03")
    assert {k["kind"]: (k["done"], k["target"]) for k in line["kinds"]} == {"paper": (5, 5), "reproduction": (1, 1)}
    assert line["hours"] == {"done": 10.0, "min": 10.0, "max": 15.0}
    assert line["met"] is True
    this_week = run_cli("cadence", "--json").json()["data"]["line"]
    assert this_week["label"] == "2021-W01" and this_week["kinds"][0]["done"] == 0 and this_week["met"] is False


def test_short_on_hours_or_papers_is_not_met(run_cli, curriculum, store):
    _meet_week(store, date(2020, 12, 21), hours=9.5)
    _meet_week(store, date(2020, 12, 28), papers=4)
    assert run_cli("cadence", "--at", "2020-12-23", "--json").json()["data"]["line"]["met"] is False
    assert run_cli("cadence", "--at", "2020-12-30", "--json").json()["data"]["line"]["met"] is False


def test_streaks_current_and_longest(run_cli, curriculum, store):
    for monday in (date(2020, 11, 30), date(2020, 12, 7)):  # W49, W50 met
        _meet_week(store, monday)
    for monday in (date(2020, 12, 21), date(2020, 12, 28)):  # W51 missed; W52, W53 met
        _meet_week(store, monday)
    streak = run_cli("cadence", "--json").json()["data"]["streak"]
    # Today is in 2021-W01 with nothing yet: the run W52-W53 still counts.
    assert streak == {"period": "week", "current": 2, "longest": 2, "longest_end": "2020-W50"}


def test_month_and_quarter_periods(run_cli, curriculum):
    run_cli("log", "experiment", "kv cache sweep", "--date", "2020-12-31")
    run_cli("log", "benchmark", "matmul vs cublas", "--date", "2020-12-01")
    run_cli("log", "report", "what I learned", "--date", "2021-01-01")  # next month, next quarter
    run_cli("log", "oss", "tiny-vllm", "--date", "2020-10-01")
    month = run_cli("cadence", "--month", "--at", "2020-12-15", "--json").json()["data"]
    assert month["line"]["label"] == "2020-12"
    assert {k["kind"]: k["done"] for k in month["line"]["kinds"]} == {"experiment": 1, "benchmark": 1, "report": 0}
    assert month["line"]["met"] is False and month["streak"]["period"] == "month"
    quarter = run_cli("cadence", "--quarter", "--at", "2020-11-11", "--json").json()["data"]["line"]
    assert quarter["label"] == "2020-Q4" and (quarter["start"], quarter["end"]) == ("2020-10-01", "2020-12-31")
    assert {k["kind"]: k["done"] for k in quarter["kinds"]} == {"oss": 1, "blog": 0, "workshop-paper": 0}
    assert quarter["other"] == {"benchmark": 1, "experiment": 1}
    q1 = run_cli("cadence", "--quarter", "--json").json()["data"]["line"]
    assert q1["label"] == "2021-Q1" and q1["other"] == {"report": 1}


def test_cadence_refuses_two_periods_and_future_at(run_cli, curriculum):
    assert "choose one of" in run_cli("cadence", "--week", "--month").stderr
    future = run_cli("cadence", "--at", "2021-02-01")
    assert future.exit_code == 2 and "in the future" in future.stderr


def test_cadence_for_people_shows_lines_streak_and_calendar(run_cli, curriculum, store):
    _meet_week(store, date(2020, 12, 28))
    out = run_cli("cadence", "--at", "2021-01-01").stdout
    assert "2020-W53" in out and "all targets met" in out
    assert "paper" in out and "5/5" in out and "streak: 1 week(s)" in out
    assert "Mon " in out and MET in out and "less" in out


def test_cadence_summary_for_status(store, curriculum):
    from roadmap_cli.research import cadence_summary
    from roadmap_cli.research.entries import EntryInput, log_entry
    from roadmap_cli.research.papers import PaperInput, log_paper

    for i in range(3):
        log_paper(
            store, PaperInput(title=f"p{i}", read_on=TODAY - timedelta(days=2 * i)), today=TODAY
        )  # 6th, 4th: W01; 2nd: W53
    log_paper(store, PaperInput(title="unread", status="to-read"), today=TODAY)
    log_entry(store, EntryInput(kind="hours", on_date=TODAY, hours=2.5), today=TODAY)
    summary = cadence_summary(store, curriculum, TODAY)
    assert summary["week"] == "2021-W01" and summary["start"] == "2021-01-04"
    assert summary["kinds"] == {"paper": {"done": 2, "target": 5}, "reproduction": {"done": 0, "target": 1}}
    assert summary["hours"] == {"done": 2.5, "min": 10.0, "max": 15.0}
    assert summary["met"] is False and summary["streak"] == 0


def test_cadence_summary_streak_counts_finished_weeks(store, curriculum):
    from roadmap_cli.research import cadence_summary

    _meet_week(store, date(2020, 12, 21))
    _meet_week(store, date(2020, 12, 28))
    assert cadence_summary(store, curriculum, TODAY)["streak"] == 2
    assert cadence_summary(store, curriculum, TODAY + timedelta(days=7))["streak"] == 0  # W01 was missed


def test_cadence_summary_widens_its_window_for_a_long_streak(store, curriculum):
    from roadmap_cli.research import cadence_summary

    first = date(2020, 12, 28) - timedelta(weeks=29)
    for n in range(30):  # 30 weeks in a row, longer than the first 12-week window
        _meet_week(store, first + timedelta(weeks=n))
    assert cadence_summary(store, curriculum, TODAY)["streak"] == 30


def test_cadence_without_targets_has_nothing_to_meet(store):
    from roadmap_cli.research import cadence_summary

    summary = cadence_summary(store, SimpleNamespace(), TODAY)
    assert summary["kinds"] == {} and summary["met"] is None


# --- the calendar -----------------------------------------------------------------


def test_shades():
    assert [shade(n) for n in (None, 0, 1, 2, 3, 4, 5, 40)] == [
        " ",
        EMPTY,
        *SHADES[:2],
        SHADES[2],
        SHADES[2],
        SHADES[3],
        SHADES[3],
    ]


def test_calendar_grid_weeks_days_and_future_blank():
    end = date(2021, 1, 6)  # Wednesday
    daily = {date(2021, 1, 4): 1, date(2021, 1, 6): 7, date(2020, 1, 13): 2, date(2020, 1, 12): 3}
    cal = build_calendar(daily, end=end, weeks=52, met_weeks={"2020-W53", "2020-W03"})
    weeks = cal["weeks"]
    assert len(weeks) == 52
    assert weeks[-1]["label"] == "2021-W01" and weeks[-2]["label"] == "2020-W53"
    assert weeks[0]["start"] == date(2020, 1, 13)  # 51 weeks before 2021-01-04; 2020-01-12 is outside
    assert weeks[-1]["days"] == [1, 0, 7, None, None, None, None]
    assert (cal["total"], cal["active_days"], cal["weeks_met"]) == (10, 3, 2)

    lines = render_calendar(cal)
    assert len(lines) == 11  # months, 7 weekdays, met, legend, totals
    assert lines[-1].strip() == "10 logged on 3 days; 2 of 52 weeks met every target"
    mon, wed, thu, met = lines[1], lines[3], lines[4], lines[8]
    assert mon.startswith("Mon ") and lines[2].startswith("    ") and wed.startswith("Wed ")
    assert mon[4:] == SHADES[1] + EMPTY * 50 + SHADES[0]
    assert wed[-1] == SHADES[3]
    assert len(thu) == 4 + 51  # today's week stops at today: Thursday onwards is blank
    assert met[4] == MET and met[-1] == MET and len(met) == 4 + 51
    months = lines[0]
    # Columns: 2020-W03 (Jan 13), W04, W05 (Jan 27 - Feb 2: holds Feb 1) -> "Feb" starts in column 2.
    assert months[4:6] == "  " and months[6:9] == "Feb"
    assert "Jan" in months and months.index("Jan") > months.index("Dec")


def test_calendar_month_labels_sit_on_the_week_holding_the_first():
    cal = build_calendar({}, end=date(2021, 1, 6), weeks=52)
    months = render_calendar(cal)[0]
    for col, week in enumerate(cal["weeks"]):
        days = [week["start"] + timedelta(days=d) for d in range(7)]
        first = next((d for d in days if d.day == 1), None)
        if first is not None and months[4 + col : 4 + col + 3].strip():
            assert months[4 + col : 4 + col + 3] == first.strftime("%b")


# --- smoke: the real curriculum -------------------------------------------------------


def test_smoke_real_curriculum_targets_and_reading_list(run_cli):
    """The shipped curriculum.yaml drives `cadence` and `paper suggest` (shape only)."""
    line = _data_of(run_cli("cadence", "--json"))["line"]
    targets = {k["kind"]: k["target"] for k in line["kinds"]}
    assert targets == {"paper": 5, "reproduction": 1}
    assert (line["hours"]["min"], line["hours"]["max"]) == (10, 15)
    month = _data_of(run_cli("cadence", "--month", "--json"))["line"]
    assert {k["kind"] for k in month["kinds"]} == {"experiment", "benchmark", "report"}
    quarter = _data_of(run_cli("cadence", "--quarter", "--json"))["line"]
    assert {k["kind"] for k in quarter["kinds"]} == {"oss", "blog", "workshop-paper"}
    suggestions = _data_of(run_cli("paper", "suggest", "--json"))
    assert suggestions["current_stage"] == 1 and suggestions["suggestions"][0]["stage"] == 1


def _data_of(result):
    assert result.exit_code == 0, result
    return result.json()["data"]


def test_calendar_totals_say_one_day_not_one_days():
    cal = build_calendar({date(2021, 1, 4): 5}, end=date(2021, 1, 6), weeks=52, met_weeks=set())
    assert render_calendar(cal)[-1].strip() == "5 logged on 1 day; 0 of 52 weeks met every target"
