"""The cohort's grading queue on its PostgreSQL: procrastinate's tables plus `roadmap_submissions`.

PostgreSQL only, and outside the numbered migrations (store/migrations.py
runs on SQLite too; a queue only makes sense on a shared server). The
instructor's first `roadmap submit` or `roadmap worker` creates it, once
(under the migration advisory lock):

- procrastinate's own schema (`procrastinate_jobs`, workers, events...), as
  the library ships it;
- `roadmap_submissions`: one row per submission, the snapshot (`files`, a
  gzipped tar) and its state. Row-level security as on the person tables: a
  learner role inserts and reads only rows whose `learner` is its login, and
  may insert only the snapshot columns (column privileges): status,
  attempt_id and the rest are the worker's;
- a BEFORE INSERT trigger (SECURITY DEFINER, owned by the instructor) that
  defers the procrastinate job in the same transaction as the row: a
  submission and its job exist together or not at all, and learners need
  no privilege on procrastinate's tables (they cannot forge a job);
- `cohort_submission_queue`: the rows without the files, for everyone's
  queue position (a security_barrier view, as the other cohort views).

At-least-once with idempotent attempts: `roadmap_submissions.attempt_id` is
UNIQUE and is set in the same transaction that inserts the attempt, after
`SELECT ... FOR UPDATE` on the submission; a retried job whose submission
already has an attempt records nothing.
"""

from __future__ import annotations

from roadmap_cli.errors import UserError
from roadmap_cli.store.values import SUBMISSION_STATUSES

