"""The curriculum's shape: pydantic models for `curriculum.yaml` (format 1).

Every model forbids unknown keys (a typo is an error, not silently ignored)
and is frozen (the loaded curriculum is shared and cached; nobody edits it).
Cross-references (milestone -> stage, reading -> stage, ...) are checked in
`roadmap_cli.curriculum.checks`, where each problem keeps its YAML location.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Literal, Optional

from pydantic import Field

from roadmap_cli.curriculum.base import Text, _Model
from roadmap_cli.curriculum.quiz_models import Question, Quiz
from roadmap_cli.errors import NotFoundError, UserError

FORMAT_VERSION = 1

# Stable ids are lower-case kebab-case: they end up in the database and in
# lab specs, so they must survive renames of the human-readable titles.
ID_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
ARXIV_PATTERN = r"^\d{4}\.\d{4,5}$"


class Resource(_Model):
    """A recommended resource of a stage; `reading` links to the reading list."""

    title: Text
    kind: str = Field(min_length=1)
    url: Optional[str] = None
    reading: Optional[str] = None


class Topic(_Model):
    id: str = Field(pattern=ID_PATTERN)
    title: Text
    terms: list[Text] = []
    formula: Optional[str] = None


class LabPartRef(_Model):
    """A lab part whose passing grade proves a build checkpoint."""

    lab: str = Field(pattern=ID_PATTERN)
    part: str = Field(pattern=ID_PATTERN)


class Checkpoint(_Model):
    id: str = Field(pattern=ID_PATTERN)
    kind: Literal["explain", "build"]
    text: Text
    proved_by: list[LabPartRef] = []


class Stage(_Model):
    number: int = Field(ge=1)
    id: str = Field(pattern=ID_PATTERN)
    title: Text
    goal: Text
    planned_weeks: int = Field(ge=1)
    resources: list[Resource] = []
    topics: list[Topic] = []
    checkpoints: list[Checkpoint] = []


class Milestone(_Model):
    id: str = Field(pattern=ID_PATTERN)
    number: int = Field(ge=1)
    title: Text
    stages: list[int] = Field(min_length=1)
    abilities: list[Text] = []
    note: Optional[Text] = None


class HoursRange(_Model):
    min: float = Field(ge=0)
    max: float = Field(ge=0)


class CadenceTarget(_Model):
    period: Literal["week", "month", "quarter"]
    kind: str = Field(pattern=ID_PATTERN)
    count: int = Field(ge=1)
    text: Optional[Text] = None


class Cadence(_Model):
    targets: list[CadenceTarget] = []
    weekly_hours: HoursRange


class Level(_Model):
    number: int = Field(ge=1)
    title: Text
    description: Text


class Section(_Model):
    """A titled block of a plan or phase: a list of items and/or a note."""

    title: Text
    items: list[Text] = []
    note: Optional[Text] = None


class Phase(_Model):
    """One phase of a long-range plan. Months are as the seed writes them."""

    id: str = Field(pattern=ID_PATTERN)
    number: int = Field(ge=1)
    title: Text
    span: Optional[Text] = None
    start_month: Optional[int] = Field(default=None, ge=0)
    end_month: Optional[int] = Field(default=None, ge=0)
    goal: Optional[Text] = None
    stages: list[int] = []
    sections: list[Section] = []
    project: Optional[Text] = None
    # Checkpoints of this phase's own work (a lab part that proves it), for
    # what the ten stages do not cover. Their ids never look like a stage's
    # (`s3-...`): they are stored in the same table as the stages' ones.
    checkpoints: list[Checkpoint] = []


class FastTrack(_Model):
    months: int = Field(ge=1)
    note: Text


class Plan(_Model):
    """A long-range plan from one seed (000: six phases; 002: four phases)."""

    id: str = Field(pattern=ID_PATTERN)
    source: str
    title: Text
    total_months: Optional[int] = Field(default=None, ge=1)
    sections: list[Section] = []
    phases: list[Phase] = Field(min_length=1)
    final_goal: Optional[Text] = None
    fast_track: Optional[FastTrack] = None
    weekly_hours: Optional[HoursRange] = None
    prerequisites: list[Text] = []


class Reading(_Model):
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field(min_length=1)
    authors: Optional[str] = None
    year: Optional[int] = Field(default=None, ge=1900, le=2100)
    arxiv: Optional[str] = Field(default=None, pattern=ARXIV_PATTERN)
    url: Optional[str] = Field(default=None, pattern=r"^https?://")
    stage: int
    kind: Literal["paper", "system", "book", "article", "course", "video", "docs"]
    # "plan-id/phase-id" for readings that belong to a long-range phase.
    phase: Optional[str] = None


class Curriculum(_Model):
    format_version: int
    title: Text
    summary: Optional[Text] = None
    stages: list[Stage] = Field(min_length=1)
    milestones: list[Milestone] = []
    final_goal: Text
    cadence: Cadence
    levels: list[Level] = []
    plans: list[Plan] = []
    reading_list: list[Reading] = []
    # Quiz questions per checkpoint (quiz_models.py); a top-level list so a
    # checkpoint's entry stays short and its questions can grow freely.
    quizzes: list[Quiz] = []

    # Lookup tables, built on first use. cached_property writes straight into
    # the instance __dict__, which frozen models allow.
    @cached_property
    def _stages_by_number(self) -> dict[int, Stage]:
        return {s.number: s for s in self.stages}

    @cached_property
    def _stages_by_id(self) -> dict[str, Stage]:
        return {s.id: s for s in self.stages}

    @cached_property
    def _checkpoint_index(self) -> dict[str, tuple[Checkpoint, Stage | Phase]]:
        index: dict[str, tuple[Checkpoint, Stage | Phase]] = {c.id: (c, s) for s in self.stages for c in s.checkpoints}
        index.update((c.id, (c, phase)) for _, phase, c in self.phase_checkpoints())
        return index

    @cached_property
    def _quizzes_by_checkpoint(self) -> dict[str, Quiz]:
        return {q.checkpoint: q for q in self.quizzes}

    @cached_property
    def _question_index(self) -> dict[str, tuple[Question, str]]:
        return {question.id: (question, quiz.checkpoint) for quiz in self.quizzes for question in quiz.questions}

    def quiz_for(self, checkpoint_id: str) -> Optional[Quiz]:
        """The checkpoint's quiz, or None when it has no questions."""
        return self._quizzes_by_checkpoint.get(checkpoint_id)

    def question(self, question_id: str) -> tuple[Question, str]:
        """(question, its checkpoint id) by question id."""
        found = self._question_index.get(question_id)
        if found is None:
            raise NotFoundError("quiz question", question_id, self._question_index)
        return found

    def stage(self, ref: str | int) -> Stage:
        """A stage by number (3, "3", "s3", "stage 3") or by id ("build-minigpt")."""
        key = str(ref).strip()
        # "s3" is how checkpoint ids name a stage; "stage 3" how the seeds do
        spelled = re.fullmatch(r"(?:s|stage)[\s-]*(\d+)", key.lower())
        if spelled and int(spelled.group(1)) in self._stages_by_number:
            return self._stages_by_number[int(spelled.group(1))]
        if key.isdigit() and int(key) in self._stages_by_number:
            return self._stages_by_number[int(key)]
        if key in self._stages_by_id:
            return self._stages_by_id[key]
        choices = [s.id for s in self.stages] + [str(s.number) for s in self.stages]
        raise NotFoundError("stage", key, choices)

    def checkpoint(self, checkpoint_id: str) -> Checkpoint:
        found = self._checkpoint_index.get(checkpoint_id)
        if found is None:
            raise NotFoundError("checkpoint", checkpoint_id, self._checkpoint_index)
        return found[0]

    def all_checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint of the stages, stage by stage, in file order (the
        ten-stage plan: its schedule, burn-up and totals count these)."""
        return [c for s in self.stages for c in s.checkpoints]

    def phase_checkpoints(self) -> list[tuple[Plan, Phase, Checkpoint]]:
        """Every checkpoint of a long-range plan's phases, plan by plan, in file order."""
        return [(plan, phase, c) for plan in self.plans for phase in plan.phases for c in phase.checkpoints]

    def stage_of(self, checkpoint_id: str) -> Stage:
        self.checkpoint(checkpoint_id)  # raises NotFoundError with did-you-mean
        owner = self._checkpoint_index[checkpoint_id][1]
        if not isinstance(owner, Stage):
            raise UserError(f"checkpoint {checkpoint_id} belongs to the plan phase {owner.id}, not to a stage")
        return owner

    def phase_of(self, checkpoint_id: str) -> Optional[tuple[Plan, Phase]]:
        """(plan, phase) of a phase checkpoint; None for a stage's."""
        for plan, phase, c in self.phase_checkpoints():
            if c.id == checkpoint_id:
                return plan, phase
        return None

    def checkpoints_proved_by(self, lab: str, part: str) -> list[Checkpoint]:
        """The build checkpoints (of stages and of plan phases) a passing (lab, part) marks complete."""
        every = [*self.all_checkpoints(), *(c for _, _, c in self.phase_checkpoints())]
        return [c for c in every if any(r.lab == lab and r.part == part for r in c.proved_by)]

    def milestone(self, ref: str | int) -> Milestone:
        key = str(ref).strip()
        for m in self.milestones:
            if m.id == key or str(m.number) == key:
                return m
        raise NotFoundError("milestone", key, [m.id for m in self.milestones])

    def plan(self, plan_id: str) -> Plan:
        for p in self.plans:
            if p.id == plan_id:
                return p
        raise NotFoundError("plan", plan_id, [p.id for p in self.plans])

    def readings_for_stage(self, number: int) -> list[Reading]:
        return [r for r in self.reading_list if r.stage == number]

    def cadence_target(self, period: str, kind: str) -> Optional[CadenceTarget]:
        for t in self.cadence.targets:
            if t.period == period and t.kind == kind:
                return t
        return None

    @property
    def total_planned_weeks(self) -> int:
        return sum(s.planned_weeks for s in self.stages)
