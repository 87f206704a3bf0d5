"""Export everything as JSON, and restore it.

The export is deterministic — tables by name, rows by primary key, keys
sorted, no timestamp of its own — so export -> import -> export gives the same
bytes (except that restored grade attempts are marked `imported`). Import
validates every row first, then goes into an empty database; `replace=True`
saves a backup export of the current data under `<home>/backups/` inside the
same write transaction, so nothing is lost. On a shared (server) database the
import is the importer's alone: their rows only, in and out, with new ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

from roadmap_cli.errors import StoreError, UserError

EXPORT_FORMAT = "roadmap-export"
EXPORT_VERSION = 1


def all_tables():
    """Every table of the store, parents before children: what export, import and db copy walk."""
    import roadmap_cli.store.tables  # noqa: F401 - registers the tables
    from sqlmodel import SQLModel

    return SQLModel.metadata.sorted_tables  # parents before children (foreign keys)


def export_data(store) -> dict[str, Any]:
    with store.connection() as conn:
        return _export(conn)


def _export(conn, *, learner: Optional[str] = None) -> dict[str, Any]:
    """Every table's rows through `conn` (inside the caller's transaction);
    only `learner`'s rows when given (the backup before a scoped import)."""
    import sqlalchemy as sa

    from roadmap_cli.store.migrations import applied_version

    out: dict[str, Any] = {}
    version = applied_version(conn)
    for table in sorted(all_tables(), key=lambda t: t.name):
        order = [c for c in table.primary_key.columns] or list(table.columns)
        query = sa.select(table).order_by(*order)
        if learner is not None and "learner" in table.columns:
            query = query.where(table.c.learner == learner)
        rows = conn.execute(query).mappings().all()
        out[table.name] = [dict(sorted(row.items())) for row in rows]
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "schema_version": version, "tables": out}


def write_export(store, out) -> None:
    """`roadmap export` streamed: the same bytes as `dumps(export_data(store))`,
    written table by table as the rows are read (constant memory; issue 13)."""
    import sqlalchemy as sa

    from roadmap_cli.formats.jsonstream import Rows, write_json
    from roadmap_cli.store.migrations import applied_version

    with store.connection() as conn:
        tables: dict[str, Any] = {}
        for table in sorted(all_tables(), key=lambda t: t.name):
            order = [c for c in table.primary_key.columns] or list(table.columns)
            result = conn.execute(sa.select(table).order_by(*order)).mappings()
            tables[table.name] = Rows(dict(sorted(row.items())) for row in result)
        doc = {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "schema_version": applied_version(conn),
            "tables": tables,
        }
        write_json(out, doc, indent=2, sort_keys=True)  # ends with the newline dumps() adds


