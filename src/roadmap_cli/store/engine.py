"""Opening the database: engine, pragmas, transactions, migrations.

SQLite is used in WAL mode with a 30 s busy timeout, and every transaction
starts with BEGIN IMMEDIATE: a writer takes the write lock up front instead of
upgrading a read lock later, which is what makes two `roadmap` processes
writing at once wait for each other instead of failing with "database is
locked". `DATABASE_URL` selects another database (PostgreSQL) later; the
SQLite-only parts are skipped there.

Safety rules, each with a test in tests/test_hostile_store.py:
- The file is only ever opened by SQLite. Closing *any* descriptor of a
  SQLite file drops every POSIX lock the process holds on it (SQLite's
  "how to corrupt" list), so there is no header check with plain file I/O:
  SQLite itself says "file is not a database" (SQLITE_NOTADB).
- A SQLite file that is not roadmap's (tables, but no `schema_migrations`
  ledger of ours) is refused before any pragma could change it.
- SQLite errors become one line and exit 3 (`errors.StoreError`) in one
  place, the engine's `handle_error` hook: corruption says how to restore.
- Before the first write through an engine (once per command) `PRAGMA
  quick_check` runs, so a corrupt database refuses writes instead of
  spreading the damage.
- A data home we cannot write is opened read-only: reads work, writes get
  one line.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

from roadmap_cli.errors import StoreError

DB_FILENAME = "roadmap.db"
BUSY_TIMEOUT_MS = 30_000
LEDGER = "schema_migrations"
# Statements that change the file: the first one of a transaction triggers the
# quick_check below. Reads (SELECT, PRAGMA) never pay for it.
_WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "REPLACE")

RESTORE_HINT = (
    "restore it: move the file aside, then `roadmap import` an export (`roadmap export` may still "
    "read it) or a backup from <home>/backups/"
)


class Store:
    """A migrated database. Cheap to pass around; sessions are short."""

    def __init__(
        self, engine, url: str, path: Path | None, *, read_only: bool = False, home: Path | None = None
    ) -> None:
        self.engine = engine
        self.url = url  # passwords hidden (render_as_string(hide_password=True))
        self.path = path
        self.read_only = read_only
        self.home = home  # the data home (where a server store keeps this machine's learner id)
        self._learner: str | None = None

    @property
    def scoped_learner(self) -> bool:
        """Logged in to a cohort server as a learner (row-level security scopes every write)."""
        from roadmap_cli.store.learners import is_scoped_learner

        return is_scoped_learner(self)

    @property
    def learner(self) -> str:
        """The current learner's id (store/learners.py), looked up once."""
        from roadmap_cli.store.learners import current_learner

        return current_learner(self)

    @property
    def where(self) -> str:
        return str(self.path or self.url)

    @contextlib.contextmanager
    def session(self) -> Iterator["object"]:
        """A SQLModel Session in one transaction: committed on success, rolled back on error."""
        from sqlalchemy.exc import OperationalError
        from sqlmodel import Session

        # Looked up before the transaction: on SQLite the id is read through
        # another connection, which would wait for this one's write lock.
        self.learner  # noqa: B018 - cached on the store
        try:
            with Session(self.engine, expire_on_commit=False) as session:
                session.info["store"] = self  # writers find the current learner here
                _stamp_learner_on_flush(session, self)
                with session.begin():
                    yield session
        except OperationalError as exc:
            raise StoreError(f"database error on {self.where}: {exc.orig}") from None

    def write(self, body, *, attempts: int = 5):
        """Run `body(session)` in one transaction and return its result; on a
        server, a deadlock or serialization failure runs it again (at most
        `attempts` times, with a growing pause). `body` must only touch the
        database: a rolled-back try leaves nothing behind, so nothing counts twice."""

        def once():
            with self.session() as session:
                return body(session)

        return self._retrying(once, attempts)

    def write_sql(self, body, *, attempts: int = 5):
        """`write` for plain SQL: `body(sql)` gets a store/sql.py `Sql` in one
        write transaction (BEGIN IMMEDIATE on SQLite), retried like `write`."""
        from roadmap_cli.store.sql import AlchemySql

        def once():
            with self.connection() as conn:
                return body(AlchemySql(conn))

        return self._retrying(once, attempts)

    def read_sql(self, body):
        """`body(sql)` in one transaction, for reads in plain SQL (store/sql.py)."""
        from roadmap_cli.store.sql import AlchemySql

        with self.connection() as conn:
            return body(AlchemySql(conn))

    def _retrying(self, once, attempts: int):
        import random
        import time

        for attempt in range(1, attempts + 1):
            try:
                return once()
            except Exception as exc:  # noqa: BLE001 - only retryable server errors go round again
                if self.path is not None or attempt == attempts or not _retryable(exc):
                    raise
            time.sleep(min(1.0, 0.02 * 2**attempt) * random.uniform(0.5, 1.5))

    @contextlib.contextmanager
    def connection(self) -> Iterator["object"]:
        """A Core connection in one transaction (for bulk SQL and migrations)."""
        if self._learner is None:  # before the transaction, as in session()
            self.learner  # noqa: B018
        with self.engine.begin() as conn:
            yield conn


