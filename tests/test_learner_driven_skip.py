"""A test that skips after the learner's code answered counts as not passed (red team P4).

gpu-architecture's roofline test skipped when the device name the learner process reported was not in the
table, and a skipped test dropped out of its part: fewer tests, same points. The rule (grading/results.py): a
skip the grader decides before the learner's code runs (no GPU, a case covered elsewhere) stays out of the part;
a skip after a request to the learner process fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_weak_sandbox_judge import RIGHT_ADD, _weak, workspace  # noqa: F401 - fixtures


def _add_test(body: str) -> None:
    tests = Path(os.environ["ROADMAP_LABS_DIR"]) / "adder" / "tests" / "test_add.py"
    tests.write_text(tests.read_text() + "\n\n" + body)


def test_a_skip_after_the_learner_answered_fails_the_part(
    run_cli, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _weak(monkeypatch)
    _add_test(
        "def test_reported_device():\n"
        "    answer = adapter.add(40, 2)\n"
        "    if answer == 42:\n"
        "        pytest.skip('the reported device is not in the table')\n"
    )
    (workspace / "adder.py").write_text(RIGHT_ADD)
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    part = data["parts"][0]
    assert part["status"] == "failed" and part["points"] == 0, part
    test = next(t for t in data["tests"] if t["nodeid"].endswith("test_reported_device"))
    assert test["outcome"] == "failed" and "skipped after your code answered" in test["message"], test


def test_a_skip_before_any_learner_call_stays_out_of_the_part(
    run_cli, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _weak(monkeypatch)
    _add_test("def test_covered_elsewhere():\n    pytest.skip('covered by another case here')\n")
    (workspace / "adder.py").write_text(RIGHT_ADD)
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    part = data["parts"][0]
    assert part["status"] == "passed" and part["points"] == part["max_points"], part
    test = next(t for t in data["tests"] if t["nodeid"].endswith("test_covered_elsewhere"))
    assert test["outcome"] == "skipped", test
