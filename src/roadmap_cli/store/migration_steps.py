"""The schema's history, step by step: each migration a small function that
declares its tables with SQLAlchemy Core, frozen as they were at that version
(the same list runs on SQLite and PostgreSQL), and MIGRATIONS, their order.
Append only: never edit or reorder a released migration, add one at the end.
store/migrations.py applies them.
"""

from __future__ import annotations

import json
from typing import Callable

import sqlalchemy as sa

Migration = tuple[str, Callable[[sa.Connection], None]]


def _create(conn: sa.Connection, *tables: sa.Table) -> None:
    for table in tables:
        table.create(conn)


def m001_core_progress(conn: sa.Connection) -> None:
    """Settings, checkpoint completion and checkpoint notes."""
    md = sa.MetaData()
    _create(
        conn,
        sa.Table(
            "settings",
            md,
            sa.Column("key", sa.String, primary_key=True),
            sa.Column("value", sa.Text, nullable=False),  # JSON-encoded
        ),
        sa.Table(
            "checkpoint_progress",
            md,
            sa.Column("checkpoint_id", sa.String, primary_key=True),
            sa.Column("completed_at", sa.String, nullable=False),  # ISO 8601, UTC
            sa.Column("source", sa.String, nullable=False),  # "self" or "lab:<lab>/<part>"
            sa.Column("evidence", sa.Text),
        ),
        sa.Table(
            "checkpoint_notes",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("checkpoint_id", sa.String, nullable=False, index=True),
            sa.Column("created_at", sa.String, nullable=False),
            sa.Column("text", sa.Text, nullable=False),
        ),
    )


def m002_labs(conn: sa.Connection) -> None:
    """Lab workspaces, grade attempts with per-test results, hints used."""
    md = sa.MetaData()
    attempts = sa.Table(
        "grade_attempts",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("lab_id", sa.String, nullable=False, index=True),
        sa.Column("started_at", sa.String, nullable=False),
        sa.Column("duration_s", sa.Float, nullable=False),
        sa.Column("outcome", sa.String, nullable=False),  # passed|failed|error|timeout|crash
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("max_score", sa.Float, nullable=False),  # points of the parts gradable here
        sa.Column("parts", sa.Text, nullable=False),  # JSON: [{id, points, max_points, status}]
        sa.Column("perf", sa.Text, nullable=False),  # JSON: [{test, name, value, unit, ...}]
        sa.Column("device", sa.String, nullable=False),
        sa.Column("device_capability", sa.String),
        sa.Column("torch_version", sa.String),
        sa.Column("triton_version", sa.String),
        sa.Column("interpret_mode", sa.Boolean, nullable=False),
        sa.Column("commit_sha", sa.String),
        sa.Column("dirty", sa.Boolean),
        sa.Column("workspace", sa.Text, nullable=False),
        sa.Column("grader_sha256", sa.String, nullable=False),
        sa.Column("message", sa.Text),
    )
    _create(
        conn,
        sa.Table(
            "lab_workspaces",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("lab_id", sa.String, nullable=False, index=True),
            sa.Column("path", sa.Text, nullable=False, unique=True),
            sa.Column("created_at", sa.String, nullable=False),
        ),
        attempts,
        sa.Table(
            "grade_test_results",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column(
                "attempt_id",
                sa.Integer,
                sa.ForeignKey("grade_attempts.id", ondelete="CASCADE"),
                nullable=False,
                index=True,
            ),
            sa.Column("nodeid", sa.Text, nullable=False),
            sa.Column("part_id", sa.String, nullable=False),
            sa.Column("outcome", sa.String, nullable=False),  # passed|failed|error|skipped|crashed|timeout
            sa.Column("duration_s", sa.Float, nullable=False),
            sa.Column("message", sa.Text),
        ),
        sa.Table(
            "lab_hints",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("lab_id", sa.String, nullable=False, index=True),
            sa.Column("hint_index", sa.Integer, nullable=False),
            sa.Column("shown_at", sa.String, nullable=False),
        ),
    )


