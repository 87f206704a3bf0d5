"""Cohort security on PostgreSQL: one database role per learner, rows scoped by the server.

A cohort's database is shared, so "who wrote this row" must not be whatever
a learner's environment claims (`ROADMAP_LEARNER`): the server decides.

- **The instructor** owns the tables (the role that ran the migrations, or a
  superuser). Table owners are not subject to row-level security, so the
  instructor sees and manages everything, as before.
- **A learner** is a login role made by `roadmap cohort add-learner ID`. On
  every person-owned table a row-level security policy lets that role read
  and write only rows whose `learner` is the role's own name
  (`current_user`): raw SQL cannot insert, change or delete another
  learner's rows, and the learner id is the login, never an environment
  variable.
- **The cohort views** (`cohort_grade_attempts`, ...: migration 8) are owned
  by the instructor and marked `security_barrier`; through them every member
  reads the whole cohort (status, board, export), read-only.
- **Grades only the server vouches for** (migration 11): row-level security
  decides whose rows a learner writes, not what they say, so a learner's
  login has no INSERT, UPDATE or DELETE on `grade_attempts` and
  `grade_test_results` at all. A grade on the learner's own machine is
  recorded through `roadmap_record_self_graded(attempt, tests)`, a SECURITY
  DEFINER function that stamps the row with the login (`session_user`),
  `verified = false` and `imported = false` whatever was sent: its device,
  sandbox and `graded_on` stay the learner's claim. Only the worker (the
  instructor's role, grading/queue.py) writes `verified = true`. A
  restrictive policy keeps lab-proved checkpoints (`source LIKE 'lab:%'`)
  out of a learner's reach; the checkpoints their own grades prove are
  recorded as `self-graded:<lab>/<part>`.

A database where every learner still logs in as the owner keeps working as
before, unprotected: `roadmap db status` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from roadmap_cli.errors import NotFoundError, StoreError, UserError

# What the cohort commands read about everyone, through views (store/migrations.py, m008).
COHORT_TABLES = ("checkpoint_progress", "grade_attempts", "papers", "cadence_entries")
POLICY = "roadmap_own_rows"
SETTINGS_POLICY = "roadmap_database_settings"
# What only the server writes in a cohort (migration 11): a learner's login may read these, never write them.
SERVER_RECORDED_TABLES = ("grade_attempts", "grade_test_results")
SELF_GRADED_FUNCTION = "roadmap_record_self_graded"
LAB_PROVED_POLICY = "roadmap_lab_proved_checkpoints"
# checkpoint_progress.source of a checkpoint a verified (worker) grade proved, and of one a learner's own grade did.
from roadmap_cli.store.values import LAB_SOURCE_PREFIX, SELF_GRADED_SOURCE_PREFIX  # noqa: E402  (one definition)

# What a self-graded attempt may say about its outcome (rowcheck.LAB_OUTCOMES plus the engine's own words).
_SELF_GRADED_OUTCOMES = ("passed", "failed", "error", "timeout", "crash", "interrupted")


# What each cohort view shows (migration 13): the columns the cohort commands read, nothing a learner wrote for
# themselves. The views first showed every column (`SELECT *`, migration 8): a learner's login read the others'
# paper notes, ratings and abstracts, checkpoint evidence and log notes and links (red team route D1).
COHORT_VIEW_COLUMNS = {
    "checkpoint_progress": ("learner", "checkpoint_id", "completed_at", "source"),
    "grade_attempts": (
        "id",
        "learner",
        "lab_id",
        "started_at",
        "outcome",
        "score",
        "max_score",
        "parts",
        "perf",
        "device",
        "sandbox",
        "graded_on",
        "verified",
    ),
    "papers": ("learner", "status", "read_on"),
    "cadence_entries": ("learner", "kind", "on_date", "hours"),
}


def view_name(table: str) -> str:
    return f"cohort_{table}"


def create_cohort_views(conn, person_tables: list[str]) -> None:
    """The read-only, whole-cohort views (both backends: the cohort commands
    query the same names on SQLite, where one file is one person anyway)."""
    import sqlalchemy as sa

    barrier = " WITH (security_barrier = true)" if conn.dialect.name == "postgresql" else ""
    for table in COHORT_TABLES:
        conn.execute(sa.text(f"CREATE VIEW {view_name(table)}{barrier} AS SELECT * FROM {table}"))
    # Every learner with a row anywhere (the database-wide settings scope '' is nobody).
    union = " UNION ".join(f"SELECT learner FROM {t}" for t in person_tables)
    conn.execute(
        sa.text(
            f"CREATE VIEW cohort_learners{barrier} AS SELECT learner FROM ({union}) AS everyone WHERE learner <> ''"
        )
    )


def enable_row_security(conn, person_tables: list[str]) -> None:
    """PostgreSQL: each person-owned table answers a non-owner role with its own rows only."""
    import sqlalchemy as sa

    for table in person_tables:
        conn.execute(sa.text(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY"))
        conn.execute(
            sa.text(
                f"CREATE POLICY {POLICY} ON {table} USING (learner = current_user) WITH CHECK (learner = current_user)"
            )
        )
    # The database-wide settings rows (learner '') are readable by everyone, writable by the owner only.
    conn.execute(sa.text(f"CREATE POLICY {SETTINGS_POLICY} ON settings FOR SELECT USING (learner = '')"))


# The narrow door for a cohort learner's own grades (migration 11). Frozen as released: change it only in a new
# migration. `session_user` is the login (inside a SECURITY DEFINER function current_user is the owner).
_SELF_GRADED_DDL = """
CREATE FUNCTION {function}(attempt jsonb, tests jsonb) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    new_id integer;
    me text := session_user;
