"""The lab engine through the real CLI, on the fake labs in tests/fixtures_labs.

`adder` has a starter that fails, a reference solution (solution/ plus a
solution_files entry) that passes, a partial-credit part, a needs_cuda part
and two wrong variants; `leaky` has a wrong variant its grader cannot catch.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"
ADDER = FIXTURES / "labs" / "adder"


@pytest.fixture(autouse=True)
def fake_labs(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")  # same answers on a GPU machine
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    yield FIXTURES / "labs"
    detect_device.cache_clear()


@pytest.fixture
def workspace(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws = tmp_path / "ws"
    result = run_cli("lab", "start", "adder", "--dir", str(ws))
    assert result.exit_code == 0, result
    monkeypatch.chdir(ws)
    return ws


def put_solution(ws: Path) -> None:
    shutil.copy(ADDER / "solution" / "adder.py", ws / "adder.py")
    shutil.copy(FIXTURES / "kernels" / "mul.py", ws / "mul.py")


def grade_json(run_cli, *args: str):
    result = run_cli("grade", *args, "--json")
    assert result.exception is None, result
    return result, result.json()["data"]


def test_solution_passes_is_recorded_and_marks_checkpoints(run_cli, workspace: Path) -> None:
    refused = run_cli("lab", "solution", "adder")
    assert refused.exit_code == 2 and "once the lab has passed" in refused.stderr

    put_solution(workspace)
    result, data = grade_json(run_cli)  # lab inferred from the current directory
    assert result.exit_code == 0, result
    parts = {p["id"]: p for p in data["parts"]}
    assert data["outcome"] == "passed-on-cpu" and data["outcome_text"] == "passed-on-cpu (1 part not graded here)"
    assert parts["add"]["status"] == parts["mul"]["status"] == "passed"
    assert parts["speed"]["points"] == 5  # grade_fraction(0.5) of 10 points
    assert parts["gpu"]["status"] == "not-graded-here" and data["not_graded_here"] == ["gpu"]
    assert data["max_score"] == 40 and data["score"] == 35  # the gpu part's 30 points are not counted
    assert data["perf"] == [
        {"test": "test_speed.py::test_speed", "name": "ops", "value": 123.0, "unit": "op/s", "shape": "1x1"}
    ]
    assert data["dirty"] is True and len(data["commit_sha"]) == 40
    assert data["interpret_mode"] is True and len(data["grader_sha256"]) == 64
    assert sorted(data["checkpoints_marked"]) == ["fake-add", "fake-mul"]

    listed = {row["id"]: row for row in run_cli("lab", "list", "--json").json()["data"]["labs"]}
    # The gpu part never ran: honest completion says so (tests/test_honest_completion.py).
    assert listed["adder"]["state"] == "passed-on-cpu" and listed["adder"]["best_score"] == 35
    assert listed["adder"]["gradable_here"] is False and listed["leaky"]["state"] == "not-started"

    status = run_cli("lab", "status", "adder", "--json").json()["data"]["labs"][0]
    assert (
        status["history"][0]["outcome"] == "passed-on-cpu" and status["history"][0]["commit_sha"] == data["commit_sha"]
    )
    human = run_cli("lab", "status")
    assert "not graded here" in human.stdout and "passed" in human.stdout

    from roadmap_cli import context
    from sqlmodel import select

    from roadmap_cli.store.tables import CheckpointProgress, GradeTestResult

    with context.current().store().session() as s:
        rows = {r.checkpoint_id: r.source for r in s.exec(select(CheckpointProgress))}
        tests = len(s.exec(select(GradeTestResult)).all())
    assert rows == {"fake-add": "lab:adder/add", "fake-mul": "lab:adder/mul"}
    assert tests == 7

    shown = run_cli("lab", "solution", "adder", "--json")
    assert shown.exit_code == 0 and "return a * b" in shown.json()["data"]["files"]["mul.py"]

    from roadmap_cli.labs.service import lab_summaries

    summary = {r["id"]: r for r in lab_summaries(context.current().store())}["adder"]
    assert set(summary) >= {"id", "title", "stage", "state", "best_score", "max_score", "gradable_here"}
    assert summary["title"]["zh"] and summary["state"] == "passed-on-cpu"


def test_starter_fails_with_readable_messages(run_cli, workspace: Path) -> None:
    result = run_cli("grade", "adder")
    assert result.exit_code == 1, result
    # An unwritten function reads as such, with the handout's pointer (never as a refusal or a crash).
    assert "not implemented yet: add (see README.md, section Add)" in result.stdout
    assert "adder.py:2" in result.stdout  # where in the learner's code
    assert (
        "not graded here (needs a CUDA GPU)" in result.stdout.replace("\n", " ") or "Not graded here" in result.stdout
    )
    assert "✗ test_add.py::test_add_small" in result.stderr  # live per-test progress


def test_infinite_loop_is_killed_and_recorded_as_timeout(run_cli, workspace: Path) -> None:
    shutil.copy(FIXTURES / "variants" / "loop_adder.py", workspace / "adder.py")
    t0 = time.monotonic()
    result, data = grade_json(run_cli, "--timeout", "3")
    elapsed = time.monotonic() - t0
    assert result.exit_code == 4, result
    assert data["outcome"] == "timeout"
    # Killed at the limit, not left to run: 3 s of allowance covers the CLI's own
    # start and the supervisor's cleanup on this 2-core box at load ~20.
    assert elapsed < 3 + 3
    timed_out = [t for t in data["tests"] if t["outcome"] == "timeout"]
    assert [t["nodeid"] for t in timed_out] == ["test_add.py::test_add_small"]
    history = run_cli("lab", "status", "adder", "--json").json()["data"]["labs"][0]["history"]
    assert history[0]["outcome"] == "timeout"
    # The whole process group was killed, including what the learner's code started.
    _pid, started = (workspace / "grandchild.pid").read_text().split()
    # Behind the OS wall the pid is the namespace's number: the process is found on the host by its start time.
    host_pid = _host_pid(started, "time.sleep(120)")
    assert host_pid is None or not _alive(host_pid)


def _host_pid(started: str, marker: str):
    """The host pid of the running process started at clock tick `started` whose command line holds `marker`."""
    import os

    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().decode(errors="replace")
        except OSError:
            continue
        if fields[19] == started and marker in cmdline:
            return int(entry)
    return None


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as dead)."""
    import os

    for _ in range(20):  # the kernel delivers SIGKILL asynchronously
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_interpreter_crash_fails_that_test_and_later_parts_still_run(run_cli, workspace: Path) -> None:
    # os.abort() in the learner process: the test that called it fails with
    # a crash message; the next call gets a fresh learner process, so the
    # other parts are still graded (issue 10, "A crash loses nothing").
    shutil.copy(FIXTURES / "variants" / "abort_adder.py", workspace / "adder.py")
    shutil.copy(FIXTURES / "kernels" / "mul.py", workspace / "mul.py")
    result, data = grade_json(run_cli)
    assert data["outcome"] == "failed", result
    assert result.exit_code == 1
    crashed = [t for t in data["tests"] if t["outcome"] == "crashed"]
    assert "test_add.py::test_add_small" in [t["nodeid"] for t in crashed]
    message = crashed[0]["message"]
    assert "your code crashed the learner process (SIGABRT) in adapter.add" in message
    assert 'adder.py", line 5 in add' in message  # where the learner's code died
    statuses = {p["id"]: p["status"] for p in data["parts"]}
    assert statuses["add"] == "failed" and statuses["mul"] == "passed"