def m003_research(conn: sa.Connection) -> None:
    """Papers (with tags) and the other cadence entries."""
    md = sa.MetaData()
    papers = sa.Table(
        "papers",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("title_key", sa.Text, nullable=False, index=True),  # normalised title for duplicates
        sa.Column("authors", sa.Text),
        sa.Column("year", sa.Integer),
        sa.Column("arxiv_id", sa.String, index=True),  # without version, e.g. 2307.08691
        sa.Column("arxiv_version", sa.Integer),
        sa.Column("doi", sa.String, index=True),  # normalised: lower case, no prefix
        sa.Column("url", sa.Text),
        sa.Column("stage", sa.Integer),
        sa.Column("status", sa.String, nullable=False),  # to-read|reading|read|reproduced
        sa.Column("read_on", sa.String, index=True),  # local date YYYY-MM-DD
        sa.Column("added_on", sa.String, nullable=False),
        sa.Column("rating", sa.Integer),
        sa.Column("notes", sa.Text),
        sa.Column("bibtex_key", sa.String),
    )
    _create(
        conn,
        papers,
        sa.Table(
            "paper_tags",
            md,
            sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id", ondelete="CASCADE"), primary_key=True),
            sa.Column("tag", sa.String, primary_key=True),
        ),
        sa.Table(
            "cadence_entries",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("kind", sa.String, nullable=False, index=True),  # reproduction|experiment|...|hours
            sa.Column("title", sa.Text),
            sa.Column("on_date", sa.String, nullable=False, index=True),  # local date YYYY-MM-DD
            sa.Column("hours", sa.Float),
            sa.Column("stage", sa.Integer),
            sa.Column("link", sa.Text),
            sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id", ondelete="SET NULL")),
            sa.Column("lab_id", sa.String),
            sa.Column("note", sa.Text),
            sa.Column("created_at", sa.String, nullable=False),
        ),
    )


def m004_imported_attempts(conn: sa.Connection) -> None:
    """grade_attempts.imported: true for attempts that came in through
    `roadmap import` (never graded on this machine). They are shown as
    imported and must never unlock `lab solution` on their own."""
    conn.execute(sa.text("ALTER TABLE grade_attempts ADD COLUMN imported BOOLEAN NOT NULL DEFAULT FALSE"))


# Tables whose rows belong to a person, as of migration 5.
_PERSON_TABLES_V5 = (
    "settings",
    "checkpoint_progress",
    "checkpoint_notes",
    "lab_workspaces",
    "grade_attempts",
    "grade_test_results",
    "lab_hints",
    "papers",
    "paper_tags",
    "cadence_entries",
)
# Tables whose primary key or unique constraint must include the learner:
# a rebuild on SQLite (it cannot alter constraints), ALTERs on PostgreSQL.
_LEARNER_DEFAULT = "local"


def _learner_column() -> sa.Column:
    return sa.Column("learner", sa.Text, nullable=False, server_default=_LEARNER_DEFAULT)


def _v5_rebuilt_tables(md: sa.MetaData, suffix: str = "") -> list[sa.Table]:
    """settings, checkpoint_progress and lab_workspaces as of migration 5:
    keyed per learner (two learners may both have a `start_date`, both have
    checked a checkpoint, both have a workspace at the same path)."""
    return [
        sa.Table(
            "settings" + suffix,
            md,
            sa.Column("key", sa.String, primary_key=True),
            sa.Column("value", sa.Text, nullable=False),
            sa.Column("learner", sa.Text, primary_key=True, server_default=_LEARNER_DEFAULT),
        ),
        sa.Table(
            "checkpoint_progress" + suffix,
            md,
            sa.Column("checkpoint_id", sa.String, primary_key=True),
            sa.Column("completed_at", sa.String, nullable=False),
            sa.Column("source", sa.String, nullable=False),
            sa.Column("evidence", sa.Text),
            sa.Column("learner", sa.Text, primary_key=True, server_default=_LEARNER_DEFAULT),
        ),
        sa.Table(
            "lab_workspaces" + suffix,
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("lab_id", sa.String, nullable=False),
            sa.Column("path", sa.Text, nullable=False),
            sa.Column("created_at", sa.String, nullable=False),
            _learner_column(),
            sa.UniqueConstraint("learner", "path", name="uq_lab_workspaces_learner_path"),
        ),
    ]


