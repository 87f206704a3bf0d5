"""Checkpoint progress: check, uncheck, notes, and what to do next.

A checkpoint is done when it has a row in `checkpoint_progress`. Explain
checkpoints are checked by the learner; build checkpoints are checked by
`roadmap grade` when a lab part that proves them passes (the learner can
force one, e.g. for work done outside roadmap, and that is recorded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

from roadmap_cli.errors import UserError
from roadmap_cli.formats.timeutil import utc_now_iso


@dataclass
class CheckResult:
    checkpoint_id: str
    completed_at: str
    source: str
    already_done: bool
    note_added: bool


def completed(store) -> dict[str, str]:
    """checkpoint id -> completion timestamp, for every completed checkpoint.

    Plain SQL: this is on `roadmap status`'s start-up path (see settings.py).
    """
    import sqlalchemy as sa

    with store.connection() as conn:
        rows = conn.execute(
            sa.text("SELECT checkpoint_id, completed_at FROM checkpoint_progress WHERE learner = :learner"),
            {"learner": store.learner},
        ).all()
    return {cid: when for cid, when in rows}


def mark_done(session, checkpoint_id: str, source: str, evidence: Optional[str] = None) -> tuple[str, bool]:
    """`mark_done_sql` inside an ORM session's transaction."""
    from roadmap_cli.store.sql import AlchemySql

    return mark_done_sql(
        AlchemySql(session.connection()), session.info["store"].learner, checkpoint_id, source, evidence
    )


def mark_done_sql(
    sql, learner: str, checkpoint_id: str, source: str, evidence: Optional[str] = None
) -> tuple[str, bool]:
    """Insert the completion row unless one exists; return (completed_at, already_done).

    The first completion date is kept: checking again never moves it; an
    evidence link fills an empty one. `sql` is a store/sql.py Sql inside a write
    transaction (plain SQL: `roadmap grade` records without SQLAlchemy, store/lite.py).
    """
    row = sql.rows(
        "SELECT completed_at, evidence, source FROM checkpoint_progress "
        "WHERE checkpoint_id = :cid AND learner = :learner",
        cid=checkpoint_id,
        learner=learner,
    )
    if row:
        completed_at, kept, was = row[0]
        if source.startswith("lab:") and (was or "").startswith("self-graded:"):
            # A cohort worker's verified grade proves what the learner's own grade only claimed (store/roles.py).
            sql.execute(
                "UPDATE checkpoint_progress SET source = :source, evidence = :evidence "
                "WHERE checkpoint_id = :cid AND learner = :learner",
                source=source,
                evidence=evidence,
                cid=checkpoint_id,
                learner=learner,
            )
        elif evidence and not kept:
            sql.execute(
                "UPDATE checkpoint_progress SET evidence = :evidence WHERE checkpoint_id = :cid AND learner = :learner",
                evidence=evidence,
                cid=checkpoint_id,
                learner=learner,
            )
        return completed_at, True
    now = utc_now_iso()
    sql.execute(
        "INSERT INTO checkpoint_progress (checkpoint_id, completed_at, source, evidence, learner) "
        "VALUES (:cid, :now, :source, :evidence, :learner)",
        cid=checkpoint_id,
        now=now,
        source=source,
        evidence=evidence,
        learner=learner,
    )
    return now, False