BEGIN
    IF jsonb_typeof(attempt) IS DISTINCT FROM 'object' OR jsonb_typeof(tests) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'roadmap_record_self_graded(attempt jsonb object, tests jsonb array)'
            USING ERRCODE = '22023';
    END IF;
    IF NOT (attempt->>'outcome' = ANY (ARRAY[{outcomes}])) THEN
        RAISE EXCEPTION 'unknown outcome %', attempt->>'outcome' USING ERRCODE = '22023';
    END IF;
    IF jsonb_array_length(tests) > 100000 OR length(attempt::text) > 16000000 THEN
        RAISE EXCEPTION 'attempt too large' USING ERRCODE = '54000';
    END IF;
    INSERT INTO grade_attempts (lab_id, started_at, duration_s, outcome, score, max_score, parts, perf, device,
            device_capability, torch_version, triton_version, interpret_mode, commit_sha, dirty, workspace,
            grader_sha256, message, sandbox, graded_on, imported, verified, learner)
        VALUES (attempt->>'lab_id', attempt->>'started_at', (attempt->>'duration_s')::float8, attempt->>'outcome',
            (attempt->>'score')::float8, (attempt->>'max_score')::float8, attempt->>'parts', attempt->>'perf',
            attempt->>'device', attempt->>'device_capability', attempt->>'torch_version',
            attempt->>'triton_version', (attempt->>'interpret_mode')::boolean, attempt->>'commit_sha',
            (attempt->>'dirty')::boolean, attempt->>'workspace', attempt->>'grader_sha256', attempt->>'message',
            attempt->>'sandbox', attempt->>'graded_on', false, false, me)
        RETURNING id INTO new_id;
    INSERT INTO grade_test_results (attempt_id, nodeid, part_id, outcome, duration_s, message, learner)
        SELECT new_id, t->>'nodeid', t->>'part_id', t->>'outcome', (t->>'duration_s')::float8, t->>'message', me
          FROM jsonb_array_elements(tests) AS t;
    RETURN new_id;
