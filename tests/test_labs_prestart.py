"""grading/prestart.py: `roadmap grade` starts its grader before the command line
is parsed, and only the very job the normal path would start is ever used."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from roadmap_cli.grading import prestart

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


@pytest.mark.parametrize(
    "args, want",
    [
        ([], {}),
        (["adder", "--json"], {"lab_id": "adder"}),
        (["--part", "mul", "-x", "-v"], {"part": "mul", "first_failure": True, "verbose": True}),
        (
            ["--part=mul", "-k", "small", "--test", "a.py::t", "--test=b.py", "--timeout", "30"],
            {"part": "mul", "keyword": "small", "tests": ["a.py::t", "b.py"], "timeout": 30.0},
        ),
        (["adder", "--on", "box", "--timeout=5"], {"lab_id": "adder", "on": "box", "timeout": 5.0}),
    ],
)
def test_the_plain_forms_are_read(args, want):
    base = {
        "lab_id": None,
        "part": None,
        "keyword": None,
        "tests": [],
        "timeout": None,
        "first_failure": False,
        "verbose": False,
        "on": None,
    }
    assert prestart._read(args) == {**base, **want}


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
    ],
)
def test_anything_else_is_left_to_typer(args):
    assert prestart._read(args) is None
    assert prestart.start(args) is False


def test_grade_uses_the_job_started_before_parsing(run_cli, workspace, monkeypatch):
    from roadmap_cli.grading.runner import GradeJob

    started, offered, claimed = [], [], []
    real_start, real_claim = GradeJob.start, prestart.claim
    monkeypatch.setattr(GradeJob, "start", lambda self: started.append(self) or real_start(self))

    def claim(job):
        offered.append(prestart._started)  # what cli.main started before typer parsed
        claimed.append(real_claim(job))
        return claimed[-1]

    monkeypatch.setattr(prestart, "claim", claim)
    result = run_cli("grade", "--part", "add", "--json")
    assert result.exit_code == 0, result
    assert result.json()["data"]["parts"][0]["status"] == "passed"
    # One grader, started before the command line was parsed, and that is the one graded.
    assert len(started) == 1 and offered == started and claimed == started


def test_a_different_job_kills_the_started_one(workspace):
    from roadmap_cli.grading.runner import GradeJob
    from roadmap_cli.labs.spec import find_lab

    assert prestart.start(["--part", "add"])
    early = prestart._started
    other = GradeJob(find_lab("adder"), workspace, parts=["mul"])
    assert prestart.claim(other) is other and other.proc is None
    assert early.proc.poll() is not None  # the supervisor (and with it pytest) is gone
    assert prestart._started is None


def test_an_unclaimed_job_is_killed(workspace):
    assert prestart.start([])
    early = prestart._started
    prestart.discard()
    assert early.proc.poll() is not None and prestart._started is None


def test_a_workspace_with_a_precheck_problem_starts_nothing(workspace):
    (workspace / "adder.py").write_text("def add(a, b):\n    return (a +\n")
    assert prestart.start([]) is False
