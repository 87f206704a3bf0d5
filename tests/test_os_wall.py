"""The OS wall around learner code (issue 25 item 1; grading_kit/oswall.py).

A learner's `adder.py` looks around at import time, from inside the learner
process, and writes what it saw into the workspace (the one place it may
write). Behind bubblewrap the reference solution, the lab tests of other
labs, kernels/, the project's .git and the data home are absent, the project
is read-only, and the learner is alone in its pid namespace. Without
bubblewrap the grade still runs, in the in-process sandbox, and every place
that shows the attempt says "weak".

Where bwrap is missing these tests skip, except under ROADMAP_REQUIRE_BWRAP=1
(CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"
RIGHT_ADD = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def wall():
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
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the fixture project (labs/, kernels/) with a .git folder, like a checkout."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(root / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    yield root
    detect_device.cache_clear()


@pytest.fixture
def workspace(run_cli, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    shutil.copy(project / "kernels" / "mul.py", ws / "mul.py")
    monkeypatch.chdir(ws)
    return ws


def _looking_adder(project: Path, home: Path) -> str:
    """A right `add`, preceded by code that records what the learner process
    can see and do. It looks by listing folders and through a shell whose
    command line never names a reference path (the in-process audit hook
    would void the attempt for that): only the wall can stop these."""
    probe = f"""
        import json, os, subprocess
        project, home = {str(project)!r}, {str(home)!r}
        def listing(path):
            try:
                return sorted(os.listdir(path))
            except OSError as exc:
                return type(exc).__name__
        seen = {{"project": listing(project), "labs": listing(os.path.join(project, "labs")),
                 "lab": listing(os.path.join(project, "labs", "adder")),
                 "kernels": listing(os.path.join(project, "kernels")), "git": listing(os.path.join(project, ".git")),
                 "home": listing(home), "tests": listing(os.path.join(project, "labs", "adder", "tests")),
                 "solution": listing(os.path.join(project, "labs", "adder", "solution"))}}
        import sys  # the grader's adapter, as the learner process preloaded it: from the shim
        seen["shim"] = listing(os.path.dirname(sys.modules["adapter"].__file__))
        # A child process (no audit hook at all) reading the reference through a path it assembles itself.
        cat = subprocess.run(["sh", "-c", 'cat "$0/sol""ution/adder.py"', os.path.join(project, "labs", "adder")],
                             capture_output=True, text=True)
        seen["cat_solution"] = cat.stdout
        # Plant a module in the installed package, through a shell (no audit hook): the file system refuses.
        import roadmap_cli
        package = os.path.dirname(roadmap_cli.__file__)
        plant = subprocess.run(["sh", "-c", 'echo "x = 1" > "$0/planted_by_learner.py"', package],
                               capture_output=True, text=True)
        seen["plant"] = [plant.returncode, plant.stderr.strip()]
        seen["pid1"] = open("/proc/1/comm").read().strip()
        seen["processes"] = sum(1 for p in os.listdir("/proc") if p.isdigit())
        with open("view.json", "w") as fh:
            json.dump(seen, fh)
    """
    return textwrap.dedent(probe) + "\n" + RIGHT_ADD


def test_behind_the_wall_the_references_and_the_data_home_are_absent(run_cli, wall, project, workspace,
                                                                      roadmap_home: Path) -> None:
    (workspace / "adder.py").write_text(_looking_adder(project, roadmap_home))
    result = run_cli("grade", "--part", "add", "--json")
    data = result.json()["data"]
    assert data["sandbox"] == "strong", (data.get("message"), data.get("log_tail"), data["tests"][:2])
    # A right solution still passes behind the wall.
    assert data["parts"][0]["status"] == "passed", [t["message"] for t in data["tests"]][:1]
    seen = json.loads((workspace / "view.json").read_text())
    # No lab's tests/ (reference values), solution/ or anything else: the learner side is the adapter shim.
    assert seen["labs"] == [] and seen["lab"] == "FileNotFoundError", seen
    assert seen["tests"] == "FileNotFoundError" and seen["solution"] == "FileNotFoundError", seen
    # The adapter and the lab's declared learner-side helper (lab.yaml learner_side), nothing else of tests/.
    assert seen["shim"] == ["adapter.py", "given.py"], seen
    assert seen["kernels"] == [] and seen["git"] == [] and seen["home"] == [], seen
    assert "labs" in seen["project"]  # the project itself is there (read-only): roadmap_cli runs from it
    assert seen["cat_solution"] == "", seen
    import roadmap_cli

    planted = Path(roadmap_cli.__file__).parent / "planted_by_learner.py"
    assert seen["plant"][0] != 0 and "Read-only file system" in seen["plant"][1], seen
    assert not planted.exists()
    # Its own pid namespace: bwrap's init is pid 1 and only a handful of processes exist in it.
    assert seen["pid1"] == "bwrap" and seen["processes"] < 10, seen
    # The attempt says so, in history too.
    history = run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"]
    assert history[0]["sandbox"] == "strong"


def test_without_bubblewrap_the_grade_runs_weak_and_says_so(run_cli, project, workspace,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from roadmap_cli.grading_kit import oswall

    monkeypatch.setenv("ROADMAP_SANDBOX", "weak")
    monkeypatch.delenv("ROADMAP_REQUIRE_BWRAP", raising=False)
    (workspace / "adder.py").write_text(RIGHT_ADD)
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert data["sandbox"] == "weak" and data["parts"][0]["status"] == "passed"
    text = run_cli("grade", "--part", "add")
    assert "weak sandbox" in text.stdout
    history = run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"]
    assert [a["sandbox"] for a in history] == ["weak", "weak"]
    assert "weak sandbox" in run_cli("lab", "history", "adder").stdout
    from roadmap_cli.timeutil import local_today

    report = run_cli("report", "--month", local_today().strftime("%Y-%m"))
    assert report.exit_code == 0 and "weak sandbox (graded without bubblewrap)" in report.stdout, report
    oswall._probe.cache_clear()


def test_requiring_bubblewrap_where_it_is_missing_refuses_the_grade(run_cli, project, workspace,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from roadmap_cli.grading_kit import oswall

    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap on PATH
    monkeypatch.setenv("ROADMAP_REQUIRE_BWRAP", "1")
    monkeypatch.delenv("ROADMAP_SANDBOX", raising=False)
    oswall._probe.cache_clear()
    try:
        result = run_cli("grade", "--part", "add")
    finally:
        oswall._probe.cache_clear()
    assert result.exit_code == 4 and "bubblewrap (bwrap) is not installed" in result.stderr, result
    assert "Traceback" not in result.stderr


def test_mounts_are_ordered_by_depth_so_a_hidden_folder_inside_a_writable_one_stays_hidden(tmp_path: Path) -> None:
    from roadmap_cli.grading_kit.oswall import _mounts

    (tmp_path / "ws" / "home").mkdir(parents=True)
    (tmp_path / "labs" / "x" / "tests").mkdir(parents=True)
    view = {"hide": [str(tmp_path / "ws" / "home"), str(tmp_path / "labs")],
            "read_only": [str(tmp_path / "labs" / "x" / "tests")], "read_write": [str(tmp_path / "ws")],
}
    order = [(kind, Path(path).relative_to(tmp_path).as_posix()) for kind, path in _mounts(view)]
    assert order == [("hide", "labs"), ("read_write", "ws"), ("hide", "ws/home"), ("read_only", "labs/x/tests")]