def test_tests_and_config_in_the_workspace_have_no_effect(run_cli, workspace: Path) -> None:
    (workspace / "tests").mkdir()
    shutil.copy(FIXTURES / "variants" / "cheat_test_add.py", workspace / "tests" / "test_add.py")
    shutil.copy(FIXTURES / "variants" / "cheat_test_add.py", workspace / "test_add.py")
    (workspace / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture(autouse=True)\ndef _x():\n    raise SystemExit(0)\n"
    )
    (workspace / "pytest.ini").write_text("[pytest]\naddopts = -p no:roadmap_cli.grading.plugin --co\n")
    result, data = grade_json(run_cli, "--part", "add")
    assert result.exit_code == 1, result
    assert {p["id"]: p["status"] for p in data["parts"]}["add"] == "failed"
    from roadmap_cli.grading.runner import tests_sha256

    assert data["grader_sha256"] == tests_sha256(ADDER / "tests")


def test_part_option_grades_only_that_part(run_cli, workspace: Path) -> None:
    put_solution(workspace)
    result, data = grade_json(run_cli, "adder", "--part", "mul")
    assert result.exit_code == 0, result
    statuses = {p["id"]: p["status"] for p in data["parts"]}
    assert statuses == {"add": "not-run", "mul": "passed", "speed": "not-run", "gpu": "not-graded-here"}
    assert data["max_score"] == 20 and {t["part"] for t in data["tests"]} == {"mul"}
    bad = run_cli("grade", "adder", "--part", "mull")
    assert bad.exit_code == 2 and "did you mean 'mul'" in bad.stderr


