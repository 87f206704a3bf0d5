"""`roadmap db copy --to URL`: every row of this database into another one
(SQLite -> PostgreSQL to start a cohort, or back), in one step.

The target is migrated to the same schema first and must hold no data (a
copy never merges into or overwrites someone's rows). Rows go table by table,
parents first, in batches, inside one target transaction: a failure leaves
the target as it was. The source is read in one transaction (one snapshot).
Afterwards `roadmap export` of both gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import UserError

BATCH = 1000


def copy_database(source, target_url: str, *, home: Path,
                  progress: Optional[Callable[[str, int, int], None]] = None) -> dict:
    """Copy every table; returns {"target": redacted URL, "rows": {table: n}} (the
    database-scope settings rows not counted, as the refusal over data counts).

    `progress(table, rows_done, rows_total)` is called after each batch."""
    import sqlalchemy as sa

    from roadmap_cli.store import open_store
    from roadmap_cli.store.learners import DATABASE_SCOPE
    from roadmap_cli.transfer import _advance_sequences, _keep_pinned_learner, _row_counts, _tables

    target = open_store(home, url=target_url)
    try:
        if target.url == source.url:
            raise UserError(f"--to names the database this command reads ({source.where}); choose another")
        tables = _tables()
        copied: dict[str, int] = {}
        # Asked before `src` holds the source's lock: resolving the learner may write (and waited on it: "locked").
        learner = source.learner
        with source.engine.connect() as src, target.connection() as dst:
            counts = _row_counts(src)
            existing = _row_counts(dst)
            existing["settings"] -= dst.execute(sa.text("SELECT count(*) FROM settings WHERE learner = :s"),
                                                {"s": DATABASE_SCOPE}).scalar_one()
            if any(existing.values()):
                raise UserError(f"{target.where} already holds data ({sum(existing.values())} rows); "
                                "a copy never merges or overwrites: use an empty database")
            dst.execute(sa.text("DELETE FROM settings WHERE learner = :s"), {"s": DATABASE_SCOPE})
            total, done = sum(counts.values()), 0
            for table in tables:  # parents before children (foreign keys)
                order = list(table.primary_key.columns) or list(table.columns)
                result = src.execute(sa.select(table).order_by(*order)).mappings()
                copied[table.name] = 0
                while True:
                    batch = [dict(row) for row in result.fetchmany(BATCH)]
                    if not batch:
                        break
                    dst.execute(table.insert(), batch)
                    copied[table.name] += len(batch)
                    done += len(batch)
                    if progress is not None:
                        progress(table.name, done, total)
            _advance_sequences(dst)
            if dst.dialect.name == "sqlite":
                _keep_pinned_learner(dst, learner)
            # The database's own settings (DATABASE_SCOPE) are copied too but, as in the
            # "already holds data" check above, not counted: every database has them, and
            # the summary must say the number a second copy would then refuse over.
            copied["settings"] = copied.get("settings", 0) - src.execute(
                sa.text("SELECT count(*) FROM settings WHERE learner = :s"), {"s": DATABASE_SCOPE}).scalar_one()
            src.rollback()
        return {"target": target.where, "rows": copied}
    finally:
        target.engine.dispose()
