"""Who the current learner is: the id stamped on every row a person owns.

Every person-owned table carries a `learner` TEXT column (migration 5). One
SQLite home is one person, so nothing changes for a single user: the id is
chosen once and pinned. A PostgreSQL database is a cohort: many learners
share it, so the id is a property of the machine (the data home), not of the
database.

Where the id comes from, first match wins:

1. `ROADMAP_LEARNER` in the environment (scripts, CI, several learners on one
   machine);
2. the `learner` setting saved by `roadmap init --learner NAME`: on SQLite the
   database-wide settings row (learner '', key 'learner'); with a server
   database in `<home>/learner`, because the server's settings table is shared;
3. the git `user.email`;
4. `local`.

On SQLite, migration 5 pins the id it chose (2 is then always set), so a
later change of the git e-mail does not hide the learner's own rows.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import UserError

LOCAL_LEARNER = "local"
ENV_VAR = "ROADMAP_LEARNER"
SETTING_KEY = "learner"
# Settings rows that belong to the database, not to a person: the pinned id.
DATABASE_SCOPE = ""
HOME_FILE = "learner"
# The id a SQLite database holds for its one person (`roadmap init --learner`, or pinned by migration 5).
SAVED_LEARNER_SQL = "SELECT value FROM settings WHERE learner = :scope AND key = :key"

# E-mail addresses and handles: letters, digits and . _ @ + -, not starting
# with punctuation (a leading '-' would read as an option in scripts).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+\-]{0,127}")


def validate_learner(name: str, *, source: str = "learner name") -> str:
    """The name itself, or one clear line saying what is wrong with it."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UserError(
            f"{source} {name!r} is not a valid learner id: use 1-128 letters, digits and . _ @ + - "
            "(starting with a letter or digit), e.g. ada@example.org"
        )
    return name


