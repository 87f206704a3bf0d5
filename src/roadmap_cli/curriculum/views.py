"""The data behind the curriculum commands, in one language.

Each function returns plain dicts/lists (the `--json` payload); the CLI
renders the same data for people, so the two never drift apart.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Optional

from roadmap_cli.curriculum.models import Curriculum, Phase, Plan, Reading, Section, Stage


def _t(text: Any, lang: str) -> Optional[str]:
    return text.get(lang) if text is not None else None


def _section(section: Section, lang: str) -> dict:
    return {
        "title": section.title.get(lang),
        "items": [i.get(lang) for i in section.items],
        "note": _t(section.note, lang),
    }


def _phase(phase: Phase, lang: str) -> dict:
    return {
        "id": phase.id,
        "number": phase.number,
        "title": phase.title.get(lang),
        "span": _t(phase.span, lang),
        "start_month": phase.start_month,
        "end_month": phase.end_month,
        "goal": _t(phase.goal, lang),
        "stages": list(phase.stages),
        "sections": [_section(s, lang) for s in phase.sections],
        "project": _t(phase.project, lang),
        "checkpoints": [
            {
                "id": c.id,
                "kind": c.kind,
                "text": c.text.get(lang),
                "proved_by": [f"{r.lab}/{r.part}" for r in c.proved_by],
            }
            for c in phase.checkpoints
        ],
    }


def plan_view(plan: Plan, lang: str) -> dict:
    return {
        "id": plan.id,
        "source": plan.source,
        "title": plan.title.get(lang),
        "total_months": plan.total_months,
        "sections": [_section(s, lang) for s in plan.sections],
        "phases": [_phase(p, lang) for p in plan.phases],
        "final_goal": _t(plan.final_goal, lang),
        "fast_track": {"months": plan.fast_track.months, "note": plan.fast_track.note.get(lang)}
        if plan.fast_track
        else None,
        "weekly_hours": plan.weekly_hours.model_dump() if plan.weekly_hours else None,
        "prerequisites": [p.get(lang) for p in plan.prerequisites],
    }


def reading_view(r: Reading) -> dict:
    return r.model_dump()


def overview(cur: Curriculum, lang: str, *, path: str) -> dict:
    """`curriculum show`: the whole curriculum at a glance."""
    kinds = Counter(c.kind for c in cur.all_checkpoints())
    return {
        "path": path,
        "format_version": cur.format_version,
        "title": cur.title.get(lang),
        "summary": _t(cur.summary, lang),
        "stages": [
            {
                "number": s.number,
                "id": s.id,
                "title": s.title.get(lang),
                "planned_weeks": s.planned_weeks,
                "topics": len(s.topics),
                "checkpoints": len(s.checkpoints),
                "build_checkpoints": sum(1 for c in s.checkpoints if c.kind == "build"),
                "readings": len(cur.readings_for_stage(s.number)),
            }
            for s in cur.stages
        ],
        "checkpoints": {"total": sum(kinds.values()), "explain": kinds["explain"], "build": kinds["build"]},
        "planned_weeks": cur.total_planned_weeks,
        "milestones": [
            {
                "id": m.id,
                "number": m.number,
                "title": m.title.get(lang),
                "stages": list(m.stages),
                "abilities": [a.get(lang) for a in m.abilities],
                "note": _t(m.note, lang),
            }
            for m in cur.milestones
        ],
        "final_goal": cur.final_goal.get(lang),
        "levels": [
            {"number": lv.number, "title": lv.title.get(lang), "description": lv.description.get(lang)}
            for lv in cur.levels
        ],
        "plans": [plan_view(p, lang) for p in cur.plans],
        "cadence": {
            "weekly_hours": cur.cadence.weekly_hours.model_dump(),
            "targets": [
                {"period": t.period, "kind": t.kind, "count": t.count, "text": _t(t.text, lang)}
                for t in cur.cadence.targets
            ],
        },
        "reading_list": {"total": len(cur.reading_list), "with_arxiv": sum(1 for r in cur.reading_list if r.arxiv)},
    }


def stage_rows(cur: Curriculum, done: Iterable[str], lang: str) -> list[dict]:
    """`stages`: one row per stage with its checkpoint progress."""
    done = set(done)
    rows = []
    for s in cur.stages:
        n_done = sum(1 for c in s.checkpoints if c.id in done)
        rows.append(
            {
                "number": s.number,
                "id": s.id,
                "title": s.title.get(lang),
                "done": n_done,
                "total": len(s.checkpoints),
                "planned_weeks": s.planned_weeks,
            }
        )
    return rows


def stage_detail(cur: Curriculum, stage: Stage, done: Iterable[str], lang: str) -> dict:
    """`stage show`: everything about one stage."""
    done = set(done)
    readings = {r.id: r for r in cur.reading_list}
    return {
        "number": stage.number,
        "id": stage.id,
        "title": stage.title.get(lang),
        "goal": stage.goal.get(lang),
        "planned_weeks": stage.planned_weeks,
        "resources": [
            {
                "title": r.title.get(lang),
                "kind": r.kind,
                "url": r.url or (readings[r.reading].url if r.reading in readings else None),
                "arxiv": readings[r.reading].arxiv if r.reading in readings else None,
                "reading": r.reading,
            }
            for r in stage.resources
        ],
        "topics": [
            {"id": t.id, "title": t.title.get(lang), "terms": [x.get(lang) for x in t.terms], "formula": t.formula}
            for t in stage.topics
        ],
        "checkpoints": [
            {
                "id": c.id,
                "kind": c.kind,
                "text": c.text.get(lang),
                "done": c.id in done,
                "proved_by": [f"{r.lab}/{r.part}" for r in c.proved_by],
            }
            for c in stage.checkpoints
        ],
        "done": sum(1 for c in stage.checkpoints if c.id in done),
        "total": len(stage.checkpoints),
        "milestones": [m.id for m in cur.milestones if stage.number in m.stages],
        "readings": [reading_view(r) for r in cur.readings_for_stage(stage.number)],
    }


def readings(cur: Curriculum, stage: Optional[int] = None, kind: Optional[str] = None) -> list[dict]:
    """`curriculum readings`: the reading list, optionally one stage / kind."""
    if stage is not None:
        cur.stage(stage)  # NotFoundError with did-you-mean for a bad number
    if kind is not None:
        from typing import get_args

        from roadmap_cli.curriculum.models import Reading
        from roadmap_cli.errors import NotFoundError

        kinds = get_args(Reading.model_fields["kind"].annotation)
        if kind not in kinds:  # a typo would otherwise list nothing, silently
            raise NotFoundError("reading kind", kind, kinds, hint=f"choose {', '.join(kinds)}")
    return [
        reading_view(r)
        for r in cur.reading_list
        if (stage is None or r.stage == stage) and (kind is None or r.kind == kind)
    ]
