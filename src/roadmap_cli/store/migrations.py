"""The schema's history: an ordered, append-only list of small migrations.

Each migration is applied once, in order, inside one transaction, and recorded
in `schema_migrations`. Never edit or reorder a released migration: add a new
one at the end. Each one declares its tables with SQLAlchemy Core, frozen as
they were at that version, so the same list runs on SQLite and PostgreSQL.

The steps and their order: store/migration_steps.py. This module applies
them and answers what version a database is at.
"""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa

from roadmap_cli.errors import StoreError
from roadmap_cli.store.migration_steps import MIGRATIONS

LATEST = len(MIGRATIONS)

_LEDGER = sa.Table(
    "schema_migrations",
    sa.MetaData(),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("applied_at", sa.String, nullable=False),
)


def applied_version(conn: sa.Connection) -> int:
    if not sa.inspect(conn).has_table("schema_migrations"):
        return 0
    return conn.execute(sa.select(sa.func.coalesce(sa.func.max(_LEDGER.c.version), 0))).scalar_one()


def _refuse_newer(version: int, where: str) -> None:
    if version > LATEST:
        raise StoreError(
            f"database {where} has schema version {version}, newer than this roadmap understands "
            f"({LATEST}); upgrade roadmap-cli"
        )


def check_not_newer(store) -> int:
    with store.engine.connect() as conn:
        version = applied_version(conn)
        conn.rollback()
    _refuse_newer(version, str(store.path or store.url))
    return version


def migrate(store, *, target: int | None = None) -> list[str]:
    """Apply pending migrations (up to `target`); return the names applied."""
    target = LATEST if target is None else target
    done: list[str] = []
    with store.engine.begin() as conn:
        # One transaction: with BEGIN IMMEDIATE two processes opening a fresh
        # database at once migrate it exactly once.
        version = applied_version(conn)
        _refuse_newer(version, str(store.path or store.url))
        if version >= target:
            return done
        if conn.dialect.name == "postgresql":
            # No BEGIN IMMEDIATE on a server: an advisory lock makes a second
            # process wait, then see (READ COMMITTED: each statement takes a
            # fresh snapshot) the migrations the first one committed.
            from roadmap_cli.store.server import lock_for_migration

            lock_for_migration(conn)
            version = applied_version(conn)
            if version >= target:
                return done
            from roadmap_cli.store.roles import session

            who = session(conn)
            if not who.instructor:
                raise StoreError(
                    f"the cohort database needs {target - version} schema upgrade(s) that only its "
                    f"owner can apply (you are logged in as learner {who.role!r}): ask the instructor "
                    "to run `roadmap db status` once with this roadmap version"
                )
        if version == 0:
            _LEDGER.create(conn, checkfirst=True)
        for number in range(version + 1, target + 1):
            name, apply = MIGRATIONS[number - 1]
            apply(conn)
            conn.execute(
                _LEDGER.insert().values(
                    version=number, name=name, applied_at=datetime.now(timezone.utc).isoformat(timespec="seconds")
                )
            )
            done.append(name)
    return done


def pending(store) -> list[str]:
    with store.engine.connect() as conn:
        version = applied_version(conn)
        conn.rollback()
    return [name for name, _ in MIGRATIONS[version:]]
