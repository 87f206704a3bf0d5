"""Shared fixtures: every test gets its own data home; `run_cli` drives the real CLI."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
from pathlib import Path

# Without a GPU, Triton kernels in the project's own tests run under the
# interpreter. It must be chosen before triton is first imported (triton
# builds its helpers at import time), so it is set here, before any test
# module loads.
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")

# A suite started in the background by a non-interactive shell (`cmd &`, as a CI runner may) inherits SIGINT
# ignored, and so would every process a test starts: Python then installs no KeyboardInterrupt handler, and the
# tests that press Ctrl-C on a grade would see it ignored. An ignored signal stays ignored across exec, a handled
# one does not: give this process Python's own handler, and its children start with SIGINT as a terminal gives it.
import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest
from typer.testing import CliRunner

import devcheck_background


@pytest.fixture(autouse=True)
def roadmap_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh data home per test, so no test sees another's database."""
    home = tmp_path / "home"
    monkeypatch.setenv("ROADMAP_HOME", str(home))
    monkeypatch.setenv("ROADMAP_LANG", "en")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("ROADMAP_CURRICULUM", raising=False)
    # Developers run the suite on a work tree with uncommitted engine and lab
    # edits, which the install manifest (grading/manifest.py) would refuse to
    # grade; tests/test_grader_manifest.py takes this away to test the check.
    monkeypatch.setenv("ROADMAP_DEV_UNLOCKED", "1")
    # Logging a paper by its id asks arXiv / Crossref (research/fetch.py). No test may reach the internet: by
    # default the registries are a closed loopback port (refused at once: "metadata not fetched"); the tests of
    # fetching point these at a local server that serves recorded-format responses.
    for name in ("ROADMAP_ARXIV_API", "ROADMAP_CROSSREF_API", "ROADMAP_DATACITE_API"):
        monkeypatch.setenv(name, "http://127.0.0.1:1")
    monkeypatch.delenv("ROADMAP_CONTACT_EMAIL", raising=False)
    from roadmap_cli import context

    context.reset()
    return home


class CliResult:
    def __init__(self, exit_code: int, stdout: str, stderr: str, exception: Exception | None) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.exception = exception

    def json(self) -> dict:
        return json.loads(self.stdout)

    def __repr__(self) -> str:
        return f"<CliResult exit={self.exit_code} stdout={self.stdout[-800:]!r} stderr={self.stderr[-800:]!r}>"


def _in_process(main):
    runner = CliRunner()

    def run(*args: str, input: str | None = None) -> CliResult:
        exit_code, exception = 0, None
        with runner.isolation(input=input) as outstreams:
            try:
                main([str(a) for a in args])
            except SystemExit as exc:
                code = exc.code
                exit_code = code if isinstance(code, int) else (0 if code is None else 1)
            except Exception as exc:  # a real bug: keep it visible in the result
                exit_code, exception = -1, exc
            sys.stdout.flush()
            sys.stderr.flush()
            stdout = outstreams[0].getvalue().decode("utf-8", "replace")
            stderr = outstreams[1].getvalue().decode("utf-8", "replace")
        return CliResult(exit_code, stdout, stderr, exception)

    return run


@pytest.fixture
def run_cli():
    """Invoke `roadmap ARGS...` in-process through `cli.main`: the console
    script's run without its early start of a grade, so our error handling is
    what is tested."""
    from roadmap_cli.cli import main

    return _in_process(main)


@pytest.fixture
def run_console_script():
    """Invoke `roadmap ARGS...` in-process through the console script itself
    (roadmap_cli/entry.py): with the fast path that starts `roadmap grade`'s
    grader (or `--on`'s ssh session) before typer loads."""
    from roadmap_cli.entry import main

    return _in_process(main)


# ---------------------------------------------------------------- PostgreSQL (cohort mode)


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL cluster for the whole session (tests/pgcluster.py).

    No server binaries: the PostgreSQL tests are skipped with the package to
    install, except where ROADMAP_REQUIRE_POSTGRES=1 (CI), where that is a failure."""
    from pgcluster import PACKAGE_HINT, find_bindir, start_cluster

    if find_bindir() is None:
        message = f"PostgreSQL server binaries not found: {PACKAGE_HINT}"
        if os.environ.get("ROADMAP_REQUIRE_POSTGRES") == "1":
            pytest.fail(message + " (ROADMAP_REQUIRE_POSTGRES=1: CI must run these tests)", pytrace=False)
        pytest.skip(message)
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_url(pg_cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh empty database on the session's cluster, set as DATABASE_URL."""
    url = pg_cluster.new_database()
    monkeypatch.setenv("DATABASE_URL", url)
    return url


