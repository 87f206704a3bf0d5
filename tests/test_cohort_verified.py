"""Grades only the server vouches for (issue 35 item 6; store/roles.py, migration 11), on a real PostgreSQL.

Row-level security decides whose rows a learner writes, not what they say. A learner's own login must not be
able to write or rewrite an attempt, its per-test results or a lab-proved checkpoint with raw SQL; their own
grades go through one SECURITY DEFINER function and come out self-graded whatever they claim; the board ranks
verified attempts (the worker's) only and lists self-graded ones apart.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from pg_writer import fake_run
from cohort_helpers import add_learner as _add, as_login as _as, sql as _sql

PASSWORD = "verified-Pa55word-long"
_counter = itertools.count()
RIGHT = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def cohort(pg_cluster, fake_labs, monkeypatch: pytest.MonkeyPatch):
    """A database owned by an instructor role (not a superuser); DATABASE_URL is the instructor's."""
    n = f"{os.getpid()}_{next(_counter)}"
    teacher, db = f"vteacher_{n}", f"verified_{n}"
    pg_cluster.admin(f"CREATE ROLE {teacher} LOGIN CREATEROLE PASSWORD '{PASSWORD}'")
    pg_cluster.admin(f"CREATE DATABASE {db} OWNER {teacher} TEMPLATE template0")
    url = f"postgresql+psycopg://{teacher}:{PASSWORD}@127.0.0.1:{pg_cluster.port}/{db}"
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    info = {"url": url, "n": n, "learners": [], "teacher": teacher}
    yield info
    pg_cluster.admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    for role in [*info["learners"], teacher]:
        pg_cluster.admin(f'DROP ROLE IF EXISTS "{role}"')


def _worker_records(learner: str, *, score: float = 10.0) -> int:
    """What `roadmap worker` records for `learner` (the instructor's login, verified=True): one passed `add`."""
    from roadmap_cli import context
    from roadmap_cli.grading.grade import attempt_writer
    from roadmap_cli.labs.spec import find_lab

    context.reset()
    lab = find_lab("adder")
    run = fake_run(lab, 0, 0)
    run.score, run.sandbox, run.device = score, "strong", "NVIDIA H100 80GB HBM3"
    store = context.current().store()
    attempt_id, _ = store.write_sql(
        attempt_writer(lab, run, None, None, learner=learner, graded_on="worker:gpu1", verified=True)
    )
    return attempt_id


FORGED = dict(
    lab_id="adder",
    started_at="2026-12-01T10:00:00+00:00",
    duration_s=1.0,
    outcome="passed",
    score=70.0,
    max_score=70.0,
    parts=json.dumps(
        [{"id": p, "points": 10, "max_points": 10, "status": "passed"} for p in ("add", "mul", "speed", "gpu")]
    ),
    perf="[]",
    device="NVIDIA H100 80GB HBM3",
    interpret_mode=False,
    workspace="submission 1",
    grader_sha256="0" * 64,
    sandbox="strong",
    graded_on="worker:gpu1",
)


