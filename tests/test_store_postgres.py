"""The store on a real PostgreSQL server (a throwaway cluster: tests/pgcluster.py).

Skipped, naming the Debian package, where no server binaries exist; a failure
instead under ROADMAP_REQUIRE_POSTGRES=1 (CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from pgcluster import PASSWORD
from roadmap_cli.store import migrations, open_store

ROOT = Path(__file__).resolve().parents[1]


def _schema(engine) -> dict:
    """Tables, columns (type family, nullability), primary keys, unique
    constraints, foreign keys and indexes, in backend-neutral terms."""
    inspector = sa.inspect(engine)

    def family(col_type) -> str:
        generic = col_type.as_generic() if hasattr(col_type, "as_generic") else col_type
        name = type(generic).__name__.upper()
        for fam in ("INTEGER", "FLOAT", "BOOLEAN", "TEXT", "STRING"):
            if fam in name or (fam == "FLOAT" and name in ("REAL", "DOUBLE", "DOUBLE_PRECISION", "NUMERIC")):
                return "TEXT" if fam == "STRING" else fam
        return name

    out = {}
    for table in sorted(inspector.get_table_names()):
        out[table] = {
            "columns": {c["name"]: (family(c["type"]), bool(c["nullable"])) for c in inspector.get_columns(table)},
            "pk": sorted(inspector.get_pk_constraint(table)["constrained_columns"]),
            "unique": sorted(tuple(sorted(u["column_names"])) for u in inspector.get_unique_constraints(table)),
            "fks": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]))
                for f in inspector.get_foreign_keys(table)
            ),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(table)
            ),
        }
    return out


def test_same_schema_on_sqlite_and_postgres(pg_url, tmp_path: Path, monkeypatch):
    pg = open_store(tmp_path / "pg")
    assert pg.engine.dialect.name == "postgresql"
    monkeypatch.delenv("DATABASE_URL")
    (tmp_path / "lite").mkdir()
    lite = open_store(tmp_path / "lite")
    assert lite.engine.dialect.name == "sqlite"
    pg_schema, lite_schema = _schema(pg.engine), _schema(lite.engine)
    # SQLite reports a UNIQUE column constraint as an index too; PostgreSQL as
    # a constraint with its own index: compare what they enforce.
    for schema in (pg_schema, lite_schema):
        for table in schema.values():
            table["indexes"] = [i for i in table["indexes"] if not i[2]]
    assert pg_schema == lite_schema
    assert "learner" in pg_schema["grade_attempts"]["columns"]
    assert pg_schema["settings"]["pk"] == ["key", "learner"]
    with pg.connection() as conn:
        assert migrations.applied_version(conn) == migrations.LATEST


def test_v4_postgres_database_upgrades_with_every_row(pg_url, tmp_path: Path, monkeypatch):
    from test_learners import V4_ROWS, _rows, _v4_database

    monkeypatch.setenv("ROADMAP_LEARNER", "ada@example.org")
    _v4_database(tmp_path)
    store = open_store(tmp_path)
    with store.connection() as conn:
        for name, before in V4_ROWS.items():
            after = _rows(conn, name)
            assert all(r.pop("learner") == "ada@example.org" for r in after), name
            # Migration 7 added grade_attempts.sandbox: unknown (NULL) for every attempt recorded before it.
            assert all(r.pop("sandbox", None) is None for r in after), name
            # Migration 9 added grade_attempts.graded_on: NULL (graded on this machine) for every older attempt.
            assert all(r.pop("graded_on", None) is None for r in after), name
            # Migration 10 added the papers' fetched metadata: none for a paper logged before it.
            for column in ("venue", "abstract", "pdf_url", "metadata_source", "metadata_fetched_on"):
                assert all(r.pop(column, None) is None for r in after), (name, column)
            # Migration 11 added grade_attempts.verified: false (no worker vouched) for every older attempt.
            assert all(r.pop("verified", False) is False for r in after), name
            # Migration 12 numbered papers and log entries per learner: an older row's number is its id.
            assert all(r.pop("number", r.get("id")) == r.get("id") for r in after), name
            key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
            assert sorted(map(key, after)) == sorted(map(key, before)), name
    # The id sequences still work after the upgrade.
    with store.session() as s:
        from roadmap_cli.store.tables import CheckpointNote

        s.add(CheckpointNote(checkpoint_id="x", created_at="2026-02-01T10:00:00+00:00", text="new"))


def test_newer_schema_is_refused_on_postgres(pg_url, run_cli, tmp_path: Path):
    store = open_store(tmp_path)
    with store.connection() as conn:
        conn.execute(
            sa.text("INSERT INTO schema_migrations VALUES (:v, 'from-the-future', 'x')"), {"v": migrations.LATEST + 1}
        )
    store.engine.dispose()
    result = run_cli("status")
    assert result.exit_code == 3 and result.exception is None
    assert "newer than this roadmap understands" in result.stderr and PASSWORD not in result.stderr


def test_db_status_names_backend_server_and_schema_never_the_password(pg_url, run_cli):
    result = run_cli("db", "status", "--json")
    assert result.exit_code == 0, result
    data = result.json()["data"]
    assert data["backend"] == "postgresql" and data["server_version"].split(".")[0].isdigit()
    assert data["schema_version"] == migrations.LATEST
    assert PASSWORD not in result.stdout and "***" in data["database"]
    text = run_cli("db", "status")
    assert "postgresql" in text.stdout and PASSWORD not in text.stdout + text.stderr


@pytest.mark.parametrize("case", ["wrong password", "refused", "unknown host", "no such database"])
def test_connection_problems_are_one_line_naming_the_host(pg_cluster, run_cli, monkeypatch, case):
    from pgcluster import free_port

    url = {
        "wrong password": pg_cluster.url("postgres", password="not-the-" + PASSWORD),
        "refused": pg_cluster.url("postgres", port=free_port()),
        "unknown host": pg_cluster.url("postgres", host="no-such-host.invalid"),
        "no such database": pg_cluster.url("no_such_db"),
    }[case]
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ROADMAP_PG_CONNECT_TIMEOUT", "3")
    result = run_cli("status")
    assert result.exit_code == 3 and result.exception is None, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result
    host = "no-such-host.invalid" if case == "unknown host" else "127.0.0.1"
    assert host in lines[0]
    assert PASSWORD not in result.stderr and "not-the-" not in result.stderr


def test_every_kind_of_command_runs_on_postgres(pg_url, run_cli, monkeypatch):
    monkeypatch.setenv("ROADMAP_LEARNER", "ada")
    assert run_cli("init", "--start-date", "2026-01-05").exit_code == 0
    assert run_cli("check", "s1-explain-attention-workflow", "--note", "QKV").exit_code == 0
    assert (
        run_cli(
            "paper", "log", "Attention Is All You Need", "--arxiv", "1706.03762", "--tags", "attention,transformer"
        ).exit_code
        == 0
    )
    assert run_cli("log", "hours", "2").exit_code == 0
    for args in (
        ["status", "--json"],
        ["paper", "list", "--json"],
        ["log", "list", "--json"],
        ["cadence", "--json"],
        ["lab", "list", "--json"],
        ["lab", "status", "minigpt", "--json"],
        ["next", "--json"],
    ):
        result = run_cli(*args)
        assert result.exit_code == 0, (args, result)
    papers = run_cli("paper", "list", "--json").json()["data"]
    assert papers["total"] == 1 and papers["papers"][0]["tags"] == ["attention", "transformer"]
    monkeypatch.setenv("ROADMAP_LEARNER", "grace")  # another learner on the same server sees none of it
    assert run_cli("paper", "list", "--json").json()["data"]["total"] == 0


def _export(run_cli) -> str:
    result = run_cli("export")
    assert result.exit_code == 0, result
    return result.stdout


def test_export_sqlite_import_postgres_export_is_identical(pg_cluster, run_cli, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    for learner in ("ada", "grace"):  # two learners in one SQLite file, as after a cohort export
        monkeypatch.setenv("ROADMAP_LEARNER", learner)
        assert run_cli("init", "--start-date", "2026-01-05").exit_code == 0
        assert run_cli("check", "s1-explain-attention-workflow").exit_code == 0
        assert run_cli("log", "hours", "1.5").exit_code == 0
    first = _export(run_cli)
    dump = tmp_path / "export.json"
    dump.write_text(first, encoding="utf-8")
    monkeypatch.setenv("DATABASE_URL", pg_cluster.new_database())
    assert run_cli("import", str(dump)).exit_code == 0
    second = _export(run_cli)
    assert json.loads(second)["tables"] == json.loads(first)["tables"]
    assert second == first
    assert {r["learner"] for r in json.loads(second)["tables"]["cadence_entries"]} == {"ada", "grace"}
    # The server's id sequences moved past the imported ids: new rows insert.
    assert run_cli("log", "hours", "1").exit_code == 0


def test_db_copy_moves_everything_to_postgres(pg_cluster, run_cli, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ROADMAP_LEARNER", "ada")
    assert run_cli("check", "s1-explain-attention-workflow").exit_code == 0
    assert run_cli("log", "hours", "3").exit_code == 0
    before = _export(run_cli)
    target = pg_cluster.new_database()
    result = run_cli("db", "copy", "--to", target)
    assert result.exit_code == 0, result
    assert PASSWORD not in result.stdout + result.stderr
    monkeypatch.setenv("DATABASE_URL", target)
    assert _export(run_cli) == before
    monkeypatch.delenv("DATABASE_URL")
    again = run_cli("db", "copy", "--to", target)  # never over data
    assert again.exit_code == 2 and "already holds" in again.stderr and again.stderr.count("\n") == 1


def test_server_stopped_mid_run_is_one_line_then_works_after_restart(pg_cluster, pg_url, tmp_path: Path):
    """A writer loops; the server stops under it: each command exits 0 or 3
    with one line, never a traceback; after a restart the next command works."""
    env = {
        **os.environ,
        "ROADMAP_HOME": str(tmp_path / "home"),
        "DATABASE_URL": pg_url,
        "ROADMAP_LEARNER": "ada",
        "ROADMAP_PG_CONNECT_TIMEOUT": "3",
    }
    roadmap = [sys.executable, "-m", "roadmap_cli"]
    assert subprocess.run(roadmap + ["init"], env=env, capture_output=True, timeout=120).returncode == 0
    driver = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("pg_writer.py")), "40"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = driver.stdout.readline()  # the writer is running
        assert first.startswith("ok"), first + driver.stderr.read()
        pg_cluster.stop("fast")
        out, err = driver.communicate(timeout=240)
    finally:
        pg_cluster.start()
    results = [json.loads(line) for line in out.splitlines()[1:] if line.startswith("{")]
    failures = [r for r in results if r["code"] != 0]
    assert failures, "the server stop was never noticed"
    for r in failures:
        assert r["code"] == 3, r
        assert "Traceback" not in r["stderr"] and len(r["stderr"].strip().splitlines()) == 1, r
        assert "127.0.0.1" in r["stderr"] and PASSWORD not in r["stderr"], r
    done = subprocess.run(roadmap + ["log", "hours", "1"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _writer(env: dict, per_process: int, number: int) -> None:
    """A forked writer process (its parent already imported everything)."""
    os.environ.update(env)
    from roadmap_cli import context

    context.reset()
    from pg_writer import mixed

    mixed(per_process, number)


def test_sixteen_processes_four_learners_write_at_once(pg_url, tmp_path: Path, monkeypatch):
    """Checks, grades and paper logs from 16 processes (4 per learner) at
    once: all land, once each; no conflict reaches anyone."""
    import multiprocessing

    import roadmap_cli.grading.grade  # noqa: F401 - imported once, before the fork: the writers start at once
    import roadmap_cli.research.entries  # noqa: F401
    import roadmap_cli.research.papers  # noqa: F401
    from roadmap_cli import context

    per_process = 3
    home = tmp_path / "home"
    monkeypatch.setenv("ROADMAP_HOME", str(home))
    context.reset()
    context.current().curriculum()  # cached under the home for the writers
    fork = multiprocessing.get_context("fork")
    procs = [
        fork.Process(
            target=_writer,
            args=(
                {"ROADMAP_HOME": str(home), "DATABASE_URL": pg_url, "ROADMAP_LEARNER": f"learner{n % 4}"},
                per_process,
                n,
            ),
        )
        for n in range(16)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0, f"writer exited with {p.exitcode}"
    store = open_store(home)
    with store.connection() as conn:
        for table in ("papers", "cadence_entries", "grade_attempts"):
            counts = dict(conn.execute(sa.text(f"SELECT learner, count(*) FROM {table} GROUP BY learner")).all())
            assert counts == {f"learner{i}": 4 * per_process for i in range(4)}, (table, counts)
        checks = dict(conn.execute(sa.text("SELECT learner, count(*) FROM checkpoint_progress GROUP BY learner")).all())
        assert set(checks) == {f"learner{i}" for i in range(4)}
        assert len(set(checks.values())) == 1  # the same checkpoints per learner, each once (primary key)


def test_conflicts_are_retried_a_bounded_number_of_times(pg_url, tmp_path: Path):
    """Store.write runs a body again after a serialization failure or a
    deadlock (the server's word for "try again"), and gives up after 5 tries
    with one line; the rolled-back tries leave nothing behind."""
    from roadmap_cli.errors import StoreError
    from roadmap_cli.store.tables import CheckpointNote

    store = open_store(tmp_path)
    tries = []

    def flaky(session, fail_times: int, state: str):
        tries.append(1)
        session.add(CheckpointNote(checkpoint_id="c", created_at="2026-02-01T10:00:00+00:00", text=f"try {len(tries)}"))
        session.flush()
        if len(tries) <= fail_times:
            session.execute(sa.text(f"DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '{state}'; END $$"))
        return len(tries)

    assert store.write(lambda s: flaky(s, 2, "40001")) == 3
    tries.clear()
    assert store.write(lambda s: flaky(s, 1, "40P01")) == 2
    tries.clear()
    with pytest.raises(StoreError) as err:
        store.write(lambda s: flaky(s, 99, "40001"))
    assert len(tries) == 5 and "conflict" in err.value.message and "\n" not in err.value.message
    with store.connection() as conn:
        texts = [r[0] for r in conn.execute(sa.text("SELECT text FROM checkpoint_notes ORDER BY id"))]
    assert texts == ["try 3", "try 2"]  # one row per successful write: failed tries were rolled back


def test_learner_id_of_a_server_home_and_replace_touches_only_the_importers_rows(
    pg_url, run_cli, monkeypatch, roadmap_home: Path, tmp_path: Path
):
    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    result = run_cli("init", "--learner", "ada@example.org", "--json")
    assert result.exit_code == 0, result
    assert (roadmap_home / "learner").read_text().strip() == "ada@example.org"  # the machine's id, not the server's
    assert run_cli("log", "hours", "2").exit_code == 0
    mine = tmp_path / "mine.json"
    mine.write_text(_export(run_cli), encoding="utf-8")
    monkeypatch.setenv("ROADMAP_LEARNER", "grace")  # the environment wins over the saved id
    assert run_cli("log", "hours", "1").exit_code == 0
    assert run_cli("db", "status", "--json").json()["data"]["learner"] == "grace"
    monkeypatch.delenv("ROADMAP_LEARNER")
    # A shared database: ada's --replace replaces ada's rows only; grace's stay as they were.
    replaced = run_cli("import", str(mine), "--replace")
    assert replaced.exit_code == 0, replaced
    everyone = tmp_path / "everyone.json"
    everyone.write_text(_export(run_cli), encoding="utf-8")
    hours = sorted((r["learner"], r["hours"]) for r in json.loads(everyone.read_text())["tables"]["cadence_entries"])
    assert hours == [("ada@example.org", 2.0), ("grace", 1.0)]
    # A file with another learner's rows is refused whole: nobody imports as somebody else.
    refused = run_cli("import", str(everyone), "--replace")
    assert refused.exit_code == 2 and "rows of other learners ('grace')" in refused.stderr, refused
    assert (
        sorted((r["learner"], r["hours"]) for r in json.loads(_export(run_cli))["tables"]["cadence_entries"]) == hours
    )
