"""`roadmap grade --on NAME` (issue 28, part 2) against a real OpenSSH server on loopback (tests/sshd.py).

The "remote" is this machine through a throwaway sshd. Its far side is set up
the way a real one is, with one honest shortcut for a CPU machine with no
network: the remote's python (`remote add --python`) is this test run's own
interpreter, which imports torch, so the managed venv reuses its packages
(system site-packages) and nothing is downloaded. The far side's sshd sets
(SetEnv) what the local grades of this suite run with: the fixture labs
(ROADMAP_LABS_DIR, the `adder` lab), ROADMAP_DEVICE=cpu and
ROADMAP_DEV_UNLOCKED=1, and ROADMAP_REMOTE_ROOT (the managed folder, instead of
~/.roadmap-remote), so the remote and the local grade judge the same lab the
same way and can be compared part by part.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def far(tmp_path_factory):
    from sshd import far_side

    server = far_side(tmp_path_factory.mktemp("far-root"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def remote(far, run_cli, adder_workspace, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROADMAP_SSH_CONFIG", str(far.client_config))
    assert run_cli("remote", "add", "box", far.url, "--python", sys.executable).exit_code == 0
    yield far
    run_cli("remote", "remove", "box")  # closes the shared ssh connection the grades left open


def _masters(home: Path) -> list[int]:
    """Pids of live ssh master processes (connection sharing) whose socket is in `home`."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if cmd.startswith("ssh: ") and str(home / "ssh-mux") in cmd:
            out.append(int(pid))
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _agents(root: Path) -> list[int]:
    """Pids of the far agents (grading/remote/daemon.py) running for the managed folder `root`."""
    return [
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit()
        and "roadmap_cli.grading.remote.daemon" in _cmdline(int(pid))
        and str(root) in _cmdline(int(pid))
    ]


def _agent(root: Path, timeout: float = 30.0) -> int:
    """The pid of the one far agent of `root`, once it listens (it says so in its log)."""

    def listening() -> bool:
        pids = _agents(root)
        return len(pids) == 1 and any(
            f"far agent {pids[0]} of " in log.read_text() for log in root.glob("agents/*.log")
        )

    assert _wait_for(listening, timeout), (_agents(root), [log.read_text() for log in root.glob("agents/*.log")])
    return _agents(root)[0]


def _wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _far_processes(root: Path) -> list[str]:
    """Command lines of live processes that run from (or in) the far side's managed folder: a grade's, never
    the far agent itself or its warm grader's zygote (they stay between grades; their forks are a grade's)."""
    out = []
    agents = set(_agents(root))
    zygotes = {
        int(p)
        for p in os.listdir("/proc")
        if p.isdigit() and _ppid(int(p)) in agents and "grading.warm import serve" in _cmdline(int(p))
    }
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid() or int(pid) in agents | zygotes:
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if str(root) in cmd or f"ROADMAP_HOME={root}".encode() in environ:
            out.append(f"{pid}: {cmd[:200]}")
    return out


def _parts(data: dict) -> list[tuple]:
    return [
        (p["id"], p["status"], p["points"], p["max_points"], p["tests_passed"], p["tests_total"]) for p in data["parts"]
    ]


