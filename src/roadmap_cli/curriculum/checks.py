"""Checks that a schema cannot express: unique ids, references that resolve,
ranges that make sense, and (as warnings) labs that do not exist yet.

Each problem is a `(loc, message)` pair where `loc` is the path to the YAML
node it is about, e.g. `("stages", 1, "checkpoints", 0, "id")`, the same
shape as a pydantic error's `loc`, so the loader maps both to file:line:col.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional

from roadmap_cli.curriculum.models import FORMAT_VERSION, Curriculum

Loc = tuple
Problem = tuple[Loc, str]


def check_format_version(data: dict) -> Optional[Problem]:
    """A file written for another format is refused before anything else: its
    other 'errors' would only be noise."""
    if "format_version" not in data:
        return None  # the schema reports it as missing
    value = data["format_version"]
    if value != FORMAT_VERSION or isinstance(value, bool):
        return (
            ("format_version",),
            f"unsupported format_version {value!r}: this version of roadmap reads format_version {FORMAT_VERSION}",
        )
    return None


def _duplicates(items: Iterable[tuple[Loc, object]], what: str) -> list[Problem]:
    """Report every repeat of a value after its first occurrence."""
    seen: dict[object, Loc] = {}
    problems = []
    for loc, value in items:
        if value in seen:
            first = seen[value]
            problems.append((loc, f"duplicate {what} {value!r} (first used at {dotted(first)})"))
        else:
            seen[value] = loc
    return problems


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# A stage's checkpoint ids start with its number (`s3-build-...`); a plan
# phase's must not look like one (both live in the same progress table).
STAGE_CHECKPOINT_ID = re.compile(r"^s\d+-")


def _every_checkpoint(cur: Curriculum):
    """(YAML location, checkpoint) for every checkpoint: the stages', then the plan phases'."""
    for i, stage in enumerate(cur.stages):
        for j, c in enumerate(stage.checkpoints):
            yield ("stages", i, "checkpoints", j), c
    for i, plan in enumerate(cur.plans):
        for j, phase in enumerate(plan.phases):
            for k, c in enumerate(phase.checkpoints):
                yield ("plans", i, "phases", j, "checkpoints", k), c


def check_references(cur: Curriculum) -> list[Problem]:
    """All semantic errors of a schema-valid curriculum, in file order."""
    problems: list[Problem] = []
    stage_numbers = {s.number for s in cur.stages}
    reading_ids = {r.id for r in cur.reading_list}
    phase_refs = {f"{p.id}/{ph.id}" for p in cur.plans for ph in p.phases}

    # Stages: unique numbers and ids, in increasing order.
    problems += _duplicates(((("stages", i, "number"), s.number) for i, s in enumerate(cur.stages)), "stage number")
    problems += _duplicates(((("stages", i, "id"), s.id) for i, s in enumerate(cur.stages)), "stage id")
    earlier: set[int] = set()
    for i, stage in enumerate(cur.stages):
        # (a repeated number is already reported as a duplicate)
        if earlier and stage.number not in earlier and stage.number < max(earlier):
            problems.append((("stages", i, "number"), "stages must be listed in increasing number order"))
        earlier.add(stage.number)

    # Checkpoints and topics: ids unique across the whole curriculum (the
    # database stores checkpoint ids without their stage).
    problems += _duplicates(((loc + ("id",), c.id) for loc, c in _every_checkpoint(cur)), "checkpoint id")
    problems += _duplicates(
        ((("stages", i, "topics", j, "id"), t.id) for i, s in enumerate(cur.stages) for j, t in enumerate(s.topics)),
        "topic id",
    )
    for loc, c in _every_checkpoint(cur):
        if loc[0] == "plans" and STAGE_CHECKPOINT_ID.match(c.id):
            problems.append(
                (
                    loc + ("id",),
                    f"phase checkpoint {c.id!r} looks like a stage's (s<N>-...): "
                    "name it after its plan and phase, e.g. m28-p2-build-...",
                )
            )
        if c.kind == "build" and not c.proved_by:
            problems.append((loc + ("kind",), f"build checkpoint {c.id!r} needs proved_by: [{{lab: ..., part: ...}}]"))
        if c.kind == "explain" and c.proved_by:
            problems.append(
                (
                    loc + ("proved_by",),
                    f"explain checkpoint {c.id!r} is self-assessed and cannot have proved_by (use kind: build)",
                )
            )
        problems += _duplicates(
            ((loc + ("proved_by", k), (r.lab, r.part)) for k, r in enumerate(c.proved_by)), "lab part"
        )
    for i, stage in enumerate(cur.stages):
        for j, res in enumerate(stage.resources):
            if res.reading is not None and res.reading not in reading_ids:
                problems.append((("stages", i, "resources", j, "reading"), f"unknown reading {res.reading!r}"))

    # Milestones.
    problems += _duplicates(((("milestones", i, "id"), m.id) for i, m in enumerate(cur.milestones)), "milestone id")
    problems += _duplicates(
        ((("milestones", i, "number"), m.number) for i, m in enumerate(cur.milestones)), "milestone number"
    )
    for i, m in enumerate(cur.milestones):
        for k, n in enumerate(m.stages):
            if n not in stage_numbers:
                problems.append((("milestones", i, "stages", k), f"milestone {m.id!r} refers to unknown stage {n}"))

    # Cadence: one target per (period, kind); a sane hours range.
    problems += _duplicates(
        ((("cadence", "targets", i, "kind"), (t.period, t.kind)) for i, t in enumerate(cur.cadence.targets)),
        "cadence target (period, kind)",
    )
    if cur.cadence.weekly_hours.min > cur.cadence.weekly_hours.max:
        problems.append((("cadence", "weekly_hours"), "weekly_hours: min is larger than max"))

    problems += _duplicates(((("levels", i, "number"), lv.number) for i, lv in enumerate(cur.levels)), "level number")

    # Long-range plans.
    problems += _duplicates(((("plans", i, "id"), p.id) for i, p in enumerate(cur.plans)), "plan id")
    for i, plan in enumerate(cur.plans):
        problems += _duplicates(
            ((("plans", i, "phases", j, "id"), ph.id) for j, ph in enumerate(plan.phases)), "phase id"
        )
        if plan.weekly_hours and plan.weekly_hours.min > plan.weekly_hours.max:
            problems.append((("plans", i, "weekly_hours"), "weekly_hours: min is larger than max"))
        for j, ph in enumerate(plan.phases):
            loc = ("plans", i, "phases", j)
            if ph.start_month is not None and ph.end_month is not None and ph.start_month > ph.end_month:
                problems.append(
                    (
                        loc + ("end_month",),
                        f"phase {ph.id!r} ends (month {ph.end_month}) before it starts (month {ph.start_month})",
                    )
                )
            for k, n in enumerate(ph.stages):
                if n not in stage_numbers:
                    problems.append((loc + ("stages", k), f"phase {ph.id!r} refers to unknown stage {n}"))

    # Reading list.
    problems += _duplicates(((("reading_list", i, "id"), r.id) for i, r in enumerate(cur.reading_list)), "reading id")
    problems += _duplicates(
        ((("reading_list", i, "arxiv"), r.arxiv) for i, r in enumerate(cur.reading_list) if r.arxiv), "arXiv id"
    )
    for i, r in enumerate(cur.reading_list):
        if r.stage not in stage_numbers:
            problems.append((("reading_list", i, "stage"), f"reading {r.id!r} refers to unknown stage {r.stage}"))
        if r.phase is not None and r.phase not in phase_refs:
            problems.append(
                (
                    ("reading_list", i, "phase"),
                    f"reading {r.id!r} refers to unknown phase {r.phase!r} (write plan-id/phase-id)",
                )
            )

    # Quizzes (quiz_checks.py): checkpoints that exist, formulas that evaluate, one right option.
    from roadmap_cli.curriculum.quiz_checks import check_quizzes

    problems += check_quizzes(cur)
    return problems


def _lab_parts(labs_root: Path, lab: str) -> Optional[set[str]]:
    """The part ids of labs/<lab>/lab.yaml; None if the lab does not exist.
    An unreadable spec yields an empty set (its own validator reports why)."""
    spec = labs_root / lab / "lab.yaml"
    if not spec.is_file():
        return None
    from roadmap_cli.formats.yamlsafe import load_yaml_file

    try:
        data = load_yaml_file(spec)
        return {str(p.get("id")) for p in data.get("parts", []) if isinstance(p, dict)}
    except Exception:  # a broken lab.yaml is the lab validator's business
        return set()


def check_lab_links(cur: Curriculum, labs_root: Optional[Path]) -> list[Problem]:
    """Warnings: build checkpoints whose lab or part does not exist (yet).
    Labs arrive after the curriculum, so this never fails validation."""
    warnings: list[Problem] = []
    cache: dict[str, Optional[set[str]]] = {}
    for where, c in _every_checkpoint(cur):
        for k, ref in enumerate(c.proved_by):
            if ref.lab not in cache:
                cache[ref.lab] = _lab_parts(labs_root, ref.lab) if labs_root else None
            parts = cache[ref.lab]
            loc = where + ("proved_by", k)
            if parts is None:
                warnings.append((loc + ("lab",), f"checkpoint {c.id!r}: lab {ref.lab!r} does not exist yet"))
            elif parts and ref.part not in parts:
                warnings.append(
                    (
                        loc + ("part",),
                        f"checkpoint {c.id!r}: lab {ref.lab!r} has no part {ref.part!r} (parts: {', '.join(sorted(parts))})",
                    )
                )
    return warnings