def test_a_learner_login_cannot_write_or_rewrite_an_attempt_or_a_lab_checkpoint(run_cli, cohort, monkeypatch):
    import psycopg

    assert run_cli("db", "status").exit_code == 0  # the instructor migrates
    n = cohort["n"]
    ada, bob = f"ada{n}", f"bob{n}"
    ada_url, _bob_url = _add(run_cli, cohort, ada), _add(run_cli, cohort, bob)
    verified_id = _worker_records(ada)  # proves fake-add for ada: a lab-proved checkpoint
    with _sql(cohort["url"]) as conn:
        assert conn.execute(
            "SELECT source FROM checkpoint_progress WHERE learner = %s AND checkpoint_id = 'fake-add'", (ada,)
        ).fetchone() == ("lab:adder/add",)
        before = conn.execute("SELECT id, score, verified, learner FROM grade_attempts ORDER BY id").fetchall()
    _as(monkeypatch, ada_url)
    assert run_cli("check", "s1-explain-attention-workflow").exit_code == 0  # a self-marked checkpoint: hers

    columns = ", ".join(FORGED)
    values = ", ".join(["%s"] * len(FORGED))
    with _sql(ada_url) as conn:
        denied = psycopg.errors.InsufficientPrivilege
        # An attempt claiming the worker, the strong sandbox, an H100 and every part passed.
        for extra_cols, extra_vals in (("", ()), (", verified, learner", (True, ada))):
            with pytest.raises(denied):
                conn.execute(
                    f"INSERT INTO grade_attempts ({columns}{extra_cols}) VALUES ({values}{', %s' * len(extra_vals)})",
                    (*FORGED.values(), *extra_vals),
                )
        # Rewriting the worker's attempt of hers, or deleting it.
        for statement in (
            "UPDATE grade_attempts SET score = 100 WHERE learner = current_user",
            "UPDATE grade_attempts SET verified = true",
            "DELETE FROM grade_attempts",
            "INSERT INTO grade_test_results (attempt_id, nodeid, part_id, outcome, duration_s, learner) "
            f"VALUES ({verified_id}, 'tests/test_gpu.py::test_gpu_only', 'gpu', 'passed', 0.1, "
            "current_user)",
            "UPDATE grade_test_results SET outcome = 'passed'",
            "DELETE FROM grade_test_results",
            "TRUNCATE grade_attempts CASCADE",
            "ALTER TABLE grade_attempts DISABLE ROW LEVEL SECURITY",
            "DROP POLICY roadmap_lab_proved_checkpoints_delete ON checkpoint_progress",
            "CREATE OR REPLACE FUNCTION roadmap_record_self_graded(attempt jsonb, tests jsonb) "
            "RETURNS integer LANGUAGE sql AS 'SELECT 1'",
            # Through the read-only cohort view.
            "UPDATE cohort_grade_attempts SET score = 100",
            "INSERT INTO cohort_grade_attempts (lab_id) VALUES ('adder')",
        ):
            with pytest.raises(psycopg.Error):
                conn.execute(statement)
        # Lab-proved checkpoints: not insertable, not changeable, not deletable; her self-marked one stays hers.
        with pytest.raises(denied, match="row-level security"):
            conn.execute(
                "INSERT INTO checkpoint_progress (checkpoint_id, completed_at, source, evidence, learner) "
                "VALUES ('fake-mul', '2026-12-01T10:00:00+00:00', 'lab:adder/mul', 'grade attempt 1', "
                "current_user)"
            )
        assert conn.execute("UPDATE checkpoint_progress SET evidence = 'mine' WHERE source LIKE 'lab:%'").rowcount == 0
        assert conn.execute("DELETE FROM checkpoint_progress WHERE source LIKE 'lab:%'").rowcount == 0
        with pytest.raises(denied, match="row-level security"):
            conn.execute("UPDATE checkpoint_progress SET source = 'lab:adder/mul' WHERE source = 'self'")
        # The one door: whatever it is sent, the row is hers, self-graded, not imported.
        forged = dict(FORGED, learner=bob, verified=True, imported=True)
        tests = [
            {
                "nodeid": "tests/test_gpu.py::test_gpu_only",
                "part_id": "gpu",
                "outcome": "passed",
                "duration_s": 0.1,
                "learner": bob,
                "attempt_id": verified_id,
            }
        ]
        own_id = conn.execute(
            "SELECT roadmap_record_self_graded(%s::jsonb, %s::jsonb)", (json.dumps(forged), json.dumps(tests))
        ).fetchone()[0]
        for bad in (
            "'[]'::jsonb, '[]'::jsonb",
            "'{}'::jsonb, '{}'::jsonb",
            "jsonb_build_object('outcome', 'verified'), '[]'::jsonb",
        ):
            with pytest.raises(psycopg.Error):
                conn.execute(f"SELECT roadmap_record_self_graded({bad})")
        # Not a door to the instructor's role either.
        with pytest.raises(psycopg.Error):
            conn.execute(f"SET ROLE {cohort['teacher']}")

    with _sql(cohort["url"]) as conn:
        after = conn.execute(
            "SELECT id, score, verified, learner FROM grade_attempts WHERE id <> %s ORDER BY id", (own_id,)
        ).fetchall()
        assert after == before  # the worker's attempt untouched
        row = conn.execute(
            "SELECT learner, verified, imported, sandbox, graded_on, score FROM grade_attempts WHERE id = %s", (own_id,)
        ).fetchone()
        assert row == (ada, False, False, "strong", "worker:gpu1", 70.0)  # kept only as her claim
        assert conn.execute(
            "SELECT learner, attempt_id FROM grade_test_results WHERE attempt_id = %s", (own_id,)
        ).fetchall() == [(ada, own_id)]
        assert conn.execute(
            "SELECT count(*) FROM grade_test_results WHERE attempt_id = %s", (verified_id,)
        ).fetchone() == (1,)
        assert conn.execute(
            "SELECT source FROM checkpoint_progress WHERE learner = %s AND checkpoint_id = 'fake-add'", (ada,)
        ).fetchone() == ("lab:adder/add",)

    # The board ranks the worker's attempt only; her 70-point claim is listed apart, labelled.
    data = run_cli("cohort", "board", "adder", "--json").json()["data"]
    assert data["mode"] == "cohort"
    ranked = [(e["learner"], e["best_score"], e["kind"]) for g in data["devices"] for e in g["learners"]]
    assert ranked == [(ada, 10.0, "verified")]
    assert [
        (e["learner"], e["best_score"], e["claimed"]["sandbox"], e["claimed"]["graded_on"]) for e in data["self_graded"]
    ] == [(ada, 70.0, "strong", "worker:gpu1")]
    text = run_cli("cohort", "board", "adder")
    assert text.exit_code == 0 and "self-graded" in text.stdout and "claimed device" in text.stdout