def test_grade_on_equals_a_local_grade_and_the_second_reuses_the_venv(
    remote, run_cli, adder_workspace: Path, roadmap_home: Path
):
    first = run_cli("grade", "--on", "box", "--json")
    assert first.exit_code == 1, first  # the starter fails (as it does locally)
    far = first.json()["data"]
    assert far["graded_on"] == "box" and far["sent"]["installed"] is True and far["sent"]["changed"] >= 2
    assert "first use of box" in first.stderr and "installing roadmap" in first.stderr
    local = run_cli("grade", "--json").json()["data"]
    assert _parts(far) == _parts(local)
    assert (far["outcome"], far["score"], far["max_score"]) == (local["outcome"], local["score"], local["max_score"])
    assert sorted((t["nodeid"], t["outcome"]) for t in far["tests"]) == sorted(
        (t["nodeid"], t["outcome"]) for t in local["tests"]
    )
    assert far["device"] == local["device"] and far["sandbox"] == local["sandbox"]

    # The second grade: the venv is reused, only the changed file goes, a deleted file is deleted there.
    (adder_workspace / "adder.py").write_text("def add(a, b):\n    return a + b\n")
    (adder_workspace / "mul.py").write_text("def mul(a, b):\n    return a * b\n")
    (adder_workspace / "notes.txt").write_text("scratch\n")
    # The first grade's session started the far agent: the second goes to it, through the shared connection.
    assert far["sent"]["via"] == "ssh"
    agent_pid = _agent(remote.far_root)
    second = run_cli("grade", "--on", "box", "--json")
    data = second.json()["data"]
    assert second.exit_code == 0, second
    assert data["sent"] == {
        "changed": 3,
        "deleted": 0,
        "bytes": data["sent"]["bytes"],
        "installed": False,
        "via": "agent",
    }
    assert "installing roadmap" not in second.stderr and "far agent" not in second.stderr
    assert _agents(remote.far_root) == [agent_pid]
    sock = remote.far_root / "agents" / (next(remote.far_root.glob("agents/*.sock")).name)
    assert sock.stat().st_mode & 0o777 == 0o600 and sock.parent.stat().st_mode & 0o777 == 0o700
    # Marked from the remote's grade, as a local one would; the GPU part is not graded there (a CPU box).
    assert set(data["checkpoints_marked"]) == {"fake-add", "fake-mul"}
    assert data["not_graded_here"] == ["gpu"]
    (adder_workspace / "notes.txt").unlink()
    third = run_cli("grade", "--on", "box", "--json").json()["data"]
    assert (third["sent"]["changed"], third["sent"]["deleted"], third["sent"]["via"]) == (0, 1, "agent")
    # The far agent's grade equals a local one test by test too.
    assert sorted((t["nodeid"], t["outcome"]) for t in third["tests"]) == sorted(
        (t["nodeid"], t["outcome"]) for t in run_cli("grade", "--json").json()["data"]["tests"]
    )
    far_ws = next(p for p in (remote.far_root / "work").glob("*/adder-*") if p.is_dir())
    assert not (far_ws / "notes.txt").exists() and (far_ws / "mul.py").read_text().endswith("a * b\n")

    import sqlite3

    rows = (
        sqlite3.connect(roadmap_home / "roadmap.db")
        .execute("SELECT graded_on, outcome FROM grade_attempts ORDER BY id")
        .fetchall()
    )
    assert rows == [("box", "failed"), (None, "failed"), ("box", "passed"), ("box", "passed"), (None, "passed")]
    # `lab history` says where each attempt was graded (newest first).
    history = run_cli("lab", "history", "--json").json()["data"]["attempts"]
    assert [a["graded_on"] for a in history] == [None, "box", "box", None, "box"]
    assert run_cli("lab", "history").stdout.count("on remote box") == 3


def test_unknown_remote_is_one_line_with_did_you_mean(remote, run_cli):
    result = run_cli("grade", "--on", "bx")
    assert result.exit_code == 2 and "unknown remote 'bx' (did you mean 'box'?)" in result.stderr, result
    assert "Traceback" not in result.stderr


def test_unreachable_remote_is_exit_5(remote, run_cli):
    from sshd import free_port

    run_cli("remote", "add", "gone", f"ssh://{remote.user}@127.0.0.1:{free_port()}")
    result = run_cli("grade", "--on", "gone")
    assert result.exit_code == 5 and "cannot reach remote 'gone'" in result.stderr, result
    assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("how", ["kill-ssh", "kill-master", "kill-client", "ctrl-c"])
