"""Whose rows a report reads: the current learner's, once tables have a learner column.

Cohort mode (migration 5) gives every table holding a person's rows a
`learner` TEXT column, and `roadmap_cli.store.learners.current_learner(store)`
names the current learner. Until that lands (or on a database migrated before
it) there is one learner, "local", and no column to filter on: the clause is
empty then, so the same SQL serves both.
"""

from __future__ import annotations

FALLBACK_LEARNER = "local"


def current_learner(store) -> str:
    try:
        from roadmap_cli.store.learners import current_learner as learner_of
    except ImportError:
        return FALLBACK_LEARNER
    return learner_of(store)


def learner_clause(store, conn, table: str) -> tuple[str, dict]:
    """(" AND learner = :learner", params) when `table` has a learner column, else ("", {})."""
    import sqlalchemy as sa

    columns = {c["name"] for c in sa.inspect(conn).get_columns(table)}
    if "learner" not in columns:
        return "", {}
    return " AND learner = :learner", {"learner": current_learner(store)}