def test_a_learners_own_grade_is_recorded_self_graded_and_a_verified_one_outranks_it(
    run_cli, cohort, monkeypatch, tmp_path: Path
):
    assert run_cli("db", "status").exit_code == 0
    n = cohort["n"]
    ada, bob = f"ada{n}", f"bob{n}"
    ada_url, bob_url = _add(run_cli, cohort, ada), _add(run_cli, cohort, bob)

    # The normal learner flow on her own machine: start, solve, grade. It records, through the function.
    _as(monkeypatch, ada_url)
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    (ws / "adder.py").write_text(RIGHT)
    monkeypatch.chdir(ws)
    graded = run_cli("grade", "--json")
    assert graded.exit_code in (0, 1), graded
    assert "fake-add" in graded.json()["data"]["checkpoints_marked"]
    history = run_cli("lab", "history", "adder", "--json")
    assert history.exit_code == 0 and len(history.json()["data"]["attempts"]) == 1
    with _sql(cohort["url"]) as conn:
        assert conn.execute("SELECT learner, verified, imported FROM grade_attempts").fetchall() == [
            (ada, False, False)
        ]
        assert conn.execute("SELECT count(*) > 0 FROM grade_test_results WHERE learner = %s", (ada,)).fetchone()[0]
        assert conn.execute(
            "SELECT source FROM checkpoint_progress WHERE learner = %s AND checkpoint_id = 'fake-add'", (ada,)
        ).fetchone() == ("self-graded:adder/add",)

    # Her export and import --replace round-trip: the server's records stay as they are.
    mine = tmp_path / "ada.json"
    assert run_cli("export", "-o", str(mine)).exit_code == 0
    replaced = run_cli("import", str(mine), "--replace")
    assert replaced.exit_code == 0, replaced
    with _sql(cohort["url"]) as conn:
        assert conn.execute("SELECT count(*) FROM grade_attempts WHERE learner = %s", (ada,)).fetchone() == (1,)

    # Bob only self-grades a higher score; ada's work goes through the worker: only hers ranks.
    _as(monkeypatch, bob_url)
    with _sql(bob_url) as conn:
        conn.execute("SELECT roadmap_record_self_graded(%s::jsonb, '[]'::jsonb)", (json.dumps(FORGED),))
    _as(monkeypatch, cohort["url"])
    _worker_records(ada, score=10.0)
    with _sql(cohort["url"]) as conn:  # the verified grade now vouches for what her own only claimed
        assert conn.execute(
            "SELECT source FROM checkpoint_progress WHERE learner = %s AND checkpoint_id = 'fake-add'", (ada,)
        ).fetchone() == ("lab:adder/add",)
    # Undoing a lab-proved checkpoint is the instructor's: one line for her, not a traceback.
    with _sql(cohort["url"]) as conn:
        conn.execute(
            "INSERT INTO checkpoint_progress (checkpoint_id, completed_at, source, evidence, learner) "
            "VALUES ('s1-explain-attention-workflow', '2026-12-01T10:00:00+00:00', 'lab:adder/add', "
            "'grade attempt 1', %s)",
            (ada,),
        )
    _as(monkeypatch, ada_url)
    refused = run_cli("uncheck", "s1-explain-attention-workflow")
    assert refused.exit_code == 2 and "only the instructor" in refused.stderr, refused
    assert refused.stderr.count("\n") == 1
    _as(monkeypatch, cohort["url"])
    data = run_cli("cohort", "board", "adder", "--json").json()["data"]
    assert [(e["rank"], e["learner"]) for g in data["devices"] for e in g["learners"]] == [(1, ada)]
    own_score = graded.json()["data"]["score"]
    assert {e["learner"]: e["best_score"] for e in data["self_graded"]} == {ada: own_score, bob: 70.0}


