"""SQLModel classes for the current schema (queries use these).

They mirror the tables the migrations create; `tests/test_store.py` checks the
two agree, so a new column needs both a migration and a field here.
Every table holds a person's rows and carries `learner` (migration 5; filled
from store/learners.current_learner by Store.session when left None).
Timestamps are ISO 8601 strings in UTC; dates (`on_date`, `read_on`) are the
learner's local dates, `YYYY-MM-DD`.
"""

from __future__ import annotations

from typing import Optional

import sqlalchemy as sa
from sqlmodel import Field, SQLModel


class Setting(SQLModel, table=True):
    __tablename__ = "settings"
    key: str = Field(primary_key=True)
    value: str  # JSON-encoded
    learner: Optional[str] = Field(default=None, primary_key=True, sa_column_kwargs={"server_default": "local"})


class CheckpointProgress(SQLModel, table=True):
    __tablename__ = "checkpoint_progress"
    checkpoint_id: str = Field(primary_key=True)
    completed_at: str
    source: str  # "self" or "lab:<lab>/<part>"
    evidence: Optional[str] = None
    learner: Optional[str] = Field(default=None, primary_key=True, sa_column_kwargs={"server_default": "local"})


class CheckpointNote(SQLModel, table=True):
    __tablename__ = "checkpoint_notes"
    id: Optional[int] = Field(default=None, primary_key=True)
    checkpoint_id: str = Field(index=True)
    created_at: str
    text: str
    learner: Optional[str] = Field(
        default=None, index=True, nullable=False, sa_column_kwargs={"server_default": "local"}
    )


class LabWorkspace(SQLModel, table=True):
    __tablename__ = "lab_workspaces"
    __table_args__ = (sa.UniqueConstraint("learner", "path", name="uq_lab_workspaces_learner_path"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    lab_id: str = Field(index=True)
    path: str
    created_at: str
    learner: Optional[str] = Field(
        default=None, index=True, nullable=False, sa_column_kwargs={"server_default": "local"}
    )


class GradeAttempt(SQLModel, table=True):
    __tablename__ = "grade_attempts"
    id: Optional[int] = Field(default=None, primary_key=True)
    lab_id: str = Field(index=True)
    started_at: str
    duration_s: float
    outcome: str  # store/values.py: ATTEMPT_OUTCOMES (and every other enumerated column)
    score: float
    max_score: float
    parts: str  # JSON list
    perf: str  # JSON list
    device: str
    device_capability: Optional[str] = None
    torch_version: Optional[str] = None
    triton_version: Optional[str] = None
    interpret_mode: bool
    commit_sha: Optional[str] = None
    dirty: Optional[bool] = None
    workspace: str
    grader_sha256: str
    message: Optional[str] = None
    # True for an attempt restored by `roadmap import` (migration 4): it was
    # not graded here, so it never unlocks a solution by itself.
    imported: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    learner: Optional[str] = Field(
        default=None, index=True, nullable=False, sa_column_kwargs={"server_default": "local"}
    )
    # "strong": graded behind the OS wall (bubblewrap); "weak": the in-process sandbox only; None: before migration 7.
    sandbox: Optional[str] = None
    # The remote that graded it (`grade --on NAME`, migration 9); None: graded on this machine.
    graded_on: Optional[str] = None
    # True only for an attempt a cohort worker graded and recorded (migration 11): the server vouches for it.
    # Everything else is the learner's own (solo) or self-graded (a cohort learner's machine: device, sandbox and
    # graded_on are their claim).
    verified: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})


class GradeTestResult(SQLModel, table=True):
    __tablename__ = "grade_test_results"
    id: Optional[int] = Field(default=None, primary_key=True)
    attempt_id: int = Field(foreign_key="grade_attempts.id", index=True)
    nodeid: str
    part_id: str
    outcome: str
    duration_s: float
    message: Optional[str] = None
    learner: Optional[str] = Field(
        default=None, index=True, nullable=False, sa_column_kwargs={"server_default": "local"}
    )


class LabHint(SQLModel, table=True):
    __tablename__ = "lab_hints"
    id: Optional[int] = Field(default=None, primary_key=True)
    lab_id: str = Field(index=True)
    hint_index: int
    shown_at: str
    learner: Optional[str] = Field(
        default=None, index=True, nullable=False, sa_column_kwargs={"server_default": "local"}
    )


