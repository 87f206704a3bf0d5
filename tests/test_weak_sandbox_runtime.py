"""What judges stays fixed after a weak-sandbox grade (issue 35 item 4; red-team routes).

A weak grade (no bubblewrap; ROADMAP_SANDBOX=weak forces it) runs learner code as the grading user. The red
team appended a pytest patch to site-packages/torch/version.py from learner code: every later grade, strong
ones and a worker's included, ran it. And its C++ test binary rewrote the shared build cache's entry and
manifest, so a later strong grade of the starter scored 13/14. So:

- every file of the Python runtime (stdlib, every site-packages, the venv's bin) and of the shared C++ cache is
  compared (inode, size, mtime, ctime) before and after each weak grade: a change voids it and later grades
  are refused with the one repair line;
- the post-grade snapshot is kept, and every later grade (strong or weak) checks the runtime against it first:
  an edit made after the grade ended (a daemon the learner left) is caught too;
- a weak grade builds C++ into a private cache, never the shared one;
- a worker's weak grade is recorded verified=false and proves checkpoints only as a claim.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import site
import sysconfig
import time
from pathlib import Path

import pytest

from test_cohort_verified import cohort  # noqa: F401 - fixture
from test_weak_sandbox_judge import RIGHT_ADD, _weak, workspace  # noqa: F401 - a fixture (wall is conftest.py's)


@pytest.fixture(autouse=True)
def own_cpp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A C++ build cache of the test's own: a weak grade watches it (another grade's writes would void it)."""
    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(tmp_path / "cpp-cache"))


def _site() -> Path:
    return Path(next(p for p in site.getsitepackages() if os.path.isdir(p)))


@pytest.fixture
def deep_module():
    """A module two folders deep inside site-packages, as torch/version.py is (never a real package's file)."""
    top = _site() / f"zz_roadmap_deep_{os.getpid()}"
    target = top / "inner" / "version.py"
    target.parent.mkdir(parents=True)
    target.write_text("__version__ = '1.0'\n")
    time.sleep(0.2)  # installed before the grade: older than the weak watch's margin for coarse file clocks
    yield target
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def cpp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shared C++ build cache holding a starter's entry, as a strong grade left it."""
    root = tmp_path / "cpp-cache"
    entry = root / "asan-0123"
    entry.mkdir(parents=True)
    (entry / "asan").write_bytes(b"\x7fELF starter binary")
    (entry / "manifest.json").write_text('{"deps": [], "sha256": "starter"}')
    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(root))
    return root


def _append_from_learner_code(path: Path) -> str:
    """Learner code that appends to `path` through a child process (the in-process audit hook never sees it)."""
    return (
        f"import subprocess\nsubprocess.run(['sh', '-c', 'echo \"# patched\" >> \"$1\"', 'sh', {str(path)!r}], "
        "check=True)\n"
    )


def test_the_runtime_snapshot_covers_the_stdlib_every_site_packages_and_the_venv_bin() -> None:
    import sys

    from roadmap_cli.grading import weak_runtime

    roots = weak_runtime.runtime_roots()

    def covered(path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == r or real.startswith(r + os.sep) for r in roots)

    assert covered(sysconfig.get_paths()["stdlib"]) and covered(os.__file__)
    assert all(covered(p) for p in site.getsitepackages() if os.path.isdir(p))
    assert covered(os.path.join(sys.prefix, "bin"))
    import _pytest.reports

    assert covered(_pytest.reports.__file__)
    # And the comparison sees an append deep inside a tree (same inode, a new size and ctime).
    snap = weak_runtime.tree_snapshot([os.path.dirname(_pytest.reports.__file__)])
    assert snap[_pytest.reports.__file__][0] == os.stat(_pytest.reports.__file__).st_ino


