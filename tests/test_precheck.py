"""The pre-check: a syntax or import error in a learner file is one report at
file:line:col with the line and a caret, found before pytest starts (no test runs)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from roadmap_cli.grading.precheck import check_workspace, compile_cuda

FIXTURES = Path(__file__).parent / "fixtures_labs"


@pytest.fixture(autouse=True)
def fake_labs(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    yield
    detect_device.cache_clear()


def test_syntax_error_is_located_with_a_caret(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "model.py").write_text("def f(a):\n    return g(a,\n\ny = 2\n")
    t0 = time.perf_counter()
    problem = check_workspace(tmp_path)
    elapsed = time.perf_counter() - t0
    assert problem is not None and problem.file == "model.py" and problem.kind == "SyntaxError"
    assert (problem.line, problem.col) == (2, 13)
    lines = problem.report().splitlines()
    assert lines[0].startswith("model.py:2:13: SyntaxError: '(' was never closed")
    assert lines[1].strip() == "return g(a," and lines[2].index("^") == lines[1].index("(")
    assert elapsed < 0.5


def test_import_errors_missing_module_and_missing_name(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("def softmax(x):\n    return x\nSCALE = 2\n")
    (tmp_path / "a.py").write_text("import os\nfrom helpers import softmax, SCALE\n")
    assert check_workspace(tmp_path) is None
    (tmp_path / "a.py").write_text("import os\nfrom helpers import softmax, sofmax\n")
    problem = check_workspace(tmp_path)
    assert problem.kind == "ImportError" and (problem.file, problem.line, problem.col) == ("a.py", 2, 30)
    assert "cannot import name 'sofmax' from 'helpers'" in problem.message
    (tmp_path / "a.py").write_text("import numpyy as np\n")
    problem = check_workspace(tmp_path)
    assert problem.kind == "ModuleNotFoundError" and "numpyy" in problem.message
    # Guarded imports are Python's to judge: an optional dependency is fine.
    (tmp_path / "a.py").write_text("try:\n    import numpyy\nexcept ImportError:\n    numpyy = None\n")
    assert check_workspace(tmp_path) is None


def test_grade_stops_at_the_precheck_and_runs_no_test(run_cli, tmp_path: Path, monkeypatch) -> None:
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    monkeypatch.chdir(ws)
    (ws / "adder.py").write_text("def add(a, b):\n    return (a + b\n")
    result = run_cli("grade")
    assert result.exit_code == 1
    # Once, not once per test file that imports it.
    assert result.stdout.count("SyntaxError") == 1 and "adder.py:2:12" in result.stdout
    assert "no test ran" in result.stdout and "✗ test_" not in result.stderr
    data = run_cli("grade", "--json").json()["data"]
    assert data["precheck"]["file"] == "adder.py" and data["tests"] == [] and data["outcome"] == "failed"
    assert data["attempt_number"] == 2  # recorded like any grade


def test_nvcc_reports_a_broken_cu_file_at_file_line(tmp_path: Path) -> None:
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    (tmp_path / "good.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    (tmp_path / "bad.cu").write_text("__global__ void k(float* x) {\n  x[threadIdx.x] = y;\n}\n")
    (tmp_path / "ext.cu").write_text("#include <torch/types.h>\n__global__ void k() {}\n")
    checks = {c.file: c for c in compile_cuda(tmp_path)}
    assert checks["ext.cu"].status == "not checked"  # torch's headers take minutes: said, not hidden
    assert checks["good.cu"].status == "compiled, not run"
    assert checks["bad.cu"].status == "compile error" and "bad.cu:2: error" in checks["bad.cu"].message


def test_nvcc_runs_behind_the_wall(tmp_path: Path) -> None:
    """Red team route N1: nvcc compiled a `.cu` that `#include`d a file of the grading user's (a `~/.pgpass`)
    outside the wall and printed its line in the grade's output. Behind the wall the path does not exist."""
    import os
    import shutil

    from roadmap_cli.grading_kit import oswall

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    oswall._probe.cache_clear()
    if oswall._probe()[0] is None:
        if os.environ.get("ROADMAP_REQUIRE_BWRAP") == "1":
            pytest.fail(f"{oswall._probe()[1]} (ROADMAP_REQUIRE_BWRAP=1)", pytrace=False)
        pytest.skip(oswall._probe()[1])
    secret = tmp_path / "home" / ".pgpass"
    secret.parent.mkdir()
    secret.write_text("127.0.0.1:5432:course:teacher:Sw0rdfish-secret\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "evil.cu").write_text(f'#include "{secret}"\n__global__ void k() {{}}\n')
    (ws / "fine.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    checks = {c.file: c for c in compile_cuda(ws)}
    assert checks["fine.cu"].status == "compiled, not run"  # the wall leaves nvcc what it needs
    assert checks["evil.cu"].status == "compile error"
    assert "Sw0rdfish" not in checks["evil.cu"].message and "No such file" in checks["evil.cu"].message


def test_a_deeply_nested_expression_is_one_line_never_a_traceback(run_cli, tmp_path: Path, monkeypatch) -> None:
    """Red team R1: `x = a+a+...` 300 000 terms long made the parser raise RecursionError (a traceback solo, a
    worker submission stuck at "running")."""
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    (ws / "deep.py").write_text("a = 1\nx = " + "+".join(["a"] * 300_000) + "\n")
    problem = check_workspace(ws)
    assert problem is not None and problem.file == "deep.py" and problem.kind == "RecursionError", problem
    monkeypatch.chdir(ws)
    result = run_cli("grade", "--json")
    assert "Traceback" not in result.stdout + result.stderr
    data = result.json()["data"]
    assert data["precheck"]["file"] == "deep.py" and data["outcome"] == "failed" and data["tests"] == []


def test_the_precheck_reads_only_regular_files_inside_the_workspace(tmp_path: Path) -> None:
    """Red team route N1b: a FIFO named `evil.cu` hung every grade (the engine read it outside the wall, with no
    timeout); a link to /dev/zero would read without end; a link to a file of the user's would be read."""
    import os
    import threading

    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "evil.cu")
    (ws / "zero.cu").symlink_to("/dev/zero")
    secret = tmp_path / "secret.py"
    secret.write_text("x = 1\n")
    (ws / "outside.py").symlink_to(secret)
    done = []
    worker = threading.Thread(
        target=lambda: done.append(({c.file: c for c in compile_cuda(ws)}, check_workspace(ws))), daemon=True
    )
    worker.start()
    worker.join(60)
    assert done, "the pre-check blocked on a FIFO or an endless file"
    checks, problem = done[0]
    if checks.get("evil.cu") is not None:  # with nvcc installed: reported, never compiled or read
        assert checks["evil.cu"].status == "not checked" and "not a regular file" in checks["evil.cu"].message
        assert checks["zero.cu"].status == "not checked"
    assert problem is not None and problem.file == "outside.py" and "outside the workspace" in problem.message
