"""The cohort's grading queue as learners use it: `roadmap submit` (a snapshot
of the workspace inserted as a submission; the table's trigger defers the job)
and `roadmap submissions` (each with its place in the queue, its wait and
grade times, its attempt). Also what every queue command checks first: cohort
mode, the instructor, the queue's tables (store/queue.py makes them). The
worker that grades the submissions: grading/queue.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from roadmap_cli.errors import UserError
from roadmap_cli.store.values import SUBMISSION_STATUSES


def require_server(store, command: str) -> None:
    if store.path is not None:
        raise UserError(
            f"`roadmap {command}` needs cohort mode: set DATABASE_URL to the cohort's PostgreSQL "
            "(postgresql+psycopg://user@host/db); this data home uses its own SQLite file"
        )


def instructor(store) -> bool:
    from roadmap_cli.store.roles import session

    with store.connection() as conn:
        return session(conn).instructor


def ensure_queue(store) -> None:
    from roadmap_cli.store.queue import ensure_queue
    from roadmap_cli.store.roles import learner_roles, session

    with store.connection() as conn:
        ensure_queue(
            conn, instructor=session(conn).instructor, learners=lambda: [row["learner"] for row in learner_roles(conn)]
        )


# ---------------------------------------------------------------- submit


def submit(store, lab_id: Optional[str], cwd: Path) -> dict:
    """Snapshot the workspace as a job for the current learner; its id and place in the queue."""
    from roadmap_cli.grading.snapshot import pack
    from roadmap_cli.labs.service import resolve_workspace, start_command
    from roadmap_cli.labs.workspace import head_info
    from roadmap_cli.store.queue import TABLE, VIEW

    require_server(store, "submit")
    spec, path = resolve_workspace(store, lab_id, cwd)
    if not path.is_dir():
        raise UserError(f"workspace {path} is gone: run `{start_command(store.home, spec.id, path)}`")
    snap = pack(path)
    sha, dirty = head_info(path)
    learner = store.learner
    ensure_queue(store)

    def write(sql):
        sid, job_id, at = sql.rows(
            f"INSERT INTO {TABLE} (learner, lab_id, files, size_bytes, file_count, commit_sha, dirty) "
            "VALUES (:learner, :lab, :files, :size, :count, :sha, :dirty) RETURNING id, job_id, submitted_at",
            learner=learner,
            lab=spec.id,
            files=snap.data,
            size=snap.size_bytes,
            count=snap.file_count,
            sha=sha,
            dirty=dirty,
        )[0]
        position = sql.scalar(f"SELECT count(*) FROM {VIEW} WHERE status = 'queued' AND id <= :id", id=sid)
        return sid, job_id, at, position

    sid, job_id, at, position = store.write_sql(write)
    return {
        "submission": int(sid),
        "job": int(job_id),
        "lab": spec.id,
        "learner": learner,
        "position": int(position),
        "submitted_at": at.isoformat(timespec="seconds"),
        "size_bytes": snap.size_bytes,
        "file_count": snap.file_count,
        "commit_sha": sha,
        "dirty": dirty,
    }


# ---------------------------------------------------------------- submissions


def submissions(store, *, everyone: bool = False, limit: int = 50) -> dict:
    from roadmap_cli.store.queue import VIEW, exists

    require_server(store, "submissions")
    learner = store.learner
    if everyone and not instructor(store):
        raise UserError(
            "`roadmap submissions --all` is for the cohort's instructor (the database's owner); "
            f"you are logged in as learner {learner!r}: drop --all to see your own"
        )
    with store.connection() as conn:
        ready = exists(conn)
    if not ready:
        return {"learner": None if everyone else learner, "queue_ready": False, "counts": {}, "submissions": []}

    def read(sql):
        where = "" if everyone else "WHERE s.learner = :me"
        rows = sql.rows(
            "SELECT s.id, s.learner, s.lab_id, s.submitted_at, s.status, s.tries, s.worker, s.device, s.started_at, "
            "s.finished_at, s.attempt_id, s.outcome, s.score, s.max_score, s.message, "
            # the attempt's number in its learner's lab: the one the grade and `lab history` show
            "(SELECT count(*) FROM grade_attempts g WHERE g.lab_id = s.lab_id AND g.learner = s.learner "
            "AND g.id <= s.attempt_id), "
            f"CASE WHEN s.status = 'queued' THEN (SELECT count(*) FROM {VIEW} q WHERE q.status = 'queued' "
            "AND q.id <= s.id) END, "
            "EXTRACT(EPOCH FROM (COALESCE(s.started_at, now()) - s.submitted_at)), "
            "EXTRACT(EPOCH FROM (s.finished_at - s.started_at)) "
            f"FROM {VIEW} s {where} ORDER BY s.id DESC LIMIT :limit",
            me=learner,
            limit=limit,
        )
        counts = dict(sql.rows(f"SELECT status, count(*) FROM {VIEW} s {where} GROUP BY status", me=learner))
        return rows, counts

    rows, counts = store.read_sql(read)
    out = []
    for (
        sid,
        who,
        lab,
        at,
        status,
        tries,
        worker,
        device,
        started,
        finished,
        attempt,
        outcome,
        score,
        max_score,
        message,
        number,
        position,
        wait_s,
        grade_s,
    ) in rows:
        out.append(
            {
                "submission": int(sid),
                "learner": who,
                "lab": lab,
                "submitted_at": at.isoformat(timespec="seconds"),
                "status": status,
                "position": position,
                "wait_s": round(float(wait_s), 1) if wait_s is not None else None,
                "grade_s": round(float(grade_s), 1) if grade_s is not None else None,
                "tries": int(tries),
                "worker": worker,
                "device": device,
                "attempt_id": attempt,
                "attempt_number": int(number) if attempt is not None and number else None,
                "outcome": outcome,
                "score": score,
                "max_score": max_score,
                "message": message,
            }
        )
    return {
        "learner": None if everyone else learner,
        "queue_ready": True,
        "counts": {s: int(counts.get(s, 0)) for s in SUBMISSION_STATUSES},
        "submissions": out,
    }