def check(
    store,
    curriculum,
    checkpoint_id: str,
    *,
    note: Optional[str] = None,
    evidence: Optional[str] = None,
    force: bool = False,
) -> CheckResult:
    """Mark a checkpoint done by the learner (with an optional note/evidence)."""
    from roadmap_cli.store.tables import CheckpointNote

    checkpoint = curriculum.checkpoint(checkpoint_id)  # NotFoundError with did-you-mean
    if checkpoint.kind == "build" and not force:
        labs = ", ".join(f"{ref.lab}/{ref.part}" for ref in checkpoint.proved_by) or "a lab"
        raise UserError(
            f"{checkpoint.id} is a build checkpoint, proved by {labs}: pass it with `roadmap grade` "
            f"(or use --force to record work done elsewhere)"
        )
    from roadmap_cli.store.tables import CheckpointProgress

    source = "self" if checkpoint.kind == "explain" else "self (forced)"

    def write(session):  # run again as a whole if the server reports a conflict (Store.write)
        completed_at, already = mark_done(session, checkpoint.id, source, evidence)
        notes = [note] if note else []
        kept = session.get(CheckpointProgress, (checkpoint.id, store.learner)).evidence
        if evidence and kept != evidence:
            # The first evidence stays on the checkpoint; a new link is kept
            # as a note instead of being dropped.
            notes.append(f"evidence: {evidence}")
        for text in notes:
            session.add(CheckpointNote(checkpoint_id=checkpoint.id, created_at=utc_now_iso(), text=text))
        return CheckResult(checkpoint.id, completed_at, source, already, bool(notes))

    return store.write(write)


def add_note(store, curriculum, checkpoint_id: str, text: str) -> None:
    from roadmap_cli.store.tables import CheckpointNote

    checkpoint = curriculum.checkpoint(checkpoint_id)
    with store.session() as session:
        session.add(CheckpointNote(checkpoint_id=checkpoint.id, created_at=utc_now_iso(), text=text))


def notes_for(store, checkpoint_id: str) -> list[dict]:
    from sqlmodel import select

    from roadmap_cli.store.tables import CheckpointNote

    with store.session() as session:
        rows = session.exec(
            select(CheckpointNote)
            .where(CheckpointNote.checkpoint_id == checkpoint_id, CheckpointNote.learner == store.learner)
            .order_by(CheckpointNote.id)
        ).all()
    return [{"created_at": r.created_at, "text": r.text} for r in rows]


def checkpoint_records(store, checkpoint_ids: list[str]) -> dict[str, dict]:
    """What the learner recorded per checkpoint: {id: {completed_at, source,
    evidence, notes: [{created_at, text}]}} (ids with nothing recorded are absent)."""
    from sqlmodel import select

    from roadmap_cli.store.tables import CheckpointNote, CheckpointProgress

    records: dict[str, dict] = {}
    with store.session() as session:
        mine = CheckpointProgress.learner == store.learner
        for row in session.exec(
            select(CheckpointProgress).where(CheckpointProgress.checkpoint_id.in_(checkpoint_ids), mine)
        ):
            records[row.checkpoint_id] = {
                "completed_at": row.completed_at,
                "source": row.source,
                "evidence": row.evidence,
                "notes": [],
            }
        notes = session.exec(
            select(CheckpointNote)
            .where(CheckpointNote.checkpoint_id.in_(checkpoint_ids), CheckpointNote.learner == store.learner)
            .order_by(CheckpointNote.id)
        )
        for note in notes:
            empty = {"completed_at": None, "source": None, "evidence": None, "notes": []}
            records.setdefault(note.checkpoint_id, empty)["notes"].append(
                {"created_at": note.created_at, "text": note.text}
            )
    return records


def uncheck(store, curriculum, checkpoint_id: str) -> bool:
    """Mark a checkpoint not done; its notes stay (its evidence link becomes
    one). Returns whether it was done."""
    from roadmap_cli.store.tables import CheckpointNote, CheckpointProgress

    checkpoint = curriculum.checkpoint(checkpoint_id)
    scoped = store.scoped_learner  # asked before the session: it holds the learner's lock a new connection waits on
    with store.session() as session:
        row = session.get(CheckpointProgress, (checkpoint.id, store.learner))
        if row is None:
            return False
        if row.source.startswith("lab:") and scoped:
            raise UserError(
                f"{checkpoint.id} was proved by a grade the cohort's server verified ({row.source}): "
                "it is the cohort's record, and only the instructor can undo it"
            )
        if row.evidence:
            session.add(
                CheckpointNote(checkpoint_id=checkpoint.id, created_at=utc_now_iso(), text=f"evidence: {row.evidence}")
            )
        session.delete(row)
    return True