END $$;
REVOKE ALL ON FUNCTION {function}(jsonb, jsonb) FROM PUBLIC;
"""


def protect_server_records(conn) -> None:
    """Migration 11 on PostgreSQL: attempts and lab-proved checkpoints become the server's record."""
    import psycopg.sql

    raw = conn.connection.driver_connection
    schema = psycopg.sql.Identifier(conn.exec_driver_sql("SELECT current_schema()").scalar()).as_string(raw)
    learners = [row["learner"] for row in learner_roles(conn)]  # before the revoke: they still hold INSERT
    outcomes = ", ".join(f"'{o}'" for o in _SELF_GRADED_OUTCOMES)
    raw.execute(_SELF_GRADED_DDL.format(function=SELF_GRADED_FUNCTION, schema=schema, outcomes=outcomes))
    # Restrictive: AND-ed with the own-rows policy. A learner writes self-marked checkpoints, never lab-proved ones;
    # what it writes is exactly a source the engine writes for it (red team: 'LAB:x' and ' lab:x' got through a
    # NOT LIKE 'lab:%' and broke every export), and it never touches a lab-proved row.
    from roadmap_cli.store.values import SELF_SOURCES

    lab = f"source NOT LIKE '{LAB_SOURCE_PREFIX}%'"
    own = (
        "(source IN (" + ", ".join(f"'{s}'" for s in SELF_SOURCES) + ")"
        f" OR source LIKE '{SELF_GRADED_SOURCE_PREFIX}%/%')"
    )
    for command, clause in (
        ("INSERT", f"WITH CHECK ({own})"),
        ("UPDATE", f"USING ({lab}) WITH CHECK ({own})"),
        ("DELETE", f"USING ({lab})"),
    ):
        raw.execute(
            f"CREATE POLICY {LAB_PROVED_POLICY}_{command.lower()} ON checkpoint_progress "  # '%': no params
            f"AS RESTRICTIVE FOR {command} {clause}"
        )
    for name in learners:
        who = _quote(conn, name)
        conn.exec_driver_sql(f"REVOKE INSERT, UPDATE, DELETE ON {', '.join(SERVER_RECORDED_TABLES)} FROM {who}")
        conn.exec_driver_sql(f"GRANT EXECUTE ON FUNCTION {SELF_GRADED_FUNCTION}(jsonb, jsonb) TO {who}")


def learner_writable_tables(person_tables: list[str]) -> list[str]:
    """The person tables a learner's login may write (row-level security still scopes the rows)."""
    return [t for t in person_tables if t not in SERVER_RECORDED_TABLES]


# ---------------------------------------------------------------- who is connected


@dataclass(frozen=True)
class Session:
    role: str
    instructor: bool  # owns the tables (or is a superuser / bypasses RLS): not scoped


def _table_owner(conn) -> Optional[str]:
    """The role that owns the cohort's tables (the instructor); None before the first migration."""
    return conn.exec_driver_sql(
        "SELECT tableowner FROM pg_tables WHERE tablename = 'grade_attempts' AND schemaname = current_schema()"
    ).scalar()


def session(conn) -> Session:
    """The logged-in role, and whether row-level security scopes it."""
    role, privileged = conn.exec_driver_sql(
        "SELECT current_user, "
        "       COALESCE((SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user), false)"
    ).one()
    owner = _table_owner(conn)
    # Before the first migration there are no tables: whoever runs it becomes their owner.
    instructor = (
        bool(privileged)
        or owner is None
        or bool(
            conn.exec_driver_sql("SELECT pg_has_role(current_user, %(owner)s, 'MEMBER')", {"owner": owner}).scalar()
        )
    )
    return Session(role=role, instructor=instructor)


def check_claimed_learner(role: Session, claimed: Optional[str], where: str) -> str:
    """A scoped learner is its login role: any other claim is refused with one line."""
    if role.instructor:
        raise AssertionError("an instructor's learner id is not scoped")
    if claimed is not None and claimed != role.role:
        raise UserError(
            f"you are logged in to the cohort database as {role.role!r}; acting as {claimed!r} "
            f"({where}) is refused: a learner can only write as themselves (unset it, or log in as "
            "that learner)"
        )
    return role.role


# ---------------------------------------------------------------- the instructor's commands


def _require_instructor(conn) -> Session:
    who = session(conn)
    if not who.instructor:
        raise UserError(
            f"only the cohort's instructor (the role that owns the tables) can manage learners; "
            f"you are logged in as {who.role!r}"
        )
    return who


def _quote(conn, name: str) -> str:
    """A role name as a quoted identifier (learner ids may hold '@', '.', '+')."""
    import psycopg.sql

    raw = conn.connection.driver_connection
    return psycopg.sql.Identifier(name).as_string(raw)


