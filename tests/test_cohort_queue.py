"""The cohort's grading queue on a real PostgreSQL (issue 28 item 3; grading/queue.py, store/queue.py).

Two `roadmap worker` processes grade 40 submissions of the fixture lab
`adder` from 4 learner roles; one worker is killed with SIGKILL while it
grades, and the other finishes its job (procrastinate's stalled-job retry).
Every submission ends graded exactly once: one attempt each, for the learner
who submitted it, of the files they submitted.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cohort_helpers import add_learner as _add_learner, as_login as _as, sql as _sql
from reaper import die_with_parent

PASSWORD = "queue-Pa55word-long"
_counter = itertools.count()
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a + b + 1\n"


@pytest.fixture
def cohort(pg_cluster, fake_labs, monkeypatch: pytest.MonkeyPatch):
    """A database owned by an instructor role (not a superuser); DATABASE_URL is the instructor's."""
    n = f"{os.getpid()}_{next(_counter)}"
    teacher, db = f"qteacher_{n}", f"queue_{n}"
    pg_cluster.admin(f"CREATE ROLE {teacher} LOGIN CREATEROLE PASSWORD '{PASSWORD}'")
    pg_cluster.admin(f"CREATE DATABASE {db} OWNER {teacher} TEMPLATE template0")
    url = f"postgresql+psycopg://{teacher}:{PASSWORD}@127.0.0.1:{pg_cluster.port}/{db}"
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    info = {"url": url, "n": n, "learners": []}
    yield info
    pg_cluster.admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    for role in [*info["learners"], teacher]:
        pg_cluster.admin(f'DROP ROLE IF EXISTS "{role}"')


