"""Nothing a weak-sandbox grade writes changes what judges a LATER grade (issue 35 item 4; red team wall2).

- W5: learner code forks a child in its own session, with a clean environment, and SIGKILLs the grade's
  supervisor; the child waits for the grade to end and then writes. The engine is a child subreaper around a
  weak grade: the child is re-parented to it and killed before the post-grade checks, so its file never
  appears.
- W1/W2: in a source checkout, learner code appends to the lab's tests/ (and `git commit`s it) or to the lab's
  data/: the grade is void and every later grade is refused, with a git repair line, until the content is what
  it was before the grade.
- W3: a change to the shared C++ cache made after a clean weak grade (another home's strong grade rebuilding an
  entry) is not blamed on the weak grade: no refusal, no marker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from test_weak_sandbox_judge import RIGHT_ADD, _weak, workspace  # noqa: F401 - fixtures

ESCAPE = textwrap.dedent("""
    import os, signal, time

    def _escape(target):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execve("/bin/sh", ["sh", "-c", 'sleep 4; echo escaped > "$0"', target], {{}})
            os._exit(0)
        time.sleep(0.2)
        open(target + ".started", "w").close()
        # The documented escape: kill the grade's supervisor (found by walking up the parents).
        pid = os.getppid()
        while pid > 1:
            with open(f"/proc/{{pid}}/cmdline", "rb") as fh:
                if b"_supervisor.py" in fh.read():
                    os.kill(pid, signal.SIGKILL)
                    break
            with open(f"/proc/{{pid}}/stat", "rb") as fh:
                pid = int(fh.read().rsplit(b")", 1)[-1].split()[1])

    _escape({target!r})
""")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="Linux only: macOS has no subreaper (docs/grading.md)")
def test_a_child_that_kills_the_supervisor_and_outlives_the_weak_grade_is_killed_before_it_writes(
    run_cli, workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _weak(monkeypatch)
    target = tmp_path / "written-after-the-grade"
    (workspace / "adder.py").write_text(ESCAPE.format(target=str(target)) + RIGHT_ADD)
    result = run_cli("grade", "--part", "add", "--json")
    data = result.json()["data"]
    assert data["sandbox"] == "weak", data
    time.sleep(6)  # well past the child's 4 s
    assert Path(str(target) + ".started").exists(), "the escape never ran"
    assert not target.exists(), "a process of the weak grade outlived it"
    # And the engine is no subreaper once the grade is over (it adopts nobody else's orphans).
    from roadmap_cli.grading import orphans

    assert orphans._subreaper_users == 0


@pytest.fixture
def checkout(workspace: Path) -> Path:
    """The lab folders as a git checkout (README's install is an editable source checkout)."""
    labs = Path(os.environ["ROADMAP_LABS_DIR"])
    root = labs.parent
    (labs / "adder" / "data").mkdir()
    (labs / "adder" / "data" / "heldout.txt").write_text("reference input\n")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "install"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)
    time.sleep(0.1)
    return root


