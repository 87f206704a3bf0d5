"""Chart data from the store, as plain dataclasses: the burn-up of checkpoints
against the plan, study hours per week against the target, grade score per
attempt per lab, and the MiniGPT loss curve.

`roadmap stats` draws them in the terminal (textchart.py); `roadmap report`
draws them as SVG (svg.py). Plain SQL only, like `roadmap status`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Optional

from roadmap_cli.reports.loss_history import LossHistory, minigpt_loss_history, thin

from roadmap_cli.store.values import UNCOUNTED_OUTCOMES  # the grade was cut short: says nothing about the code


@dataclass
class BurnUp:
    start: Optional[str]  # the learner's start date (None: not set, no plan line)
    end: str
    total: int  # checkpoints in the curriculum
    days: list[str] = field(default_factory=list)  # sample days, weekly, oldest first
    done: list[int] = field(default_factory=list)  # checkpoints done by each day
    planned: list[Optional[float]] = field(default_factory=list)  # the plan's expectation by each day


@dataclass
class WeekHours:
    week: str  # ISO week label, 2026-W45
    start: str  # its Monday
    hours: float
    met: Optional[bool]  # reached the weekly minimum (None: no target)


@dataclass
class HoursSeries:
    weeks: list[WeekHours]
    target_min: Optional[float]
    target_max: Optional[float]


@dataclass
class LabGrades:
    lab_id: str
    points: list[tuple[int, float]]  # (attempt number within the lab, score as % of the points gradable)


@dataclass
class Charts:
    burnup: BurnUp
    hours: HoursSeries
    grades: list[LabGrades]
    loss: LossHistory
    part_attempts: int = 0  # counted part attempts (--part, -k, watch) left out of `grades`


def local_day(timestamp: str) -> date:
    """The learner's local date of a stored UTC timestamp."""
    return datetime.fromisoformat(timestamp).astimezone().date()


def planned_done(curriculum, start: date, day: date) -> float:
    """Checkpoints the plan expects done by `day`: stages in order, each over its
    planned_weeks, checkpoints at an even pace within a stage (the same plan as
    `roadmap status`'s schedule line, whose figure is this one rounded down)."""
    weeks = max((day - start).days, 0) / 7
    elapsed, expected = 0.0, 0.0
    for stage in curriculum.stages:
        span = max(stage.planned_weeks, 0)
        if weeks >= elapsed + span:
            expected += len(stage.checkpoints)
        elif weeks > elapsed and span:
            expected += len(stage.checkpoints) * (weeks - elapsed) / span
        elapsed += span
    return expected


def completion_days(store, curriculum) -> dict[str, date]:
    """checkpoint id -> local day it was done, for the curriculum's checkpoints."""
    from roadmap_cli.tracker.progress import completed

    ids = {cp.id for cp in curriculum.all_checkpoints()}
    return {cid: local_day(when) for cid, when in completed(store).items() if cid in ids}


def burnup(store, curriculum, *, start: Optional[date], end: date) -> BurnUp:
    """Checkpoints done vs the plan, one sample a week from the start to `end`.

    Without a start date the curve starts at the first completion and has no
    plan line (`roadmap init --start-date` gives one).
    """
    done_days = sorted(completion_days(store, curriculum).values())
    total = len(curriculum.all_checkpoints())
    first = start or (done_days[0] if done_days else end)
    first = min(first, end)
    days = [first + timedelta(weeks=i) for i in range((end - first).days // 7 + 1)]
    if days[-1] != end:
        days.append(end)
    series = BurnUp(start.isoformat() if start else None, end.isoformat(), total)
    for day in days:
        series.days.append(day.isoformat())
        series.done.append(sum(1 for d in done_days if d <= day))
        series.planned.append(round(planned_done(curriculum, start, day), 2) if start else None)
    return series


def hours_per_week(store, curriculum, *, first: date, last: date) -> HoursSeries:
    """Study hours of every ISO week from the one holding `first` to the one holding `last`."""
    from roadmap_cli.research.cadence import Targets, load_activity
    from roadmap_cli.research.periods import periods_between

    targets = Targets.for_learner(store, curriculum)
    activity = load_activity(store, since=first - timedelta(days=7))
    weeks = []
    for week in periods_between("week", first, last):
        _, hours = activity.in_period(week)
        met = None if targets.hours_min is None else hours >= targets.hours_min
        weeks.append(WeekHours(week.label, week.start.isoformat(), hours, met))
    return HoursSeries(weeks, targets.hours_min, targets.hours_max)


def grade_series(store, *, until: Optional[date] = None) -> list[LabGrades]:
    return _grade_series(store, until=until)[0]


def _grade_series(store, *, until: Optional[date] = None) -> tuple[list[LabGrades], int]:
    """Per lab, the score of each counted whole attempt as a % of the points gradable
    on that attempt's machine, numbered like `roadmap lab history`. A part attempt
    (--part, -k/--test, -x: labs/passing.py) is not plotted: its 15/15 is one part's,
    not the lab's percentage."""
    import sqlalchemy as sa

    from roadmap_cli.labs.passing import is_part_attempt

    with store.connection() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT lab_id, started_at, outcome, score, max_score, parts FROM grade_attempts "
                "WHERE learner = :learner ORDER BY lab_id, id"
            ),
            {"learner": store.learner},
        ).all()
    by_lab: dict[str, list[tuple[int, float]]] = {}
    numbers: dict[str, int] = {}
    part_attempts = 0
    for lab_id, started_at, outcome, score, max_score, parts in rows:
        numbers[lab_id] = numbers.get(lab_id, 0) + 1  # every attempt has a number, counted or not
        if outcome in UNCOUNTED_OUTCOMES or (until and local_day(started_at) > until):
            continue
        if is_part_attempt(parts):
            part_attempts += 1
            continue
        pct = 100.0 * score / max_score if max_score else 0.0
        by_lab.setdefault(lab_id, []).append((numbers[lab_id], round(pct, 1)))
    return [LabGrades(lab, points) for lab, points in sorted(by_lab.items())], part_attempts


def all_charts(
    store, curriculum, *, start: Optional[date], first: date, last: date, loss: Optional[LossHistory] = None
) -> Charts:
    """The four charts for `first`..`last` (the burn-up always runs from the start)."""
    loss = loss if loss is not None else minigpt_loss_history(store)
    loss = LossHistory(loss.source, thin(loss.train), thin(loss.val), loss.problem)
    grades, part_attempts = _grade_series(store, until=last)
    return Charts(
        burnup=burnup(store, curriculum, start=start, end=last),
        hours=hours_per_week(store, curriculum, first=first, last=last),
        grades=grades,
        loss=loss,
        part_attempts=part_attempts,
    )


def parse_parts(text: Optional[str]) -> list[dict]:
    """An attempt's stored `parts` JSON as a list of dicts (never raises on junk)."""
    try:
        parts = json.loads(text or "[]")
    except ValueError:
        return []
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
