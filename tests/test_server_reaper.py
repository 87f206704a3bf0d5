"""A pytest run killed outright (`kill -9`) leaves nothing running (issue 39 item 8): the PostgreSQL cluster
and the sshd it started, what an ssh session left behind (a daemon in a session of its own, as `grade --on`'s
far agent is, and the client's shared connection) and a `roadmap worker` it started are all gone within
seconds, and the servers' folders removed (once, a cluster was found running two hours after its run died).
tests/reaper.py is the watchdog; this is its proof."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

INNER = textwrap.dedent("""
    import json, os, re, subprocess, sys, time
    sys.path.insert(0, {tests!r})

    def test_start_servers_then_hang(tmp_path):
        from pgcluster import start_cluster
        from sshd import far_side
        from test_cohort_queue import WorkerProc

        # First, as it takes longest to warm up: a worker on the outer run's cluster, which outlives this run:
        # nothing but its own watchdog ends it.
        worker = WorkerProc({worker_url!r}, tmp_path / "worker-home", "--allow-weak-sandbox")
        cluster = start_cluster()
        far_root = tmp_path / "far-root"
        far_root.mkdir()
        server = far_side(far_root)
        # Through the sshd, the way `grade --on` starts its far agent: a daemon in a session of its own, its
        # managed folder on its command line; the client keeps its shared connection open for ten minutes.
        ssh = ["ssh", "-F", str(server.client_config), "-p", str(server.port), "-o", "ControlMaster=auto",
               "-o", f"ControlPath={{server.root}}/mux", "-o", "ControlPersist=600", f"{{server.user}}@127.0.0.1"]
        daemon = ("import os, sys, time; open(sys.argv[1] + '/daemon.pid', 'w').write(str(os.getpid())); "
                  "time.sleep(300)")
        started = subprocess.run(
            ssh + [f"setsid {{sys.executable}} -c {{daemon!r}} {{far_root}} </dev/null >/dev/null 2>&1 &"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert started.returncode == 0, started.stderr
        check = subprocess.run(ssh + ["-O", "check"], capture_output=True, text=True, timeout=30)
        master = int(re.search(r"pid=(\\d+)", check.stderr).group(1))
        worker.wait_for(lambda e: e["event"] == "ready", 120)
        while not (far_root / "daemon.pid").exists():
            time.sleep(0.1)
        info = {{"postgres": cluster.postmaster_pid(), "sshd": server.proc.pid, "worker": worker.proc.pid,
                "far daemon": int((far_root / "daemon.pid").read_text()), "ssh master": master,
                "folders": [str(cluster.root), str(server.root)]}}
        with open({out!r} + ".tmp", "w") as f:
            json.dump(info, f)
        os.replace({out!r} + ".tmp", {out!r})
        time.sleep(300)  # killed long before
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_killed_pytest_run_leaves_nothing_running(tmp_path: Path, pg_cluster):
    from sshd import find_sshd

    if find_sshd() is None:
        if os.environ.get("ROADMAP_REQUIRE_SSHD") == "1":
            pytest.fail("sshd not installed (CI must run this test)", pytrace=False)
        pytest.skip("sshd not installed")
    out = tmp_path / "servers.json"
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER.format(tests=str(TESTS), out=str(out), worker_url=pg_cluster.new_database("reaped")))
    env = dict(os.environ, ROADMAP_LABS_DIR=str(TESTS / "fixtures_labs" / "labs"), ROADMAP_DEVICE="cpu")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:warnings",
            "--tb=short",
            "--basetemp",
            str(tmp_path / "inner-tmp"),
        ]
        + [str(inner)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not out.exists():
            if proc.poll() is not None:
                pytest.fail("the inner pytest run ended before its servers started:\n" + proc.stdout.read()[-6000:])
            assert time.monotonic() < deadline, "the inner run's servers did not start within 180 s"
            time.sleep(0.2)
        info = json.loads(out.read_text())
        pids = {what: pid for what, pid in info.items() if what != "folders"}
        assert all(_alive(pid) for pid in pids.values()), pids
    finally:
        proc.send_signal(signal.SIGKILL)  # no teardown, no finally: what a cancelled CI job does
        proc.wait()
        proc.stdout.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
        any(_alive(pid) for pid in pids.values()) or any(Path(f).exists() for f in info["folders"])
    ):
        time.sleep(0.2)
    running = [what for what, pid in pids.items() if _alive(pid)]
    for what in running:  # a failing run of this test leaves nothing either
        os.kill(pids[what], signal.SIGKILL)
    assert not running, f"still running 20 s after their pytest run was killed: {running}"
    assert not [f for f in info["folders"] if Path(f).exists()]


def test_a_released_reaper_touches_nothing(tmp_path: Path):
    """The normal path: the test stopped its server itself, then its reaper goes quietly."""
    from reaper import guard

    keep = tmp_path / "keep"
    keep.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        reaper = guard(pids=[sleeper.pid], paths=[str(keep)])
        time.sleep(0.3)
        reaper.release()
        assert reaper.proc.returncode == 0
        time.sleep(0.3)
        assert sleeper.poll() is None and keep.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
