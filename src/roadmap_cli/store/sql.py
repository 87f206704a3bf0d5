"""Plain SQL against either store: one small interface over a SQLAlchemy
connection and over a stdlib sqlite3 connection.

Code on `roadmap grade`'s hot path (recording the attempt, the attempt number,
the hint offer, the language setting) is written once, in SQL with `:name`
parameters, which SQLAlchemy's `text()` and sqlite3 both accept. It then runs
on the full store (SQLite or PostgreSQL, through SQLAlchemy) and on the lean
one (store/lite.py: the stdlib sqlite3 module, no SQLAlchemy import, which is
~0.5 CPU-s a grade does not have to pay on a 2-core machine).

    store.read_sql(lambda sql: sql.rows("SELECT ... WHERE learner = :l", l=store.learner))
    store.write_sql(lambda sql: sql.insert("INSERT INTO t (a) VALUES (:a)", a=1))  # -> the new id
"""

from __future__ import annotations

from typing import Any


class Sql:
    """What a body passed to `read_sql`/`write_sql` may call."""

    dialect = "sqlite"  # or "postgresql": what the connection speaks

    def rows(self, statement: str, **params: Any) -> list[tuple]:
        """Every row a SELECT (or an INSERT ... RETURNING) gives, as tuples."""
        raise NotImplementedError

    def execute(self, statement: str, **params: Any) -> None:
        """A statement whose rows nobody reads (UPDATE, DELETE, INSERT)."""
        raise NotImplementedError

    def scalar(self, statement: str, **params: Any) -> Any:
        rows = self.rows(statement, **params)
        return rows[0][0] if rows else None

    def insert(self, statement: str, **params: Any) -> int:
        """Run one INSERT and return the new row's id (`RETURNING id`: SQLite >= 3.35 and PostgreSQL)."""
        return int(self.rows(statement + " RETURNING id", **params)[0][0])


class AlchemySql(Sql):
    """Over a SQLAlchemy Connection (the full store: Store.read_sql/write_sql)."""

    def __init__(self, conn) -> None:
        import sqlalchemy as sa

        self._conn, self._text = conn, sa.text
        self.dialect = conn.dialect.name

    def rows(self, statement: str, **params: Any) -> list[tuple]:
        return [tuple(row) for row in self._conn.execute(self._text(statement), params).all()]

    def execute(self, statement: str, **params: Any) -> None:
        self._conn.execute(self._text(statement), params)


class SqliteSql(Sql):
    """Over a stdlib sqlite3 Connection (store/lite.py)."""

    def __init__(self, conn) -> None:
        self._conn = conn

    def rows(self, statement: str, **params: Any) -> list[tuple]:
        return self._conn.execute(statement, params).fetchall()

    def execute(self, statement: str, **params: Any) -> None:
        self._conn.execute(statement, params)