def test_solo_sqlite_attempts_are_the_learners_own_and_rank(run_cli, adder_workspace, monkeypatch):
    """SQLite: one person's file, no server to vouch: attempts rank as before, labelled as the learner's own."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    (adder_workspace / "adder.py").write_text(RIGHT)
    assert run_cli("grade", "--json").exit_code in (0, 1)
    data = run_cli("cohort", "board", "adder", "--json").json()["data"]
    assert data["mode"] == "solo" and data["self_graded"] == []
    assert [e["kind"] for g in data["devices"] for e in g["learners"]] == ["own"]
    from roadmap_cli import context

    context.reset()
    store = context.current().store()
    assert store.read_sql(
        lambda sql: sql.rows(  # the checkpoint the lab proved, as before
            "SELECT source FROM checkpoint_progress WHERE checkpoint_id = 'fake-add'"
        )
    ) == [("lab:adder/add",)]


def test_a_self_graded_claim_never_helps_a_verified_grade_prove_a_checkpoint(run_cli, cohort, monkeypatch):
    """A checkpoint two parts prove: a forged self-graded pass of one part plus the worker's verified pass of
    the other must not make it lab-proved."""
    from roadmap_cli import context
    from roadmap_cli.grading.grade import attempt_writer
    from roadmap_cli.labs.spec import find_lab

    assert run_cli("db", "status").exit_code == 0
    ada = f"ada{cohort['n']}"
    ada_url = _add(run_cli, cohort, ada)
    with _sql(ada_url) as conn:  # every part "passed", as her claim
        conn.execute("SELECT roadmap_record_self_graded(%s::jsonb, '[]'::jsonb)", (json.dumps(FORGED),))
    lab = find_lab("adder").model_copy(deep=True)  # the loaded spec may be cached: change a copy
    lab.part("add").proves.append("fake-mul")  # fake-mul now needs both add and mul
    run = fake_run(lab, 0, 0)  # the worker's grade: add passed, nothing else
    context.reset()
    store = context.current().store()
    store.write_sql(attempt_writer(lab, run, None, None, learner=ada, graded_on="worker:gpu1", verified=True))
    with _sql(cohort["url"]) as conn:
        proved = dict(
            conn.execute("SELECT checkpoint_id, source FROM checkpoint_progress WHERE learner = %s", (ada,)).fetchall()
        )
    assert proved == {"fake-add": "lab:adder/add"}


def test_learners_of_a_cohort_from_before_the_upgrade_lose_write_access_and_still_grade(
    run_cli, cohort, monkeypatch, tmp_path: Path
):
    """A cohort at schema 9 with a learner role (who could INSERT attempts then): the instructor's upgrade takes
    that away and gives the function instead; the learner's next grade is recorded self-graded."""
    import psycopg

    from roadmap_cli.store import migrations
    from roadmap_cli.store.engine import open_store

    store = open_store(tmp_path / "teacher", migrate=False, url=cohort["url"])
    migrations.migrate(store, target=9)
    from roadmap_cli.store import roles
    from roadmap_cli.store.learners import person_tables

    ada = f"ada{cohort['n']}"
    with store.engine.begin() as conn:  # what add-learner granted at schema 9: every person table, attempts too
        roles.add_learner(conn, ada, PASSWORD, person_tables(conn))
        conn.exec_driver_sql(f'GRANT INSERT, UPDATE, DELETE ON grade_attempts, grade_test_results TO "{ada}"')
    cohort["learners"].append(ada)
    from sqlalchemy.engine import make_url

    ada_url = make_url(cohort["url"]).set(username=ada, password=PASSWORD).render_as_string(hide_password=False)
    with _sql(ada_url) as conn:
        assert conn.execute("SELECT has_table_privilege('grade_attempts', 'INSERT')").fetchone() == (True,)
    assert run_cli("db", "status").exit_code == 0  # the instructor's upgrade: migration 10
    with _sql(ada_url) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                f"INSERT INTO grade_attempts ({', '.join(FORGED)}) VALUES ({', '.join(['%s'] * len(FORGED))})",
                tuple(FORGED.values()),
            )
        own = conn.execute(
            "SELECT roadmap_record_self_graded(%s::jsonb, '[]'::jsonb)", (json.dumps(FORGED),)
        ).fetchone()[0]
    with _sql(cohort["url"]) as conn:
        assert conn.execute("SELECT learner, verified FROM grade_attempts WHERE id = %s", (own,)).fetchone() == (
            ada,
            False,
        )
    listed = run_cli("cohort", "learners", "--json").json()["data"]["learners"]
    assert [r["learner"] for r in listed] == [ada]  # still listed as a learner after the revoke