TABLE = "roadmap_submissions"
VIEW = "cohort_submission_queue"
TASK = "roadmap.grade_submission"
QUEUE_PREFIX = "grade:"  # one procrastinate queue per lab: `worker --labs` listens to those only
QUEUE_LOCK = 0x726F61646D7170  # "roadmapq": one process creates the queue's tables
# What a learner may write: the snapshot. Everything else is the worker's.
LEARNER_INSERT_COLUMNS = ("learner", "lab_id", "files", "size_bytes", "file_count", "commit_sha", "dirty")
STATUSES = SUBMISSION_STATUSES  # store/values.py: "not-graded" is a grade that could not run, never "failed"
STATUS_CHECK = "CHECK (status IN (" + ", ".join(f"'{s}'" for s in STATUSES) + "))"
# Server-side bounds (migration 15): a learner's login can INSERT by raw SQL, past the client's checks.
# `roadmap submit` packs at most grading/snapshot.py MAX_BYTES (20 MiB) of files into a gzipped tar: headroom
# for the tar's own headers.
MAX_FILES_BYTES = 21 * 1024 * 1024
MAX_WAITING = 20  # a learner's submissions queued at once
LAB_ID_PATTERN = "^[a-z0-9][a-z0-9_-]{0,63}$"
SIZE_CHECK = (
    f"CONSTRAINT {TABLE}_bounded CHECK (octet_length(files) <= {MAX_FILES_BYTES} "
    f"AND lab_id ~ '{LAB_ID_PATTERN}' AND octet_length(coalesce(commit_sha, '')) <= 200)"
)
ENQUEUE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION roadmap_enqueue_submission() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = {{schema}}, pg_temp AS $$
BEGIN
    -- Whatever the inserting role sent, a new submission starts queued and ungraded.
    NEW.status := 'queued'; NEW.tries := 0; NEW.worker := NULL; NEW.device := NULL; NEW.started_at := NULL;
    NEW.finished_at := NULL; NEW.attempt_id := NULL; NEW.outcome := NULL; NEW.score := NULL;
    NEW.max_score := NULL; NEW.message := NULL; NEW.submitted_at := now();
    -- Checked here, before the job is deferred (the table's CHECK says the same, for updates).
    IF NEW.lab_id !~ '{LAB_ID_PATTERN}' OR octet_length(NEW.files) > {MAX_FILES_BYTES} THEN
        RAISE EXCEPTION 'roadmap: a submission is at most {MAX_FILES_BYTES} bytes, for a lab id like "autograd"'
            USING ERRCODE = 'check_violation';
    END IF;
    -- One learner cannot fill the queue (each row is a snapshot of up to {MAX_FILES_BYTES} bytes).
    IF (SELECT count(*) FROM {TABLE} WHERE learner = NEW.learner AND status = 'queued') >= {MAX_WAITING} THEN
        RAISE EXCEPTION 'roadmap: % already has {MAX_WAITING} submissions waiting; wait for them to be graded',
            NEW.learner USING ERRCODE = 'check_violation';
    END IF;
    NEW.job_id := (procrastinate_defer_jobs_v1(ARRAY[ROW(
        '{QUEUE_PREFIX}' || NEW.lab_id, '{TASK}', 0, NULL, NULL,
        jsonb_build_object('submission', NEW.id), NULL)::procrastinate_job_to_defer_v1]))[1];
    RETURN NEW;
END $$;
"""

_DDL = f"""
CREATE TABLE {TABLE} (
    id bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
    learner text NOT NULL,
    lab_id text NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    files bytea NOT NULL,
    size_bytes bigint NOT NULL,
    file_count integer NOT NULL,
    commit_sha text,
    dirty boolean,
    job_id bigint,
    status text NOT NULL DEFAULT 'queued' {STATUS_CHECK},
    tries integer NOT NULL DEFAULT 0,
    worker text,
    device text,
    started_at timestamptz,
    finished_at timestamptz,
    attempt_id integer UNIQUE REFERENCES grade_attempts (id),
    outcome text,
    score double precision,
    max_score double precision,
    message text,
    {SIZE_CHECK}
);
CREATE INDEX {TABLE}_status ON {TABLE} (status, id);
ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY;
CREATE POLICY roadmap_own_submissions ON {TABLE} USING (learner = current_user) WITH CHECK (learner = current_user);
{ENQUEUE_FUNCTION}
CREATE TRIGGER roadmap_enqueue_submission BEFORE INSERT ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION roadmap_enqueue_submission();
CREATE VIEW {VIEW} WITH (security_barrier = true) AS
    SELECT id, learner, lab_id, submitted_at, size_bytes, file_count, status, tries, worker, device, started_at,
           finished_at, attempt_id, outcome, score, max_score, message
      FROM {TABLE};
"""


def bound_existing(conn) -> None:
    """Migration 14 on a queue made before it: the size/lab-id CHECK (NOT VALID: rows already there stay, every
    new or updated row is checked) and the trigger that caps a learner's waiting submissions."""
    if not exists(conn):
        return  # made later by ensure_queue, with both in its DDL
    import psycopg.sql

    raw = _raw(conn)
    raw.execute(f"ALTER TABLE {TABLE} ADD {SIZE_CHECK} NOT VALID")
    schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
    raw.execute(ENQUEUE_FUNCTION.replace("{schema}", psycopg.sql.Identifier(schema).as_string(raw)))


def _raw(conn):
    return conn.connection.driver_connection


def exists(conn) -> bool:
    return bool(conn.exec_driver_sql("SELECT to_regclass(%(t)s) IS NOT NULL", {"t": TABLE}).scalar())


def ensure_queue(conn, *, instructor: bool, learners) -> None:
    """Create the queue's tables once (the instructor); a learner before that gets one line.

    `instructor`: store/roles.session(conn).instructor; `learners()`: the learner roles to grant to (roles.py
    imports this module, so the caller asks it)."""
    if exists(conn):
        return
    if not instructor:
        raise UserError(
            "the cohort's grading queue is not set up yet: the instructor (the database's owner) "
            "runs `roadmap worker` once on the GPU box, then submit again"
        )
    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({QUEUE_LOCK})")
    if exists(conn):  # another process made it while we waited
        return
    from procrastinate.schema import SchemaManager

    raw = _raw(conn)
    if conn.exec_driver_sql("SELECT to_regclass('procrastinate_jobs') IS NULL").scalar():
        raw.execute(SchemaManager.get_schema())  # no parameters: psycopg sends the script as it is
    schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
    import psycopg.sql

    raw.execute(_DDL.replace("{schema}", psycopg.sql.Identifier(schema).as_string(raw)))
    for name in learners():
        grant_learner(conn, name)


def grant_learner(conn, name: str) -> None:
    """What a learner role needs to submit and follow its submissions (store/roles.add_learner calls it too)."""
    import psycopg.sql

    if not exists(conn):
        return
    raw = _raw(conn)
    who = psycopg.sql.Identifier(name).as_string(raw)
    conn.exec_driver_sql(f"GRANT SELECT, INSERT ({', '.join(LEARNER_INSERT_COLUMNS)}) ON {TABLE} TO {who}")
    conn.exec_driver_sql(f"GRANT SELECT ON {VIEW} TO {who}")
