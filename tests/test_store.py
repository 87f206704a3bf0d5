"""The SQLite store: migrations, refusals, concurrency-safe settings."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from roadmap_cli.errors import StoreError
from roadmap_cli.store import migrations, open_store


def test_fresh_database_is_at_latest_version(tmp_path: Path):
    store = open_store(tmp_path)
    assert migrations.pending(store) == []
    with store.connection() as conn:
        assert migrations.applied_version(conn) == migrations.LATEST
    mode = sqlite3.connect(tmp_path / "roadmap.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_upgrade_from_first_version_keeps_data(tmp_path: Path):
    store = open_store(tmp_path, migrate=False)
    migrations.migrate(store, target=1)
    with store.connection() as conn:
        conn.execute(
            sa.text("INSERT INTO checkpoint_progress VALUES ('s1-x', '2026-01-01T00:00:00+00:00', 'self', NULL)")
        )
        conn.execute(
            sa.text("INSERT INTO checkpoint_notes (checkpoint_id, created_at, text) VALUES ('s1-x', 't', '笔记 note')")
        )
        conn.execute(sa.text("INSERT INTO settings VALUES ('start_date', '\"2026-01-01\"')"))
    store.engine.dispose()

    upgraded = open_store(tmp_path)  # applies 2..LATEST on open
    assert migrations.pending(upgraded) == []
    with upgraded.connection() as conn:
        assert (
            conn.execute(sa.text("SELECT completed_at FROM checkpoint_progress")).scalar_one().startswith("2026-01-01")
        )
        assert conn.execute(sa.text("SELECT text FROM checkpoint_notes")).scalar_one() == "笔记 note"
        assert conn.execute(sa.text("SELECT count(*) FROM papers")).scalar_one() == 0
        versions = [r[0] for r in conn.execute(sa.text("SELECT version FROM schema_migrations ORDER BY version"))]
    assert versions == list(range(1, migrations.LATEST + 1))


def test_newer_database_is_refused(tmp_path: Path):
    open_store(tmp_path).engine.dispose()
    con = sqlite3.connect(tmp_path / "roadmap.db")
    con.execute("INSERT INTO schema_migrations VALUES (?, 'from-the-future', 'x')", (migrations.LATEST + 1,))
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="newer than this roadmap"):
        open_store(tmp_path)


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_corrupt_database_is_refused_and_untouched(tmp_path: Path, content: bytes):
    db = tmp_path / "roadmap.db"
    db.write_bytes(content)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(StoreError):
        open_store(tmp_path)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not (tmp_path / "roadmap.db-wal").exists() or (tmp_path / "roadmap.db-wal").stat().st_size == 0


def test_corrupt_database_gives_one_line_through_cli(run_cli, roadmap_home: Path):
    roadmap_home.mkdir(parents=True)
    (roadmap_home / "roadmap.db").write_bytes(b"garbage" * 50)
    result = run_cli("db", "status")
    assert result.exit_code == 3
    assert "left untouched" in result.stderr
    assert "Traceback" not in result.stderr


def test_unwritable_home_is_one_line(run_cli, tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run_cli("--home", str(blocker / "sub"), "db", "status")
    assert result.exit_code == 3
    assert "data home" in result.stderr


def test_tables_match_migrations(tmp_path: Path):
    """Every SQLModel table/column exists in the migrated schema, and vice versa."""
    from sqlmodel import SQLModel

    import roadmap_cli.store.tables  # noqa: F401

    store = open_store(tmp_path)
    inspector = sa.inspect(store.engine)
    migrated = {t for t in inspector.get_table_names() if t != "schema_migrations"}
    modelled = set(SQLModel.metadata.tables)
    assert migrated == modelled
    for name in modelled:
        assert {c["name"] for c in inspector.get_columns(name)} == set(SQLModel.metadata.tables[name].columns.keys()), (
            name
        )


def test_db_status_json(run_cli):
    result = run_cli("db", "status", "--json")
    assert result.exit_code == 0, result
    data = result.json()["data"]
    assert data["schema_version"] == migrations.LATEST
    assert data["applied_now"] == [name for name, _ in migrations.MIGRATIONS]
    again = run_cli("db", "status", "--json").json()["data"]
    assert again["applied_now"] == [] and again["pending_before_open"] == []


def test_db_copy_to_sqlite_says_the_same_row_count_as_its_refusal(run_cli, tmp_path: Path):
    import re

    assert run_cli("log", "hours", "3").exit_code == 0
    assert run_cli("check", "s1-explain-attention-workflow").exit_code == 0
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    first = run_cli("db", "copy", "--to", target)  # once "database is locked": the learner was asked mid-copy
    assert first.exit_code == 0, first
    copied = int(re.search(r"copied (\d+) rows", first.stdout).group(1))
    again = run_cli("db", "copy", "--to", target)
    assert again.exit_code == 2, again
    assert f"already holds data ({copied} rows)" in again.stderr, (first.stdout, again.stderr)
    assert copied >= 2
