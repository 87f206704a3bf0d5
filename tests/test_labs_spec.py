"""Lab spec validation (file:line:col errors), node-id -> part mapping, and
the plugin's fixtures, without running a full grade."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from roadmap_cli.errors import NotFoundError, ValidationError
from roadmap_cli.labs.nodeids import part_for, prefix_matches

FIXTURES = Path(__file__).parent / "fixtures_labs"


@pytest.fixture
def labs_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A writable copy of the fake labs (and the kernels their solution_files name)."""
    shutil.copytree(FIXTURES / "labs", tmp_path / "labs")
    shutil.copytree(FIXTURES / "kernels", tmp_path / "kernels")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(tmp_path / "labs"))
    return tmp_path / "labs"


def test_the_fake_labs_load(labs_copy: Path) -> None:
    from roadmap_cli.labs.spec import all_labs, find_lab

    assert [s.id for s in all_labs()] == ["leaky", "adder"]  # by stage
    spec = find_lab("adder")
    assert spec.part("gpu").needs_cuda and spec.part("add").proves == ["fake-add"]
    assert set(spec.solution_sources()) == {"adder.py", "mul.py"}
    with pytest.raises(NotFoundError, match="did you mean 'adder'"):
        find_lab("addr")


def test_spec_errors_point_at_file_line_col(labs_copy: Path) -> None:
    from roadmap_cli.labs.spec import load_lab

    path = labs_copy / "adder" / "lab.yaml"
    text = path.read_text()
    text = text.replace("    points: 20\n", "    points: lots\n")  # line 16 once colour is added
    text = text.replace("time_limit_s: 30\n", "time_limit_s: 30\ncolour: blue\n")  # extra key, line 7
    path.write_text(text)
    with pytest.raises(ValidationError) as info:
        load_lab(labs_copy / "adder")
    details = "\n".join(info.value.details)
    assert f"{path}:7:1: colour: Extra inputs are not permitted" in details
    assert f"{path}:16:13: parts.1.points:" in details


def test_cross_checks_name_the_place(labs_copy: Path) -> None:
    from roadmap_cli.labs.spec import load_lab

    path = labs_copy / "adder" / "lab.yaml"
    path.write_text(path.read_text().replace("fails: [mul]", "fails: [mull]").replace("  - id: mul\n", "  - id: add\n"))
    (labs_copy / "adder" / "wrong" / "add-off-by-one.patch").unlink()
    with pytest.raises(ValidationError) as info:
        load_lab(labs_copy / "adder")
    details = "\n".join(info.value.details)
    assert "duplicate part id 'add'" in details
    assert "unknown part 'mull'" in details
    assert "missing file wrong/add-off-by-one.patch" in details
    assert all(line.startswith(f"{path}:") for line in info.value.details)


def test_learner_side_files_are_checked(labs_copy: Path) -> None:
    """lab.yaml `learner_side`: helper modules of tests/ shown to the learner process; never a test, the
    conftest, a path out of tests/ or a missing file."""
    from roadmap_cli.grading.isolation import learner_files
    from roadmap_cli.labs import plan
    from roadmap_cli.labs.spec import load_lab

    spec = load_lab(labs_copy / "adder")
    assert spec.learner_side == ["given.py"] and learner_files(spec) == ["adapter.py", "given.py"]
    assert plan.fingerprint(plan.read_plan(spec.root)) == plan.fingerprint(spec)
    path = labs_copy / "adder" / "lab.yaml"
    path.write_text(
        path.read_text().replace(
            "learner_side: [given.py]",
            "learner_side: [given.py, test_add.py, conftest.py, ../solution/adder.py, nope.py]",
        )
    )
    with pytest.raises(ValidationError) as info:
        load_lab(labs_copy / "adder")
    details = "\n".join(info.value.details)
    assert "'test_add.py' cannot be learner-side" in details and "'conftest.py' cannot be learner-side" in details
    assert "'../solution/adder.py' must be a file name in tests/" in details
    assert "'nope.py' not found in tests/" in details
    assert "given.py" not in details


def test_an_invalid_lab_does_not_hide_the_others(run_cli, labs_copy: Path) -> None:
    (labs_copy / "leaky" / "lab.yaml").write_text("format_version: 1\nid: leaky\n")
    data = run_cli("lab", "list", "--json").json()["data"]
    assert [row["id"] for row in data["labs"]] == ["adder"]
    assert "leaky" in data["invalid"]
    result = run_cli("lab", "show", "leaky")
    assert result.exit_code == 2 and "lab.yaml:1:1" in result.stderr


