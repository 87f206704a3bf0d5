"""grading/prestart.py: `roadmap grade` starts its grader before the command line
is parsed, and only the very job the normal path would start is ever used."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from roadmap_cli.grading import options, prestart

FIXTURES = Path(__file__).parent / "fixtures_labs"
ADDER = FIXTURES / "labs" / "adder"


@pytest.fixture(autouse=True)
def no_job_left(fake_labs):  # fake_labs: tests/conftest.py
    yield
    prestart.discard()


@pytest.fixture
def workspace(adder_workspace: Path) -> Path:
    shutil.copy(ADDER / "solution" / "adder.py", adder_workspace / "adder.py")
    shutil.copy(FIXTURES / "kernels" / "mul.py", adder_workspace / "mul.py")
    return adder_workspace


def _read(args: list[str]):
    return options.read(args)


@pytest.mark.parametrize(
    "args, want",
    [
        ([], {}),
        (["adder", "--json"], {"lab_id": "adder", "as_json": True}),
        (["--part", "mul", "-x", "-v"], {"part": "mul", "first_failure": True, "verbose": True}),
        (
            ["--part=mul", "-k", "small", "--test", "a.py::t", "--test=b.py", "--timeout", "30"],
            {"part": "mul", "keyword": "small", "test": ["a.py::t", "b.py"], "timeout": 30.0},
        ),
        (["adder", "--on", "box", "--timeout=5"], {"lab_id": "adder", "on": "box", "timeout": 5.0}),
    ],
)
def test_the_plain_forms_are_read(args, want):
    assert _read(args) == {**options.defaults(), **want}


@pytest.mark.parametrize(
    "args",
    [
        ["--watch"],
        ["-h"],
        ["--help"],
        ["-xv"],
        ["a", "b"],
        ["--part"],
        ["--timeout", "0"],
        ["--timeout", "nan"],
        ["--timeout", "x"],
        ["--"],
        ["--bogus"],
        ["adder", "--events", "--events-workspace", "w"],
    ],
)
def test_anything_else_is_left_to_typer(args):
    assert _read(args) is None


def test_grade_takes_the_job_started_before_parsing(run_console_script, workspace, monkeypatch):
    from roadmap_cli.grading import grade
    from roadmap_cli.grading.runner import GradeJob

    started, taken, resolved = [], [], []
    real_start, real_take = GradeJob.start, prestart.take
    monkeypatch.setattr(GradeJob, "start", lambda self: started.append(self) or real_start(self))
    monkeypatch.setattr(prestart, "take", lambda *a, **k: taken.append(real_take(*a, **k)) or taken[-1])
    monkeypatch.setattr(grade, "resolve_workspace", lambda *a, **k: resolved.append(a) or (None, None))
    result = run_console_script("grade", "--part", "add", "--json")
    assert result.exit_code == 0, result
    assert result.json()["data"]["parts"][0]["status"] == "passed"
    # One grader, started before the command line was parsed, and that is the one graded: the lab and
    # workspace it resolved were handed on, never resolved a second time.
    assert len(started) == 1 and taken == started and resolved == []


def test_cli_main_grades_without_an_early_start(run_cli, workspace, monkeypatch):
    """The fast path is the console script's alone: cli.main (tests, `python -c`) starts nothing early."""
    monkeypatch.setattr(prestart, "start", lambda *a, **k: pytest.fail("cli.main started a grader early"))
    result = run_cli("grade", "--part", "add", "--json")
    assert result.exit_code == 0, result
    assert result.json()["data"]["parts"][0]["status"] == "passed"


def test_a_grade_asking_for_something_else_kills_the_started_one(workspace):
    assert prestart.start(_read(["--part", "add"]))
    early = prestart._started
    assert prestart.take(None, part="mul", timeout=None) is None
    assert early.proc.poll() is not None  # the supervisor (and with it pytest) is gone
    assert prestart._started is None


def test_the_started_job_is_handed_over_with_its_lab_and_workspace(workspace):
    from roadmap_cli.grading.focus import Focus

    assert prestart.start(_read(["-k", "add"]))
    early = prestart._started
    job = prestart.take("adder", part=None, timeout=None, focus=Focus(keyword="add"))
    assert job is early and job.workspace == workspace.resolve() and job.spec.id == "adder"
    job.abort()


def test_an_unclaimed_job_is_killed(workspace):
    assert prestart.start(_read([]))
    early = prestart._started
    prestart.discard()
    assert early.proc.poll() is not None and prestart._started is None


def test_a_workspace_with_a_precheck_problem_starts_nothing(workspace):
    (workspace / "adder.py").write_text("def add(a, b):\n    return (a +\n")
    assert prestart.start(_read([])) is False