def m005_learners(conn: sa.Connection) -> None:
    """A `learner` column on every person-owned table (cohort mode: many
    learners in one database). Existing rows go to the learner this database
    belongs to (store/learners.py: $ROADMAP_LEARNER, git user.email, or
    `local`); on SQLite that id is pinned in settings so it stays stable.
    Nothing is dropped: rebuilt tables are copied row for row."""
    from roadmap_cli.store.learners import DATABASE_SCOPE, SETTING_KEY, default_learner

    owner = default_learner()
    sqlite = conn.dialect.name == "sqlite"
    md = sa.MetaData()
    rebuilt = {t.name: t for t in _v5_rebuilt_tables(md, "__v5" if sqlite else "")}
    if sqlite:
        # SQLite cannot change a primary key: new table, copy, drop, rename.
        # None of these three is the parent of a foreign key, so dropping the
        # old one cascades nothing.
        for name in ("settings", "checkpoint_progress", "lab_workspaces"):
            new = rebuilt[name + "__v5"]
            new.create(conn)
            columns = [c.name for c in new.columns if c.name != "learner"]
            cols = ", ".join(columns)
            conn.execute(
                sa.text(f"INSERT INTO {new.name} ({cols}, learner) SELECT {cols}, :owner FROM {name}"), {"owner": owner}
            )
            conn.execute(sa.text(f"DROP TABLE {name}"))
            conn.execute(sa.text(f"ALTER TABLE {new.name} RENAME TO {name}"))
    else:
        for name, key in (("settings", "key"), ("checkpoint_progress", "checkpoint_id")):
            conn.execute(sa.text(f"ALTER TABLE {name} ADD COLUMN learner TEXT NOT NULL DEFAULT '{_LEARNER_DEFAULT}'"))
            conn.execute(sa.text(f"ALTER TABLE {name} DROP CONSTRAINT {name}_pkey"))
            conn.execute(sa.text(f"ALTER TABLE {name} ADD PRIMARY KEY ({key}, learner)"))
        conn.execute(
            sa.text(f"ALTER TABLE lab_workspaces ADD COLUMN learner TEXT NOT NULL DEFAULT '{_LEARNER_DEFAULT}'")
        )
        conn.execute(sa.text("ALTER TABLE lab_workspaces DROP CONSTRAINT lab_workspaces_path_key"))
        conn.execute(
            sa.text("ALTER TABLE lab_workspaces ADD CONSTRAINT uq_lab_workspaces_learner_path UNIQUE (learner, path)")
        )
    if sqlite:  # the rebuilt lab_workspaces lost its lab_id index: same name as before
        conn.execute(sa.text("CREATE INDEX ix_lab_workspaces_lab_id ON lab_workspaces (lab_id)"))
    for name in _PERSON_TABLES_V5:
        if name not in ("settings", "checkpoint_progress", "lab_workspaces"):
            conn.execute(sa.text(f"ALTER TABLE {name} ADD COLUMN learner TEXT NOT NULL DEFAULT '{_LEARNER_DEFAULT}'"))
        conn.execute(sa.text(f"UPDATE {name} SET learner = :owner"), {"owner": owner})
        if name not in ("settings", "checkpoint_progress"):  # their primary key (.., learner) serves
            conn.execute(sa.text(f"CREATE INDEX ix_{name}_learner ON {name} (learner)"))
    if not sqlite:
        # An older `roadmap import` into PostgreSQL inserted explicit ids and
        # left the id sequences behind: move them past the largest id, or the
        # next insert collides.
        for name in (
            "checkpoint_notes",
            "lab_workspaces",
            "grade_attempts",
            "grade_test_results",
            "lab_hints",
            "papers",
            "cadence_entries",
        ):
            conn.execute(
                sa.text(
                    f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                    f"COALESCE((SELECT MAX(id) FROM {name}), 0) + 1, false)"
                )
            )
    if sqlite:
        # One home, one person: pin the id chosen now (store/learners.py).
        conn.execute(
            sa.text("INSERT INTO settings (learner, key, value) VALUES (:scope, :key, :value)"),
            {"scope": DATABASE_SCOPE, "key": SETTING_KEY, "value": json.dumps(owner)},
        )


