"""PostgreSQL specifics (cohort mode): errors as one line, writers queued per
learner, migrations run once, server facts for `roadmap db status`.

Imported only when DATABASE_URL names a server: the SQLite path never loads
this module (nor psycopg).

Concurrency: every transaction starts by taking a transaction-scoped advisory
lock on its learner (`pg_advisory_xact_lock`), the server's counterpart of
SQLite's BEGIN IMMEDIATE. Two commands of the same learner run one after the
other (a `check` racing a `grade` cannot both insert the same checkpoint);
different learners never share a row, so they never wait for each other. What
the lock cannot prevent (a deadlock or serialization failure the server still
reports) is retried a bounded number of times by `Store.write`, and after that
is one line, exit 3: never a traceback.
"""

from __future__ import annotations

import re
from typing import Optional

# SQLSTATEs worth running the transaction again for.
RETRYABLE = {"40001", "40P01"}  # serialization_failure, deadlock_detected
MIGRATION_LOCK = 0x726F61646D6170  # "roadmap": one process migrates a database at a time


def install_postgres_hooks(engine) -> None:
    from sqlalchemy import event

    @event.listens_for(engine, "begin")
    def _queue_per_learner(conn):  # pragma: no cover - exercised by the PostgreSQL tests
        store = getattr(conn.engine, "roadmap_store", None)
        # Not yet known: this is the lookup of who the learner is (store/learners.py), a read that needs no queue.
        learner = getattr(store, "_learner", None)
        if learner is None:
            return
        conn.exec_driver_sql("SELECT pg_advisory_xact_lock(hashtext(%(key)s))", {"key": "roadmap-learner:" + learner})


def lock_for_migration(conn) -> None:
    """Held until the migrating transaction ends: a second process waits, then
    finds the schema current."""
    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")


def sqlstate(exc: BaseException) -> Optional[str]:
    orig = getattr(exc, "orig", exc)
    return getattr(orig, "sqlstate", None)


def is_retryable(exc: BaseException) -> bool:
    return sqlstate(exc) in RETRYABLE


def _host(where: str) -> str:
    """host:port (or the socket directory) of a redacted URL."""
    from sqlalchemy.engine import make_url

    try:
        url = make_url(where)
    except Exception:  # noqa: BLE001 - `where` is always ours; be safe anyway
        return "the database server"
    host = url.host or url.query.get("host") or "localhost"
    if isinstance(host, tuple):
        host = host[0]
    return f"{host}:{url.port or 5432}"


def redact(text: str, secret: Optional[str]) -> str:
    if secret:
        text = text.replace(secret, "***")
    # A URL with a password inside a driver message, just in case.
    return re.sub(r"(://[^:/@\s]+:)[^@\s]+@", r"\1***@", text)


def describe_server_error(exc: BaseException, where: str, *, secret: Optional[str] = None) -> Optional[str]:
    """One line for a server error a user can act on; None for a programming
    error (a bad query keeps its traceback)."""
    import psycopg

    if not isinstance(exc, psycopg.Error):
        return None
    host = _host(where)
    text = redact(" ".join(str(exc).split()), secret)
    state = getattr(exc, "sqlstate", None)
    low = text.lower()
    if state in ("28P01", "28000") or "password authentication failed" in low or "no password supplied" in low:
        return (
            f"cannot log in to the database server {host}: authentication failed "
            "(check the user and password in DATABASE_URL)"
        )
    if state == "3D000" or ("database" in low and "does not exist" in low):
        return f"the database server {host} has no such database ({text.split('FATAL:')[-1].strip()}): create it first"
    if state in RETRYABLE:
        return (
            f"the database server {host} kept reporting a conflict ({text}); nothing was saved — run the command again"
        )
    if (
        state in ("57P01", "57P02", "57P03")
        or "server closed the connection" in low
        or "terminating connection" in low
        or "consuming input failed" in low
        or "connection is closed" in low
        or "connection is lost" in low
    ):
        return (
            f"lost the connection to the database server {host} (it stopped or restarted); "
            "this command's change was not saved — run it again once the server is up"
        )
    if isinstance(exc, psycopg.OperationalError):
        reason = text.split(" failed: ")[-1] if " failed: " in text else text
        reason = reason.split(" Is the server running")[0].strip()
        return f"cannot reach the database server {host}: {reason}"
    return None


def server_facts(store) -> dict:
    """Backend and server version for `roadmap db status`."""
    with store.engine.connect() as conn:
        version = conn.exec_driver_sql("SHOW server_version").scalar()
        conn.rollback()
    return {"backend": "postgresql", "server_version": version, "driver": "psycopg " + _psycopg_version()}


def _psycopg_version() -> str:
    import psycopg

    return psycopg.__version__
