"""A pytest run killed outright (`kill -9`) leaves no server running: the
PostgreSQL cluster and the sshd it started are stopped by tests/reaper.py and
their folders removed within seconds (once, a cluster was found running two
hours after its run died)."""

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
    import json, os, sys, time
    sys.path.insert(0, {tests!r})

    def test_start_servers_then_hang():
        from pgcluster import start_cluster
        from sshd import Server, find_sshd

        cluster = start_cluster()
        server = Server(find_sshd()).start()
        info = {{"pg_pid": cluster.postmaster_pid(), "pg_root": str(cluster.root),
                "sshd_pid": server.proc.pid, "sshd_root": str(server.root)}}
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


def test_a_killed_pytest_run_leaves_no_server_running(tmp_path: Path):
    from pgcluster import find_bindir
    from sshd import find_sshd

    missing = [what for what, found in (("PostgreSQL", find_bindir()), ("sshd", find_sshd())) if not found]
    if missing:
        if os.environ.get("ROADMAP_REQUIRE_POSTGRES") == "1" or os.environ.get("ROADMAP_REQUIRE_SSHD") == "1":
            pytest.fail(f"{', '.join(missing)} not installed (CI must run this test)", pytrace=False)
        pytest.skip(f"{', '.join(missing)} not installed")
    out = tmp_path / "servers.json"
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER.format(tests=str(TESTS), out=str(out)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(inner)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not out.exists():
            assert proc.poll() is None, "the inner pytest run ended before its servers started"
            assert time.monotonic() < deadline, "the inner run's servers did not start within 120 s"
            time.sleep(0.2)
        info = json.loads(out.read_text())
        assert _alive(info["pg_pid"]) and _alive(info["sshd_pid"])
    finally:
        proc.send_signal(signal.SIGKILL)  # no teardown, no finally: what a cancelled CI job does
        proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
        _alive(info["pg_pid"])
        or _alive(info["sshd_pid"])
        or Path(info["pg_root"]).exists()
        or Path(info["sshd_root"]).exists()
    ):
        time.sleep(0.2)
    assert not _alive(info["pg_pid"]), "PostgreSQL still running after its pytest run was killed"
    assert not _alive(info["sshd_pid"]), "sshd still running after its pytest run was killed"
    assert not Path(info["pg_root"]).exists() and not Path(info["sshd_root"]).exists()


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