def m006_quiz_review(conn: sa.Connection) -> None:
    """Quiz attempts (evidence on explain checkpoints) and spaced review:
    one FSRS card per (learner, item) with its next due time, and a log of
    every rating. `item` is "checkpoint:<id>" or "question:<id>"."""
    md = sa.MetaData()
    learner = lambda: sa.Column("learner", sa.String, nullable=False, server_default="local", index=True)  # noqa: E731
    _create(
        conn,
        sa.Table(
            "quiz_attempts",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            learner(),
            sa.Column("checkpoint_id", sa.String, nullable=False, index=True),
            sa.Column("taken_at", sa.String, nullable=False),  # ISO 8601, UTC
            sa.Column("correct", sa.Integer, nullable=False),
            sa.Column("total", sa.Integer, nullable=False),
            sa.Column("passed", sa.Boolean, nullable=False),  # correct/total >= 80%
            sa.Column("answers", sa.Text, nullable=False),  # JSON: [{question, kind, answer, correct, rating}]
        ),
        sa.Table(
            "review_cards",
            md,
            sa.Column("learner", sa.String, primary_key=True, server_default="local"),
            sa.Column("item", sa.String, primary_key=True),  # checkpoint:<id> | question:<id>
            sa.Column("card", sa.Text, nullable=False),  # JSON of fsrs.Card.to_dict()
            sa.Column("due", sa.String, nullable=False, index=True),  # ISO 8601, UTC, seconds: compares as text
            sa.Column("reviews", sa.Integer, nullable=False),
            sa.Column("updated_at", sa.String, nullable=False),
        ),
        sa.Table(
            "review_logs",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            learner(),
            sa.Column("item", sa.String, nullable=False, index=True),
            sa.Column("rating", sa.Integer, nullable=False),  # 1 again, 2 hard, 3 good, 4 easy
            sa.Column("reviewed_at", sa.String, nullable=False),
            sa.Column("source", sa.String, nullable=False),  # quiz | review
            sa.Column("due_after", sa.String, nullable=False),  # the due time this review set
        ),
    )


def m007_attempt_sandbox(conn: sa.Connection) -> None:
    """grade_attempts.sandbox: "strong" when the learner's code ran behind
    the OS wall (bubblewrap namespaces), "weak" when only the in-process
    sandbox guarded it. NULL for attempts recorded before this existed (or
    imported from such a database): shown as unknown, ranked as weak."""
    conn.execute(sa.text("ALTER TABLE grade_attempts ADD COLUMN sandbox VARCHAR"))


def m008_cohort_security(conn: sa.Connection) -> None:
    """The cohort views (what `cohort status|board|export` read about everyone)
    on both backends; on PostgreSQL, row-level security on every person-owned
    table, so a learner's own login role reads and writes only its own rows
    (store/roles.py). The owner, who runs this, is not scoped."""
    from roadmap_cli.store import roles
    from roadmap_cli.store.learners import person_tables

    tables = person_tables(conn)
    roles.create_cohort_views(conn, tables)
    if conn.dialect.name == "postgresql":
        roles.enable_row_security(conn, tables)


def m009_attempt_graded_on(conn: sa.Connection) -> None:
    """grade_attempts.graded_on: the remote (`roadmap grade --on NAME`) whose
    machine graded the attempt; NULL for a grade on this machine (and every
    attempt recorded before this existed)."""
    conn.execute(sa.text("ALTER TABLE grade_attempts ADD COLUMN graded_on VARCHAR"))


def m010_paper_metadata(conn: sa.Connection) -> None:
    """papers.venue, abstract, pdf_url: what `paper log --arxiv/--doi` and
    `paper refresh` fetch; metadata_source and metadata_fetched_on say from
    which registry and when (NULL: typed or imported, never fetched)."""
    for column in ("venue", "abstract", "pdf_url", "metadata_source", "metadata_fetched_on"):
        conn.execute(sa.text(f"ALTER TABLE papers ADD COLUMN {column} VARCHAR"))


