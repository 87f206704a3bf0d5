"""Export everything as JSON, and restore it.

The export is deterministic — tables by name, rows by primary key, keys
sorted, no timestamp of its own — so export -> import -> export gives the same
bytes. Import goes into an empty database; `replace=True` first saves a backup
export of the current data under `<home>/backups/`, so nothing is lost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roadmap_cli.errors import UserError
from roadmap_cli.timeutil import utc_now_iso

EXPORT_FORMAT = "roadmap-export"
EXPORT_VERSION = 1


def _tables():
    import roadmap_cli.store.tables  # noqa: F401 - registers the tables
    from sqlmodel import SQLModel

    return SQLModel.metadata.sorted_tables  # parents before children (foreign keys)


def export_data(store) -> dict[str, Any]:
    import sqlalchemy as sa

    from roadmap_cli.store.migrations import applied_version

    out: dict[str, Any] = {}
    with store.connection() as conn:
        version = applied_version(conn)
        for table in sorted(_tables(), key=lambda t: t.name):
            order = [c for c in table.primary_key.columns] or list(table.columns)
            rows = conn.execute(sa.select(table).order_by(*order)).mappings().all()
            out[table.name] = [dict(sorted(row.items())) for row in rows]
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "schema_version": version, "tables": out}


def dumps(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def row_counts(store) -> dict[str, int]:
    import sqlalchemy as sa

    with store.connection() as conn:
        return {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one() for t in _tables()}


def import_data(store, data: Any, *, home: Path, replace: bool = False) -> dict[str, int]:
    """Restore an export into `store`; returns rows inserted per table."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT or not isinstance(data.get("tables"), dict):
        raise UserError("not a roadmap export (expected the JSON written by `roadmap export`)")
    if data.get("version") != EXPORT_VERSION:
        raise UserError(f"export format version {data.get('version')!r} is not supported (expected {EXPORT_VERSION})")
    from roadmap_cli.store.migrations import LATEST

    schema_version = data.get("schema_version", 0)
    if not isinstance(schema_version, int) or isinstance(schema_version, bool):
        raise UserError(f"export has an invalid schema_version {schema_version!r} (expected a number)")
    if schema_version > LATEST:
        raise UserError("this export comes from a newer roadmap; upgrade roadmap-cli to import it")
    tables = {t.name: t for t in _tables()}
    unknown = sorted(set(data["tables"]) - set(tables))
    if unknown:
        raise UserError(f"export has unknown table(s): {', '.join(unknown)}")
    _check_rows(data["tables"], tables)
    existing = {name: n for name, n in row_counts(store).items() if n}
    if existing and not replace:
        raise UserError(
            f"the database already holds data ({sum(existing.values())} rows); "
            "use --replace to replace it (a backup export is saved first)"
        )
    if existing:
        backups = home / "backups"
        backups.mkdir(parents=True, exist_ok=True)
        stamp = utc_now_iso().replace(":", "").replace("-", "")
        (backups / f"before-import-{stamp}.json").write_text(dumps(export_data(store)), encoding="utf-8")
    from sqlalchemy.exc import StatementError

    inserted: dict[str, int] = {}
    current = None
    try:
        # One transaction: a row the database refuses rolls everything back,
        # so a failed import leaves the data exactly as it was.
        with store.connection() as conn:
            for table in reversed(_tables()):
                conn.execute(table.delete())
            for table in _tables():
                current = table.name
                rows = data["tables"].get(table.name, [])
                if rows:
                    conn.execute(table.insert(), rows)
                inserted[table.name] = len(rows)
    except StatementError as exc:
        reason = getattr(exc, "orig", None) or exc
        raise UserError(f"table {current}: the database refused a row ({reason}); nothing was imported") from None
    return inserted


# Columns read back as dates / timestamps: a malformed one would be stored
# fine and then break `roadmap cadence` on every run, so it is refused here.
DATE_COLUMNS = ("on_date", "read_on", "added_on")
TIMESTAMP_COLUMNS = ("completed_at", "created_at", "started_at", "shown_at")


def _check_rows(exported: dict, tables: dict) -> None:
    """Every table is a list of objects with known columns and readable dates
    (a hand-edited file gets a clear line, not a traceback now or later)."""
    from datetime import date, datetime

    for name, rows in exported.items():
        if not isinstance(rows, list):
            raise UserError(f"table {name}: expected a list of rows, got {type(rows).__name__}")
        columns = set(tables[name].columns.keys())
        for i, row in enumerate(rows, 1):
            if not isinstance(row, dict):
                raise UserError(f"table {name}, row {i}: expected an object, got {type(row).__name__}")
            extra = set(row) - columns
            if extra:
                raise UserError(f"table {name}: unknown column(s) {', '.join(sorted(extra))}")
            for column, parse in [(c, date.fromisoformat) for c in DATE_COLUMNS] + [(c, datetime.fromisoformat) for c in TIMESTAMP_COLUMNS]:
                value = row.get(column)
                if value is None:
                    continue
                try:
                    parse(value)
                except (TypeError, ValueError):
                    raise UserError(f"table {name}, row {i}: {column} {value!r} is not an ISO date") from None
