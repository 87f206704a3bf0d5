"""What judges stays fixed (issue 35 item 4): nothing learner code writes
may change a later grade's judge.

- The grader starts with `python -I -S` and a sys.path the engine fixes: a
  .pth file in site-packages (whoever wrote it) never runs in it.
- A weak-sandbox grade (no bubblewrap: learner code runs as the user) whose
  learner code writes a bytecode file into the grader's cache, or a .pth into
  site-packages, is void, says how to repair, and later grades are refused
  until it is repaired; the grader's own bytecode writes are not mistaken for it.
- The weak mode's forbidden reads cover the packaged `_data/` copy of the
  solutions in site-packages.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"
RIGHT_ADD = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def workspace(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(root / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    # A grader bytecode cache of this test's own (manifest.pycache_dir is under the user cache folder).
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # And a C++ build cache of its own: a weak grade watches the shared one (another grade's writes there
    # would void it).
    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(tmp_path / "cpp-cache"))
    from roadmap_cli.grading import manifest
    from roadmap_cli.labs.device import detect_device

    manifest._PYCACHE.clear()
    detect_device.cache_clear()
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    monkeypatch.chdir(ws)
    yield ws
    manifest._PYCACHE.clear()
    detect_device.cache_clear()


def _site() -> Path:
    return Path(next(p for p in site.getsitepackages() if os.path.isdir(p)))


def test_a_pth_file_in_site_packages_never_runs_in_the_grader(run_cli, wall, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pth-ran"
    pth = _site() / f"zz_roadmap_test_{os.getpid()}.pth"
    pth.write_text(f"import os; open({str(marker)!r} + '-' + str(os.getpid()), 'w').close()\n")
    try:
        (workspace / "adder.py").write_text(RIGHT_ADD)
        data = run_cli("grade", "--part", "add", "--json").json()["data"]
        assert data["parts"][0]["status"] == "passed", data
        # Neither the supervisor nor the grader ran it; the learner process (site on, behind the wall) may
        # try, in a view where this folder does not exist.
        assert data["sandbox"] == "strong"
        assert sorted(p.name for p in tmp_path.glob("pth-ran-*")) == []
        # A plain `python -I` does run it: the test could fail.
        subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)
        assert list(tmp_path.glob("pth-ran-*")), "the .pth file never runs at all: the test proves nothing"
    finally:
        pth.unlink(missing_ok=True)


def _weak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROADMAP_SANDBOX", "weak")
    monkeypatch.delenv("ROADMAP_REQUIRE_BWRAP", raising=False)


def test_a_weak_grade_that_plants_grader_bytecode_is_void_and_later_grades_refuse_until_repaired(
    run_cli, workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _weak(monkeypatch)
    (workspace / "adder.py").write_text(RIGHT_ADD)
    first = run_cli("grade", "--part", "add", "--json").json()["data"]
    # The grader filled its own bytecode cache during that weak grade: honest bytecode, no void.
    assert first["sandbox"] == "weak" and first["parts"][0]["status"] == "passed", first.get("message")
    from roadmap_cli.grading import manifest

    pycache = manifest.pycache_dir()
    assert pycache is not None and any(pycache.rglob("*.pyc"))
    import _pytest.python as target

    planted_at = Path(str(pycache) + os.path.dirname(target.__file__)) / "python.cpython-311.pyc"
    # The learner's module plants bytecode for the grader's pytest (as any code running as the user could).
    # Through a child process: the learner process's audit hook (which refuses Python-level writes there)
    # does not see it; only the engine's watch can.
    (workspace / "adder.py").write_text(
        textwrap.dedent(f"""
        import importlib.util, marshal, os, subprocess
        path = {str(planted_at)!r}
        code = compile("raise SystemExit('planted')", {target.__file__!r}, "exec")
        with open("planted.pyc", "wb") as fh:
            fh.write(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code))
        subprocess.run(["sh", "-c", 'mkdir -p "$(dirname "$1")" && cp planted.pyc "$1"', "sh", path], check=True)
    """)
        + RIGHT_ADD
    )
    second = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert second["outcome"] == "error" and "weak-sandbox grade wrote" in second["message"], second
    assert "reinstall" in second["message"] and str(pycache) in second["message"]
    assert all(p["status"] != "passed" for p in second["parts"])
    # Any later grade, strong or weak, is refused with the same one line until it is repaired.
    (workspace / "adder.py").write_text(RIGHT_ADD)
    monkeypatch.delenv("ROADMAP_SANDBOX")
    refused = run_cli("grade", "--part", "add")
    assert refused.exit_code != 0 and "weak-sandbox grade wrote" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    shutil.rmtree(pycache)  # the repair it names
    from roadmap_cli.grading import manifest as m

    m._PYCACHE.clear()
    again = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert again["parts"][0]["status"] == "passed", again.get("message")


def test_a_weak_grade_that_leaves_a_pth_in_site_packages_is_void(
    run_cli, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _weak(monkeypatch)
    pth = _site() / f"zz_roadmap_planted_{os.getpid()}.pth"
    (workspace / "adder.py").write_text(
        f"import subprocess\nsubprocess.run(['sh', '-c', 'echo \\# planted > \"$1\"', "
        f"'sh', {str(pth)!r}], check=True)\n" + RIGHT_ADD
    )
    try:
        data = run_cli("grade", "--part", "add", "--json").json()["data"]
        assert data["outcome"] == "error" and str(pth) in data["message"], data
    finally:
        pth.unlink(missing_ok=True)
    # Gone: the marker is cleared by itself and grading works again.
    (workspace / "adder.py").write_text(RIGHT_ADD)
    again = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert again["parts"][0]["status"] == "passed", again.get("message")


def test_the_weak_modes_forbidden_reads_cover_the_packaged_copy_of_the_solutions(
    run_cli, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roadmap_cli.grading_kit.oswall import runtime_hides

    copies = [p for p in runtime_hides() if os.path.isdir(p)]
    if not copies:
        pytest.skip("this install leaves no packaged _data copy")
    _weak(monkeypatch)
    target = next(Path(copies[0]).rglob("*.py"), None) or next(Path(copies[0]).rglob("*"))
    (workspace / "adder.py").write_text(f"open({str(target)!r}).read()\n" + RIGHT_ADD)
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert data["outcome"] == "error" and "reference solution" in data["message"], data