def current_stage(curriculum, done: dict[str, str]):
    """The first stage with an unfinished checkpoint (None when all are done)."""
    for stage in curriculum.stages:
        if any(cp.id not in done for cp in stage.checkpoints):
            return stage
    return None


@dataclass
class NextAction:
    checkpoint_id: str
    stage: Optional[int]  # None for a plan phase's checkpoint
    kind: str
    text: str
    command: str
    extra: dict = field(default_factory=dict)
    phase: Optional[str] = None  # "plan-id/phase-id" for a plan phase's checkpoint
    phase_title: Optional[str] = None


@lru_cache(maxsize=1)
def _shipped_labs() -> frozenset[str]:
    """Ids of the labs this installation ships (a folder with a lab.yaml)."""
    from roadmap_cli.errors import RoadmapError
    from roadmap_cli.paths import labs_root

    try:
        return frozenset(p.parent.name for p in labs_root().glob("*/lab.yaml"))
    except (RoadmapError, OSError):
        return frozenset()


def _command(curriculum, cp, started_labs: frozenset[str] = frozenset()) -> str:
    """The command that advances checkpoint `cp` (`started_labs`: labs with a workspace, which
    `lab start` would refuse to make again)."""
    if cp.kind == "build" and cp.proved_by and cp.proved_by[0].lab in _shipped_labs():
        lab = cp.proved_by[0].lab
        if lab in started_labs:
            return f"roadmap grade {lab}"
        return f"roadmap lab start {lab}  # then: roadmap grade"
    if cp.kind == "build":
        # a curriculum may name a lab that does not exist (yet): the work can
        # only be recorded by hand
        return f"roadmap check {cp.id} --force"
    if curriculum.quiz_for(cp.id) is not None:
        # an explain checkpoint with questions: the quiz tells the learner whether they can
        return f"roadmap quiz {cp.id}  # then: roadmap check {cp.id}"
    return f"roadmap check {cp.id}"


# Plan months against the stages' planned weeks: 52 weeks in 12 months.
_WEEKS_PER_MONTH = 52 / 12


def next_actions(
    curriculum, done: dict[str, str], lang: str, limit: int = 5, started_labs: frozenset[str] = frozenset()
) -> list[NextAction]:
    """The next unfinished checkpoints in curriculum order, each with the command that advances it.

    The stages' checkpoints in their order; a plan phase's own checkpoints (work the ten stages do not
    cover) take their place among them by when the phase starts: its `start_month` against the stages'
    planned weeks (stage N starts after stages 1..N-1's planned_weeks), after the stage work planned from
    the same week. So day one suggests stage 1, not a phase that starts in month 7; a phase that gives no
    start month comes after the stages, as it does in the file.
    """
    order: list[tuple[float, int, NextAction]] = []
    week = 0.0
    for stage in curriculum.stages:
        for cp in stage.checkpoints:
            if cp.id not in done:
                order.append(
                    (
                        week,
                        len(order),
                        NextAction(
                            cp.id, stage.number, cp.kind, cp.text.get(lang), _command(curriculum, cp, started_labs)
                        ),
                    )
                )
        week += stage.planned_weeks
    after_stages = week
    for plan, phase, cp in curriculum.phase_checkpoints():
        if cp.id in done:
            continue
        starts = after_stages if phase.start_month is None else phase.start_month * _WEEKS_PER_MONTH
        order.append(
            (
                starts,
                len(order),
                NextAction(
                    cp.id,
                    None,
                    cp.kind,
                    cp.text.get(lang),
                    _command(curriculum, cp, started_labs),
                    phase=f"{plan.id}/{phase.id}",
                    phase_title=phase.title.get(lang),
                ),
            )
        )
    # A phase starting in the same week as a stage comes after that stage's work (ties: stage work first).
    order.sort(key=lambda item: (item[0] + (1e-9 if item[2].stage is None else 0.0), item[1]))
    return [action for _week, _n, action in order[:limit]]
