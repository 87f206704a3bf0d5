"""Everything one month's or quarter's report holds, as plain dataclasses.

`build_report` is the service behind `roadmap report`: it reads the store
(plain SQL), the curriculum and the lab specs, and returns a `Report` that the
templates (render.py) and `--json` show alike. Dates are the learner's local
dates; a checkpoint counts in the period holding the local day it was done.
Every query reads the current learner's rows only (`store.learner`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import Optional

from roadmap_cli.errors import UserError
from roadmap_cli.reports.series import Charts, WeekHours, all_charts, local_day, parse_parts
from roadmap_cli.research.periods import Period, period_of, periods_between

ITEM_KINDS = ("reproduction", "experiment", "benchmark", "report", "blog", "oss", "workshop-paper")
SAFE_SCHEMES = ("http://", "https://", "file://")


@dataclass
class CheckpointLine:
    id: str
    stage: Optional[int]  # None for a plan phase's checkpoint
    kind: str  # explain | build
    text: str
    day: str
    source: str  # "self" or "lab:<lab>/<part>"
    evidence: Optional[str]
    phase: Optional[str] = None  # "P2 Inference engines" for a plan phase's checkpoint

    @property
    def where(self) -> str:
        """The stage number, or the plan phase, as the report's table shows it."""
        return str(self.stage) if self.stage is not None else (self.phase or "")


@dataclass
class PartLine:
    id: str
    title: str
    status: str  # passed | failed | not-graded-here | ...
    points: float
    max_points: float


@dataclass
class PerfLine:
    name: str
    value: float
    unit: str
    pct_of_baseline: Optional[float]  # the learner's speed as % of the torch baseline's


@dataclass
class LabLine:
    lab_id: str
    title: str
    # The lab by its parts over every counted attempt up to the period's end (labs/passing.py: the one
    # meaning of "passed"): state is passed | passed-on-cpu | partial | in-progress.
    state: str
    state_line: str  # "Passed", "Passed on CPU (1 part needs a CUDA GPU)", "Partial: 2 of 5 parts passed"
    lab_score: float  # best points per passed part, summed, over the parts gradable here
    lab_max_score: float
    parts_open: list[str]  # ids of the parts not passed yet
    # The period's best attempt (a whole attempt before any part attempt, then its score):
    attempt: int  # number within the lab, as `roadmap lab history` shows it
    day: str
    outcome: str  # the attempt's word: passed | passed-on-cpu | part-passed | failed ... (labs/history.py)
    outcome_text: str  # with its scope: "passed-on-cpu (1 part not graded here)", "part-passed (graded capture; ...)"
    part_attempt: bool  # it graded only some parts (--part, -k/--test, -x): never the lab's result
    score: float
    max_score: float
    device: str
    interpret_mode: bool
    sandbox: Optional[str]  # "strong" (behind bubblewrap), "weak" (in-process only), None (before migration 7)
    parts: list[PartLine]
    not_graded_here: list[str]  # parts that need a CUDA GPU, not graded on this attempt's machine
    perf: list[PerfLine]
    attempts_in_period: int


@dataclass
class PaperLine:
    id: int
    title: str
    authors: Optional[str]
    year: Optional[int]
    status: str
    read_on: str
    link: Optional[str]  # http(s) only: anything else is shown as text, never linked
    rating: Optional[int]
    notes: Optional[str]


@dataclass
class EntryLine:
    id: int
    kind: str
    title: str
    on_date: str
    link: Optional[str]
    note: Optional[str]


@dataclass
class HoursLine:
    total: float
    weeks: list[WeekHours]
    weekly_min: Optional[float]
    weekly_max: Optional[float]
    weeks_met: int
    period_min: Optional[float]  # the weekly target spread over the period's days
    period_max: Optional[float]


@dataclass
class TargetLine:
    kind: str
    done: int
    target: int
    met: bool


@dataclass
class Report:
    kind: str  # month | quarter
    label: str  # 2026-11 | 2026-Q4
    start: str
    end: str
    as_of: str  # the last day counted (today, for a period under way)
    curriculum: str
    checkpoints_done_total: int  # the ten stages' checkpoints (the plan's totals)
    checkpoints_total: int
    checkpoints: list[CheckpointLine]  # done in the period: the stages' and the plan phases'
    labs: list[LabLine]
    papers: list[PaperLine]
    entries: dict[str, list[EntryLine]]  # kind -> entries, for every item kind
    hours: HoursLine
    targets: list[TargetLine]
    streaks: dict[str, dict]  # week/month/quarter -> {"current", "longest"}
    calendar: dict
    charts: Charts
    notes: list[str] = field(default_factory=list)
    phase_checkpoints_done_total: int = 0  # the plan phases' own checkpoints (not in the totals above)
    phase_checkpoints_total: int = 0


