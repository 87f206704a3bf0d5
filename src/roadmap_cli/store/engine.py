"""Opening the database: engine, pragmas, transactions, migrations.

SQLite is used in WAL mode with a 30 s busy timeout, and every transaction
starts with BEGIN IMMEDIATE: a writer takes the write lock up front instead of
upgrading a read lock later, which is what makes two `roadmap` processes
writing at once wait for each other instead of failing with "database is
locked". `DATABASE_URL` selects another database (PostgreSQL) later; the
SQLite-only parts are skipped there.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from roadmap_cli.errors import StoreError

DB_FILENAME = "roadmap.db"
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 30_000


class Store:
    """A migrated database. Cheap to pass around; sessions are short."""

    def __init__(self, engine, url: str, path: Path | None) -> None:
        self.engine = engine
        self.url = url
        self.path = path

    @contextlib.contextmanager
    def session(self) -> Iterator["object"]:
        """A SQLModel Session in one transaction: committed on success, rolled back on error."""
        from sqlalchemy.exc import OperationalError
        from sqlmodel import Session

        try:
            with Session(self.engine, expire_on_commit=False) as session:
                with session.begin():
                    yield session
        except OperationalError as exc:
            raise StoreError(f"database error on {self.path or self.url}: {exc.orig}") from None

    @contextlib.contextmanager
    def connection(self) -> Iterator["object"]:
        """A Core connection in one transaction (for bulk SQL and migrations)."""
        with self.engine.begin() as conn:
            yield conn


def _check_sqlite_file(path: Path) -> None:
    """Refuse a file that is not a SQLite database, without touching it."""
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with open(path, "rb") as fh:
            header = fh.read(16)
    except OSError as exc:
        raise StoreError(f"cannot read database {path}: {exc.strerror}") from None
    if header != SQLITE_MAGIC:
        raise StoreError(f"{path} is not a roadmap database (corrupted?); it was left untouched — move it aside to start fresh")


def _sqlite_engine(path: Path):
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import URL

    # URL.create, not an f-string: a home path with '?', '#' or '%' in it
    # would be parsed as a query string and the file created elsewhere.
    url = URL.create("sqlite", database=str(path))
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # pragma: no cover - exercised by every test
        # We issue BEGIN ourselves (below); pysqlite's implicit transactions
        # would start a deferred one instead.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # pragma: no cover
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def open_store(home: Path, *, migrate: bool = True) -> Store:
    """Open (creating if needed) the database under `home` and migrate it.

    `DATABASE_URL`, when set, wins over the SQLite file in the home.
    """
    from sqlalchemy.exc import DatabaseError

    from roadmap_cli.store import migrations

    url = os.environ.get("DATABASE_URL")
    path: Path | None = None
    if url:
        from sqlalchemy import create_engine
        from sqlalchemy.exc import ArgumentError

        try:
            engine = create_engine(url)
        except ArgumentError as exc:  # includes NoSuchModuleError (unknown dialect)
            raise StoreError(f"DATABASE_URL is not a usable database URL: {exc}") from None
        except ImportError as exc:  # the dialect's driver (e.g. psycopg) is not installed
            raise StoreError(f"DATABASE_URL needs a database driver that is not installed: {exc.name or exc}") from None
    else:
        path = Path(home) / DB_FILENAME
        _check_sqlite_file(path)
        engine = _sqlite_engine(path)
        url = f"sqlite:///{path}"
    store = Store(engine, url, path)
    try:
        if migrate:
            migrations.migrate(store)
        else:
            migrations.check_not_newer(store)
    except DatabaseError as exc:
        engine.dispose()
        where = path or url
        raise StoreError(f"cannot use database {where}: {exc.orig} (the file was left untouched)") from None
    return store
