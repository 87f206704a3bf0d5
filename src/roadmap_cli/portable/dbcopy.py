"""`roadmap db copy --to URL`: every row of this database into another one
(SQLite -> PostgreSQL to start a cohort, or back), in one step.

The target is migrated to the same schema first and must hold no data (a
copy never merges into or overwrites someone's rows). Rows go table by table,
parents first, in batches, inside one target transaction: a failure leaves
the target as it was. The source is read in one transaction (one snapshot).
Afterwards `roadmap export` of both gives the same bytes.

Into a cohort with per-learner logins (`roadmap cohort add-learner`), the
URL the instructor handed out is a learner's: row-level security lets that
login write only its own rows, so the copy is of one person's history, made
theirs (`learner` = the login) with the cohort's new ids (store/roles.py).
The target must hold none of their rows yet (others' rows are fine). What the
cohort's server does not let a learner write for themselves (a cohort's
grades come from its server: grade attempts, and checkpoints a lab grade
proved) is left out with one line each saying so, never a traceback; the
rest (notes, papers, hours, quiz and review state, self-checked
checkpoints, ...) is copied. Attempts that are copied come in marked
`imported`, as `roadmap import` marks them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import UserError

BATCH = 1000


def copy_database(
    source,
    target_url: str,
    *,
    home: Path,
    progress: Optional[Callable[[str, int, int], None]] = None,
    replace: bool = False,
) -> dict:
    """Copy every table; returns {"target": redacted URL, "rows": {table: n}} (the
    database-scope settings rows not counted, as the refusal over data counts).

    `progress(table, rows_done, rows_total)` is called after each batch."""
    import sqlalchemy as sa

    from roadmap_cli.store import open_store
    from roadmap_cli.store.learners import DATABASE_SCOPE
    from roadmap_cli.portable.archive import advance_sequences, all_tables, keep_pinned_learner, table_row_counts

    target = open_store(home, url=target_url)
    try:
        if target.url == source.url:
            raise UserError(f"--to names the database this command reads ({source.where}); choose another")
        tables = all_tables()
        copied: dict[str, int] = {}
        # Asked before `src` holds the source's lock: resolving the learner may write (and waited on it: "locked").
        learner = source.learner
        # target.engine, not target.connection(): that resolves the target's learner from $ROADMAP_LEARNER, which
        # names this (source) home's learner; on a learner's login the login itself decides (store/roles.py).
        with source.engine.connect() as src, target.engine.begin() as dst:
            if dst.dialect.name == "postgresql":
                from roadmap_cli.store.roles import session

                who = session(dst)
                if not who.instructor:  # a learner's login: their own rows only (row-level security)
                    result = _copy_own_rows(src, dst, who.role, target.where, progress, home=home, replace=replace)
                    src.rollback()
                    return result
            if replace:
                raise UserError(
                    "--replace replaces a learner's own rows, with that learner's cohort login; "
                    f"{target.where} is not one: a whole copy needs an empty database"
                )
            counts = table_row_counts(src)
            existing = table_row_counts(dst)
            existing["settings"] -= dst.execute(
                sa.text("SELECT count(*) FROM settings WHERE learner = :s"), {"s": DATABASE_SCOPE}
            ).scalar_one()
            if any(existing.values()):
                raise UserError(
                    f"{target.where} already holds data ({sum(existing.values())} rows); "
                    "a copy never merges or overwrites: use an empty database"
                )
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
            advance_sequences(dst)
            if dst.dialect.name == "sqlite":
                keep_pinned_learner(dst, learner)
            # The database's own settings (DATABASE_SCOPE) are copied too but, as in the
            # "already holds data" check above, not counted: every database has them, and
            # the summary must say the number a second copy would then refuse over.
            copied["settings"] = (
                copied.get("settings", 0)
                - src.execute(
                    sa.text("SELECT count(*) FROM settings WHERE learner = :s"), {"s": DATABASE_SCOPE}
                ).scalar_one()
            )
            src.rollback()
        return {"target": target.where, "rows": copied, "skipped": {}, "notes": []}
    except Exception as exc:
        from roadmap_cli.store.server import sqlstate

        if sqlstate(exc) == "42501":  # permission: e.g. a learner's login on an instructor-only table
            raise UserError(
                f"{target.where} refused the copy ({_first_line(exc)}); nothing was copied: copy with "
                "the login that owns the cohort's tables, or ask your instructor"
            ) from None
        raise
    finally:
        target.engine.dispose()


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", exc)
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0]


def _copy_own_rows(src, dst, me: str, where: str, progress, *, home: Path, replace: bool) -> dict:
    """`db copy --to` a learner's login: the source's one learner's rows become `me`'s (see the module doc).
    `replace`: the rows `me` already has there are saved to a backup export under `home`, then deleted."""
    import sqlalchemy as sa

    from roadmap_cli.portable.archive import OwnRows, all_tables, insert_own_history

    tables = [t for t in all_tables() if "learner" in t.columns]
    owners = sorted({row[0] for t in tables for row in src.execute(sa.select(t.c.learner).distinct())} - {""})
    if len(owners) > 1:
        shown = ", ".join(owners[:3]) + (" ..." if len(owners) > 3 else "")
        raise UserError(
            f"this database holds the rows of {len(owners)} learners ({shown}); a learner's login ({me}) "
            "can take only its own: copy with the login that owns the cohort's tables instead"
        )
    own = OwnRows(dst, me)  # on a cohort login: not the server's records (grades, lab-proved checkpoints)
    own.replace_or_refuse(
        home,
        replace=replace,
        refusal=lambda n: (  # row security limits it to `me` anyway
            f"{where} already holds {n} rows of yours ({me}); a copy never merges: add --replace to replace them (a "
            "backup export of your rows there is saved first)"
        ),
    )
    rows = {
        t.name: [
            dict(r)
            for r in src.execute(sa.select(t).order_by(*(list(t.primary_key.columns) or list(t.columns)))).mappings()
        ]
        for t in tables
    }
    total = sum(len(r) for r in rows.values())
    done = [0]

    def advance(table: str, n: int) -> None:
        done[0] += n
        if progress is not None:
            progress(table, done[0], total)

    copied, skipped, notes = insert_own_history(dst, own.without_collisions(rows), me, advance)
    return {"target": where, "rows": copied, "skipped": skipped, "notes": notes, "learner": me}