def test_start_refuses_a_non_empty_dir_and_force_keeps_old_work(run_cli, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("my notes")
    refused = run_cli("lab", "start", "adder", "--dir", str(plain))
    assert refused.exit_code == 2 and "not empty" in refused.stderr
    assert (plain / "notes.txt").read_text() == "my notes" and not (plain / "adder.py").exists()

    forced = run_cli("lab", "start", "adder", "--dir", str(plain), "--force", "--json").json()["data"]
    assert (Path(forced["moved_aside"]) / "notes.txt").read_text() == "my notes"
    assert (plain / "adder.py").exists() and not (plain / "notes.txt").exists()

    (plain / "adder.py").write_text("def add(a, b):\n    return 42  # my attempt\n")
    again = run_cli("lab", "start", "adder", "--dir", str(plain), "--force", "--json").json()["data"]
    import git

    saved = git.Repo(plain).commit(again["saved_commit"])
    assert "my attempt" in (saved.tree / "adder.py").data_stream.read().decode()
    assert "NotImplementedError" in (plain / "adder.py").read_text()
    assert saved.author.email == "roadmap@localhost"


def test_reset_commits_current_work_first(run_cli, workspace: Path) -> None:
    (workspace / "adder.py").write_text("def add(a, b):\n    return a - b  # wip\n")
    data = run_cli("lab", "reset", "--json").json()["data"]
    import git

    saved = git.Repo(workspace).commit(data["saved_commit"])
    assert "wip" in (saved.tree / "adder.py").data_stream.read().decode()
    assert "NotImplementedError" in (workspace / "adder.py").read_text()
    assert run_cli("lab", "path", "adder").stdout.strip() == str(workspace.resolve())


def test_hints_are_shown_in_order_and_recorded(run_cli) -> None:
    first = run_cli("lab", "hint", "adder", "--json").json()["data"]
    second = run_cli("lab", "hint", "adder", "--json").json()["data"]
    third = run_cli("lab", "hint", "adder", "--json").json()["data"]
    # Never graded: hints go to the first part not passed yet (add); once its hint is seen, mul's
    # (still open) comes next; with all seen, add's is repeated.
    assert first["for_part"] == "add" and (first["index"], second["index"], third["index"]) == (1, 2, 1)
    assert (first["number"], second["number"], third["number"]) == (1, 2, 1)
    assert first["text"] == "Use the + operator." and third["new"] is False


def test_grade_outside_a_workspace_needs_an_id(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("grade")
    assert result.exit_code == 2 and "not inside a lab workspace" in result.stderr
    result = run_cli("grade", "adder")
    assert result.exit_code == 2 and "roadmap lab start adder" in result.stderr
    result = run_cli("lab", "show", "addr")
    assert result.exit_code == 2 and "did you mean 'adder'" in result.stderr


def test_dev_check_passes_a_good_lab_and_catches_a_wrong_variant_that_passes(run_cli) -> None:
    good = run_cli("dev", "check", "adder", "--jobs", "2", "--json")
    assert good.exit_code == 0, good
    rows = {r["check"]: r for r in good.json()["data"]["rows"]}
    assert set(rows) == {"starter", "solution", "wrong:add-off-by-one", "wrong:mul-adds", "rules", "handout"}
    assert all(r["ok"] for r in rows.values())

    bad = run_cli("dev", "check", "leaky")
    assert bad.exit_code == 1
    assert "wrong:harmless" in bad.stdout and "only a comment differs" in bad.stdout
    assert "leaky: no rules listed" in bad.stdout  # a warning, not the failure: leaky fails for its variant


def test_an_imported_pass_does_not_unlock_the_solution(run_cli, workspace: Path, tmp_path: Path) -> None:
    """Issue 19: a forged (or simply restored) attempt that claims a pass is a
    claim, not a grade: after `roadmap import` it is marked imported and
    `lab solution` stays locked until a grade run here passes."""
    put_solution(workspace)
    grade_json(run_cli)
    assert run_cli("lab", "solution", "adder").exit_code == 0  # a real pass unlocks it
    exported = run_cli("export", "-o", str(tmp_path / "mine.json"))
    assert exported.exit_code == 0, exported
    restored = run_cli("import", str(tmp_path / "mine.json"), "--replace")
    assert restored.exit_code == 0, restored
    locked = run_cli("lab", "solution", "adder")
    assert locked.exit_code == 2 and "once the lab has passed" in locked.stderr
    put_solution(workspace)
    grade_json(run_cli)
    assert run_cli("lab", "solution", "adder").exit_code == 0


@pytest.mark.parametrize(
    "message, function, expected",
    [
        (
            'view: see README.md, section "Part 4: storage"',
            "view",
            'not implemented yet: view (see README.md, section "Part 4: storage")',
        ),
        (
            "implement add(a, b): see README.md, section Add",
            "add",
            "not implemented yet: add (see README.md, section Add)",
        ),
        (
            "matmul is not implemented yet: see README.md, section 'Part 2'",
            "matmul",
            "not implemented yet: matmul (see README.md, section 'Part 2')",
        ),
        ("", "permute", "not implemented yet: permute"),
        ("see README.md, section 3", None, "not implemented yet: a function (see README.md, section 3)"),
    ],
)
def test_a_learner_not_implemented_error_reads_as_not_implemented_yet(message, function, expected) -> None:
    from roadmap_cli.grading.plugin import not_implemented

    assert not_implemented(message, function) == expected