def dumps(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def row_counts(store) -> dict[str, int]:
    with store.connection() as conn:
        return table_row_counts(conn)


def table_row_counts(conn) -> dict[str, int]:
    """{table name: its number of rows} on `conn` (what import and db copy show, and refuse over)."""
    import sqlalchemy as sa

    return {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one() for t in all_tables()}


def import_data(
    store,
    data: Any,
    *,
    home: Path,
    replace: bool = False,
    lab_ids: Optional[set] = None,
    stages=None,
    validated: bool = False,
    notes: Optional[list] = None,
) -> dict[str, int]:
    """Restore an export into `store`; returns rows inserted per table (`notes` gets a line for each
    group of rows a learner's cohort login may not write and that was left out: insert_own_history).

    Every row is validated first (rowcheck.py: the commands' own rules);
    the first problem refuses the whole file with its JSON path. Then, in one
    write transaction (BEGIN IMMEDIATE: the write lock is held throughout),
    the current data is saved to a new backup file, replaced, and committed.
    Taking the backup inside the lock means two imports at once cannot both
    back up the same data and lose the other's: each backs up what it
    replaces. Attempts come in marked `imported`.
    """
    if not validated:
        validate_import(data, lab_ids=lab_ids, stages=stages)
    if store.read_only:
        raise StoreError(f"{store.where} is read-only (no write access to the data home): cannot import")
    import sqlalchemy as sa
    from sqlalchemy.exc import StatementError

    store.learner  # noqa: B018 - resolved (and cached) before the write lock is taken
    inserted: dict[str, int] = {}
    current = None
    try:
        # One transaction: a row the database refuses rolls everything back,
        # so a failed import leaves the data exactly as it was.
        with store.connection() as conn:
            if conn.dialect.name != "sqlite" and _shared(conn, store.learner):
                return _import_own_rows(conn, data, store.learner, home=home, replace=replace, notes=notes)
            counts = table_row_counts(conn)
            # The home's pinned learner id (settings, learner '') is not data.
            counts["settings"] -= conn.execute(sa.text("SELECT count(*) FROM settings WHERE learner = ''")).scalar_one()
            existing = {name: n for name, n in counts.items() if n}
            if existing and not replace:
                raise UserError(
                    f"the database already holds data ({sum(existing.values())} rows); "
                    "use --replace to replace it (a backup export is saved first)"
                )
            if existing:
                # BEGIN IMMEDIATE already holds the write lock: this snapshot
                # is exactly what gets replaced.
                write_backup(home, dumps(_export(conn)))
            for table in reversed(all_tables()):
                conn.execute(table.delete())
            for table in all_tables():
                current = table.name
                rows = data["tables"].get(table.name, [])
                if "learner" in table.columns and any("learner" not in row for row in rows):
                    # An export from before learner ids (migration 5): one person's, the importer's.
                    rows = [row if "learner" in row else {**row, "learner": store.learner} for row in rows]
                if table.name == "grade_attempts":
                    # Graded elsewhere: never vouched for here, whatever the file says.
                    rows = [{**row, "imported": True, "verified": False} for row in rows]
                rows = with_learner_numbers(table.name, rows)
                if rows:
                    conn.execute(table.insert(), rows)
                inserted[table.name] = len(rows)
            advance_sequences(conn)
            if conn.dialect.name == "sqlite":
                keep_pinned_learner(conn, store.learner)
    except StatementError as exc:
        reason = getattr(exc, "orig", None) or exc
        raise UserError(f"table {current}: the database refused a row ({reason}); nothing was imported") from None
    return inserted


# Tables whose rows carry the learner's own number (migration 12; research/numbers.py).
NUMBERED_TABLES = ("papers", "cadence_entries")


def with_learner_numbers(table: str, rows: list) -> list:
    """Rows of an export from before migration 12 have no `number`: each gets its id, the id its learner
    knew it by (what the migration does to stored rows). Rows that have one keep it: a learner's numbers
    are theirs wherever the rows go (import, db copy), never renumbered by the target's ids."""
    if table not in NUMBERED_TABLES or all("number" in row for row in rows):
        return rows
    return [row if "number" in row else {**row, "number": row["id"]} for row in rows]


def _shared(conn, me: str) -> bool:
    """A server database that is not only the importer's: a learner's scoped login (it cannot see the
    others, so it must assume them), or rows of another learner. Else the whole-database import, ids
    kept (export -> import -> export stays byte-identical), is safe."""
    import sqlalchemy as sa

    from roadmap_cli.store.roles import session

    if conn.dialect.name == "postgresql" and not session(conn).instructor:
        return True
    return any(
        conn.execute(sa.select(t.c.learner).where(t.c.learner.notin_([me, ""])).limit(1)).first()
        for t in all_tables()
        if "learner" in t.columns
    )


def _import_own_rows(
    conn, data: dict, me: str, *, home: Path, replace: bool, notes: Optional[list] = None
) -> dict[str, int]:
    """A shared (server) database: the import touches the importer's own rows only.

    Every row of the file must be the importer's (an export from before
    learner ids carries none: it is theirs); `--replace` backs up and deletes
    only their rows, never another learner's (on a row-secured cohort the
    server would refuse anyway: store/roles.py). Ids are the database's, not
    the file's: other learners' rows already hold the file's numbers, so each
    row gets a new id and the references to it (a test result's attempt, a
    tag's paper) follow."""

    others = sorted(
        {row["learner"] for rows in data["tables"].values() for row in rows if row.get("learner") not in (None, "", me)}
    )
    if others:
        shown = ", ".join(repr(o) for o in others[:3]) + (" ..." if len(others) > 3 else "")
        raise UserError(
            f"the file holds rows of other learners ({shown}): on a shared database you can import only "
            f"your own rows (you are {me!r}); nothing was imported"
        )
    own = OwnRows(conn, me)
    own.replace_or_refuse(
        home,
        replace=replace,
        refusal=lambda n: (
            f"you already have {n} rows in this database; use --replace to replace them (a backup export of your "
            "rows is saved first; other learners' rows are not touched)"
        ),
    )
    inserted, _skipped, said = insert_own_history(conn, own.without_collisions(data["tables"]), me, verb="imported")
    if notes is not None:
        notes.extend(said)
    return inserted


class OwnRows:
    """A learner's own rows on a shared database, as far as that learner may replace them.

    On a cohort learner's login (PostgreSQL, not the instructor) the grade attempts, their test results and
    the checkpoints a lab grade proved are the server's record (store/roles.py): they are neither counted as
    the learner's to replace, nor deleted (the server refuses), and a row brought in may not collide with a
    lab-proved checkpoint the server keeps. Elsewhere every row with the learner's id is theirs."""

    def __init__(self, conn, me: str) -> None:
        import sqlalchemy as sa

        from roadmap_cli.store.roles import SERVER_RECORDED_TABLES, session
        from roadmap_cli.store.values import LAB_SOURCE_PREFIX

        self.conn, self.me = conn, me
        self.scoped = conn.dialect.name == "postgresql" and not session(conn).instructor
        self.tables = [
            t for t in all_tables() if "learner" in t.columns and not (self.scoped and t.name in SERVER_RECORDED_TABLES)
        ]
        self._progress = next(t for t in all_tables() if t.name == "checkpoint_progress")
        self._lab_source = LAB_SOURCE_PREFIX + "%"
        self.kept_lab: set = set()
        if self.scoped:
            self.kept_lab = {
                r[0]
                for r in conn.execute(
                    sa.select(self._progress.c.checkpoint_id).where(
                        self._progress.c.learner == me, self._progress.c.source.like(self._lab_source)
                    )
                )
            }

    def _where(self, table):
        clause = table.c.learner == self.me
        if self.scoped and table is self._progress:
            clause = clause & ~table.c.source.like(self._lab_source)
        return clause

    def count(self) -> int:
        import sqlalchemy as sa

        return sum(
            self.conn.execute(sa.select(sa.func.count()).select_from(t).where(self._where(t))).scalar_one()
            for t in self.tables
        )

    def delete(self) -> None:
        for table in reversed(self.tables):  # children first (foreign keys)
            self.conn.execute(table.delete().where(self._where(table)))

    def replace_or_refuse(self, home: Path, *, replace: bool, refusal: Callable[[int], str]) -> int:
        """What `import --replace` and `db copy --to --replace` do with the rows `me` already has: none, go
        on; some without `replace`, refuse (UserError(refusal(count)): nothing changed); some with
        `replace`, save a backup export of them under `home` first, then delete them. Returns the count."""
        existing = self.count()
        if existing and not replace:
            raise UserError(refusal(existing))
        if existing:
            write_backup(home, dumps(_export(self.conn, learner=self.me)))
            self.delete()
        return existing

    def without_collisions(self, tables_data: dict) -> dict:
        if not self.kept_lab:
            return tables_data
        return {
            **tables_data,
            "checkpoint_progress": [
                r for r in tables_data.get("checkpoint_progress", []) if r.get("checkpoint_id") not in self.kept_lab
            ],
        }


# Written for a learner only by the cohort's server (issue 36; the `cohort` work makes them so): a learner's
# own import or copy tries them last, each group in its own savepoint, and leaves out a group the server refuses.
GRADE_TABLES = ("grade_attempts", "grade_test_results")


def insert_own_history(
    conn, tables_data: dict, me: str, progress=None, *, verb: str = "copied"
) -> tuple[dict, dict, list[str]]:
    """`tables_data` as `me`'s rows on a shared database: (inserted, skipped, notes) per table.

    Everything but the grades is inserted first (a refusal there fails the whole, as any error does).
    Then grade attempts with their test results, and the checkpoints a lab grade proved, each group in a
    savepoint: where the server refuses a learner's login those rows (SQLSTATE 42501, permission or
    row-level security), the group is left out and a note line says what and what to do instead.
    Attempts come in marked `imported`: graded elsewhere, a claim, never a solution unlock by itself."""
    from roadmap_cli.store.server import sqlstate
    from roadmap_cli.store.values import LAB_SOURCE_PREFIX

    rest = {name: list(rows) for name, rows in tables_data.items() if name not in GRADE_TABLES}
    grades = {
        name: [
            {**row, "imported": True, "verified": False} if name == "grade_attempts" else row
            for row in tables_data.get(name, [])
        ]
        for name in GRADE_TABLES
    }
    checkpoints = rest.get("checkpoint_progress", [])
    proved = [r for r in checkpoints if str(r.get("source")).startswith(LAB_SOURCE_PREFIX)]
    rest["checkpoint_progress"] = [r for r in checkpoints if not str(r.get("source")).startswith(LAB_SOURCE_PREFIX)]
    inserted = insert_own_rows(conn, rest, me, progress)
    skipped: dict[str, int] = {}
    notes: list[str] = []
    groups = (
        (
            grades,
            f"{len(grades['grade_attempts'])} grade attempts (and their "
            f"{len(grades['grade_test_results'])} test results)",
            "this cohort records grades only from its own grading: grade the labs again with `roadmap grade` "
            "or `roadmap submit LAB`",
        ),
        (
            {"checkpoint_progress": proved},
            f"{len(proved)} checkpoint{'s' if len(proved) != 1 else ''} proved by lab grades",
            "they are marked again when the cohort grades the parts that prove them",
        ),
    )
    for group, what, instead in groups:
        if not any(group.values()):
            continue
        savepoint = conn.begin_nested()
        try:
            got = insert_own_rows(conn, group, me, progress)
        except Exception as exc:
            if sqlstate(exc) != "42501":  # anything but "the server does not let you write these" is a failure
                raise
            savepoint.rollback()
            for name, rows in group.items():
                skipped[name] = skipped.get(name, 0) + len(rows)
            orig = getattr(exc, "orig", exc)
            reason = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
            notes.append(f"not {verb}: {what}: the server refused them for your login ({reason}); {instead}")
            continue
        savepoint.commit()
        for name, n in got.items():
            inserted[name] = inserted.get(name, 0) + n
    return inserted, skipped, notes


def insert_own_rows(conn, tables_data: dict, me: str, progress=None) -> dict[str, int]:
    """Insert `tables_data` ({table: rows}) as `me`'s rows, with the database's new ids (references follow).

    Rows of the database-wide scope (learner '') are left out; a reference to a row not in `tables_data`
    is refused. `progress(table, rows)` is called after each table. Used by a scoped import and by
    `db copy --to` a learner's login (dbcopy.py)."""
    new_ids: dict[str, dict] = {}
    inserted: dict[str, int] = {}
    for table in all_tables():
        rows = [
            dict(row, learner=me) if "learner" in table.columns else dict(row)
            for row in tables_data.get(table.name, [])
            if row.get("learner") != ""
        ]  # '': database-wide
        rows = with_learner_numbers(table.name, rows)  # before the ids are replaced: an old file's number is its id
        if table.name == "grade_attempts":  # graded elsewhere: never an unlock by itself, never vouched for
            rows = [{**row, "imported": True, "verified": False} for row in rows]
        for fk in table.foreign_keys:
            column, parent = fk.parent.name, fk.column.table.name
            for row in rows:
                if row.get(column) is not None:
                    try:
                        row[column] = new_ids[parent][row[column]]
                    except KeyError:
                        raise UserError(
                            f"table {table.name}: {column} {row[column]} names no row of {parent} in the "
                            "file; nothing was imported"
                        ) from None
        id_column = table.columns.get("id")
        if id_column is not None and id_column.primary_key and id_column.autoincrement:
            mapping = new_ids[table.name] = {}
            for row in rows:
                old = row.pop("id", None)
                mapping[old] = conn.execute(table.insert().values(**row).returning(id_column)).scalar_one()
        elif rows:
            conn.execute(table.insert(), rows)
        inserted[table.name] = len(rows)
        if progress is not None and rows:
            progress(table.name, len(rows))
    return inserted


def keep_pinned_learner(conn, learner: str) -> None:
    """A SQLite home keeps a pinned learner id (store/learners.py): an export
    from before learner ids has none, so the importer's stays."""
    import sqlalchemy as sa

    if conn.execute(sa.text("SELECT 1 FROM settings WHERE learner = '' AND key = 'learner'")).first() is None:
        from roadmap_cli.store.learners import _pin

        _pin(conn, learner)


def advance_sequences(conn) -> None:
    """PostgreSQL: rows inserted with explicit ids leave each table's id
    sequence behind; move it past the largest id so the next insert works."""
    if conn.dialect.name != "postgresql":
        return
    import sqlalchemy as sa

    for table in all_tables():
        column = table.columns.get("id")
        if column is None or not column.primary_key or not column.autoincrement:
            continue
        conn.execute(
            sa.text(
                f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                f"COALESCE((SELECT MAX(id) FROM {table.name}), 0) + 1, false)"
            )
        )


def validate_import(data: Any, *, lab_ids: Optional[set] = None, stages=None) -> None:
    """Everything about an export that needs no database: its envelope and
    every row (rowcheck.py). Called before the store is even opened,
    so a wrong file is refused without touching the data home."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT or not isinstance(data.get("tables"), dict):
        raise UserError("not a roadmap export (expected the JSON written by `roadmap export`)")
    if data.get("version") != EXPORT_VERSION:
        raise UserError(f"export format version {data.get('version')!r} is not supported (expected {EXPORT_VERSION})")
    from roadmap_cli.store.migrations import LATEST
    from roadmap_cli.portable.rowcheck import validate_export

    schema_version = data.get("schema_version", 0)
    if not isinstance(schema_version, int) or isinstance(schema_version, bool):
        raise UserError(f"export has an invalid schema_version {schema_version!r} (expected a number)")
    if schema_version > LATEST:
        raise UserError("this export comes from a newer roadmap; upgrade roadmap-cli to import it")
    tables = {t.name: t for t in all_tables()}
    unknown = sorted(set(data["tables"]) - set(tables))
    if unknown:
        raise UserError(f"export has unknown table(s): {', '.join(unknown)}")
    validate_export(data["tables"], tables, lab_ids=lab_ids, stages=stages)


def write_backup(home: Path, text: str) -> Path:
    """Write `text` to a new file under <home>/backups; never overwrite one.

    The name is unique (time, pid, counter) and opened with O_EXCL; a failed
    write (no space, a backups path that is a file) removes the partial file
    and raises one line: the import then stops before changing anything."""
    import os

    from roadmap_cli.formats.timeutil import utc_now_iso

    backups = home / "backups"
    try:
        backups.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the backups folder {backups}: {exc.strerror or exc}; nothing was imported"
        ) from None
    stamp = utc_now_iso().replace(":", "").replace("-", "")
    data = text.encode("utf-8")
    for n in range(1000):
        target = backups / f"before-import-{stamp}-{os.getpid()}{f'-{n}' if n else ''}.json"
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise StoreError(
                f"cannot write a backup in {backups}: {exc.strerror or exc}; nothing was imported"
            ) from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            target.unlink(missing_ok=True)  # never leave a 0-byte or partial backup behind
            raise StoreError(f"cannot write the backup {target}: {exc.strerror or exc}; nothing was imported") from None
        os.close(fd)
        return target
    raise StoreError(f"cannot find a free backup name in {backups}; nothing was imported")
