"""The lean store: the home's SQLite file through the stdlib sqlite3 module.

`roadmap grade` records one attempt, a few test rows and maybe a checkpoint;
importing SQLAlchemy to do it costs ~0.3 CPU-s (more on a loaded box), and on
a 2-core machine the engine competes with the grader for the CPU while pytest
runs, so that import came out of the learner's wait (issue 13: the engine's
overhead over bare pytest <= 0.8 s). This store runs the same plain SQL
(store/sql.py) without it.

It only ever takes a database the full store would open without changing
anything: the home's SQLite file (no DATABASE_URL), writable, vetted as
roadmap's, at exactly the latest schema version, with a learner that needs no
git lookup. Anything else (a migration due, a read-only home, a foreign or
damaged file, a server) gives None, and the caller opens the full store, which
migrates or says what is wrong in one line. The full store's rules hold here
too, through the same functions: the file is vetted before any pragma, WAL and
busy timeout as in store/engine.py, every transaction BEGIN IMMEDIATE, a
quick_check before the first write, and SQLite errors become one line (StoreError).

Opened to read (`open_lite(home, read_only=True)`), it is also how the console
script finds the workspace to grade before anything else is loaded
(labs/service.workspaces_fast): no write lock taken, and the learner found by
the one function both stores use (store/learners.known_learner).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Iterator, Optional

from roadmap_cli.errors import RoadmapError, StoreError
from roadmap_cli.store import engine as full
from roadmap_cli.store.sql import SqliteSql

# The schema this store writes: migrations.LATEST, which cannot be imported
# here without SQLAlchemy (tests/test_store_lite.py keeps the two equal). A
# database at any other version is left to the full store.
SCHEMA_VERSION = 15


class LiteStore:
    """Duck-types the part of store/engine.py's Store that plain SQL needs:
    `learner`, `where`, `path`, `read_sql`, `write_sql`."""

    lite = True

    def __init__(self, path: Path, learner: str, *, read_only: bool = False) -> None:
        self.path = path
        self.learner = learner
        self.where = str(path)
        self.read_only = read_only  # opened to read (the console script's workspace lookup): no write lock
        self._checked = False  # quick_check done (once per store, as the full store does per engine)

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = _connect(self.path, read_only=self.read_only)
        except sqlite3.Error as exc:
            raise _store_error(exc, self.where) from None
        try:
            yield conn
        finally:
            conn.close()

    def read_sql(self, body):
        return self._transaction(body, write=False)

    def write_sql(self, body):
        return self._transaction(body, write=True)

    def _transaction(self, body, *, write: bool):
        with self._connection() as conn:
            try:
                if write and self.read_only:
                    raise StoreError(f"{self.where} was opened to read only")  # a bug, not a user's mistake
                # Read or write, BEGIN IMMEDIATE as the full store does: a read
                # that later writes never has to upgrade its lock. A read-only store only reads.
                conn.execute("BEGIN" if self.read_only else "BEGIN IMMEDIATE")
                if write and not self._checked:
                    full._refuse_if_corrupt(conn, self.where)
                    self._checked = True
                result = body(SqliteSql(conn))
                conn.execute("COMMIT")
                return result
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise _store_error(exc, self.where) from None
                raise


def open_lite(home: Path, *, read_only: bool = False) -> Optional[LiteStore]:
    """The lean store for `home`, or None when the full store must open it. `read_only`: for a lookup
    before anything is graded (the console script's workspace rows), which takes no write lock."""
    from roadmap_cli.store import learners

    if os.environ.get("DATABASE_URL"):
        return None
    path = Path(home) / full.DB_FILENAME
    if not path.is_file() or (not read_only and not full._writable(Path(home), path)):
        return None
    try:
        conn = _connect(path, vet=True, read_only=read_only)
    except (sqlite3.Error, RoadmapError):
        return None  # the full store opens it again and gives the proper one-line error
    try:
        if conn.execute(f"SELECT coalesce(max(version), 0) FROM {full.LEDGER}").fetchone()[0] != SCHEMA_VERSION:
            return None  # a migration is due (or the file is newer than us): the full store's business

        def saved() -> Optional[str]:
            row = conn.execute(
                learners.SAVED_LEARNER_SQL, {"scope": learners.DATABASE_SCOPE, "key": learners.SETTING_KEY}
            ).fetchone()
            return learners.saved_value(row[0]) if row is not None else None

        # Not pinned yet: None, and the full store looks it up (git) and pins it.
        learner = learners.known_learner(saved)
    except (sqlite3.Error, RoadmapError, ValueError):
        return None  # the full store opens it again and gives the proper one-line error
    finally:
        conn.close()
    return LiteStore(path, learner, read_only=read_only) if learner is not None else None


def _connect(path: Path, *, vet: bool = False, read_only: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(full._connect_uri(path, read_only), uri=True, timeout=full.BUSY_TIMEOUT_MS / 1000)
    try:
        if vet:
            full._vet_file(conn, str(path))  # before any pragma: a foreign file stays byte-identical
        conn.isolation_level = None  # we issue BEGIN ourselves (store/engine.py's connect hook does the same)
        full.configure_connection(conn, read_only=read_only)
    except BaseException:
        conn.close()
        raise
    return conn


def _store_error(exc: sqlite3.Error, where: str) -> Exception:
    line = full.describe_sqlite_error(exc, where)
    return StoreError(line) if line is not None else exc
