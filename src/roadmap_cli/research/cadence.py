"""Targets vs what was logged, per ISO week / month / quarter, with streaks.

What counts, and when:
- a paper with status read or reproduced counts as one `paper` on its read_on date;
- every cadence entry counts as one of its kind on its on_date; `hours`
  entries add their hours to the week's study time.
A week meets its targets when every weekly target count is reached *and* the
study hours reach the weekly minimum (the curriculum's, or the learner's own
`roadmap init --weekly-hours`); a month or quarter when
every target of that period is reached. A period with no targets at all has
nothing to meet, and no streak.

All numbers come from two GROUP BY queries (per day and kind), so this stays
cheap for `roadmap status` whatever the size of the log.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from typing import Optional

from roadmap_cli.research.periods import PERIOD_KINDS, Period, period_of, streaks


@dataclass
class Targets:
    """The curriculum's cadence, in a shape that does not depend on its models."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # period -> kind -> count
    hours_min: Optional[float] = None
    hours_max: Optional[float] = None

    @classmethod
    def from_curriculum(cls, curriculum) -> "Targets":
        cadence = getattr(curriculum, "cadence", None)
        targets = cls()
        if cadence is None:
            return targets
        for target in getattr(cadence, "targets", None) or []:
            targets.counts.setdefault(target.period, {})[target.kind] = int(target.count)
        hours = getattr(cadence, "weekly_hours", None)
        if hours is not None:
            targets.hours_min, targets.hours_max = float(hours.min), float(hours.max)
        return targets

    @classmethod
    def for_learner(cls, store, curriculum) -> "Targets":
        """The curriculum's targets, with the weekly hours the learner chose
        (`roadmap init --weekly-hours`) as the week's hours goal."""
        from roadmap_cli.store.settings import get_setting

        targets = cls.from_curriculum(curriculum)
        own = get_setting(store, "weekly_hours")
        if own:
            targets.hours_min = targets.hours_max = float(own)
        return targets

    def for_period(self, kind: str) -> dict[str, int]:
        return self.counts.get(kind, {})

    def has_any(self, kind: str) -> bool:
        """Whether this period kind has a target worth meeting (count or hours above 0)."""
        return any(n > 0 for n in self.for_period(kind).values()) or (kind == "week" and bool(self.hours_min))


def _label(kind: str, day: date) -> str:
    """The period label of `day` without building a Period (hot in streaks)."""
    if kind == "week":
        year, week, _ = day.isocalendar()
        return f"{year}-W{week:02d}"
    if kind == "month":
        return f"{day.year}-{day.month:02d}"
    return f"{day.year}-Q{(day.month - 1) // 3 + 1}"


@dataclass
class Activity:
    """Per-day counts: items[day][kind] and hours[day]."""

    items: dict[date, dict[str, int]]
    hours: dict[date, float]

    @property
    def first_day(self) -> Optional[date]:
        days = list(self.items) + list(self.hours)
        return min(days) if days else None

    def in_period(self, period: Period) -> tuple[dict[str, int], float]:
        """(counts per kind, hours) logged within `period`."""
        counts, hours = self._buckets(period.kind).get(period.label, ({}, 0.0))
        return dict(counts), round(hours, 2)

    def _buckets(self, kind: str) -> dict[str, tuple[dict[str, int], float]]:
        # One pass over the days per period kind, cached: streaks look at
        # every period since the first activity.
        cache = self.__dict__.setdefault("_bucket_cache", {})
        if kind not in cache:
            buckets: dict[str, tuple[dict[str, int], float]] = {}
            for day in set(self.items) | set(self.hours):
                label = _label(kind, day)
                counts, hours = buckets.get(label, ({}, 0.0))
                for k, n in self.items.get(day, {}).items():
                    counts[k] = counts.get(k, 0) + n
                buckets[label] = (counts, hours + self.hours.get(day, 0.0))
            cache[kind] = buckets
        return cache[kind]

    def per_day_total(self) -> dict[date, int]:
        """Logged things per day (papers read + entries, an hours entry counts once)."""
        totals: dict[date, int] = defaultdict(int)
        for day, kinds in self.items.items():
            totals[day] += sum(kinds.values())
        return dict(totals)


