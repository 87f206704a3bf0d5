"""`roadmap grade -k/--test/-x/-v` and `--part` report only what they ran;
a filtered run never completes a part; a mismatch names the test's check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"
ADDER = FIXTURES / "labs" / "adder"


pytestmark = pytest.mark.usefixtures("fake_labs")  # tests/conftest.py


@pytest.fixture
def workspace(adder_workspace: Path) -> Path:
    return adder_workspace


def test_k_runs_only_matching_tests_and_never_completes_the_part(run_cli, workspace: Path) -> None:
    shutil.copy(ADDER / "solution" / "adder.py", workspace / "adder.py")
    data = run_cli("grade", "-k", "small", "--json").json()["data"]
    assert [t["nodeid"] for t in data["tests"]] == ["test_add.py::test_add_small"]
    parts = {p["id"]: p for p in data["parts"]}
    assert parts["add"]["status"] == "focused" and parts["add"]["points"] == 0
    assert parts["mul"]["status"] == parts["speed"]["status"] == "not-run"
    assert data["checkpoints_marked"] == [] and data["exit_code"] == 0
    human = run_cli("grade", "-k", "small")
    assert "add: selected tests passed (1/1 test)" in human.stdout and "2 other parts not run" in human.stdout
    assert "passed — " not in human.stdout  # no whole-lab headline for a partial run


def test_x_stops_at_the_first_failure(run_cli, workspace: Path) -> None:
    data = run_cli("grade", "-x", "--json").json()["data"]
    ran = [t for t in data["tests"] if t["outcome"] != "not-run"]
    assert len(ran) == 1 and ran[0]["outcome"] == "failed"
    parts = {p["id"]: p["status"] for p in data["parts"]}
    assert parts == {"add": "failed", "mul": "not-run", "speed": "not-run", "gpu": "not-graded-here"}


def test_test_option_and_part_report_only_what_ran(run_cli, workspace: Path) -> None:
    (workspace / "adder.py").write_text("def add(a, b):\n    return a + b + 1\n")
    result = run_cli("grade", "--test", "test_add.py::test_add_small", "-v")
    assert result.exit_code == 1
    # The mismatch is located at the test's own check, with the full traceback in -v.
    assert "checked by: test_add.py:7 in test_add_small: assert adapter.add(2, 3) == 5" in result.stdout
    assert "traceback (the test's check and your code" in result.stdout and "compare.py" not in result.stdout
    unknown = run_cli("grade", "--test", "test_nope.py::x")
    assert unknown.exit_code == 2 and "in no part of adder" in unknown.stderr
    shutil.copy(FIXTURES / "kernels" / "mul.py", workspace / "mul.py")
    part = run_cli("grade", "--part", "mul")
    assert part.exit_code == 0
    assert (
        "mul: passed (2/2 tests, 20/20 points)" in part.stdout and "2 other parts not run (add, speed)" in part.stdout
    )


def test_learner_frame_is_named(run_cli, workspace: Path) -> None:
    result = run_cli("grade", "--part", "mul", "--json").json()["data"]
    message = next(p for p in result["parts"] if p["id"] == "mul")["message"]
    assert "in your code: mul.py:2 in mul" in message and "checked by: test_mul.py" in message


def test_k_matching_no_test_is_one_line_and_records_nothing(run_cli, workspace: Path) -> None:
    """A -k typo is a user mistake (exit 2, one line), not a grader error (4) nor a recorded `error` attempt."""
    result = run_cli("grade", "-k", "zzz")
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "-k zzz" in lines[0] and "no attempt recorded" in lines[0]
    assert run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"] == []
