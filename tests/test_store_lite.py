"""store/lite.py: `roadmap grade` records through the stdlib sqlite3 module,
writes exactly the rows the full store writes, and only ever takes a database
the full store would open without changing it."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from roadmap_cli.errors import StoreError
from roadmap_cli.store import lite


def _home_with_store(home: Path):
    from roadmap_cli.store import open_store

    home.mkdir(parents=True, exist_ok=True)
    store = open_store(home)
    store.learner  # noqa: B018 - pins the learner, as the first command does
    return store


def _run(lab, *, tests_status: list[str], part_status: str = "passed"):
    """A GradeRun-shaped record: one part, the given test outcomes."""
    part = lab.parts[0]
    parts = [
        SimpleNamespace(
            id=part.id,
            points=float(part.points) if part_status == "passed" else 0.0,
            max_points=float(part.points),
            status=part_status,
            tests_passed=tests_status.count("passed"),
            tests_total=len(tests_status),
        )
    ]
    tests = [
        SimpleNamespace(
            nodeid=f"test_a.py::test_{i}",
            part=part.id,
            outcome=outcome,
            duration_s=0.25 * i,
            message=None if outcome == "passed" else f"boom {i} ✗ 'quoted'",
        )
        for i, outcome in enumerate(tests_status)
    ]
    return SimpleNamespace(
        started_at="2026-12-03T10:00:00+00:00",
        duration_s=1.5,
        outcome=part_status,
        score=parts[0].points,
        max_score=parts[0].max_points,
        parts=parts,
        perf=[{"name": "ops", "value": 12.5}],
        device="cpu",
        device_capability=None,
        torch_version="2.13.0",
        triton_version=None,
        interpret_mode=True,
        workspace="/tmp/ws/a b",
        grader_sha256="f" * 64,
        message=None,
        sandbox="strong",
        tests=tests,
    )


def _rows(db: Path) -> dict:
    con = sqlite3.connect(db)
    try:
        out = {}
        for table, skip in (
            ("grade_attempts", ()),
            ("grade_test_results", ()),
            ("checkpoint_progress", ("completed_at",)),
        ):
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})") if r[1] not in skip]
            out[table] = [
                tuple((type(v).__name__, v) for v in row)
                for row in con.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY 1, 2")
            ]
        return out
    finally:
        con.close()


def test_the_schema_version_is_the_migrations_latest():
    from roadmap_cli.store import migrations

    assert lite.SCHEMA_VERSION == migrations.LATEST, "a new migration: raise store/lite.py's SCHEMA_VERSION"


def test_lite_and_full_store_write_identical_rows(tmp_path: Path, monkeypatch):
    from roadmap_cli.grading.grade import attempt_number, record_attempt
    from roadmap_cli.labs.spec import find_lab

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ROADMAP_LEARNER", "ada@example.org")
    lab = find_lab("minigpt")
    results = {}
    for kind in ("full", "lite"):
        home = tmp_path / kind
        store = _home_with_store(home)
        if kind == "lite":
            store = lite.open_lite(home)
            assert store is not None
        with_evidence = []
        for statuses, part_status in (
            (["passed", "failed"], "failed"),
            (["passed", "passed"], "passed"),
            (["passed", "passed"], "passed"),
        ):
            attempt_id, marked = record_attempt(
                store, lab, _run(lab, tests_status=statuses, part_status=part_status), "abc123", True
            )
            with_evidence.append((attempt_id, marked, attempt_number(store, lab.id, attempt_id)))
        results[kind] = (with_evidence, _rows(home / "roadmap.db"))
    assert results["lite"] == results["full"]
    marks = [m for _, m, _ in results["lite"][0]]
    assert marks[0] == [] and marks[1] == list(lab.parts[0].proves) and marks[2] == []  # marked once, then kept


def test_rows_written_by_the_lite_store_read_back_through_the_orm(tmp_path: Path, monkeypatch):
    from sqlmodel import select

    from roadmap_cli.grading.grade import record_attempt
    from roadmap_cli.labs.spec import find_lab
    from roadmap_cli.store.tables import CheckpointProgress, GradeAttempt, GradeTestResult

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    home = tmp_path / "home"
    full = _home_with_store(home)
    lab = find_lab("minigpt")
    attempt_id, _ = record_attempt(lite.open_lite(home), lab, _run(lab, tests_status=["passed"]), None, None)
    with full.session() as s:
        attempt = s.get(GradeAttempt, attempt_id)
        assert (attempt.interpret_mode, attempt.dirty, attempt.imported, attempt.learner) == (
            True,
            None,
            False,
            full.learner,
        )
        assert json.loads(attempt.perf) == [{"name": "ops", "value": 12.5}] and attempt.workspace == "/tmp/ws/a b"
        tests = s.exec(select(GradeTestResult).where(GradeTestResult.attempt_id == attempt_id)).all()
        assert [(t.nodeid, t.outcome, t.learner) for t in tests] == [("test_a.py::test_0", "passed", full.learner)]
        done = s.exec(select(CheckpointProgress)).all()
        assert {c.checkpoint_id for c in done} == set(lab.parts[0].proves)
        # the evidence names the attempt by its number in the lab, as the grade and `lab history` do
        assert all(c.evidence == "grade attempt #1 of minigpt" and c.source.startswith("lab:minigpt/") for c in done)


def test_a_failed_body_leaves_nothing(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    home = tmp_path / "home"
    _home_with_store(home)
    store = lite.open_lite(home)

    def body(sql):
        sql.execute(
            "INSERT INTO lab_hints (lab_id, hint_index, shown_at, learner) VALUES ('x', 0, 'now', :l)", l=store.learner
        )
        raise RuntimeError("crash after the first row")

    with pytest.raises(RuntimeError):
        store.write_sql(body)
    assert store.read_sql(lambda sql: sql.scalar("SELECT count(*) FROM lab_hints")) == 0


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_it_declines_what_the_full_store_must_handle(tmp_path: Path, monkeypatch):
    from roadmap_cli.store import open_store

    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert lite.open_lite(tmp_path / "nothing") is None  # no database yet: the full store creates it

    older = tmp_path / "older"
    older.mkdir()
    from roadmap_cli.store import migrations

    store = open_store(older, migrate=False)
    migrations.migrate(store, target=migrations.LATEST - 1)
    before = _sha(older / "roadmap.db")
    assert lite.open_lite(older) is None  # a migration is due: never run it here
    assert _sha(older / "roadmap.db") == before

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    con = sqlite3.connect(foreign / "roadmap.db")
    con.execute("CREATE TABLE stuff (x)")
    con.commit()
    con.close()
    before = _sha(foreign / "roadmap.db")
    assert lite.open_lite(foreign) is None  # someone else's file: left byte-identical
    assert _sha(foreign / "roadmap.db") == before

    ours = tmp_path / "ours"
    _home_with_store(ours)
    assert lite.open_lite(ours) is not None
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    assert lite.open_lite(ours) is None  # DATABASE_URL wins, as in open_store
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setenv("ROADMAP_LEARNER", "not a valid id!")
    assert lite.open_lite(ours) is None  # the full store says what is wrong with it
    monkeypatch.setenv("ROADMAP_LEARNER", "grace")
    assert lite.open_lite(ours).learner == "grace"


def _set_pinned(home: Path, raw: str) -> None:
    con = sqlite3.connect(home / "roadmap.db")
    con.execute("UPDATE settings SET value = ? WHERE learner = '' AND key = 'learner'", (raw,))
    con.commit()
    con.close()


@pytest.mark.parametrize(
    "env, pinned, want",
    [
        (None, '"ada@example.org"', "ada@example.org"),  # the id pinned in the home
        (None, "ada-plain", "ada-plain"),  # an old plain (not JSON) setting
        ("grace", '"ada@example.org"', "grace"),  # $ROADMAP_LEARNER first
    ],
)
def test_the_lean_lookup_and_the_full_store_agree_on_the_learner(tmp_path: Path, monkeypatch, env, pinned, want):
    """store/learners.known_learner is the one order: the console script's workspace lookup (a read-only
    lean store), the lean store that records a grade and the full store all say the same learner."""
    from roadmap_cli.labs.service import workspaces_fast
    from roadmap_cli.store import open_store

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    home = tmp_path / "home"
    _home_with_store(home)
    _set_pinned(home, pinned)
    if env:
        monkeypatch.setenv("ROADMAP_LEARNER", env)
    full = open_store(home)
    assert full.learner == want
    assert lite.open_lite(home).learner == want and lite.open_lite(home, read_only=True).learner == want
    ws = tmp_path / "ws"
    ws.mkdir()
    from roadmap_cli.labs.service import record_workspace

    record_workspace(full, "adder", ws)
    assert workspaces_fast(home) == [("adder", ws)]  # the row of that learner, found by the lean lookup


def test_the_workspace_lookup_takes_no_write_lock(tmp_path: Path, monkeypatch):
    """The early start's lookup is a read: another process holding the write lock (a grade recording
    its attempt) does not make it wait, and the lean store opened to read refuses to write."""
    import time

    from roadmap_cli.labs.service import workspaces_fast

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    home = tmp_path / "home"
    _home_with_store(home)
    writer = sqlite3.connect(home / "roadmap.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.monotonic()
        assert workspaces_fast(home) == []
        assert time.monotonic() - t0 < 5  # a write lock would wait for the 30 s busy timeout
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    with pytest.raises(StoreError):
        lite.open_lite(home, read_only=True).write_sql(lambda sql: sql.execute("DELETE FROM settings"))


def test_a_corrupted_database_refuses_the_write_in_one_line(tmp_path: Path, monkeypatch):
    from test_hostile_store import _corrupt_table_root

    monkeypatch.delenv("DATABASE_URL", raising=False)
    home = tmp_path / "home"
    _home_with_store(home)
    store = lite.open_lite(home)
    assert store is not None
    _corrupt_table_root(home / "roadmap.db", "grade_attempts")
    with pytest.raises(StoreError) as err:
        store.write_sql(
            lambda sql: sql.execute(
                "INSERT INTO lab_hints (lab_id, hint_index, shown_at, learner) VALUES ('x', 0, 'now', 'local')"
            )
        )
    assert "corrupt" in str(err.value) and "\n" not in str(err.value)


def test_grade_never_imports_sqlalchemy(tmp_path: Path):
    """The console script's whole `roadmap grade` (the fixture lab, recorded) runs without SQLAlchemy."""
    fixtures = Path(__file__).parent / "fixtures_labs"
    env = dict(
        os.environ,
        ROADMAP_HOME=str(tmp_path / "home"),
        ROADMAP_LABS_DIR=str(fixtures / "labs"),
        ROADMAP_DEVICE="cpu",
        ROADMAP_LANG="en",
    )
    env.pop("DATABASE_URL", None)
    ws = tmp_path / "ws"
    subprocess.run(
        [sys.executable, "-m", "roadmap_cli", "lab", "start", "adder", "--dir", str(ws)],
        env=env,
        check=True,
        capture_output=True,
    )
    (ws / "adder.py").write_text((fixtures / "labs" / "adder" / "solution" / "adder.py").read_text())
    (ws / "mul.py").write_text((fixtures / "kernels" / "mul.py").read_text())
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('sqlalchemy', 'sqlmodel', 'git'))) + '\\n'))\n"
        "from roadmap_cli.entry import main\n"
        "main(sys.argv[1:])\n"
    )
    for args in (["grade", "--json"], ["grade"]):
        proc = subprocess.run(
            [sys.executable, "-c", probe, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode in (0, 1), proc.stderr
        modules = proc.stderr.rsplit("MODULES", 1)[1].split()
        assert modules == [], f"`roadmap {' '.join(args)}` imported {modules}"
    history = subprocess.run(
        [sys.executable, "-m", "roadmap_cli", "lab", "history", "adder", "--json"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(history.stdout)["data"]["total"] == 2  # both grades were recorded