_MONTH = re.compile(r"(\d{4})-(\d{2})")
_QUARTER = re.compile(r"(\d{4})-[Qq]([1-4])")


def parse_period(month: Optional[str], quarter: Optional[str]) -> Period:
    """`--month YYYY-MM` or `--quarter YYYY-Qn` as a Period; a clear line otherwise."""
    if (month is None) == (quarter is None):
        raise UserError("choose one period: --month YYYY-MM or --quarter YYYY-Qn")
    if month is not None:
        m = _MONTH.fullmatch(month.strip())
        if not m or not 1 <= int(m.group(2)) <= 12 or int(m.group(1)) < 1:
            raise UserError(f"invalid --month {month!r}: expected YYYY-MM, e.g. 2026-11")
        return period_of("month", date(int(m.group(1)), int(m.group(2)), 1))
    q = _QUARTER.fullmatch(quarter.strip())
    if not q or int(q.group(1)) < 1:
        raise UserError(f"invalid --quarter {quarter!r}: expected YYYY-Qn with n from 1 to 4, e.g. 2026-Q4")
    return period_of("quarter", date(int(q.group(1)), 3 * (int(q.group(2)) - 1) + 1, 1))


def safe_link(url: Optional[str]) -> Optional[str]:
    """A link only for http(s)/file URLs: `javascript:` and friends stay text."""
    if url and url.strip().lower().startswith(SAFE_SCHEMES) and not any(c in url for c in "\n\r\t "):
        return url.strip()
    return None


def _paper_link(url: Optional[str], arxiv: Optional[str], doi: Optional[str]) -> Optional[str]:
    if arxiv:
        return f"https://arxiv.org/abs/{arxiv}"
    if doi:
        return f"https://doi.org/{doi}"
    return safe_link(url)


def _checkpoints(store, curriculum, lang: str, period: Period) -> tuple[list[CheckpointLine], int, int]:
    """The checkpoints done in the period (stages' and plan phases'), and how
    many of the stages' and of the phases' were done by its end."""
    import sqlalchemy as sa

    with store.connection() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT checkpoint_id, completed_at, source, evidence FROM checkpoint_progress WHERE learner = :learner"
            ),
            {"learner": store.learner},
        ).all()
    where: dict[str, tuple[Optional[int], Optional[str], object]] = {
        cp.id: (stage.number, None, cp) for stage in curriculum.stages for cp in stage.checkpoints
    }
    where.update(
        (cp.id, (None, f"P{phase.number} {phase.title.get(lang)}", cp))
        for _, phase, cp in curriculum.phase_checkpoints()
    )
    lines, stages_done, phases_done = [], 0, 0
    for cid, when, source, evidence in rows:
        if cid not in where:
            continue  # a checkpoint of another curriculum
        stage, phase, cp = where[cid]
        day = local_day(when)
        if day <= period.end:
            if stage is None:
                phases_done += 1
            else:
                stages_done += 1
        if period.contains(day):
            lines.append(
                CheckpointLine(cid, stage, cp.kind, cp.text.get(lang), day.isoformat(), source, evidence, phase)
            )
    lines.sort(key=lambda c: (c.day, c.stage is None, c.stage or 0, c.id))
    return lines, stages_done, phases_done


def _pct_of_baseline(figure: dict) -> Optional[float]:
    """The learner's speed as % of the baseline's, however the grader recorded it."""
    if isinstance(figure.get("pct_of_baseline"), (int, float)):
        return round(float(figure["pct_of_baseline"]), 1)
    for key, value in figure.items():
        if key.startswith("ratio") and isinstance(value, (int, float)):
            return round(100 * float(value), 1)  # ratio_vs_sdpa: baseline time / learner time
    if figure.get("unit") == "ratio" and isinstance(figure.get("value"), (int, float)):
        return round(100 * float(figure["value"]), 1)
    return None