class WorkerProc:
    """`roadmap worker --json` in its own process; its events read by a thread."""

    def __init__(self, url: str, home: Path, *extra: str) -> None:
        env = dict(os.environ, DATABASE_URL=url, ROADMAP_HOME=str(home))
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "roadmap_cli",
                "worker",
                "--json",
                "--heartbeat",
                "1",
                "--stalled-after",
                "4",
                *extra,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,  # a killed test run takes its workers along (tests/reaper.py)
        )
        self.events: list[dict] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.changed:
                self.events.append(event)
                self.changed.notify_all()

    def wait_for(self, predicate, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, (
                    self.events[-5:],
                    self.proc.poll(),
                    self.proc.stderr.read() if self.proc.poll() else "",
                )
                self.changed.wait(min(left, 1.0))

    def kinds(self, kind: str) -> list[dict]:
        return [e for e in list(self.events) if e["event"] == kind]


@pytest.mark.e2e  # a load test: 40 real grades, two workers, a kill
@pytest.mark.slow
def test_two_workers_grade_forty_submissions_exactly_once_through_a_kill(run_cli, cohort, monkeypatch, tmp_path):
    teacher_url = cohort["url"]
    assert run_cli("db", "status").exit_code == 0  # the instructor migrates
    names = [f"q{i}_{cohort['n']}" for i in range(4)]
    urls = {name: _add_learner(run_cli, cohort, name) for name in names}
    workers = [WorkerProc(teacher_url, tmp_path / f"worker{i}") for i in range(2)]
    try:
        for w in workers:
            w.wait_for(lambda e: e["event"] == "ready", 60)  # the first one made the queue's tables
        expected: dict[int, tuple[str, bool]] = {}
        for name in names:
            _as(monkeypatch, urls[name])
            ws = tmp_path / f"ws-{name}"
            assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
        for k in range(10):
            for name in names:
                _as(monkeypatch, urls[name])
                right = (k + names.index(name)) % 2 == 0
                (tmp_path / f"ws-{name}" / "adder.py").write_text(RIGHT if right else WRONG)
                result = run_cli("submit", "adder", "--json")
                assert result.exit_code == 0, result
                data = result.json()["data"]
                assert data["learner"] == name and data["position"] >= 1 and data["job"] > 0
                expected[data["submission"]] = (name, right)
        assert len(expected) == 40

        # Kill the first worker with SIGKILL while it grades (after it has recorded a few).
        victim, survivor = workers
        victim.wait_for(lambda e: e["event"] == "graded", 90)
        in_flight = victim.wait_for(
            lambda e: (
                e["event"] == "start" and not any(g["submission"] == e["submission"] for g in victim.kinds("graded"))
            ),
            90,
        )
        victim.proc.kill()
        victim.proc.wait(10)

        deadline = time.monotonic() + 150
        with _sql(teacher_url) as conn:
            while time.monotonic() < deadline:
                done = conn.execute(
                    "SELECT count(*) FROM roadmap_submissions WHERE status IN ('done', 'failed')"
                ).fetchone()[0]
                if done == 40:
                    break
                time.sleep(0.5)
            rows = conn.execute(
                "SELECT s.id, s.learner, s.status, s.tries, s.worker, a.learner, a.parts, a.graded_on, "
                "a.workspace FROM roadmap_submissions s LEFT JOIN grade_attempts a "
                "ON a.id = s.attempt_id ORDER BY s.id"
            ).fetchall()
            attempts = conn.execute("SELECT count(*) FROM grade_attempts WHERE lab_id = 'adder'").fetchone()[0]
        assert len(rows) == 40
        assert [r[2] for r in rows] == ["done"] * 40, [r[:5] for r in rows if r[2] != "done"]
        assert attempts == 40  # exactly once: no submission recorded twice, none lost
        for sid, learner, _status, _tries, _worker, attempt_learner, parts, graded_on, workspace in rows:
            name, right = expected[sid]
            assert learner == name and attempt_learner == name  # recorded for the submitter
            assert graded_on.startswith("worker:") and workspace == f"submission {sid}"
            add = next(p for p in json.loads(parts) if p["id"] == "add")
            assert add["status"] == ("passed" if right else "failed"), (sid, add)  # their files were graded
        killed = next(r for r in rows if r[0] == in_flight["submission"])
        assert killed[3] >= 2, killed[:5]  # tried again...
        assert killed[4] == survivor.wait_for(lambda e: e["event"] == "ready", 1)["worker"]  # ...by the survivor
        assert survivor.kinds("rescued"), "the survivor put the killed worker's job back"

        # The learner sees their own submissions; --all is the instructor's.
        _as(monkeypatch, urls[names[0]])
        mine = run_cli("submissions", "--json").json()["data"]
        assert mine["counts"]["done"] == 10 and {s["learner"] for s in mine["submissions"]} == {names[0]}
        # One numbering: the queue shows each attempt by its number in the learner's lab, as `lab history` does.
        history = run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"]
        by_id = {a["id"]: a["number"] for a in history}
        assert sorted(s["attempt_number"] for s in mine["submissions"]) == list(range(1, 11))
        assert all(by_id[s["attempt_id"]] == s["attempt_number"] for s in mine["submissions"])
        assert f"attempt #{mine['submissions'][0]['attempt_number']})" in run_cli("submissions").stdout
        refused = run_cli("submissions", "--all")
        assert refused.exit_code == 2 and "instructor" in refused.stderr and "Traceback" not in refused.stderr
        _as(monkeypatch, teacher_url)
        everyone = run_cli("submissions", "--all", "--json", "--limit", "100").json()["data"]
        assert len(everyone["submissions"]) == 40 and everyone["counts"]["done"] == 40
        for name in names:  # per learner, not across the cohort
            assert sorted(s["attempt_number"] for s in everyone["submissions"] if s["learner"] == name) == list(
                range(1, 11)
            )
        assert all(s["wait_s"] is not None and s["wait_s"] >= 0 for s in everyone["submissions"])

        # Ctrl-C stops the survivor cleanly.
        survivor.proc.send_signal(signal.SIGINT)
        assert survivor.proc.wait(30) == 0
        survivor.wait_for(lambda e: e["event"] == "stopping", 1)
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait(10)


def test_user_mistakes_are_one_line(run_cli, cohort, monkeypatch, tmp_path, pg_cluster):
    teacher_url = cohort["url"]
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0

    def one_line(result, code: int, words: str) -> None:
        assert result.exit_code == code, result
        assert words in result.stderr and "Traceback" not in result.stderr + result.stdout, result

    # Not inside a workspace and no lab id.
    monkeypatch.chdir(tmp_path)
    one_line(run_cli("submit"), 2, "not inside a lab workspace")
    # Too big: an untracked, not ignored file over 20 MB.
    big = ws / "weights.bin"
    with open(big, "wb") as f:
        f.truncate(21 * 1024 * 1024)
    one_line(run_cli("submit", "adder"), 2, "over the 20 MB")
    big.unlink()
    # The worker refuses without the OS sandbox, unless told.
    monkeypatch.setenv("ROADMAP_SANDBOX", "weak")
    one_line(run_cli("worker"), 2, "--allow-weak-sandbox")
    monkeypatch.delenv("ROADMAP_SANDBOX")
    one_line(run_cli("worker", "--labs", "addr"), 2, "adder")  # did-you-mean
    # A learner cannot submit before the instructor made the queue; cannot run a worker.
    learner = f"ql_{cohort['n']}"
    url = run_cli("cohort", "add-learner", learner, "--json").json()["data"]["database_url"]
    cohort["learners"].append(learner)
    _as(monkeypatch, url)
    assert run_cli("lab", "start", "adder", "--dir", str(tmp_path / "ws2")).exit_code == 0
    one_line(run_cli("submit", "adder"), 2, "not set up yet")
    one_line(run_cli("worker"), 2, "instructor")
    # The snapshot carries tracked + untracked files, never .git or ignored ones.
    _as(monkeypatch, teacher_url)
    (ws / ".gitignore").write_text("out/\n")
    (ws / "out").mkdir()
    (ws / "out" / "big.log").write_text("x" * 100)
    (ws / "notes.txt").write_text("mine")
    result = run_cli("submit", "adder", "--json")
    assert result.exit_code == 0, result
    with _sql(teacher_url) as conn:
        files = conn.execute("SELECT files FROM roadmap_submissions").fetchone()[0]
    import io
    import tarfile

    names = tarfile.open(fileobj=io.BytesIO(files), mode="r:gz").getnames()
    assert "notes.txt" in names and "adder.py" in names and ".gitignore" in names
    assert not any(n.startswith((".git/", "out/")) for n in names)
    # The learner can now submit (the queue grants reach learners added before it existed).
    _as(monkeypatch, url)
    assert run_cli("submit", "adder").exit_code == 0
    mine = run_cli("submissions", "--json").json()["data"]
    assert [s["learner"] for s in mine["submissions"]] == [learner]
    assert mine["submissions"][0]["position"] == 2  # the instructor's submission is ahead
    # A learner cannot mark their own submission graded, nor read another's files.
    import psycopg

    with _sql(url) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE roadmap_submissions SET status = 'done', score = 100")
        assert conn.execute("SELECT count(*) FROM roadmap_submissions").fetchone()[0] == 1  # their own row only
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO procrastinate_jobs (queue_name, task_name, args) VALUES ('x', 'y', '{}')")
    # A stopped (unreachable) server: one line, both sides.
    dead = teacher_url.replace(f":{pg_cluster.port}/", f":{_closed_port()}/")
    _as(monkeypatch, dead)
    one_line(run_cli("submit", "adder"), 3, "cannot reach the database server")
    one_line(run_cli("worker"), 3, "cannot reach the database server")


def test_ctrl_c_mid_grade_puts_the_job_back(run_cli, cohort, tmp_path):
    assert run_cli("lab", "start", "adder", "--dir", str(tmp_path / "ws")).exit_code == 0
    # A learner module that takes its time on import: the grade is surely still running at Ctrl-C.
    (tmp_path / "ws" / "adder.py").write_text("import time\ntime.sleep(20)\n\n\n" + RIGHT)
    assert run_cli("submit", "adder").exit_code == 0
    worker = WorkerProc(cohort["url"], tmp_path / "worker")
    try:
        worker.wait_for(lambda e: e["event"] == "start", 60)
        worker.proc.send_signal(signal.SIGINT)
        assert worker.proc.wait(60) == 0
    finally:
        if worker.proc.poll() is None:
            worker.proc.kill()
    with _sql(cohort["url"]) as conn:
        assert conn.execute("SELECT status, tries, attempt_id FROM roadmap_submissions").fetchall() == [
            ("queued", 1, None)
        ]
        assert conn.execute("SELECT status FROM procrastinate_jobs").fetchall() == [("todo",)]
        assert conn.execute("SELECT count(*) FROM grade_attempts").fetchone()[0] == 0  # nothing recorded


@pytest.mark.slow
def test_a_server_that_stops_under_a_running_worker_is_one_line(fake_labs, tmp_path):
    from pgcluster import start_cluster

    cluster = start_cluster()  # its own: stopping the session's cluster would stop the other tests' databases
    try:
        url = cluster.new_database("stop")
        worker = WorkerProc(url, tmp_path / "worker")
        worker.wait_for(lambda e: e["event"] == "ready", 60)
        cluster.stop("fast")
        assert worker.proc.wait(60) == 3
        err = worker.proc.stderr.read()
        assert err.count("\n") == 1 and "database server 127.0.0.1" in err and "Traceback" not in err, err
    finally:
        cluster.destroy()


def test_not_in_cohort_mode(run_cli, fake_labs, tmp_path):
    assert run_cli("lab", "start", "adder", "--dir", str(tmp_path / "ws")).exit_code == 0
    for args in (["submit", "adder"], ["worker"], ["submissions"]):
        result = run_cli(*args)
        assert result.exit_code == 2 and "cohort mode" in result.stderr, result


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_grade_that_ran_and_failed_and_one_that_could_not_run_have_two_names(run_cli, cohort, monkeypatch, tmp_path):
    """ "failed" is an attempt's outcome (the grade ran, a test failed); a submission the worker could not
    grade at all is "not-graded", in `submissions`, its counts, --json and the worker's events."""
    from roadmap_cli.store.values import SUBMISSION_STATUSES

    assert SUBMISSION_STATUSES == ("queued", "running", "done", "not-graded")
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    (ws / "adder.py").write_text(WRONG)
    monkeypatch.chdir(ws)
    assert run_cli("submit", "adder").exit_code == 0
    assert run_cli("submit", "adder").exit_code == 0
    with _sql(cohort["url"]) as conn:  # the second snapshot is unreadable: it cannot be graded
        conn.execute(
            "UPDATE roadmap_submissions SET files = 'not a tar' WHERE id = (SELECT max(id) FROM roadmap_submissions)"
        )
    worker = WorkerProc(cohort["url"], tmp_path / "worker")
    try:
        worker.wait_for(lambda e: e["event"] == "graded", 120)
        not_graded = worker.wait_for(lambda e: e["event"] == "not-graded", 120)
        worker.proc.send_signal(signal.SIGINT)
        assert worker.proc.wait(60) == 0
    finally:
        if worker.proc.poll() is None:
            worker.proc.kill()
    assert not worker.kinds("failed") and not_graded["message"]
    data = run_cli("submissions", "--json").json()["data"]
    assert data["counts"] == {"queued": 0, "running": 0, "done": 1, "not-graded": 1}
    assert [(s["status"], s["outcome"]) for s in data["submissions"]] == [("not-graded", None), ("done", "failed")]
    text = run_cli("submissions").stdout
    assert "done 1, not graded 1" in text and "not graded (the worker could not grade it):" in text, text
    assert "done: failed 0/" in text and "failed:" not in text.replace("done: failed", "")

    # A cohort from before: its queue says 'failed' for what could not run; the migration renames it.
    from roadmap_cli.store import migrations

    with _sql(cohort["url"]) as conn:
        conn.execute("ALTER TABLE roadmap_submissions DROP CONSTRAINT roadmap_submissions_status_check")
        conn.execute("UPDATE roadmap_submissions SET status = 'failed' WHERE status = 'not-graded'")
        conn.execute(
            "ALTER TABLE roadmap_submissions ADD CONSTRAINT roadmap_submissions_status_check "
            "CHECK (status IN ('queued', 'running', 'done', 'failed'))"
        )
        # Back to before the renaming migration (and the ones after it, whose objects are dropped to be made again).
        renaming = 1 + [name for name, _ in migrations.MIGRATIONS].index("submission_not_graded")
        conn.execute("ALTER TABLE roadmap_submissions DROP CONSTRAINT IF EXISTS roadmap_submissions_bounded")
        conn.execute("DELETE FROM schema_migrations WHERE version >= %s", (renaming,))
    _as(monkeypatch, cohort["url"])
    assert run_cli("db", "status").exit_code == 0  # the instructor migrates
    with _sql(cohort["url"]) as conn:
        assert sorted(r[0] for r in conn.execute("SELECT status FROM roadmap_submissions")) == ["done", "not-graded"]
        import psycopg

        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE roadmap_submissions SET status = 'failed'")
