"""One meaning of "passed" on every surface (issue 36 item 4; labs/passing.py).

A lab passes by its parts across counted attempts; an attempt that graded a
subset of parts (--part, -k/--test, -x) is a part attempt, never the lab's
result nor its percentage; a GPU part not graded here neither passes the lab
nor blocks it on CPU ("passed on CPU (1 part needs a CUDA GPU)").

The fixture lab `adder` has add (10), mul (20), speed (10) and gpu (30, needs CUDA).
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

FIXTURE_LABS = (
    Path(__file__).parent / "fixtures_labs"
)  # not imported from conftest: two conftest modules share that name

ADDER = FIXTURE_LABS / "labs" / "adder"


def _surfaces(run_cli) -> dict:
    """What each surface says about adder, as data (and the people's text where it says a word)."""
    month = datetime.now().strftime("%Y-%m")
    report = run_cli("report", "--month", month, "--json")
    assert report.exit_code == 0, report
    status = run_cli("status", "--json")
    assert status.exit_code == 0, status
    board = run_cli("cohort", "board", "adder", "--json").json()["data"]["devices"][0]["learners"][0]
    return {
        "history": run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"],
        "history_text": run_cli("lab", "history", "adder").stdout,
        "lab_status": run_cli("lab", "status", "adder", "--json").json()["data"]["labs"][0],
        "status": next(lab for lab in status.json()["data"]["labs"] if lab["id"] == "adder"),
        "status_text": run_cli("status").stdout,
        "report": next(lab for lab in report.json()["data"]["labs"] if lab["lab_id"] == "adder"),
        "report_text": run_cli("report", "--month", month).stdout,
        "stats": run_cli("stats", "--json").json()["data"]["grades"],
        "stats_text": run_cli("stats").stdout,
        "board": board,
        "board_text": run_cli("cohort", "board", "adder").stdout,
        "cohort": run_cli("cohort", "status", "--json").json()["data"]["learners"][0],
    }


def test_a_one_part_attempt_is_a_part_attempt_everywhere(adder_workspace: Path, run_cli) -> None:
    shutil.copy(FIXTURE_LABS / "kernels" / "mul.py", adder_workspace / "mul.py")
    graded = run_cli("grade", "--part", "mul", "--json")
    assert graded.exit_code == 0, graded
    data = graded.json()["data"]
    assert (data["outcome"], data["part_attempt"], data["graded_parts"]) == ("part-passed", True, ["mul"])
    assert data["score"] == data["max_score"] == 20  # the attempt's own points: its parts only

    seen = _surfaces(run_cli)
    (attempt,) = seen["history"]
    assert attempt["outcome"] == "part-passed" and attempt["graded_parts"] == ["mul"]
    assert attempt["outcome_text"] == "part-passed (graded mul; 1/4 parts)"
    assert attempt["parts_left_out"] == ["add", "speed"] and attempt["parts_not_graded_here"] == 1
    assert "graded mul" in seen["history_text"]
    for surface in ("lab_status", "status"):
        assert seen[surface]["state"] == "partial", surface
        assert (seen[surface]["best_score"], seen[surface]["max_score"]) == (20, 40), surface  # CPU: gpu left out
    assert "partial" in seen["status_text"] and "passed" not in seen["status_text"].split("adder", 1)[1].split("\n")[0]
    report = seen["report"]
    assert report["state"] == "partial" and report["part_attempt"] is True and report["outcome"] == "part-passed"
    assert report["state_line"] == "Partial: 1 of 4 parts passed" and report["parts_open"] == ["add", "speed", "gpu"]
    assert "Partial: 1 of 4 parts passed (20/40 points" in seen["report_text"]
    assert "\nPassed" not in seen["report_text"]
    assert all(g["lab_id"] != "adder" for g in seen["stats"])  # 20/20 of one part is not the lab at 100 %
    assert "1 part attempt (--part, -k, watch) not plotted" in seen["stats_text"]
    board = seen["board"]
    assert (board["lab_state"], board["outcome"], board["part_attempt"]) == ("partial", "part-passed", True)
    assert "lab partial (1/4 parts)" in seen["board_text"]
    assert seen["cohort"]["labs_passed"] == []


def test_parts_passed_one_at_a_time_pass_the_lab_on_cpu_and_never_plain_passed(adder_workspace: Path, run_cli) -> None:
    shutil.copy(ADDER / "solution" / "adder.py", adder_workspace / "adder.py")
    shutil.copy(FIXTURE_LABS / "kernels" / "mul.py", adder_workspace / "mul.py")
    focused = run_cli("grade", "-k", "test_add_small", "--json").json()["data"]
    assert (focused["outcome"], focused["outcome_text"]) == (
        "part-passed",
        "part-passed (some tests of add; 0/4 parts)",
    )
    assert (
        run_cli("lab", "status", "adder", "--json").json()["data"]["labs"][0]["state"] == "in-progress"
    )  # -k: no part
    for part in ("add", "mul", "speed"):
        assert run_cli("grade", "--part", part).exit_code == 0

    seen = _surfaces(run_cli)
    words = "passed on CPU (1 part needs a CUDA GPU)"
    for surface in ("lab_status", "status"):
        assert (seen[surface]["state"], seen[surface]["state_text"]) == ("passed-on-cpu", words), surface
    assert words in seen["status_text"]
    assert (
        seen["report"]["state"] == "passed-on-cpu"
        and seen["report"]["state_line"] == "Passed on CPU (1 part needs a CUDA GPU)"
    )
    assert seen["board"]["lab_state"] == "passed-on-cpu" and words in seen["board_text"]
    assert seen["cohort"]["labs_passed"] == []  # the GPU part never passed: not a passed lab
    assert all(a["part_attempt"] for a in seen["history"]) and all(g["lab_id"] != "adder" for g in seen["stats"])

    # A whole attempt is plotted, and is the report's and the board's best attempt.
    whole = run_cli("grade", "--json").json()["data"]
    assert whole["outcome"] == "passed-on-cpu" and whole["part_attempt"] is False
    seen = _surfaces(run_cli)
    (series,) = [g for g in seen["stats"] if g["lab_id"] == "adder"]
    assert [n for n, _ in series["points"]] == [5]  # attempt #5, the only whole one
    assert seen["report"]["attempt"] == 5 and seen["report"]["part_attempt"] is False
    assert seen["board"]["part_attempt"] is False


def test_the_rule_itself() -> None:
    from types import SimpleNamespace as Part

    from roadmap_cli.labs.passing import is_part_attempt, lab_verdict, passed_parts

    spec = [
        Part(id="a", points=10, needs_cuda=False),
        Part(id="b", points=20, needs_cuda=False),
        Part(id="g", points=30, needs_cuda=True),
    ]
    only_a = [
        {"id": "a", "status": "passed", "points": 10},
        {"id": "b", "status": "not-run", "points": 0},
        {"id": "g", "status": "not-graded-here", "points": 0},
    ]
    only_b = [
        {"id": "a", "status": "not-run", "points": 0},
        {"id": "b", "status": "passed", "points": 20},
        {"id": "g", "status": "not-graded-here", "points": 0},
    ]
    assert is_part_attempt(only_a) and not is_part_attempt([{"id": "a", "status": "failed"}])
    assert lab_verdict(spec, passed_parts([("passed", only_a)]), cuda=False)["state"] == "partial"
    both = passed_parts([("passed", only_a), ("passed", only_b)])
    assert lab_verdict(spec, both, cuda=False)["state"] == "passed-on-cpu"
    assert lab_verdict(spec, {**both, "g": 30.0}, cuda=True)["state"] == "passed"
    # An interrupted or timed-out attempt passes nothing; a later failure does not undo a pass.
    assert passed_parts([("interrupted", only_a), ("timeout", only_b)]) == {}
    gpu_only = lab_verdict(spec[2:], {}, cuda=False, n_attempts=1)
    assert (gpu_only["state"], gpu_only["state_text"]) == ("in-progress", "in-progress (every part needs a CUDA GPU)")
    failed_a = [{"id": "a", "status": "failed", "points": 0}]
    assert passed_parts([("passed", only_a), ("failed", failed_a)]) == {"a": 10.0}


def test_the_attempts_that_can_pass_a_part_are_selected_in_one_place():
    """cohort status, the grade's checkpoint proof and lab status read the same attempts
    (labs/passing.passing_attempts_sql): counted, scored, and in a cohort optionally the worker's only."""
    import sqlite3

    from roadmap_cli.labs.passing import passing_attempts_sql

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE grade_attempts (id INTEGER, learner TEXT, outcome TEXT, score REAL, verified BOOLEAN)")
    db.executemany(
        "INSERT INTO grade_attempts VALUES (?, ?, ?, ?, ?)",
        [
            (1, "ada", "passed", 10, 1),
            (2, "ada", "failed", 5, 0),
            (3, "ada", "timeout", 10, 1),
            (4, "ada", "interrupted", 10, 1),
            (5, "ada", "failed", 0, 1),
            (6, "bob", "passed", 10, 1),
        ],
    )

    def ids(sql: str) -> list[int]:
        return [r[0] for r in db.execute(sql.replace(":learner", "'ada'"))]

    assert ids(passing_attempts_sql("id", where="learner = :learner")) == [1, 2]
    assert ids(passing_attempts_sql("id", where="learner = :learner", verified_only=True)) == [1]
    assert ids(passing_attempts_sql("id", verified_only=True)) == [1, 6]