def load_activity(store, *, since: Optional[date] = None) -> Activity:
    from sqlalchemy import text

    params = {"since": since.isoformat() if since else "0000-00-00", "learner": store.learner}
    items: dict[date, dict[str, int]] = defaultdict(dict)
    hours: dict[date, float] = {}
    with store.engine.connect() as conn:
        papers = conn.execute(
            text(
                "SELECT read_on, COUNT(*) FROM papers WHERE status IN ('read', 'reproduced') "
                "AND read_on IS NOT NULL AND read_on >= :since AND learner = :learner GROUP BY read_on"
            ),
            params,
        ).all()
        entries = conn.execute(
            text(
                "SELECT on_date, kind, COUNT(*), COALESCE(SUM(hours), 0) FROM cadence_entries "
                "WHERE on_date >= :since AND learner = :learner GROUP BY on_date, kind"
            ),
            params,
        ).all()
        conn.rollback()
    for day, n in papers:
        items[date.fromisoformat(day)]["paper"] = n
    for day, kind, n, h in entries:
        d = date.fromisoformat(day)
        items[d][kind] = items[d].get(kind, 0) + n
        if kind == "hours":
            hours[d] = hours.get(d, 0.0) + float(h)
    return Activity(dict(items), hours)


def period_line(period: Period, activity: Activity, targets: Targets) -> dict:
    """Targets vs done for one period, and whether it met every target."""
    done, hours = activity.in_period(period)
    kinds = [
        {"kind": kind, "done": done.get(kind, 0), "target": count, "met": done.get(kind, 0) >= count}
        for kind, count in targets.for_period(period.kind).items()
    ]
    line = {
        "period": period.kind,
        "label": period.label,
        "start": period.start,
        "end": period.end,
        "kinds": kinds,
        "hours": {"done": hours, "min": None, "max": None},
    }
    met = all(k["met"] for k in kinds)
    if period.kind == "week" and targets.hours_min is not None:
        line["hours"].update(min=targets.hours_min, max=targets.hours_max)
        met = met and hours >= targets.hours_min
    line["met"] = met if targets.has_any(period.kind) else None
    # Logged kinds without a target for this period still show what was done.
    line["other"] = {k: n for k, n in sorted(done.items()) if k not in targets.for_period(period.kind) and k != "hours"}
    return line


def _meets(kind: str, counts: dict[str, int], hours: float, targets: Targets) -> bool:
    if any(counts.get(k, 0) < n for k, n in targets.for_period(kind).items()):
        return False
    return kind != "week" or targets.hours_min is None or hours >= targets.hours_min


def met_labels(kind: str, activity: Activity, targets: Targets, today: date) -> list[str]:
    """Labels of the periods up to today that met every target.

    Only periods with some activity can meet a target (a period with no
    activity meets nothing), so this looks at the activity buckets only.
    """
    if not targets.has_any(kind):
        return []
    last = period_of(kind, today).label
    return sorted(
        label
        for label, (counts, hours) in activity._buckets(kind).items()
        if label <= last and _meets(kind, counts, hours, targets)
    )


def cadence_report(store, curriculum, *, period: str = "week", at: date, today: date, weeks: int = 52) -> dict:
    """Everything `roadmap cadence` shows: the period's line, the streaks, the calendar."""
    from roadmap_cli.research.calendar import build_calendar

    if period not in PERIOD_KINDS:
        from roadmap_cli.errors import UserError

        raise UserError(f"unknown period {period!r} (choose week, month or quarter)")
    targets = Targets.for_learner(store, curriculum)
    activity = load_activity(store)
    chosen = period_of(period, at)
    met = met_labels(period, activity, targets, max(at, today))
    streak = streaks(period, met, at, activity.first_day)
    weekly_met = set(met) if period == "week" else set(met_labels("week", activity, targets, at))
    calendar = build_calendar(activity.per_day_total(), end=at, weeks=weeks, met_weeks=weekly_met)
    return {
        "at": at,
        "line": period_line(chosen, activity, targets),
        "streak": {
            "period": period,
            "current": streak.current,
            "longest": streak.longest,
            "longest_end": streak.longest_end,
        },
        "calendar": calendar,
    }


def cadence_summary(store, curriculum, today: date) -> dict:
    """This week's line for `roadmap status`: targets vs done, hours, streak.

    Cheap on a long log: it reads only the last weeks' activity (by the
    date indexes), widening the window only while the current streak reaches
    back to its start. The longest streak is `roadmap cadence`'s business.
    """
    from datetime import timedelta

    targets = Targets.for_learner(store, curriculum)
    week = period_of("week", today)
    weeks_back = 12
    while True:
        window_start = period_of("week", today - timedelta(weeks=weeks_back))
        activity = load_activity(store, since=window_start.start)
        streak = streaks("week", met_labels("week", activity, targets, today), today, activity.first_day)
        if streak.current < weeks_back or weeks_back >= 52 * 100:
            break  # the current run starts after the window's first week: it is exact
        weeks_back *= 4
    line = period_line(week, activity, targets)
    return {
        "week": week.label,
        "start": week.start.isoformat(),
        "end": week.end.isoformat(),
        "kinds": {k["kind"]: {"done": k["done"], "target": k["target"]} for k in line["kinds"]},
        "hours": line["hours"],
        "met": line["met"],
        "streak": streak.current,  # in weeks
    }
