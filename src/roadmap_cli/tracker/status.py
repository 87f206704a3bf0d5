"""The dashboard's data: overall progress, stages, milestones, the schedule,
the plan phases' own checkpoints, labs, this week's cadence and the next actions.

Everything here must stay cheap: `roadmap status` runs in a budget of 1.3x
`import sqlmodel, typer, rich`. Labs and cadence are read with small SQL
aggregates by their own domains; torch/triton are never imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Optional

from roadmap_cli.tracker.progress import NextAction, completed, current_stage, next_actions


@dataclass
class StageLine:
    number: int
    id: str
    title: str
    done: int
    total: int
    state: str  # done | current | upcoming


@dataclass
class MilestoneLine:
    id: str
    number: int
    title: str
    stages: list[int]
    done: int
    total: int
    reached: bool


@dataclass
class PhaseLine:
    """A long-range plan's phase that has checkpoints of its own."""

    plan: str
    id: str
    number: int
    title: str
    span: Optional[str]
    done: int
    total: int


@dataclass
class Schedule:
    start_date: str
    weeks_elapsed: float
    planned_stage: Optional[int]  # the stage the plan expects to be under way now
    actual_stage: Optional[int]
    expected_done: int  # checkpoints the plan expects to be done by now
    done: int
    verdict: str  # ahead | on track | behind | finished | not started


@dataclass
class StatusReport:
    curriculum: str
    lang: str
    done: int
    total: int
    current_stage: Optional[int]
    stages: list[StageLine]
    milestones: list[MilestoneLine]
    schedule: Optional[Schedule]
    labs: Optional[list[dict]]
    cadence: Optional[dict]
    next: list[NextAction]
    notes: list[str] = field(default_factory=list)
    reviews: Optional[dict] = None  # {"due": n, "new": m}: `roadmap review` items due today
    phases: list[PhaseLine] = field(default_factory=list)  # plan phases with checkpoints (not in done/total)


def _schedule(curriculum, done: dict[str, str], start: date, today: date, actual: Optional[int]) -> Schedule:
    """Place today on the plan: each stage takes its planned_weeks in order.

    The plan expects checkpoints to be finished at an even pace within a stage.
    """
    weeks = max((today - start).days, 0) / 7
    elapsed, expected, planned_stage = 0.0, 0.0, None
    for stage in curriculum.stages:
        span = max(stage.planned_weeks, 0)
        if weeks >= elapsed + span:
            expected += len(stage.checkpoints)
        else:
            if planned_stage is None:
                planned_stage = stage.number
                if span:
                    expected += len(stage.checkpoints) * (weeks - elapsed) / span
        elapsed += span
    total = sum(len(s.checkpoints) for s in curriculum.stages)
    n_done = sum(1 for cp in curriculum.all_checkpoints() if cp.id in done)
    expected_done = int(expected)
    if n_done == total:
        verdict = "finished"
    elif today < start:
        verdict = "not started"
    elif n_done >= expected_done + 2:
        verdict = "ahead"
    elif n_done + 2 <= expected_done:
        verdict = "behind"
    else:
        verdict = "on track"
    return Schedule(start.isoformat(), round(weeks, 1), planned_stage, actual, expected_done, n_done, verdict)


def _optional_section(loader, notes: list[str], name: str) -> Any:
    """Labs and cadence come from other domains; a failure there must not take
    the whole dashboard down, but it is reported, not hidden."""
    try:
        return loader()
    except ImportError:
        return None
    except Exception as exc:  # noqa: BLE001 - shown to the user as a note
        notes.append(f"{name} unavailable: {exc}")
        return None


def build_status(store, curriculum, *, lang: str, start_date: Optional[date], today: date) -> StatusReport:
    done = completed(store)
    stage_now = current_stage(curriculum, done)
    stages: list[StageLine] = []
    for stage in curriculum.stages:
        n = sum(1 for cp in stage.checkpoints if cp.id in done)
        total = len(stage.checkpoints)
        state = (
            "done"
            if n == total
            else ("current" if stage_now is not None and stage.number == stage_now.number else "upcoming")
        )
        stages.append(StageLine(stage.number, stage.id, stage.title.get(lang), n, total, state))
    by_number = {s.number: s for s in stages}
    milestones = []
    for m in curriculum.milestones:
        n = sum(by_number[s].done for s in m.stages if s in by_number)
        total = sum(by_number[s].total for s in m.stages if s in by_number)
        milestones.append(
            MilestoneLine(m.id, m.number, m.title.get(lang), list(m.stages), n, total, total > 0 and n == total)
        )

    phases: list[PhaseLine] = []
    for plan in curriculum.plans:
        for phase in plan.phases:
            if phase.checkpoints:
                phases.append(
                    PhaseLine(
                        plan.id,
                        phase.id,
                        phase.number,
                        phase.title.get(lang),
                        phase.span.get(lang) if phase.span else None,
                        sum(1 for cp in phase.checkpoints if cp.id in done),
                        len(phase.checkpoints),
                    )
                )
    notes: list[str] = []

    def labs():
        from roadmap_cli.labs.service import lab_summaries

        return lab_summaries(store)

    def started():
        from roadmap_cli.labs.service import started_labs

        return started_labs(store)

    def cadence():
        from roadmap_cli.research import cadence_summary

        return cadence_summary(store, curriculum, today)

    def reviews():
        from datetime import datetime, timezone

        from roadmap_cli.quiz.review import due_summary  # plain SQL; fsrs is not imported

        return due_summary(store, curriculum, done, datetime.now(timezone.utc))

    total_cps = sum(s.total for s in stages)
    return StatusReport(
        curriculum=curriculum.title.get(lang),
        lang=lang,
        done=sum(s.done for s in stages),
        total=total_cps,
        current_stage=stage_now.number if stage_now else None,
        stages=stages,
        milestones=milestones,
        schedule=_schedule(curriculum, done, start_date, today, stage_now.number if stage_now else None)
        if start_date
        else None,
        labs=_optional_section(labs, notes, "labs"),
        cadence=_optional_section(cadence, notes, "cadence"),
        next=next_actions(
            curriculum, done, lang, limit=3, started_labs=_optional_section(started, notes, "labs") or frozenset()
        ),
        notes=notes,
        reviews=_optional_section(reviews, notes, "reviews"),
        phases=phases,
    )