# ---------------------------------------------------------------- the engine-test labs

FIXTURE_LABS = Path(__file__).parent / "fixtures_labs"


@pytest.fixture
def fake_labs(monkeypatch: pytest.MonkeyPatch):
    """The engine-test labs (tests/fixtures_labs: `adder`, ...) instead of the
    real ones, graded as on a machine without a GPU."""
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURE_LABS / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    yield FIXTURE_LABS
    detect_device.cache_clear()


@pytest.fixture
def wall():
    """The OS wall (grading_kit/oswall.py), or a skip naming why bubblewrap cannot run here; a failure
    instead where CI says it must (ROADMAP_REQUIRE_BWRAP=1)."""
    from roadmap_cli.grading_kit import oswall

    oswall._probe.cache_clear()
    if oswall._probe()[0] is None:
        why = oswall._probe()[1]
        if os.environ.get("ROADMAP_REQUIRE_BWRAP") == "1":
            pytest.fail(f"{why} (ROADMAP_REQUIRE_BWRAP=1: CI must run these tests)", pytrace=False)
        pytest.skip(why)
    yield oswall
    oswall._probe.cache_clear()


@pytest.fixture
def adder_workspace(fake_labs, run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A freshly started workspace of the fixture lab `adder` (its starter
    files), made the current directory."""
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    monkeypatch.chdir(ws)
    return ws


@pytest.fixture(scope="module")
def cpu():
    """The CPU device, with the engine-test labs (tests/fixtures_labs) as the labs folder, for a whole module
    (the warm-grader and warm-learner tests)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROADMAP_LABS_DIR", str(FIXTURE_LABS / "labs"))
        mp.setenv("ROADMAP_DEVICE", "cpu")
        from roadmap_cli.labs.device import detect_device

        detect_device.cache_clear()
        yield detect_device()
        detect_device.cache_clear()


@pytest.fixture(scope="module")
def adder(cpu):
    from roadmap_cli.labs.spec import find_lab

    return find_lab("adder")


@pytest.hookimpl(trylast=True)  # after -k/-m have deselected: start it only when its test will run
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    """Start the every-lab dev check now and move its test to the end (tests/devcheck_background.py says why)."""
    ours = [item for item in items if item.name == devcheck_background.TEST_NAME]
    if ours and not config.option.collectonly:
        items[:] = [item for item in items if item not in ours] + ours
        config.stash[_DEV_CHECK] = devcheck_background.start()


_DEV_CHECK = pytest.StashKey["devcheck_background.BackgroundDevCheck"]()


def pytest_unconfigure(config: pytest.Config) -> None:
    running = config.stash.get(_DEV_CHECK, None)
    if running is not None:
        running.stop()


@pytest.fixture
def background_dev_check(request: pytest.FixtureRequest):
    """The dev check started after collection (None when this test was not collected with it)."""
    return request.config.stash.get(_DEV_CHECK, None)


# ---------------------------------------------------------------- a cohort database on the throwaway cluster

COHORT_PASSWORD = "teach-Pa55word-long"
_cohort_counter = itertools.count()


@pytest.fixture
def cohort(pg_cluster, monkeypatch: pytest.MonkeyPatch):
    """A database owned by a fresh instructor role (CREATEROLE, not a superuser); DATABASE_URL is the instructor's.
    (test_cohort_roles, _copy, _views, test_paper_numbers_postgres; test_cohort_verified has its own.)"""
    n = f"{os.getpid()}_{next(_cohort_counter)}"
    teacher, db = f"teacher_{n}", f"cohort_{n}"
    pg_cluster.admin(f"CREATE ROLE {teacher} LOGIN CREATEROLE PASSWORD '{COHORT_PASSWORD}'")
    pg_cluster.admin(f"CREATE DATABASE {db} OWNER {teacher} TEMPLATE template0")
    url = f"postgresql+psycopg://{teacher}:{COHORT_PASSWORD}@127.0.0.1:{pg_cluster.port}/{db}"
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    info = {"url": url, "db": db, "n": n, "port": pg_cluster.port, "learners": []}
    yield info
    # Roles are the cluster's, not the database's: drop the database (and the grants on it), then every role.
    pg_cluster.admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    for role in [*info["learners"], teacher]:
        pg_cluster.admin(f'DROP ROLE IF EXISTS "{role}"')
