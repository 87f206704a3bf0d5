"""The learner's own numbers for papers and log entries (migration 12).

Every learner's papers are numbered 1, 2, 3, ... in their own sequence, and so
are their log entries: in a cohort database (one PostgreSQL database, many
learners) a learner's first paper is #1 whatever the others logged. The
number is what every command shows and takes; `id` is the internal key the
tables refer to each other by.

The next number is the learner's MAX(number) + 1, read in the transaction
that inserts the row:

- SQLite: every transaction is BEGIN IMMEDIATE (store/engine.py), so the read
  and the insert hold the write lock together;
- PostgreSQL: every transaction first takes the learner's advisory lock
  (store/server.py), so two commands of one learner run one after the other
  and the second reads the first's row (READ COMMITTED: a fresh snapshot per
  statement); different learners never read each other's numbers (row-level
  security shows a learner only their own rows, and the query names the
  learner anyway), so they need not wait for each other.

The unique index on (learner, number) is the backstop: a writer that ever
got this wrong fails instead of giving two papers one number.

A number freed by deleting the newest row is given again (as SQLite's ids
always were); a deleted row's references are cleared when it goes (an entry
citing a deleted paper forgets it), so nothing points at the new owner.
"""

from __future__ import annotations

NUMBERED_TABLES = ("papers", "cadence_entries")


def next_number(conn, table: str, learner: str) -> int:
    """The number the learner's next row of `table` gets (`conn`: the writing transaction's)."""
    from sqlalchemy import text

    if table not in NUMBERED_TABLES:
        raise ValueError(table)
    latest = conn.execute(
        text(f"SELECT MAX(number) FROM {table} WHERE learner = :learner"), {"learner": learner}
    ).scalar()
    return (latest or 0) + 1


def session_next_number(session, table: str) -> int:
    """`next_number` inside an ORM session (Store.session/Store.write); rows
    added but not yet flushed are flushed first, so they count."""
    session.flush()
    return next_number(session.connection(), table, session.info["store"].learner)