@pytest.mark.parametrize(
    "prefix,nodeid,expected",
    [
        ("test_a.py", "test_a.py::test_x", True),
        ("test_a.py::test_x", "test_a.py::test_x[1-2]", True),
        ("test_a.py::test_x", "test_a.py::test_xy", False),
        ("test_a.py", "test_ab.py::test_x", False),
        ("perf/", "perf/test_speed.py::test_big", True),
        ("perf", "perf/test_speed.py::test_big", True),
    ],
)
def test_prefix_matching(prefix: str, nodeid: str, expected: bool) -> None:
    assert prefix_matches(prefix, nodeid) is expected


def test_a_test_belongs_to_the_first_matching_part() -> None:
    parts = [("fp16", ["test_mm.py::test_fp16"]), ("all", ["test_mm.py"])]
    assert part_for("test_mm.py::test_fp16[3]", parts) == "fp16"
    assert part_for("test_mm.py::test_fp32[3]", parts) == "all"
    assert part_for("test_other.py::t", parts) is None


def test_plugin_streams_results_and_checks_grade_fraction(tmp_path: Path) -> None:
    """Run the plugin in a child pytest on a tiny test file; read its events."""
    import json
    import subprocess
    import sys

    (tmp_path / "test_p.py").write_text(
        "def test_ok(record_perf, grade_fraction):\n"
        "    record_perf('t', 1.5, 'ms', n=3)\n"
        "    grade_fraction(0.25)\n"
        "def test_bad_fraction(grade_fraction):\n"
        "    grade_fraction(1.5)\n"
        "def test_fails():\n"
        "    assert 1 == 2, 'one is not two'\n"
    )
    import os

    from roadmap_cli.grading import channel

    # The engine's handshake: a config pipe (key, results descriptor) and an authenticated results pipe.
    key = channel.new_key()
    config_r, config_w = os.pipe()
    results_r, results_w = os.pipe()
    os.write(
        config_w,
        json.dumps(
            {
                "key": key.hex(),
                "results_fd": results_w,
                "parts": [],
                "selected": None,
                "stop_part_on_fail": False,
                "sandbox": None,
            }
        ).encode(),
    )
    os.close(config_w)
    env = dict(os.environ, ROADMAP_GRADE_FD=str(config_r), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "roadmap_cli.grading.plugin",
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(tmp_path),
            "-c",
            "/dev/null",
            str(tmp_path / "test_p.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=60,
        pass_fds=(config_r, results_w),
    )
    os.close(config_r)
    os.close(results_w)
    reader = channel.Reader(results_r, key)
    events = []
    while not reader.eof:
        events += reader.read()
    assert reader.forged == 0
    kinds = [e["event"] for e in events]
    assert kinds[0] == "session" and kinds[-1] == "finish" and kinds.count("start") == 3
    res = {e["nodeid"]: e for e in events if e["event"] == "result"}
    assert res["test_p.py::test_ok"]["fraction"] == 0.25
    assert res["test_p.py::test_ok"]["perf"] == [
        {"test": "test_p.py::test_ok", "name": "t", "value": 1.5, "unit": "ms", "n": 3}
    ]
    assert res["test_p.py::test_bad_fraction"]["outcome"] == "failed"
    assert "within 0..1" in res["test_p.py::test_bad_fraction"]["message"]
    assert res["test_p.py::test_fails"]["message"].startswith("AssertionError: one is not two")


def test_a_broken_grader_is_a_grader_error_not_a_learner_failure(
    labs_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roadmap_cli.labs import workspace as ws
    from roadmap_cli.labs.device import detect_device
    from roadmap_cli.grading.runner import grade_workspace
    from roadmap_cli.labs.spec import find_lab

    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    detect_device.cache_clear()
    spec = find_lab("adder")
    (spec.tests_dir / "conftest.py").write_text("import no_such_module_anywhere\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ws.write_solution(spec, workspace)
    run = grade_workspace(spec, workspace, parts=["add"])
    detect_device.cache_clear()
    assert run.outcome == "error" and run.exit_code == 4
    assert "no_such_module_anywhere" in run.log_tail