def _labs(store, lang: str, period: Period) -> list[LabLine]:
    """Per lab graded in the period: its state by parts (every counted attempt to the period's end) and its
    best attempt there (whole attempts first, then score, then newest)."""
    import json

    import sqlalchemy as sa

    from roadmap_cli.labs.device import nvidia_smi_present, uses_triton
    from roadmap_cli.labs.history import outcome_text, outcome_word
    from roadmap_cli.labs.passing import is_part_attempt, lab_verdict, passed_parts, verdict_line
    from roadmap_cli.reports.series import UNCOUNTED_OUTCOMES

    with store.connection() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT id, lab_id, started_at, outcome, score, max_score, parts, perf, device, interpret_mode, sandbox "
                "FROM grade_attempts WHERE learner = :learner ORDER BY lab_id, id"
            ),
            {"learner": store.learner},
        ).all()
    best: dict[str, tuple] = {}
    counts: dict[str, int] = {}
    number: dict[str, int] = {}
    so_far: dict[str, list] = {}  # (outcome, parts) of every attempt up to the period's end
    for row in rows:
        number[row.lab_id] = number.get(row.lab_id, 0) + 1
        day = local_day(row.started_at)
        if day <= period.end:
            so_far.setdefault(row.lab_id, []).append((row.outcome, row.parts))
        if not period.contains(day) or row.outcome in UNCOUNTED_OUTCOMES:
            continue
        counts[row.lab_id] = counts.get(row.lab_id, 0) + 1
        key = (not is_part_attempt(row.parts), row.outcome == "passed", row.score, row.id)
        if row.lab_id not in best or key > best[row.lab_id][0]:
            best[row.lab_id] = (key, number[row.lab_id], day, row)
    specs = _specs(best)
    cuda = None if nvidia_smi_present() else False  # as `roadmap status` counts the score
    lines = []
    for lab_id, (_, attempt, day, row) in best.items():
        spec = specs.get(lab_id)
        part_titles = {p.id: p.title.get(lang) for p in spec.parts} if spec else {}
        parts = [
            PartLine(
                str(p.get("id")),
                part_titles.get(p.get("id"), str(p.get("id"))),
                str(p.get("status")),
                float(p.get("points") or 0),
                float(p.get("max_points") or 0),
            )
            for p in parse_parts(row.parts)
        ]
        try:
            figures = json.loads(row.perf or "[]")
        except ValueError:
            figures = []
        perf = [
            PerfLine(str(f.get("name")), float(f["value"]), str(f.get("unit", "")), _pct_of_baseline(f))
            for f in figures
            if isinstance(f, dict) and isinstance(f.get("value"), (int, float))
        ]
        stored = parse_parts(row.parts)
        done = passed_parts(so_far[lab_id])
        verdict = lab_verdict(spec.parts if spec else [], done, cuda=cuda, n_attempts=len(so_far[lab_id]))
        lines.append(
            LabLine(
                lab_id,
                spec.title.get(lang) if spec else lab_id,
                verdict["state"],
                verdict_line(verdict) if spec else "a lab no longer in this install",
                verdict["best_score"],
                verdict["max_score"],
                verdict["parts_open"],
                attempt,
                day.isoformat(),
                outcome_word(row.outcome, stored),
                outcome_text(row.outcome, stored),
                is_part_attempt(stored),
                float(row.score),
                float(row.max_score),
                row.device,
                # "(Triton interpreter)" only for a lab whose code runs Triton (labs/device.uses_triton)
                bool(row.interpret_mode) and uses_triton(lab_id),
                row.sandbox,
                parts,
                [p.title for p in parts if p.status == "not-graded-here"],
                perf,
                counts[lab_id],
            )
        )
    stage = {s.id: s.stage for s in specs.values()}
    return sorted(lines, key=lambda lab: (stage.get(lab.lab_id, 99), lab.lab_id))


def _specs(lab_ids) -> dict:
    """The lab.yaml of each lab graded in the period (parsing all of them costs
    more than the rest of the report); a lab removed since is shown by its id."""
    from roadmap_cli.errors import RoadmapError
    from roadmap_cli.labs.spec import find_lab

    specs = {}
    for lab_id in lab_ids:
        try:
            specs[lab_id] = find_lab(lab_id)
        except RoadmapError:
            pass
    return specs


