"""grading/warm.py: a grade forked from a warm grader must be the same grade
a new Python gives (same verdicts, same process contract), and a warm grader
that fails must cost speed, never a grade."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from roadmap_cli.grading.launch import warm_graders
from roadmap_cli.grading.runner import GradeJob, grade_workspace
from roadmap_cli.grading.warm import WarmProc

from warm_helpers import make_workspace, verdict

FIXTURES = Path(__file__).parent / "fixtures_labs"


@pytest.fixture(scope="module")
def warm(cpu):
    with warm_graders(cpu) as graders:
        assert graders.wait_ready()
        yield graders


@pytest.mark.parametrize("kind", ["starter", "solution", "add-off-by-one", "mul-adds"])
def test_a_warm_grade_gives_the_verdict_a_cold_grade_gives(kind, adder, cpu, warm, tmp_path):
    ws = make_workspace(adder, tmp_path, kind)
    cold = grade_workspace(adder, ws, device=cpu)
    forked = grade_workspace(adder, ws, device=cpu, warm=warm)
    assert verdict(forked) == verdict(cold)
    assert forked.outcome == ("passed" if kind == "solution" else "failed")


def test_the_grader_is_forked_from_the_warm_interpreter(adder, cpu, warm, tmp_path):
    ws = make_workspace(adder, tmp_path, "solution")
    shutil.copy(FIXTURES / "variants" / "loop_adder.py", ws / "adder.py")  # keeps the grade alive to look at
    job = GradeJob(adder, ws, device=cpu, timeout=20, warm=warm, verify_install=False).start()
    try:
        assert isinstance(job.proc, WarmProc)
        deadline = time.monotonic() + 10
        while True:  # the zygote answers right after fork(): the child may not have called setsid() yet
            with open(f"/proc/{job.proc.pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            parent, session = int(fields[1]), int(fields[3])
            if session == job.proc.pid or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert parent == warm._proc.pid  # the supervisor is the zygote's child...
        assert session == job.proc.pid  # ...in a session of its own, as start_new_session gives
    finally:
        job.cancel()
        run = job.finish()
    assert run.outcome != "passed"


def test_the_warm_grader_is_out_of_reach_of_the_terminals_ctrl_c(warm):
    # In a session of its own: Ctrl-C goes to the engine (which cancels its grades, recorded as
    # interrupted), never straight to the zygote, which would kill the grades under the engine.
    assert os.getsid(warm._proc.pid) == warm._proc.pid != os.getsid(0)


def test_a_warm_grade_that_hangs_is_killed_at_its_limit_with_all_it_started(adder, cpu, warm, tmp_path):
    from tests.test_labs_engine import _alive, _host_pid

    ws = make_workspace(adder, tmp_path, "solution")
    shutil.copy(FIXTURES / "variants" / "loop_adder.py", ws / "adder.py")
    t0 = time.monotonic()
    run = grade_workspace(adder, ws, device=cpu, timeout=3, parts=["add"], warm=warm)
    assert run.outcome == "timeout"
    assert time.monotonic() - t0 < 3 + 4
    _pid, started = (ws / "grandchild.pid").read_text().split()
    host_pid = _host_pid(started, "time.sleep(120)")
    assert host_pid is None or not _alive(host_pid)


def _spawn_probe(warm, tmp_path: Path, name: str):
    """A warm grade of a one-test pytest file that writes what it sees."""
    probe = tmp_path / f"test_probe_{name}.py"
    probe.write_text(
        "import json, os, random, sys\n"
        "def test_probe():\n"
        "    fd = int(os.environ['PROBE_FD'])\n"
        "    seen = {'cwd': os.getcwd(), 'mark': os.environ.get('PROBE_MARK'), 'pid': os.getpid(),\n"
        "            'sid': os.getsid(0), 'random': random.random(), 'stdin': os.readlink('/proc/self/fd/0'),\n"
        "            'argv0': sys.argv[0]}\n"
        "    os.write(fd, json.dumps(seen).encode())\n"
        "    print('visible on the output pipe')\n"
        "    assert os.environ.get('PROBE_FAIL') != '1'\n"
    )
    cwd = tmp_path / f"cwd_{name}"
    cwd.mkdir()
    probe_r, probe_w = os.pipe()
    out_r, out_w = os.pipe()
    # The descriptor lands at the number the engine gave it, whatever number the zygote received it as.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PROBE_FD": str(probe_w),
        "PROBE_MARK": name,
        "PROBE_FAIL": "1" if name == "fails" else "0",
    }
    proc = warm.spawn(
        ["-q", "-s", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(probe)],
        env=env,
        cwd=str(cwd),
        output_fd=out_w,
        pass_fds=(probe_w,),
    )
    os.close(probe_w)
    os.close(out_w)
    code = proc.wait(timeout=60)
    with os.fdopen(probe_r, "rb") as fh:
        seen = fh.read()
    with os.fdopen(out_r, "rb") as fh:
        output = fh.read().decode(errors="replace")
    return code, seen, output, cwd


def test_a_forked_grader_has_its_own_cwd_environment_session_and_random_stream(warm, tmp_path):
    import json

    code_a, seen_a, output_a, cwd_a = _spawn_probe(warm, tmp_path, "a")
    code_b, seen_b, _, cwd_b = _spawn_probe(warm, tmp_path, "b")
    assert code_a == 0 and code_b == 0, output_a
    a, b = json.loads(seen_a), json.loads(seen_b)
    assert (a["cwd"], b["cwd"]) == (str(cwd_a), str(cwd_b))
    assert (a["mark"], b["mark"]) == ("a", "b")
    assert a["sid"] != b["sid"] and a["sid"] != os.getsid(0)  # each grade in a new session
    assert a["stdin"] == "/dev/null"
    assert a["random"] != b["random"]  # not the zygote's stream replayed
    assert a["argv0"].endswith(os.path.join("pytest", "__main__.py"))  # as `python -m pytest` has it
    assert "visible on the output pipe" in output_a and "1 passed" in output_a


def test_a_failing_warm_grader_exits_with_pytests_status(warm, tmp_path):
    code, _, output, _ = _spawn_probe(warm, tmp_path, "fails")
    assert code == 1, output


def test_a_dead_warm_grader_costs_speed_never_a_grade(adder, cpu, tmp_path):
    ws = make_workspace(adder, tmp_path, "solution")
    with warm_graders(cpu) as broken:
        broken._proc.send_signal(signal.SIGKILL)
        broken._proc.wait()
        job = GradeJob(adder, ws, device=cpu, warm=broken, verify_install=False).start()
        assert not isinstance(job.proc, WarmProc)  # started cold instead
        assert job.finish().outcome == "passed"


def test_closing_the_warm_grader_ends_the_grades_it_started(cpu, tmp_path):
    sleeper = tmp_path / "test_sleeps.py"
    sleeper.write_text("import time\ndef test_sleeps():\n    time.sleep(120)\n")
    graders = warm_graders(cpu)
    assert graders.wait_ready()
    out_r, out_w = os.pipe()
    proc = graders.spawn(
        ["-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(sleeper)],
        env={"PATH": os.environ.get("PATH", "")},
        cwd=str(tmp_path),
        output_fd=out_w,
        pass_fds=(),
    )
    os.close(out_w)
    t0 = time.monotonic()
    graders.close()
    assert proc.wait(timeout=10) != 0
    assert time.monotonic() - t0 < 10
    with os.fdopen(out_r, "rb") as fh:
        fh.read()  # EOF: no process holds the output pipe any more (the pytest grandchild is gone too)