def git_email() -> Optional[str]:
    """`git config user.email`, when git exists, it is set and is a valid id."""
    try:
        out = subprocess.run(
            ["git", "config", "--get", "user.email"],
            capture_output=True,
            text=True,
            timeout=5,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    email = out.stdout.strip()
    return email if out.returncode == 0 and _NAME.fullmatch(email or "") else None


def default_learner() -> str:
    """The id used when nothing was saved: $ROADMAP_LEARNER, git user.email, `local`."""
    env = os.environ.get(ENV_VAR)
    if env:
        return validate_learner(env, source=f"${ENV_VAR}")
    return git_email() or LOCAL_LEARNER


def _is_server(store) -> bool:
    return getattr(store, "path", None) is None


def _home_file(store) -> Optional[Path]:
    home = getattr(store, "home", None)
    return Path(home) / HOME_FILE if home is not None else None


def saved_learner(store) -> Optional[str]:
    """The id saved by `roadmap init --learner` (or pinned by migration 5), if any."""
    if _is_server(store):
        path = _home_file(store)
        try:
            text = path.read_text(encoding="utf-8").strip() if path is not None else ""
        except OSError:
            return None
        return validate_learner(text, source=f"{path}:") if text else None
    import sqlalchemy as sa

    try:
        with store.engine.begin() as conn:  # not store.connection(): it asks us first
            value = conn.execute(sa.text(SAVED_LEARNER_SQL), {"scope": DATABASE_SCOPE, "key": SETTING_KEY}).scalar()
    except sa.exc.DBAPIError:  # a database from before migration 5 (opened without migrating)
        return None
    return saved_value(value)


def saved_value(value: Optional[str]) -> Optional[str]:
    """The learner id of the settings row SAVED_LEARNER_SQL read (a JSON string; an old plain one too)."""
    if value is None:
        return None
    try:
        name = json.loads(value)
    except ValueError:
        name = value
    return validate_learner(name, source="the saved learner setting")


def known_learner(saved: Callable[[], Optional[str]]) -> Optional[str]:
    """Which learner this process is, without asking git: $ROADMAP_LEARNER, else the id saved in this
    home (`saved()`, only asked when the environment names none); None when neither says. The one order
    of the two for both stores: the lean one (store/lite.py: None, the full store must open) and the full
    one (current_learner, which then falls back to git's user.email, then `local`)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return validate_learner(env, source=f"${ENV_VAR}")
    return saved()


def _scoped_role(store):
    """On a server whose tables are row-secured, the logged-in learner role (None: SQLite, or the instructor)."""
    engine = getattr(store, "engine", None)
    if not _is_server(store) or engine is None or engine.dialect.name != "postgresql":
        return None
    from roadmap_cli.store.roles import session

    with store.engine.connect() as conn:
        who = session(conn)
        conn.rollback()
    return None if who.instructor else who


def is_scoped_learner(store) -> bool:
    """A cohort learner's own login, which row-level security scopes (False: SQLite, or the instructor)."""
    return _scoped_role(store) is not None


def current_learner(store) -> str:
    """The learner this process acts as (cached on the store: one lookup per command)."""
    cached = getattr(store, "_learner", None)
    if cached is not None:
        return cached
    env = os.environ.get(ENV_VAR)
    scoped = _scoped_role(store)
    if scoped is not None:
        # A cohort learner's own login role (store/roles.py): the server decides who they are; a different
        # claim from the environment or this home's saved id is refused, never silently used.
        from roadmap_cli.store.roles import check_claimed_learner

        if env:
            check_claimed_learner(scoped, env, f"${ENV_VAR}")
        saved = saved_learner(store)
        if saved:
            check_claimed_learner(scoped, saved, f"the learner saved in {_home_file(store)}")
        name = validate_learner(scoped.role, source="your database login")
    else:
        name = known_learner(lambda: saved_learner(store)) or default_learner()
    try:
        store._learner = name
    except AttributeError:  # a stand-in store object without attributes
        pass
    return name


def set_learner(store, name: str) -> str:
    """Save `name` as this home's learner (`roadmap init --learner NAME`).

    On SQLite, a rename: rows of the previous id move to the new one when the
    new id has none yet (one person, one home: their history follows them)."""
    validate_learner(name)
    if _is_server(store):
        path = _home_file(store)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{HOME_FILE}.{os.getpid()}")
        tmp.write_text(name + "\n", encoding="utf-8")
        os.replace(tmp, path)
    else:
        import sqlalchemy as sa

        previous = saved_learner(store) or default_learner()
        with store.connection() as conn:
            if previous != name:
                tables = person_tables(conn)
                taken = any(
                    conn.execute(sa.text(f"SELECT 1 FROM {t} WHERE learner = :n LIMIT 1"), {"n": name}).first()
                    for t in tables
                )
                if not taken:
                    for table in tables:
                        conn.execute(
                            sa.text(f"UPDATE {table} SET learner = :n WHERE learner = :old"),
                            {"n": name, "old": previous},
                        )
            _pin(conn, name)
    try:
        store._learner = name
    except AttributeError:
        pass
    return name


def _pin(conn, name: str) -> None:
    import sqlalchemy as sa

    params = {"scope": DATABASE_SCOPE, "key": SETTING_KEY, "value": json.dumps(name)}
    conn.execute(sa.text("DELETE FROM settings WHERE learner = :scope AND key = :key"), params)
    conn.execute(sa.text("INSERT INTO settings (learner, key, value) VALUES (:scope, :key, :value)"), params)


# Tables whose rows belong to a person (migration 5 gave each a `learner`
# column). Migration 6 (quiz) appends its own; `person_tables` reads the
# schema so it never goes stale.
PERSON_TABLES_V5 = (
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


def person_tables(conn) -> list[str]:
    """Every table with a `learner` column, by name (the grading queue's submissions are not a person's
    rows to write: a learner may only insert a snapshot there, store/queue.py grants that)."""
    import sqlalchemy as sa

    from roadmap_cli.store.queue import TABLE as QUEUE_TABLE

    inspector = sa.inspect(conn)
    return sorted(
        t
        for t in inspector.get_table_names()
        if t != QUEUE_TABLE and any(c["name"] == "learner" for c in inspector.get_columns(t))
    )
