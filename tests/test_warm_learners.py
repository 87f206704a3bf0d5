"""grading_kit/warm_learner.py: a learner process forked from dev check's warm
learner must give the grade a cold learner gives (same verdicts, same kills,
the same wall), and a warm learner that fails must cost speed, never a grade."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from roadmap_cli.grading.launch import warm_graders, warm_learners
from roadmap_cli.grading.runner import GradeJob, grade_workspace
from roadmap_cli.grading_kit import oswall

from warm_helpers import FIXTURES, make_workspace, verdict

MARK = "_warm_learner_main import serve"  # in the command line of the zygote and of every process forked from it

pytestmark = pytest.mark.skipif(oswall.status()[0] != oswall.STRONG, reason="warm learners run behind bubblewrap only")


@pytest.fixture(scope="module")
def learners(adder, cpu):
    zygote = warm_learners([adder], cpu)
    assert zygote is not None
    with zygote:
        yield zygote


@pytest.fixture(scope="module")
def graders(cpu):
    with warm_graders(cpu) as warm:
        warm.wait_ready()
        yield warm


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read().replace(b"\0", b" ").decode(errors="replace")


def _cmdline_or_empty(pid: int) -> str:
    try:
        return _cmdline(pid)
    except OSError:  # gone meanwhile
        return ""


def _ancestors(pid: int) -> list[int]:
    chain = []
    while pid > 1:
        pid = int(_stat(pid)[1])
        chain.append(pid)
    return chain


def _descendants(root: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if root in _ancestors(int(entry)):
                    found.append(int(entry))
            except (OSError, IndexError):
                pass
    return found


def _running_learner(job, ws: Path) -> int:
    """The host pid of the loop variant's learner process, once it runs `add`."""
    from tests.test_labs_engine import _host_pid

    deadline = time.monotonic() + 60
    while not (ws / "grandchild.pid").exists() or not (ws / "grandchild.pid").read_text().strip():
        assert time.monotonic() < deadline and job.proc.poll() is None, "the learner never ran add()"
        time.sleep(0.05)
    _pid, started = (ws / "grandchild.pid").read_text().split()
    grandchild = _host_pid(started, "time.sleep(120)")
    assert grandchild is not None
    return int(_stat(grandchild)[1])  # its parent: the learner process


@pytest.mark.parametrize("kind", ["starter", "solution", "add-off-by-one", "mul-adds"])
def test_a_warm_learner_gives_the_verdict_a_cold_learner_gives(kind, adder, cpu, learners, graders, tmp_path):
    cold = grade_workspace(adder, make_workspace(adder, tmp_path, kind), device=cpu, warm=graders)
    warm = grade_workspace(
        adder, make_workspace(adder, Path(learners.root), kind), device=cpu, warm=graders, learners=learners
    )
    assert verdict(warm) == verdict(cold)
    assert warm.outcome == ("passed" if kind == "solution" else "failed")


def test_the_learner_is_forked_from_the_warm_learner_and_killed_at_the_grades_limit(adder, cpu, learners, graders):
    from tests.test_labs_engine import _alive

    ws = make_workspace(adder, Path(learners.root), "loop")
    job = GradeJob(
        adder, ws, device=cpu, timeout=8, parts=["add"], warm=graders, learners=learners, verify_install=False
    ).start()
    try:
        learner = _running_learner(job, ws)
        assert MARK in _cmdline(learner)  # a fork of the zygote: no new Python was exec'd
        assert learners._proc.pid in _ancestors(learner)  # under the zygote's bubblewrap...
        assert job.proc.pid not in _ancestors(learner)  # ...not the grade supervisor's descendant
        assert int(_stat(learner)[3]) == learner != int(_stat(_ancestors(learner)[0])[3])  # in a session of its own
    finally:
        run = job.finish()
    assert run.outcome == "timeout"
    _pid, started = (ws / "grandchild.pid").read_text().split()
    from tests.test_labs_engine import _host_pid

    grandchild = _host_pid(started, "time.sleep(120)")
    assert not _alive(learner)
    assert grandchild is None or not _alive(grandchild)
    # Nothing of the grade is left under the warm learner: its keeper is gone too (bwrap's init and the zygote stay).
    deadline = time.monotonic() + 10
    while len(_descendants(learners._proc.pid)) > 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_descendants(learners._proc.pid)) == 2