def m011_verified_attempts(conn: sa.Connection) -> None:
    """grade_attempts.verified: true only for an attempt a cohort worker graded
    and recorded (grading/queue.py). On PostgreSQL a learner's login then loses
    INSERT/UPDATE/DELETE on grade_attempts and grade_test_results: their own
    grades go through one SECURITY DEFINER function and are recorded
    self-graded (verified false, whatever they send), and lab-proved
    checkpoints (source 'lab:...') become the server's to write (store/roles.py).
    On SQLite (one person's file) every attempt stays the learner's own."""
    conn.execute(sa.text("ALTER TABLE grade_attempts ADD COLUMN verified BOOLEAN NOT NULL DEFAULT FALSE"))
    if conn.dialect.name == "postgresql":
        from roadmap_cli.store import roles

        # A PostgreSQL view's `*` was expanded when migration 8 made it: show graded_on and verified through it.
        conn.execute(
            sa.text(
                "CREATE OR REPLACE VIEW cohort_grade_attempts WITH (security_barrier = true) AS "
                "SELECT * FROM grade_attempts"
            )
        )
        roles.protect_server_records(conn)


# Tables whose rows carry a learner's own number (migration 12): what every
# command shows and takes as the row's id.
NUMBERED_TABLES = ("papers", "cadence_entries")


def m012_learner_numbers(conn: sa.Connection) -> None:
    """papers.number and cadence_entries.number: each learner's papers (and log
    entries) are numbered 1..n in their own sequence, the id every command
    shows and takes. `id` stays the internal surrogate key: paper_tags and
    cadence_entries refer to papers by it (rebuilding a parent table on SQLite
    would mean rebuilding its children too), and it never changes when rows
    move between databases under a new learner (import, db copy).

    Existing rows keep the id they were known by (number = id): a solo user
    sees no change; in a cohort each learner keeps the numbers they saw, and
    their next row gets their own MAX(number) + 1. Unique per (learner,
    number).

    roadmap's writers give the number themselves (research/numbers.py). A
    row inserted without one (number 0, the column's default: SQLite cannot
    add a NOT NULL column without a default) by any other writer (plain SQL,
    a script, an older tool) is numbered by the database: a trigger gives it
    the learner's MAX(number) + 1, so such a row is never hidden at 0 nor
    refused by the unique index. (A future rebuild of either table on SQLite
    must create its trigger again.)"""
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        # Invoker's rights: under row-level security a learner's MAX sees their own rows, which are all that
        # count. BEFORE INSERT: NEW can be changed (and the unique index sees the final number).
        conn.execute(
            sa.text(
                "CREATE FUNCTION roadmap_number_new_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.number = 0 THEN "
                "EXECUTE 'SELECT COALESCE(MAX(number), 0) + 1 FROM ' || quote_ident(TG_TABLE_SCHEMA) || '.' "
                "|| quote_ident(TG_TABLE_NAME) || ' WHERE learner = $1' INTO NEW.number USING NEW.learner; "
                "END IF; RETURN NEW; END $$"
            )
        )
    for table in NUMBERED_TABLES:
        conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN number INTEGER NOT NULL DEFAULT 0"))
        conn.execute(sa.text(f"UPDATE {table} SET number = id"))
        conn.execute(sa.text(f"CREATE UNIQUE INDEX uq_{table}_learner_number ON {table} (learner, number)"))
        # (learner, number) serves every lookup by learner that migration 5's index served: one index to
        # keep up on each insert instead of two (a 5,000-entry BibTeX import pays for each).
        conn.execute(sa.text(f"DROP INDEX ix_{table}_learner"))
        if postgres:
            conn.execute(
                sa.text(
                    f"CREATE TRIGGER number_{table} BEFORE INSERT ON {table} "
                    "FOR EACH ROW EXECUTE FUNCTION roadmap_number_new_row()"
                )
            )
        else:
            # SQLite's triggers cannot change NEW: number the row right after it went in (the 0 it went in
            # with never meets another 0: each is renumbered before the next row is inserted).
            conn.execute(
                sa.text(
                    f"CREATE TRIGGER number_{table} AFTER INSERT ON {table} WHEN NEW.number = 0 BEGIN "
                    f"UPDATE {table} SET number = (SELECT COALESCE(MAX(number), 0) + 1 FROM {table} "
                    "WHERE learner = NEW.learner) WHERE id = NEW.id; END"
                )
            )
        if postgres:
            # A PostgreSQL view's `*` was expanded when migration 8 made it: show the number through it.
            conn.execute(
                sa.text(
                    f"CREATE OR REPLACE VIEW cohort_{table} WITH (security_barrier = true) AS SELECT * FROM {table}"
                )
            )