def add_learner(conn, name: str, password: str, person_tables: list[str]) -> None:
    """A login role for `name`, allowed to read the cohort and write only its own rows."""
    import psycopg.sql

    _require_instructor(conn)
    if conn.exec_driver_sql("SELECT 1 FROM pg_roles WHERE rolname = %(n)s", {"n": name}).first():
        raise UserError(
            f"a database role {name!r} already exists: choose another learner id, or "
            f"`roadmap cohort remove-learner {name}` first"
        )
    who = _quote(conn, name)
    raw = conn.connection.driver_connection
    literal = psycopg.sql.Literal(password).as_string(raw)
    database = _quote(conn, conn.exec_driver_sql("SELECT current_database()").scalar())
    schema = _quote(conn, conn.exec_driver_sql("SELECT current_schema()").scalar())
    statements = [
        f"CREATE ROLE {who} LOGIN PASSWORD {literal} NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS",
        f"GRANT CONNECT ON DATABASE {database} TO {who}",
        f"GRANT USAGE ON SCHEMA {schema} TO {who}",
        # Reading is scoped by the policies (person tables) or harmless (the migrations ledger, the views).
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {who}",
        f"GRANT INSERT, UPDATE, DELETE ON {', '.join(learner_writable_tables(person_tables))} TO {who}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {who}",
    ]
    if conn.exec_driver_sql(
        "SELECT to_regprocedure(%(f)s) IS NOT NULL", {"f": f"{SELF_GRADED_FUNCTION}(jsonb, jsonb)"}
    ).scalar():
        statements.append(f"GRANT EXECUTE ON FUNCTION {SELF_GRADED_FUNCTION}(jsonb, jsonb) TO {who}")
    for statement in statements:
        conn.exec_driver_sql(statement)
    from roadmap_cli.store.queue import grant_learner

    grant_learner(conn, name)  # the grading queue, when the cohort has one (store/queue.py)


def remove_learner(conn, name: str) -> int:
    """Drop the learner's role (it can no longer log in); their rows stay, as
    the cohort's history. Returns how many rows they own."""
    _require_instructor(conn)
    if not conn.exec_driver_sql("SELECT 1 FROM pg_roles WHERE rolname = %(n)s", {"n": name}).first():
        known = [r[0] for r in conn.exec_driver_sql("SELECT learner FROM cohort_learners")]
        raise NotFoundError("learner role", name, known)
    if name == session(conn).role:
        raise UserError("you cannot remove the role you are logged in as")
    rows = sum(
        conn.exec_driver_sql(f"SELECT count(*) FROM {t} WHERE learner = %(n)s", {"n": name}).scalar()
        for t in COHORT_TABLES
    )
    who = _quote(conn, name)
    database = _quote(conn, conn.exec_driver_sql("SELECT current_database()").scalar())
    schema = _quote(conn, conn.exec_driver_sql("SELECT current_schema()").scalar())
    # The privileges add_learner granted first (DROP ROLE refuses a role that still holds any; DROP OWNED
    # would need membership in the role, which a CREATEROLE instructor lacks), then the role.
    for statement in (
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {who}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {who}",
        f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {schema} FROM {who}",
        f"REVOKE ALL ON SCHEMA {schema} FROM {who}",
        f"REVOKE ALL ON DATABASE {database} FROM {who}",
        f"DROP ROLE {who}",
    ):
        conn.exec_driver_sql(statement)
    return rows


def learner_roles(conn) -> list[dict]:
    """Every login role the policies scope (not the instructor, not superusers), with its row count."""
    owner = _table_owner(conn)
    if owner is None:
        raise StoreError("the cohort database has no tables yet: run `roadmap db status` once as the instructor")
    rows = conn.exec_driver_sql(
        "SELECT r.rolname FROM pg_roles r WHERE r.rolcanlogin AND NOT r.rolsuper AND NOT r.rolbypassrls "
        "AND NOT pg_has_role(r.rolname, %(owner)s, 'MEMBER') "
        # checkpoint_notes: every learner writes it (grade_attempts no longer, since migration 11).
        "AND has_table_privilege(r.rolname, 'checkpoint_notes', 'INSERT') ORDER BY r.rolname",
        {"owner": owner},
    ).all()
    return [{"learner": name} for (name,) in rows]