def _retryable(exc: BaseException) -> bool:
    from roadmap_cli.store.server import is_retryable

    return is_retryable(exc)  # a psycopg error, or the StoreError the error hook made of one (it keeps .sqlstate)


def _stamp_learner_on_flush(session, store: "Store") -> None:
    """New rows without a learner get the current learner's id: every person-
    owned table has the column (migration 5), so no writer can forget it."""
    from sqlalchemy import event

    @event.listens_for(session, "before_flush")
    def _stamp(sess, _context, _instances):
        for obj in sess.new:
            if getattr(obj, "learner", False) is None:
                obj.learner = store.learner


# ---------------------------------------------------------------- errors


def describe_sqlite_error(orig: BaseException, where: str) -> str | None:
    """One line for a SQLite error a user can act on; None for anything else
    (a programming error keeps its traceback)."""
    code = getattr(orig, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = " ".join(str(orig).split())  # the error is one line, whatever SQLite said
    if primary == sqlite3.SQLITE_NOTADB or "file is not a database" in text:
        return f"{where} is not a roadmap database (not SQLite, or its header is damaged); it was left untouched — move it aside to start fresh"
    if primary == sqlite3.SQLITE_CORRUPT or "malformed" in text:
        return f"database {where} is corrupted ({text}); {RESTORE_HINT}"
    if primary == sqlite3.SQLITE_FULL:
        return f"cannot write {where}: the disk is full (nothing was saved; free some space and retry)"
    if primary == sqlite3.SQLITE_READONLY:
        return f"{where} is read-only: this command needs to save changes (reads still work)"
    if primary == sqlite3.SQLITE_CANTOPEN:
        return f"cannot open database {where} ({text}): check that its folder exists and is accessible"
    if primary in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_PERM, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return f"database error on {where}: {text}"
    return None


def _install_error_hook(engine, where: str, *, secret: str | None = None) -> None:
    from sqlalchemy import event

    server = engine.dialect.name != "sqlite"

    @event.listens_for(engine, "handle_error")
    def _on_error(ctx):  # pragma: no cover - exercised by the hostile tests
        if isinstance(ctx.original_exception, StoreError):
            raise ctx.original_exception
        if server:
            from roadmap_cli.store.server import describe_server_error

            line = describe_server_error(ctx.original_exception, where, secret=secret)
        else:
            line = describe_sqlite_error(ctx.original_exception, where)
        if line is not None:
            error = StoreError(line)
            error.sqlstate = getattr(ctx.original_exception, "sqlstate", None)  # Store.write retries on some
            raise error from None


# ---------------------------------------------------------------- SQLite


def _vet_file(dbapi_conn: sqlite3.Connection, where: str) -> None:
    """Refuse a file that is not ours, through SQLite and before any pragma
    (journal_mode=WAL rewrites header bytes): a foreign file stays byte-identical.

    Raises sqlite3.DatabaseError (SQLITE_NOTADB) for a file that is not SQLite."""
    names = {row[0] for row in dbapi_conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not names:
        return  # a new or 0-byte file: ours to initialise
    if LEDGER not in names:
        raise StoreError(
            f"{where} is a SQLite database of some other program (tables: "
            f"{', '.join(sorted(names)[:5])}{', ...' if len(names) > 5 else ''}); it was left untouched — "
            "point --home or ROADMAP_HOME elsewhere, or move the file aside"
        )
    columns = {row[1] for row in dbapi_conn.execute(f"PRAGMA table_info({LEDGER})")}
    if columns != {"version", "name", "applied_at"}:
        raise StoreError(
            f"{where} has a `{LEDGER}` table that is not roadmap's; it was left untouched — "
            "point --home or ROADMAP_HOME elsewhere, or move the file aside"
        )


def _writable(home: Path, path: Path) -> bool:
    if not os.access(home, os.W_OK | os.X_OK):
        return False
    return not path.exists() or os.access(path, os.W_OK)


def _connect_uri(path: Path, read_only: bool) -> str:
    uri = "file:" + quote(str(path))  # a home with '?', '#' or '%' stays one path
    if not read_only:
        return uri + "?mode=rwc"
    wal = path.with_name(path.name + "-wal")
    # Without write access SQLite cannot create the -shm index a WAL reader
    # needs; with no -wal file every committed row is in the main file, so
    # reading it as immutable is exact. A leftover -wal (a writer died) means
    # the last commits live there: read it the normal way.
    return uri + ("?mode=ro" if wal.exists() else "?mode=ro&immutable=1")


def _sqlite_engine(path: Path, *, read_only: bool):
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import URL
    from sqlalchemy.pool import QueuePool

    where = str(path)
    uri = _connect_uri(path, read_only)
    vetted: list[bool] = []

    def connect() -> sqlite3.Connection:
        dbapi_conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        try:
            if not vetted:  # once per engine: the first connection looks before anything writes
                _vet_file(dbapi_conn, where)
                vetted.append(True)
        except BaseException:
            dbapi_conn.close()
            raise
        return dbapi_conn

    url = URL.create("sqlite", database=where)
    engine = create_engine(url, creator=connect, poolclass=QueuePool)
    _install_error_hook(engine, where)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # pragma: no cover - exercised by every test
        # We issue BEGIN ourselves (below); pysqlite's implicit transactions
        # would start a deferred one instead.
        dbapi_conn.isolation_level = None
        configure_connection(dbapi_conn, read_only=read_only)

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # pragma: no cover
        # A read-only file cannot take the write lock; a deferred BEGIN reads fine.
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    # The quick_check runs before the first write of this engine (one per
    # command: a few ms for a learner's database), not before every
    # transaction: a bulk caller committing row by row would pay it each time.
    checked: list[bool] = []

    @event.listens_for(engine, "before_cursor_execute")
    def _before_write(conn, cursor, statement, _params, _context, _many):  # pragma: no cover
        if checked or not statement.lstrip().upper().startswith(_WRITE_VERBS):
            return
        if read_only:
            raise StoreError(
                f"{where} is read-only (no write access to the data home): "
                "this command needs to save changes (reads still work)"
            )
        _refuse_if_corrupt(cursor.connection, where)
        checked.append(True)

    return engine


def configure_connection(dbapi_conn: sqlite3.Connection, *, read_only: bool) -> None:
    """The pragmas of every connection to a roadmap SQLite file (this engine's and store/lite.py's)."""
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if not read_only:
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _refuse_if_corrupt(dbapi_conn: sqlite3.Connection, where: str) -> None:
    """quick_check (the page structure, not the indexes' contents: O(pages),
    about a millisecond for a learner's database) before the first write."""
    try:
        verdict = dbapi_conn.execute("PRAGMA quick_check(1)").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        verdict = str(exc)
    if verdict != "ok":
        verdict = " ".join(str(verdict).replace("*** in database main ***", "").split())  # one line
        raise StoreError(f"database {where} is corrupted ({verdict}); writes are refused; {RESTORE_HINT}")


# ---------------------------------------------------------------- DATABASE_URL


def _engine_from_url(url: str):
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(
            "DATABASE_URL is not a database URL (expected e.g. postgresql://user@host/db "
            "or sqlite:////path/to/roadmap.db)"
        ) from None
    if parsed.get_backend_name() == "postgres":
        # postgres://, the form hosting providers print: SQLAlchemy only knows "postgresql".
        driver = parsed.drivername.partition("+")[2]
        parsed = parsed.set(drivername="postgresql" + (f"+{driver}" if driver else ""))
    database = str(parsed.database or "")
    if parsed.get_backend_name() == "sqlite" and (
        database in ("", ":memory:")
        or ":memory:" in database
        or "mode=memory" in database
        or parsed.query.get("mode") == "memory"
    ):
        raise StoreError(
            "DATABASE_URL points at an in-memory database, which keeps nothing after the command; "
            "use a file (sqlite:////path/to/roadmap.db) or unset it"
        )
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("psycopg2", "pg8000", "asyncpg"):
        raise StoreError(
            f"DATABASE_URL uses the {parsed.get_driver_name()} driver; roadmap speaks psycopg 3: "
            "write postgresql+psycopg://user@host/db"
        )
    if parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")  # psycopg 3, not SQLAlchemy's default psycopg2
    try:
        engine = create_engine(parsed, **_server_engine_options(parsed))
    except ArgumentError as exc:  # includes NoSuchModuleError (unknown dialect)
        raise StoreError(f"DATABASE_URL is not a usable database URL: {exc}") from None
    except ImportError as exc:  # the dialect's driver (e.g. psycopg) is not installed
        raise StoreError(f"DATABASE_URL needs a database driver that is not installed: {exc.name or exc}") from None
    where = parsed.render_as_string(hide_password=True)
    _install_error_hook(engine, where, secret=parsed.password)
    if parsed.get_backend_name() == "postgresql":
        from roadmap_cli.store.server import install_postgres_hooks

        install_postgres_hooks(engine)
    return engine, where


def _server_engine_options(parsed) -> dict:
    if parsed.get_backend_name() != "postgresql":
        return {}
    # pool_pre_ping: a server restarted between two commands of one process
    # (tests, the bench) gives a fresh connection instead of an error.
    # connect_timeout: an unreachable host fails in seconds, not minutes.
    timeout = os.environ.get("ROADMAP_PG_CONNECT_TIMEOUT", "10")
    if not timeout.isdigit() or int(timeout) < 1:
        raise StoreError(f"ROADMAP_PG_CONNECT_TIMEOUT={timeout!r} is not a number of seconds (e.g. 10)")
    return {"pool_pre_ping": True, "connect_args": {"connect_timeout": int(timeout)}}


def _check_foreign_server_db(store: Store) -> None:
    """A server database (PostgreSQL) holding tables but no ledger of ours is
    someone else's: refuse it instead of adding roadmap's tables to it."""
    import sqlalchemy as sa

    with store.engine.connect() as conn:
        names = set(sa.inspect(conn).get_table_names())
        conn.rollback()
    if names and LEDGER not in names:
        raise StoreError(
            f"DATABASE_URL {store.url} holds tables of some other program "
            f"({', '.join(sorted(names)[:5])}); refusing to add roadmap's tables to it"
        )


def open_store(home: Path, *, migrate: bool = True, url: str | None = None) -> Store:
    """Open (creating if needed) the database under `home` and migrate it.

    `DATABASE_URL`, when set, wins over the SQLite file in the home. Stored
    rows are not scanned here (that costs every command ~0.1 s): the CLI
    names a malformed row only after a command crashed on one
    (roadmap_cli/portable/rowcheck.py, `explain_crash`).
    """
    from sqlalchemy.exc import DatabaseError, OperationalError

    from roadmap_cli.store import migrations

    url = url or os.environ.get("DATABASE_URL")  # `url`: another database (`roadmap db copy --to`)
    path: Path | None = None
    read_only = False
    if url:
        engine, url = _engine_from_url(url)
    else:
        path = Path(home) / DB_FILENAME
        if path.exists() and not path.is_file():
            raise StoreError(f"{path} is not a file (a folder?); move it aside to start fresh")
        read_only = not _writable(Path(home), path)
        if read_only and not path.exists():
            raise StoreError(f"data home {home} is not writable and holds no database yet (set --home or ROADMAP_HOME)")
        engine = _sqlite_engine(path, read_only=read_only)
        url = f"sqlite:///{path}"
    store = Store(engine, url, path, read_only=read_only, home=Path(home))
    engine.roadmap_store = store  # the PostgreSQL begin hook queues writers per learner (store/server.py)
    try:
        if path is None:
            _check_foreign_server_db(store)
        if migrate and not read_only:
            migrations.migrate(store)
        else:
            version = migrations.check_not_newer(store)
            if read_only and migrate and version < migrations.LATEST:
                raise StoreError(
                    f"{path} needs a schema upgrade but its data home is read-only (run once with write access)"
                )
    except StoreError:
        engine.dispose()
        raise
    except (DatabaseError, OperationalError) as exc:
        engine.dispose()
        line = describe_sqlite_error(getattr(exc, "orig", exc), str(path or url))
        raise StoreError(
            line or f"cannot use database {path or url}: {exc.orig} (the file was left untouched)"
        ) from None
    return store