def _papers(store, period: Period) -> list[PaperLine]:
    import sqlalchemy as sa

    with store.connection() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT id, title, authors, year, status, read_on, url, arxiv_id, doi, rating, notes FROM papers "
                "WHERE learner = :learner AND status IN ('read', 'reproduced') AND read_on >= :a AND read_on <= :b "
                "ORDER BY read_on, id"
            ),
            {"a": period.start.isoformat(), "b": period.end.isoformat(), "learner": store.learner},
        ).all()
    return [
        PaperLine(
            r.id,
            r.title,
            r.authors,
            r.year,
            r.status,
            r.read_on,
            _paper_link(r.url, r.arxiv_id, r.doi),
            r.rating,
            r.notes,
        )
        for r in rows
    ]


def _entries(store, period: Period) -> dict[str, list[EntryLine]]:
    import sqlalchemy as sa

    with store.connection() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT id, kind, title, on_date, link, note FROM cadence_entries WHERE kind != 'hours' "
                "AND on_date >= :a AND on_date <= :b AND learner = :learner ORDER BY on_date, id"
            ),
            {"a": period.start.isoformat(), "b": period.end.isoformat(), "learner": store.learner},
        ).all()
    by_kind: dict[str, list[EntryLine]] = {k: [] for k in ITEM_KINDS}
    for r in rows:
        by_kind.setdefault(r.kind, []).append(
            EntryLine(r.id, r.kind, r.title or "", r.on_date, safe_link(r.link), r.note)
        )
    return by_kind


def build_report(
    store, curriculum, *, period: Period, lang: str, start_date: Optional[date], today: date, loss=None
) -> Report:
    """The report of `period` as of `today` (a period under way is counted up to today)."""
    from roadmap_cli.research.cadence import Targets, load_activity, met_labels, period_line
    from roadmap_cli.research.calendar import build_calendar
    from roadmap_cli.research.periods import streaks

    if period.start > today:
        raise UserError(f"{period.label} has not started yet (today is {today.isoformat()})")
    as_of = min(period.end, today)
    checkpoints, done_by_end, phase_done_by_end = _checkpoints(store, curriculum, lang, period)
    charts = all_charts(store, curriculum, start=start_date, first=period.start, last=as_of, loss=loss)

    targets = Targets.for_learner(store, curriculum)
    activity = load_activity(store)
    line = period_line(period, activity, targets)
    target_lines = [TargetLine(k["kind"], k["done"], k["target"], k["met"]) for k in line["kinds"]]
    streak_lines = {}
    for kind in ("week", period.kind):
        s = streaks(kind, met_labels(kind, activity, targets, as_of), as_of, activity.first_day)
        streak_lines[kind] = {"current": s.current, "longest": s.longest, "longest_end": s.longest_end}
    n_weeks = len(list(periods_between("week", period.start, as_of)))
    calendar = build_calendar(
        activity.per_day_total(), end=as_of, weeks=n_weeks, met_weeks=met_labels("week", activity, targets, as_of)
    )

    _, total_hours = activity.in_period(Period(period.start, as_of, period.kind, period.label))
    days = (as_of - period.start).days + 1
    weekly_min, weekly_max = targets.hours_min, targets.hours_max
    hours = HoursLine(
        total=round(total_hours, 2),
        weeks=charts.hours.weeks,
        weekly_min=weekly_min,
        weekly_max=weekly_max,
        weeks_met=sum(1 for w in charts.hours.weeks if w.met),
        period_min=None if weekly_min is None else round(weekly_min * days / 7, 1),
        period_max=None if weekly_max is None else round(weekly_max * days / 7, 1),
    )
    notes = []
    if start_date is None:
        notes.append("no start date: the burn-up has no plan line (roadmap init --start-date YYYY-MM-DD)")
    if as_of < period.end:
        notes.append(f"{period.label} is under way: counted up to {as_of.isoformat()}")
    return Report(
        kind=period.kind,
        label=period.label,
        start=period.start.isoformat(),
        end=period.end.isoformat(),
        as_of=as_of.isoformat(),
        curriculum=curriculum.title.get(lang),
        checkpoints_done_total=done_by_end,
        checkpoints_total=len(curriculum.all_checkpoints()),
        phase_checkpoints_done_total=phase_done_by_end,
        phase_checkpoints_total=len(curriculum.phase_checkpoints()),
        checkpoints=checkpoints,
        labs=_labs(store, lang, period),
        papers=_papers(store, period),
        entries=_entries(store, period),
        hours=hours,
        targets=target_lines,
        streaks=streak_lines,
        calendar=calendar,
        charts=charts,
        notes=notes,
    )