def test_a_weak_grade_that_edits_a_file_deep_in_site_packages_is_void_and_later_grades_refuse(
    run_cli, wall, workspace: Path, deep_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _weak(monkeypatch)
    (workspace / "adder.py").write_text(_append_from_learner_code(deep_module) + RIGHT_ADD)
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert data["sandbox"] == "weak"
    assert data["outcome"] == "error" and str(deep_module) in data["message"], data
    assert "reinstall" in data["message"] and all(p["status"] != "passed" for p in data["parts"])
    # A strong grade of a right solution is refused with the same one line until it is repaired.
    (workspace / "adder.py").write_text(RIGHT_ADD)
    monkeypatch.delenv("ROADMAP_SANDBOX")
    refused = run_cli("grade", "--part", "add")
    assert refused.exit_code != 0 and str(deep_module) in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    deep_module.write_text("__version__ = '1.0'\n")  # what a reinstall does: the file written again
    again = run_cli("grade", "--part", "add", "--json")
    assert again.exit_code == 0, again.stderr
    again = again.json()["data"]
    assert again["sandbox"] == "strong" and again["parts"][0]["status"] == "passed", again.get("message")


def test_without_a_subreaper_an_edit_after_the_weak_grade_ended_is_caught_by_every_later_grade(
    run_cli, wall, workspace: Path, deep_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the engine cannot adopt the grade's orphans (macOS; prctl refused), a process the learner left may
    write after the grade: the runtime record catches it. (On Linux none is left: test_weak_sandbox_leftovers.)"""
    from roadmap_cli.grading import orphans

    monkeypatch.setattr(orphans, "_prctl", lambda option, value: False)
    _weak(monkeypatch)
    (workspace / "adder.py").write_text(RIGHT_ADD)
    first = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert first["sandbox"] == "weak" and first["parts"][0]["status"] == "passed", first.get("message")
    # What a daemon the learner's code left behind (double fork + setsid) does once the grade is over.
    with open(deep_module, "a") as fh:
        fh.write("# patched after the grade\n")
    monkeypatch.delenv("ROADMAP_SANDBOX")
    refused = run_cli("grade", "--part", "add")
    assert refused.exit_code != 0 and str(deep_module) in refused.stderr, refused.stderr
    assert "reinstall" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    # Strong grades with nothing changed since are not refused (the record is the runtime as it is).
    deep_module.write_text("__version__ = '1.0'\n")
    again = run_cli("grade", "--part", "add", "--json")
    assert again.exit_code == 0, again.stderr
    again = again.json()["data"]
    assert again["parts"][0]["status"] == "passed", again.get("message")
    twice = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert twice["parts"][0]["status"] == "passed", twice.get("message")


def test_a_weak_grade_that_rewrites_the_shared_cpp_cache_is_void(
    run_cli, workspace: Path, cpp_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _weak(monkeypatch)
    manifest = cpp_cache / "asan-0123" / "manifest.json"
    (workspace / "adder.py").write_text(
        f"import subprocess\nsubprocess.run(['sh', '-c', 'echo {{}} > \"$1\"', 'sh', {str(manifest)!r}], check=True)\n"
        + RIGHT_ADD
    )
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert data["outcome"] == "error" and str(manifest) in data["message"], data
    assert str(cpp_cache) in data["message"]  # the repair line names the cache to delete


def test_a_weak_grade_builds_into_a_private_cache_never_the_shared_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roadmap_cli.grading_kit import cpp_cache, sandbox

    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(tmp_path / "shared"))
    artefacts = tmp_path / "grade-artefacts"
    artefacts.mkdir()
    monkeypatch.setattr(cpp_cache, "_PRIVATE", [])
    try:
        sandbox.configure({"os_wall": None, "artefacts": str(artefacts)})  # a weak grade's grader
        weak = cpp_cache.cache_root()
        assert weak.parent == artefacts and weak != cpp_cache.shared_cache_root()
        sandbox.configure({"os_wall": {"view": "strong"}, "artefacts": str(artefacts)})
        assert cpp_cache.cache_root() == tmp_path / "shared"
    finally:
        sandbox.configure(None)
    assert cpp_cache.cache_root() == tmp_path / "shared"  # outside a grade: the engine's shared cache


def test_a_workers_weak_grade_is_recorded_unverified_and_proves_no_checkpoint(run_cli, cohort, monkeypatch) -> None:
    """--allow-weak-sandbox: the worker grades and records, but the attempt is not verified (the board does not
    rank it) and what it passed proves checkpoints only as the learner's claim."""
    from pg_writer import fake_run
    from roadmap_cli import context
    from roadmap_cli.grading import queue, submissions
    from roadmap_cli.labs.spec import find_lab

    from test_cohort_verified import _add, _sql

    assert run_cli("db", "status").exit_code == 0
    ada = f"ada{cohort['n']}"
    _add(run_cli, cohort, ada)
    context.reset()
    store = context.current().store()
    submissions.ensure_queue(store)
    lab = find_lab("adder")
    worker = object.__new__(queue.Worker)
    worker.store, worker.options = store, queue.WorkerOptions(name="box:1")
    for sandbox_kind in ("weak", "strong"):
        ns = fake_run(lab, 0, 0)
        ns.sandbox = sandbox_kind
        run = dataclasses.make_dataclass("Run", list(vars(ns)))(**vars(ns))
        worker._record(1 if sandbox_kind == "weak" else 2, ada, lab, run, None, None)
        with _sql(cohort["url"]) as conn:
            rows = conn.execute(
                "SELECT sandbox, verified FROM grade_attempts WHERE learner = %s ORDER BY id", (ada,)
            ).fetchall()
            sources = [
                r[0]
                for r in conn.execute("SELECT source FROM checkpoint_progress WHERE learner = %s", (ada,)).fetchall()
            ]
        if sandbox_kind == "weak":
            assert rows == [("weak", False)]
            assert sources and not any(s.startswith("lab:") for s in sources), sources
    assert rows == [("weak", False), ("strong", True)]
    assert any(s.startswith("lab:") for s in sources), sources
