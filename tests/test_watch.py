"""`roadmap watch` driven in a pseudo-terminal (pexpect) on the fixture lab:
a wrong save shows the failure, the fix passes the part and the next part
starts, a save during a run cancels it, `q` exits and leaves no process."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")
pytest.importorskip("watchfiles")

FIXTURES = Path(__file__).parent / "fixtures_labs"
ROADMAP = [sys.executable, "-c", "from roadmap_cli.cli import main; main()"]


def _graders_of(ws: Path, exclude: frozenset = frozenset()) -> list[int]:
    """Pids of processes (grader, supervisor, sandboxed learner process) working
    on this workspace: its path in their environment or as their cwd."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in exclude or int(pid) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if f"ROADMAP_WORKSPACE={ws}".encode() in environ.split(b"\0") or cwd == str(ws) or cwd.startswith(f"{ws}/"):
            found.append(int(pid))
    return found


def _warm_grader_of(parent: int):
    """The pid of `parent`'s warm grader zygote, if it has one."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"roadmap_cli.grading.warm" in cmdline:
            return int(pid)
    return None


@pytest.fixture
def env(roadmap_home: Path) -> dict:
    return {
        **os.environ,
        "ROADMAP_HOME": str(roadmap_home),
        "ROADMAP_LABS_DIR": str(FIXTURES / "labs"),
        "ROADMAP_DEVICE": "cpu",
        "ROADMAP_LANG": "en",
        "OMP_NUM_THREADS": "1",
    }


def _save(path: Path, text: str) -> None:
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    os.replace(tmp, path)  # like an editor's atomic save


def test_watch_in_a_pty(env: dict, tmp_path: Path) -> None:
    import subprocess

    ws = (tmp_path / "ws").resolve()
    subprocess.run([*ROADMAP, "lab", "start", "adder", "--dir", str(ws)], env=env, check=True, capture_output=True)
    child = pexpect.spawn(ROADMAP[0], ROADMAP[1:] + ["watch"], cwd=str(ws), env=env, encoding="utf-8", timeout=60)
    try:
        child.expect("watching adder")
        child.expect(r"▶ grading part add")
        child.expect(r"attempt #1")  # the starter fails
        _save(ws / "adder.py", "def add(a, b):\n    return a - b\n")
        child.expect(r"grading part add \(saved adder.py\)")
        child.expect(r"✗ add: failed")
        child.expect(r"assert -1 == 5")  # the first failure, in full
        child.expect(r"checked by: test_add.py:7")
        child.expect("attempt #2")
        # After the first grade, later ones fork a warm grader (grading/warm.py) that watch started.
        zygote = _warm_grader_of(child.pid)
        assert zygote is not None, "watch should keep a warm grader once its first grade is done"
        # A save during a run cancels it: slow mul, then save again while it runs.
        _save(ws / "adder.py", "def add(a, b):\n    return a + b\n")
        child.expect(r"✓ add: passed \(4/4 tests\)")
        child.expect(r"grading part mul \(next part: mul\)")
        child.expect("attempt #4")  # mul fails (starter); #3 was add passing
        _save(ws / "mul.py", "import time\n\ndef mul(a, b):\n    time.sleep(30)\n    return a * b\n")
        child.expect(r"grading part mul \(saved mul.py\)")
        deadline = time.monotonic() + 30
        watcher = frozenset({child.pid})
        while not _graders_of(ws, watcher) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _graders_of(ws, watcher), "the grader of mul should be running"
        time.sleep(1.0)
        _save(ws / "mul.py", "def mul(a, b):\n    return a * b\n")
        child.expect(r"cancelled: not counted")
        child.expect(r"✓ mul: passed")
        child.expect(r"grading part speed")
        child.expect(r"attempt #7")
        child.send("h")
        # mul just passed, and so did every part gradable here: no part-specific target, add's hint comes first
        # and is numbered 1 (the first shown), not by its place in lab.yaml
        child.expect(r"Hint 1/2 \(add\): Use the \+ operator")
        child.send("q")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    time.sleep(0.2)
    assert _graders_of(ws) == []  # no orphan grader left behind
    assert not Path(f"/proc/{zygote}").exists()  # nor the warm grader
    history = subprocess.run([*ROADMAP, "lab", "history", "adder", "--json"], env=env, capture_output=True, text=True)
    import json

    outcomes = [a["outcome"] for a in reversed(json.loads(history.stdout)["data"]["attempts"])]
    # Every grade is recorded, the cancelled one as "interrupted".
    assert outcomes[:6] == [
        "failed",
        "failed",
        "part-passed",
        "failed",
        "interrupted",
        "part-passed",
    ]  # watch grades a part at a time