def test_a_warm_learner_cannot_read_hidden_paths_or_write_outside_its_root(adder, cpu, learners, graders):
    ws = make_workspace(adder, Path(learners.root), "solution")
    escape = Path(__file__).parent / f"escape-{os.getpid()}.txt"  # writable here, outside the root
    probe = ws / "probe.json"
    (ws / "adder.py").write_text(
        (ws / "adder.py").read_text() + "\n\n"
        "def _probe():\n"
        "    import json, os\n"
        "    seen = {'cmdline': open('/proc/self/cmdline', 'rb').read().decode().replace(chr(0), ' ')}\n"
        f"    seen['labs'] = sorted(os.listdir({str(FIXTURES / 'labs')!r})) if os.path.isdir({str(FIXTURES / 'labs')!r}) else 'absent'\n"
        f"    seen['adder'] = os.path.exists({str(FIXTURES / 'labs' / 'adder')!r})\n"
        "    import sys\n"
        "    seen['shim'] = sorted(os.listdir(os.path.dirname(sys.modules['adapter'].__file__)))\n"
        f"    try:\n        open({str(escape)!r}, 'w').write('out')\n        seen['escaped'] = True\n"
        "    except OSError as exc:\n        seen['escaped'] = repr(exc)\n"
        f"    open({str(probe)!r}, 'w').write(json.dumps(seen))\n\n\n"
        "_probe()\n"
    )
    try:
        run = grade_workspace(adder, ws, device=cpu, warm=graders, learners=learners, parts=["add"])
        seen = json.loads(probe.read_text())
        assert run.outcome == "passed", run.log_tail
        assert MARK in seen["cmdline"]  # this ran in a warm learner
        # No labs folder (the view is an allow-list): no lab's tests/ either; the learner side imports its
        # adapter from the shim.
        assert (
            seen["labs"] in ([], "absent") and seen["adder"] is False and seen["shim"] == ["adapter.py", "given.py"]
        ), seen
        assert sorted(os.listdir(FIXTURES / "labs" / "adder")) != ["tests"]  # (here, the solution and the rest)
        assert seen["escaped"] is not True and not escape.exists()
    finally:
        escape.unlink(missing_ok=True)


def test_a_dead_warm_learner_costs_speed_never_a_grade(adder, cpu, graders):
    from roadmap_cli.grading._supervisor import descendants

    zygote = warm_learners([adder], cpu)
    with zygote:
        # bwrap and everything under it, once the zygote is there: killed while bwrap is still
        # setting up (before its child's parent-death signal is armed), the zygote could outlive it.
        deadline = time.monotonic() + 30
        while not any(MARK in _cmdline_or_empty(pid) for pid in descendants(zygote._proc.pid)):
            assert time.monotonic() < deadline, "the learner zygote never started"
            time.sleep(0.05)
        for pid in [*descendants(zygote._proc.pid), zygote._proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        zygote._proc.wait()
        assert (
            grade_workspace(
                adder, make_workspace(adder, Path(zygote.root), "solution"), device=cpu, warm=graders, learners=zygote
            ).outcome
            == "passed"
        )
        ws = make_workspace(adder, Path(zygote.root), "loop")
        job = GradeJob(
            adder, ws, device=cpu, timeout=20, parts=["add"], warm=graders, learners=zygote, verify_install=False
        ).start()
        try:
            assert MARK not in _cmdline(_running_learner(job, ws))  # started cold instead
        finally:
            job.cancel()
            job.finish()


def test_a_learner_that_crashes_is_reported_as_a_cold_one_and_the_next_call_gets_a_fresh_one(
    adder, cpu, learners, graders, tmp_path
):
    """The learner's exit status is the signal itself (no bwrap's 128 + N in between); after the crash the
    next test starts a new learner process, forked again."""

    def crashing(parent: Path) -> Path:
        ws = make_workspace(adder, parent, "solution")
        (ws / "adder.py").write_text(
            (ws / "adder.py")
            .read_text()
            .replace(
                "def add(a, b):", "def add(a, b):\n    import ctypes\n    ctypes.string_at(0)\n\n\ndef _unused(a, b):"
            )
        )
        return ws

    cold = grade_workspace(adder, crashing(tmp_path), device=cpu, warm=graders)
    warm = grade_workspace(adder, crashing(Path(learners.root)), device=cpu, warm=graders, learners=learners)
    assert verdict(warm) == verdict(cold)
    messages = [t.message or "" for t in warm.tests]
    assert any("crashed the learner process (SIGSEGV)" in m for m in messages), messages
    assert any(t.outcome == "passed" for t in warm.tests)  # mul's tests, in the learner started after the crash


def test_only_a_walled_grade_under_the_root_uses_the_warm_learner(cpu, monkeypatch, tmp_path):
    from roadmap_cli.grading.launch import grader_env
    from roadmap_cli.grading_kit import warm_learner

    root = tmp_path / "root"
    inside, scratch = root / "ws", root / "grade"
    config = {"workspace": str(inside), "os_wall": {"read_write": [str(inside), str(scratch)]}}
    monkeypatch.setenv(warm_learner.ENV_FD, "7")
    monkeypatch.setenv(warm_learner.ENV_ROOT, str(root))
    assert warm_learner.usable(config) == 7
    assert warm_learner.usable({**config, "os_wall": None}) is None  # the weak sandbox: always cold
    outside = {**config, "os_wall": {"read_write": [str(inside), str(tmp_path / "elsewhere")]}}
    assert warm_learner.usable(outside) is None  # the cold learner could write there, the warm one could not
    assert warm_learner.usable({**config, "workspace": str(tmp_path / "root2" / "ws")}) is None
    # `roadmap grade` run from a shell that sets them: its graders never see them.
    env = grader_env(cpu)
    assert warm_learner.ENV_FD not in env and warm_learner.ENV_ROOT not in env