# The number a learner knows a paper or a log entry by (migration 12): 1..n per
# learner. `id` is the internal key the other tables refer to; no command shows it.
def _learner_number_index(table: str) -> sa.Index:
    return sa.Index(f"uq_{table}_learner_number", "learner", "number", unique=True)


class Paper(SQLModel, table=True):
    __tablename__ = "papers"
    __table_args__ = (_learner_number_index("papers"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    title: str
    title_key: str = Field(index=True)
    authors: Optional[str] = None
    year: Optional[int] = None
    arxiv_id: Optional[str] = Field(default=None, index=True)
    arxiv_version: Optional[int] = None
    doi: Optional[str] = Field(default=None, index=True)
    url: Optional[str] = None
    stage: Optional[int] = None
    status: str
    read_on: Optional[str] = Field(default=None, index=True)
    added_on: str
    rating: Optional[int] = None
    notes: Optional[str] = None
    bibtex_key: Optional[str] = None
    # No index of its own since migration 12: uq_papers_learner_number starts with it.
    learner: Optional[str] = Field(default=None, nullable=False, sa_column_kwargs={"server_default": "local"})
    # Migration 10: metadata fetched from arXiv / Crossref / DataCite (research/fetch.py).
    venue: Optional[str] = None
    abstract: Optional[str] = None
    pdf_url: Optional[str] = None
    metadata_source: Optional[str] = None
    metadata_fetched_on: Optional[str] = None
    # Migration 12: the learner's own number for this paper (research/numbers.py gives it).
    number: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class PaperTag(SQLModel, table=True):
    __tablename__ = "paper_tags"
    paper_id: int = Field(foreign_key="papers.id", primary_key=True)
    tag: str = Field(primary_key=True)
    learner: Optional[str] = Field(
        default=None, index=True, nullable=False, sa_column_kwargs={"server_default": "local"}
    )


class CadenceEntry(SQLModel, table=True):
    __tablename__ = "cadence_entries"
    __table_args__ = (_learner_number_index("cadence_entries"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    kind: str = Field(index=True)
    title: Optional[str] = None
    on_date: str = Field(index=True)
    hours: Optional[float] = None
    stage: Optional[int] = None
    link: Optional[str] = None
    paper_id: Optional[int] = Field(default=None, foreign_key="papers.id")
    lab_id: Optional[str] = None
    note: Optional[str] = None
    created_at: str
    # No index of its own since migration 12: uq_cadence_entries_learner_number starts with it.
    learner: Optional[str] = Field(default=None, nullable=False, sa_column_kwargs={"server_default": "local"})
    # Migration 12: the learner's own number for this entry (`log edit|delete NUMBER`).
    number: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


# Quizzes and spaced review (migration 6; roadmap_cli/quiz). Reads and writes
# go through plain SQL in quiz/records.py; these classes serve export/import.
class QuizAttempt(SQLModel, table=True):
    __tablename__ = "quiz_attempts"
    id: Optional[int] = Field(default=None, primary_key=True)
    learner: Optional[str] = Field(
        default=None, index=True, nullable=False, sa_column_kwargs={"server_default": "local"}
    )
    checkpoint_id: str = Field(index=True)
    taken_at: str
    correct: int
    total: int
    passed: bool
    answers: str  # JSON list


class ReviewCard(SQLModel, table=True):
    __tablename__ = "review_cards"
    learner: Optional[str] = Field(default=None, primary_key=True, sa_column_kwargs={"server_default": "local"})
    item: str = Field(primary_key=True)  # checkpoint:<id> | question:<id>
    card: str  # fsrs.Card JSON
    due: str = Field(index=True)
    reviews: int
    updated_at: str


class ReviewLog(SQLModel, table=True):
    __tablename__ = "review_logs"
    id: Optional[int] = Field(default=None, primary_key=True)
    learner: Optional[str] = Field(
        default=None, index=True, nullable=False, sa_column_kwargs={"server_default": "local"}
    )
    item: str = Field(index=True)
    rating: int
    reviewed_at: str
    source: str  # quiz | review
    due_after: str