def test_a_killed_connection_or_ctrl_c_is_interrupted_and_leaves_nothing_running(
    remote, run_cli, adder_workspace: Path, roadmap_home: Path, how: str, monkeypatch: pytest.MonkeyPatch
):
    """Mid-grade, the ssh client of a grade's own session is killed (agents off: the login path; one line,
    exit 5), or the shared connection is (the far agent's path; the same), or the near process dies
    (SIGKILL: nothing is recorded), or the learner presses Ctrl-C (exit 130): the attempt is interrupted,
    and no process of the grade is left on the far side (the far agent cancels a grade whose client went)."""
    if how == "kill-ssh":
        monkeypatch.setenv("ROADMAP_FAR_AGENT", "0")
    assert run_cli("grade", "--on", "box").exit_code == 1  # set up (venv, files, the far agent) first
    if how != "kill-ssh":
        _agent(remote.far_root)
    # A grade that never ends by itself: mul sleeps, so the kill lands while tests run.
    (adder_workspace / "mul.py").write_text("import time\n\ndef mul(a, b):\n    time.sleep(60)\n    return a * b\n")
    env = dict(os.environ, ROADMAP_SSH_CONFIG=str(remote.client_config))
    proc = subprocess.Popen(
        [sys.executable, "-m", "roadmap_cli", "grade", "--on", "box"],
        cwd=adder_workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    target = None
    while time.monotonic() < deadline and target is None:
        time.sleep(0.2)
        if any("pytest" in p or "grade" in p for p in _far_processes(remote.far_root)):
            if how == "kill-ssh":
                target = next(
                    (int(p) for p in os.listdir("/proc") if p.isdigit() and _is_ssh_child(int(p), proc.pid)), None
                )
            elif how == "kill-master":
                target = next(iter(_masters(roadmap_home)), None)
            else:
                target = proc.pid
    assert target is not None, "the far grade never started"
    agents = _agents(remote.far_root)
    time.sleep(1.0)
    os.kill(target, signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    if how == "kill-client":
        assert proc.returncode == -signal.SIGKILL
        assert _wait_for(lambda: _far_processes(remote.far_root) == [], 15), _far_processes(remote.far_root)
        assert _agents(remote.far_root) == agents  # the far agent itself lives on
        return
    if how in ("kill-ssh", "kill-master"):
        assert proc.returncode == 5, err
        assert "connection to remote 'box' was lost" in err and "recorded as interrupted" in err
        assert err.count("error:") == 1
    else:
        assert proc.returncode == 130, err
        assert "stopping the grade on box" in err
    assert "Traceback" not in err
    deadline = time.monotonic() + 15
    while _far_processes(remote.far_root) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _far_processes(remote.far_root) == []
    import sqlite3

    last = (
        sqlite3.connect(roadmap_home / "roadmap.db")
        .execute("SELECT outcome, score, graded_on FROM grade_attempts ORDER BY id DESC LIMIT 1")
        .fetchone()
    )
    assert last == ("interrupted", 0.0, "box")
    if how == "ctrl-c":
        assert _agents(remote.far_root) == agents  # it cancelled the grade, and serves the next


def test_a_dead_far_agent_falls_back_to_a_login_and_remote_remove_stops_it(remote, run_cli, roadmap_home: Path):
    assert run_cli("grade", "--on", "box").exit_code == 1
    first = _agent(remote.far_root)
    os.kill(first, signal.SIGKILL)  # an OOM kill: its socket is left behind, the shared connection forwards to it
    assert _wait_for(lambda: first not in _agents(remote.far_root))
    result = run_cli("grade", "--on", "box", "--json")
    assert result.exit_code == 1 and result.json()["data"]["sent"]["via"] == "ssh", result
    assert result.stderr.count("the far agent on box did not answer: grading through a new ssh session") == 1
    assert "Traceback" not in result.stderr
    # That session started a new agent; the next grade reaches it.
    assert _agent(remote.far_root) != first
    again = run_cli("grade", "--on", "box", "--json")
    assert again.json()["data"]["sent"]["via"] == "agent" and "far agent" not in again.stderr, again
    assert run_cli("remote", "remove", "box").exit_code == 0
    assert _wait_for(lambda: _agents(remote.far_root) == [], 15)
    assert not list(remote.far_root.glob("agents/*.sock"))
    run_cli("remote", "add", "box", remote.url, "--python", sys.executable)  # for the fixture's teardown


def test_the_far_agent_refuses_another_user(remote, run_cli):
    """Its socket is 0600 in a 0700 folder; and a peer of another uid (SO_PEERCRED) gets nothing."""
    assert run_cli("grade", "--on", "box").exit_code == 1
    _agent(remote.far_root)
    sock_path = next(remote.far_root.glob("agents/*.sock"))
    assert sock_path.stat().st_mode & 0o777 == 0o600 and sock_path.parent.stat().st_mode & 0o777 == 0o700
    if os.getuid() != 0:
        pytest.skip("connecting as another user needs root here")
    import tempfile

    python = "/usr/bin/python3"  # one the other user can run (this test's may sit in a folder only we can read)
    if not os.access(python, os.X_OK):
        pytest.skip("no /usr/bin/python3 to connect as another user")

    def as_nobody() -> None:
        os.setgid(65534)
        os.setuid(65534)

    code = (
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n"
        "try:\n    s.sendall(b'{\"stop\": true}\\n')\n    print(repr(s.recv(100)))\n"
        "except (ConnectionResetError, BrokenPipeError):\n    print(\"b''\")\n"
    )
    # Only for the test, a second name for the socket that the other user may open (mode 0666, in a folder they
    # can search): the uid check alone must refuse them.
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        os.chmod(tmp, 0o755)
        link = Path(tmp) / "agent.sock"
        try:
            os.link(sock_path, link)
        except OSError as exc:
            pytest.skip(f"cannot link the socket where another user can reach it: {exc}")
        link.chmod(0o666)
        try:
            proc = subprocess.run(
                [python, "-c", code, str(link)],
                preexec_fn=as_nobody,
                cwd="/",
                capture_output=True,
                text=True,
                timeout=30,
            )
        finally:
            sock_path.chmod(0o600)
    # Closed (or reset) without a word, whether before the request was written (broken pipe) or after: not stopped.
    assert proc.stdout.strip() == "b''", proc
    assert len(_agents(remote.far_root)) == 1


def _is_ssh_child(pid: int, parent: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return int(stat.rsplit(")", 1)[1].split()[1]) == parent and cmd.endswith(b"ssh")


def test_a_result_signed_with_another_key_is_not_recorded(remote, run_cli, roadmap_home: Path):
    assert run_cli("grade", "--on", "box").exit_code == 1
    # This side's key changes (as if the far side's answer were forged by someone without the key).
    (roadmap_home / "remote-keys" / "box").write_text(os.urandom(32).hex() + "\n")
    # The far side has a key file under the new id only if it is sent: it is (a new key id), so the grade signs
    # with the new key and passes; break the far copy instead to simulate a forger without the key.
    import hashlib

    new_key = bytes.fromhex((roadmap_home / "remote-keys" / "box").read_text().strip())
    far_key = remote.far_root / "home" / "keys" / hashlib.sha256(new_key).hexdigest()[:16]
    far_key.parent.mkdir(parents=True, exist_ok=True)
    far_key.write_text(os.urandom(32).hex() + "\n")
    result = run_cli("grade", "--on", "box")
    assert result.exit_code == 5 and "not signed with its key" in result.stderr, result
    import sqlite3

    count = sqlite3.connect(roadmap_home / "roadmap.db").execute("SELECT count(*) FROM grade_attempts").fetchone()
    assert count == (1,)


def test_grades_share_one_ssh_connection_a_stale_socket_is_harmless_and_remove_closes_it(
    remote, run_cli, roadmap_home: Path
):
    from roadmap_cli.grading.remote import registry

    box = registry.get(roadmap_home, "box")
    control = registry.control_path(roadmap_home, box)
    assert control is not None and control.parent.stat().st_mode & 0o777 == 0o700
    assert run_cli("grade", "--on", "box").exit_code == 1
    masters = _masters(roadmap_home)
    assert len(masters) == 1 and control.exists()
    assert run_cli("grade", "--on", "box").exit_code == 1
    assert _masters(roadmap_home) == masters  # the second grade went through the same connection
    # The master dies (a reboot, an OOM kill): its socket is left behind, and the next grade still works.
    os.kill(masters[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _masters(roadmap_home) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert control.exists()
    assert run_cli("grade", "--on", "box").exit_code == 1
    assert len(_masters(roadmap_home)) == 1
    assert run_cli("remote", "remove", "box").exit_code == 0
    deadline = time.monotonic() + 10
    while _masters(roadmap_home) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _masters(roadmap_home) == [] and not control.exists()


def test_the_ssh_session_opens_before_the_command_line_is_parsed(
    remote, run_console_script, monkeypatch: pytest.MonkeyPatch
):
    """The console script (roadmap_cli/entry.py) opens the grade's ssh session before typer parses
    (grading/remote/near.start_early), and grade_on takes that very session: one session per grade, opened early."""
    from roadmap_cli.grading.remote import near

    openers: list[str] = []
    real = near._Opened.__init__

    def spy(self, *args, **kwargs):
        openers.append(sys._getframe(1).f_code.co_name)
        real(self, *args, **kwargs)

    monkeypatch.setattr(near._Opened, "__init__", spy)
    assert run_console_script("grade", "--on", "box", "--part", "mul").exit_code == 1
    assert openers == ["start_early"] and near._early is None
    # An option --on refuses: nothing is opened early, and the refusal is one line.
    result = run_console_script("grade", "--on", "box", "-x")
    assert result.exit_code == 2 and openers == ["start_early"] and "Traceback" not in result.stderr


def test_watch_on_regrades_there_on_every_save_sending_only_the_changed_file(
    remote, adder_workspace: Path, roadmap_home: Path
):
    pexpect = pytest.importorskip("pexpect")
    pytest.importorskip("watchfiles")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "roadmap_cli", "watch", "--on", "box"],
        cwd=str(adder_workspace),
        env=dict(os.environ),
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect("watching adder")
        child.expect(r"first grade on box: all parts")
        # The starter fails; the CPU remote cannot grade the GPU part. The footer says where it ran.
        child.expect(
            r"attempt #1 · [\d.]+s · graded remotely on box \(" + f"{remote.user}@127.0.0.1:{remote.port}" + r"\)"
        )
        tmp = adder_workspace / "adder.new"
        tmp.write_text("def add(a, b):\n    return a + b\n")
        os.replace(tmp, adder_workspace / "adder.py")
        child.expect(r"grading part add \(saved adder.py\)")
        child.expect(r"sending 1 changed file\(s\)")
        child.expect(r"✓ add: passed")
        child.expect(r"attempt #2")
        child.expect(r"grading part mul \(next part: mul\)")
        child.expect(r"attempt #3")
        child.send("q")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    deadline = time.monotonic() + 15
    while _far_processes(remote.far_root) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _far_processes(remote.far_root) == []
    import sqlite3

    rows = (
        sqlite3.connect(roadmap_home / "roadmap.db")
        .execute("SELECT graded_on, outcome FROM grade_attempts ORDER BY id")
        .fetchall()
    )
    assert rows == [("box", "failed"), ("box", "passed"), ("box", "failed")]


def test_remote_check_after_a_first_grade_probes_the_managed_venv(remote, run_cli, roadmap_home: Path):
    """Before any grade, `remote check` probes the far python (test_grade_on_bare.py); after the first
    `grade --on` made the managed venv, it probes that venv (what every later grade runs with), and says so."""
    assert run_cli("grade", "--on", "box").exit_code == 1
    after = run_cli("remote", "check", "box", "--json")
    assert after.exit_code == 0, after
    data = after.json()["data"]
    venv = next(remote.far_root.glob("envs/*/ready")).parent
    assert data["executable"] == str(venv / "bin" / "python") and data["managed_venv"] == str(venv), data
    assert data["torch"] and data["torch_install"] is None  # the venv's torch, nothing left to install
    out = run_cli("remote", "check", "box").stdout
    assert f"managed venv {venv}" in out, out


def test_remote_remove_stops_the_far_agent_even_when_the_shared_connection_is_closed(
    remote, run_cli, roadmap_home: Path
):
    from roadmap_cli.grading.remote import registry

    assert run_cli("grade", "--on", "box").exit_code == 1
    agent = _agent(remote.far_root)
    box = registry.get(roadmap_home, "box")
    registry.close_shared(roadmap_home, box)  # ControlPersist ran out, or the laptop slept: no shared connection
    assert _wait_for(lambda: _masters(roadmap_home) == [], 10)
    result = run_cli("remote", "remove", "box", "--json")
    assert result.exit_code == 0, result
    assert result.json()["data"]["far_agent"] == "stopped"
    assert _wait_for(lambda: agent not in _agents(remote.far_root), 15), _agents(remote.far_root)
    assert _masters(roadmap_home) == []  # the login that stopped it left no connection behind
    run_cli("remote", "add", "box", remote.url, "--python", sys.executable)  # for the fixture's teardown


def test_remote_remove_of_an_unreachable_host_removes_it_and_says_so_in_one_line(remote, run_cli, roadmap_home: Path):
    from sshd import free_port

    assert run_cli("grade", "--on", "box").exit_code == 1
    _agent(remote.far_root)
    # The box moved (or is down): its agent cannot be reached to be stopped.
    run_cli(
        "remote", "add", "box", f"ssh://{remote.user}@127.0.0.1:{free_port()}", "--replace", "--python", sys.executable
    )
    from roadmap_cli.grading.remote import session

    assert session.agent_state(roadmap_home, remotes_get(roadmap_home, "box")).get("socket")
    result = run_cli("remote", "remove", "box")
    assert result.exit_code == 0, result
    assert "Removed remote box" in result.stdout
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "could not reach box to stop its far agent" in lines[0], result.stderr
    assert "stops by itself after 15 idle minutes" in lines[0] and "Traceback" not in result.stderr
    assert run_cli("remote", "list", "--json").json()["data"]["remotes"] == []
    for pid in _agents(remote.far_root):  # the test's own far agent: not left for the next tests
        os.kill(pid, signal.SIGTERM)
    run_cli("remote", "add", "box", remote.url, "--python", sys.executable)  # for the fixture's teardown


def remotes_get(home: Path, name: str):
    from roadmap_cli.grading.remote import registry

    return registry.get(home, name)