def m013_narrow_cohort_views(conn: sa.Connection) -> None:
    """The cohort views show only what the cohort commands read (roles.COHORT_VIEW_COLUMNS): counts, states,
    scores and dates, never a learner's notes, ratings, abstracts, evidence or links. On PostgreSQL a view
    cannot lose columns in place, so each is dropped and made again, and every role that could read the old
    one (the learners' logins) is granted the new one."""
    from roadmap_cli.store import roles

    postgres = conn.dialect.name == "postgresql"
    barrier = " WITH (security_barrier = true)" if postgres else ""
    for table, columns in roles.COHORT_VIEW_COLUMNS.items():
        view = roles.view_name(table)
        readers = []
        if postgres:
            readers = [
                r[0]
                for r in conn.execute(
                    sa.text(
                        "SELECT DISTINCT grantee FROM information_schema.role_table_grants WHERE table_name = :view "
                        "AND privilege_type = 'SELECT' AND grantee <> current_user"
                    ),
                    {"view": view},
                )
            ]
        conn.execute(sa.text(f"DROP VIEW {view}"))
        conn.execute(sa.text(f"CREATE VIEW {view}{barrier} AS SELECT {', '.join(columns)} FROM {table}"))
        for reader in readers:
            grantee = "PUBLIC" if reader == "PUBLIC" else '"' + reader.replace('"', '""') + '"'
            conn.execute(sa.text(f"GRANT SELECT ON {view} TO {grantee}"))


def m014_submission_not_graded(conn: sa.Connection) -> None:
    """roadmap_submissions.status 'failed' (the worker could not grade it, no attempt) becomes 'not-graded':
    "failed" is an attempt's outcome only (a grade that ran and did not pass). The queue's table exists only
    on a cohort server whose worker ran (store/queue.py makes it); elsewhere there is nothing to do.
    (Numbered 14: migrations 12 and 13 are the same wave's learner numbers and narrow cohort views.)"""
    if conn.dialect.name != "postgresql":
        return
    from roadmap_cli.store.queue import STATUS_CHECK, TABLE, exists

    if not exists(conn):
        return
    conn.execute(sa.text(f"ALTER TABLE {TABLE} DROP CONSTRAINT IF EXISTS {TABLE}_status_check"))
    conn.execute(sa.text(f"UPDATE {TABLE} SET status = 'not-graded' WHERE status = 'failed'"))
    conn.execute(sa.text(f"ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_status_check {STATUS_CHECK}"))


def m015_bounded_submissions(conn: sa.Connection) -> None:
    """The grading queue bounds what a learner's login can insert by raw SQL (red team D3): a submission's
    files at most store/queue.py MAX_FILES_BYTES, a lab id shaped like one, at most MAX_WAITING of a learner's
    submissions queued at once. PostgreSQL with a queue only; a queue made later gets them from its DDL."""
    if conn.dialect.name != "postgresql":
        return
    from roadmap_cli.store import queue

    queue.bound_existing(conn)


# Append only. The version of a database is the number of migrations applied.
MIGRATIONS: list[Migration] = [
    ("core_progress", m001_core_progress),
    ("labs", m002_labs),
    ("research", m003_research),
    ("imported_attempts", m004_imported_attempts),
    ("learners", m005_learners),
    ("quiz_review", m006_quiz_review),
    ("attempt_sandbox", m007_attempt_sandbox),
    ("cohort_security", m008_cohort_security),
    ("attempt_graded_on", m009_attempt_graded_on),
    ("paper_metadata", m010_paper_metadata),
    ("verified_attempts", m011_verified_attempts),
    ("learner_numbers", m012_learner_numbers),
    ("narrow_cohort_views", m013_narrow_cohort_views),
    ("submission_not_graded", m014_submission_not_graded),
    ("bounded_submissions", m015_bounded_submissions),
]