def _head(root: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_a_weak_grade_that_commits_a_planted_conftest_is_void_and_later_grades_refuse_until_reset(
    run_cli, workspace: Path, checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _weak(monkeypatch)
    installed = _head(checkout)
    conftest = checkout / "labs" / "adder" / "tests" / "conftest.py"
    plant = textwrap.dedent(f"""
        import base64, subprocess
        _root = {str(checkout)!r}
        _conftest = base64.b64encode({str(conftest)!r}.encode()).decode()
        subprocess.run(["sh", "-c", f'echo "# planted hook" >> "$(echo {{_conftest}} | base64 -d)"'], check=True)
        # The checkout's path encoded: the in-process hook's argv check is no wall (any code running as the
        # user gets past it); this test is about what the engine sees after the grade.
        _hidden = base64.b64encode(_root.encode()).decode()
        subprocess.run(["sh", "-c", f'cd "$(echo {{_hidden}} | base64 -d)" && '
                        'git -c user.name=x -c user.email=x@x commit -qam x'], check=True)
    """)
    (workspace / "adder.py").write_text(plant + RIGHT_ADD)
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert _head(checkout) != installed, data["message"][
        :400
    ]  # the plant was committed: git HEAD "matches" the planted file
    assert data["outcome"] == "error" and "weak-sandbox grade wrote" in data["message"], data
    assert all(p["status"] != "passed" for p in data["parts"])
    # Every later grade, strong or weak, is refused with one line naming the commit to go back to.
    (workspace / "adder.py").write_text(RIGHT_ADD)
    refused = run_cli("grade", "--part", "add")
    assert refused.exit_code != 0, refused.stdout
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert f"git -C {checkout} reset --hard {installed}" in line, line
    subprocess.run(["git", "-C", str(checkout), "reset", "-q", "--hard", installed], check=True)
    again = run_cli("grade", "--part", "add", "--json")
    assert again.exit_code == 0, again.stderr
    assert again.json()["data"]["parts"][0]["status"] == "passed"


def test_a_weak_grade_that_appends_to_a_reference_input_in_data_is_void(
    run_cli, workspace: Path, checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _weak(monkeypatch)
    heldout = checkout / "labs" / "adder" / "data" / "heldout.txt"
    (workspace / "adder.py").write_text(
        f"import subprocess\nsubprocess.run(['sh', '-c', 'echo poison >> \"$1\"', 'sh', {str(heldout)!r}], "
        "check=True)\n" + RIGHT_ADD
    )
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert data["outcome"] == "error" and str(heldout) in data["message"], data
    (workspace / "adder.py").write_text(RIGHT_ADD)
    assert run_cli("grade", "--part", "add").exit_code != 0
    heldout.write_text("reference input\n")  # the content as it was: repaired (a checkout would do the same)
    again = run_cli("grade", "--part", "add", "--json")
    assert again.exit_code == 0 and again.json()["data"]["parts"][0]["status"] == "passed", again.stderr


def test_a_cpp_cache_rewrite_after_a_clean_weak_grade_is_not_blamed_on_it(
    run_cli, workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from roadmap_cli.grading import weak_taint

    cache = Path(os.environ["ROADMAP_CPP_CACHE"])
    entry = cache / "asan-0123"
    entry.mkdir(parents=True)
    (entry / "asan").write_bytes(b"\x7fELF starter binary")
    time.sleep(0.1)
    _weak(monkeypatch)
    (workspace / "adder.py").write_text(RIGHT_ADD)
    first = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert first["sandbox"] == "weak" and first["parts"][0]["status"] == "passed", first.get("message")
    # A strong grade in ANOTHER data home rebuilds that entry (the shared cache is per user, not per home).
    (entry / "asan").write_bytes(b"\x7fELF rebuilt binary")
    again = run_cli("grade", "--part", "add", "--json")
    assert again.exit_code == 0, again.stderr
    assert again.json()["data"]["parts"][0]["status"] == "passed", again.json()["data"].get("message")
    marker = weak_taint.taint_file()
    assert marker is None or not marker.exists()


def test_without_a_subreaper_a_pyc_forged_after_the_grade_in_the_grader_cache_is_caught(
    run_cli, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """macOS (no subreaper): W5's child writes its pyc once the grade is over. The runtime record now covers the
    grader's bytecode cache by content (a .pyc counts unless it is exactly its source's compilation), so the
    next grade is refused."""
    import importlib.util
    import marshal

    import _pytest.python as target

    from roadmap_cli.grading import manifest, orphans

    monkeypatch.setattr(orphans, "_prctl", lambda option, value: False)
    _weak(monkeypatch)
    (workspace / "adder.py").write_text(RIGHT_ADD)
    first = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert first["parts"][0]["status"] == "passed", first.get("message")
    pycache = manifest.pycache_dir()
    planted = Path(str(pycache) + os.path.dirname(target.__file__)) / "python.cpython-311.pyc"
    planted.parent.mkdir(parents=True, exist_ok=True)
    code = compile("raise SystemExit('planted')", target.__file__, "exec")
    planted.write_bytes(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code))
    refused = run_cli("grade", "--part", "add")
    assert refused.exit_code != 0 and str(planted) in refused.stderr, refused.stderr


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="Linux only: macOS has no subreaper (docs/grading.md)")
def test_the_sweep_after_a_weak_grade_spares_new_work_of_a_child_the_engine_already_had(tmp_path: Path) -> None:
    """CI: the suite's weak grades ran beside its background dev check (a child of the test process), and
    each sweep killed the grades the dev check had started meanwhile. A new process under an old child is
    that child's work; only a new branch (a grade's orphan comes back to the engine itself) is the grade's."""
    from roadmap_cli.grading import orphans

    flag, grandchild_pid = tmp_path / "go", tmp_path / "grandchild.pid"
    # An old child: when told, it starts a grandchild of the engine (as the dev check starts a grade).
    old_child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import os, subprocess, sys, time\n"
                f"while not os.path.exists({str(flag)!r}): time.sleep(0.02)\n"
                "p = subprocess.Popen(['sleep', '30'])\n"
                f"open({str(grandchild_pid)!r}, 'w').write(str(p.pid))\n"
                "p.wait()\n"
            ),
        ]
    )
    reaper = orphans.Reaper()
    try:
        assert reaper.active
        flag.write_text("")
        new_branch = subprocess.Popen(["sleep", "30"])  # stands for an orphan the grade left to the engine
        for _ in range(500):
            if grandchild_pid.exists() and grandchild_pid.read_text():
                break
            time.sleep(0.02)
        grandchild = int(grandchild_pid.read_text())
        assert reaper.kill_new() >= 1
        assert not os.path.exists(f"/proc/{new_branch.pid}"), (
            "the grade's orphan outlived the sweep"
        )  # killed and reaped
        assert old_child.poll() is None and os.path.exists(f"/proc/{grandchild}"), "the old child's work was killed"
    finally:
        reaper.close()
        old_child.kill()
        old_child.wait()