def test_red_team_routes_a_forged_claim_passes_no_lab_and_breaks_no_board(run_cli, cohort, monkeypatch):
    """Found by the red team (issue 35 item 7): a self-graded attempt claiming every part counted as a passed lab
    in `cohort status`; one whose perf is not a list crashed `cohort board` and `export` for everyone; and a
    checkpoint source 'LAB:x' or ' lab:x' slipped past the lab-proved policy and broke every export."""
    import psycopg

    assert run_cli("db", "status").exit_code == 0
    n = cohort["n"]
    mallory = f"mallory{n}"
    url = _add(run_cli, cohort, mallory)
    claim = dict(
        FORGED,
        parts=json.dumps(
            [
                {
                    "id": "add",
                    "points": 10.0,
                    "max_points": 10.0,
                    "status": "passed",
                    "tests_passed": 1,
                    "tests_total": 1,
                },
                {
                    "id": "mul",
                    "points": 10.0,
                    "max_points": 10.0,
                    "status": "passed",
                    "tests_passed": 1,
                    "tests_total": 1,
                },
            ]
        ),
        perf="5",
        score=20.0,
    )
    with _sql(url) as conn:
        conn.execute("SELECT roadmap_record_self_graded(%s::jsonb, '[]'::jsonb)", (json.dumps(claim),))
        for source in ("LAB:adder/add", " lab:adder/add", "lab:adder/add ", "anything"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
                conn.execute(
                    "INSERT INTO checkpoint_progress (checkpoint_id, completed_at, source, evidence, learner) "
                    "VALUES ('fake-mul', '2026-12-01T10:00:00+00:00', %s, 'x', current_user)",
                    (source,),
                )
    status = run_cli("cohort", "status", "--json")
    assert status.exit_code == 0, status
    row = next(r for r in status.json()["data"]["learners"] if r["learner"] == mallory)
    assert row["labs_passed"] == [], row  # a claim is not a passed lab
    board = run_cli("cohort", "board", "adder", "--json")
    assert board.exit_code == 0 and "Traceback" not in board.stderr, board
    assert [e["learner"] for e in board.json()["data"]["self_graded"]] == [mallory]
    assert run_cli("cohort", "export").exit_code == 0


def _worker_records_a_failure(learner: str) -> int:
    """What `roadmap worker` records for `learner` when the submitted files fail every part: verified, 0 points."""
    from roadmap_cli import context
    from roadmap_cli.grading.grade import attempt_writer
    from roadmap_cli.labs.spec import find_lab

    context.reset()
    lab = find_lab("adder")
    run = fake_run(lab, 0, 0)
    run.parts[0].status, run.parts[0].points, run.tests[0].outcome = "failed", 0.0, "failed"
    run.outcome, run.score, run.sandbox = "failed", 0.0, "strong"
    store = context.current().store()
    attempt_id, _ = store.write_sql(
        attempt_writer(lab, run, None, None, learner=learner, graded_on="worker:gpu1", verified=True)
    )
    return attempt_id


def test_a_learner_whose_verified_attempts_all_failed_is_attempted_not_not_started(
    run_cli, cohort, monkeypatch, tmp_path: Path
):
    assert run_cli("db", "status").exit_code == 0
    ada = f"ada{cohort['n']}"
    ada_url = _add(run_cli, cohort, ada)
    _worker_records_a_failure(ada)
    _worker_records_a_failure(ada)
    _as(monkeypatch, cohort["url"])
    data = run_cli("cohort", "board", "adder", "--json").json()["data"]
    [entry] = [e for g in data["devices"] for e in g["learners"]]
    assert entry["learner"] == ada and entry["attempts"] == 2 and entry["best_score"] == 0.0
    assert entry["lab_state"] == "in-progress" and entry["lab_state_text"] == "attempted, failing", entry
    text = run_cli("cohort", "board", "adder").stdout
    assert "not-started" not in text and "lab attempted, failing (0/" in text and "best attempt 0/" in text, text

    # Her history says which attempts the server vouches for and which are her own machine's claim.
    _as(monkeypatch, ada_url)
    assert run_cli("lab", "start", "adder", "--dir", str(tmp_path / "ws-ada")).exit_code == 0
    (tmp_path / "ws-ada" / "adder.py").write_text(RIGHT)
    monkeypatch.chdir(tmp_path / "ws-ada")
    assert run_cli("grade").exit_code in (0, 1)
    history = run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"]
    assert [a["kind"] for a in history] == ["self-graded", "verified", "verified"]
    out = run_cli("lab", "history", "adder").stdout
    assert out.count("verified") == 2 and out.count("self-graded") == 1, out


def test_solo_history_attempts_are_the_learners_own_and_say_nothing_of_verification(
    run_cli, adder_workspace, monkeypatch
):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert run_cli("grade").exit_code in (0, 1)
    history = run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"]
    assert [a["kind"] for a in history] == ["own"]
    out = run_cli("lab", "history", "adder").stdout
    assert "verified" not in out and "self-graded" not in out


def test_a_solo_learner_whose_attempts_all_failed_is_attempted_on_the_board(run_cli, adder_workspace, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert run_cli("grade", "--json").json()["data"]["score"] == 0  # the starter: every part fails
    [entry] = [
        e for g in run_cli("cohort", "board", "adder", "--json").json()["data"]["devices"] for e in g["learners"]
    ]
    assert entry["lab_state"] == "in-progress" and entry["lab_state_text"] == "attempted, failing", entry
