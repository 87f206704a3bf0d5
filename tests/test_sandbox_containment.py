"""Learner code is fully contained (issue 12 item 2): whatever it starts —
a process in its own session, a double-forked sleeper, a child that ignores
SIGTERM — is gone once `roadmap grade` returns (after a normal end, a
timeout or Ctrl-C), and the attempt is still recorded. Checked by scanning
/proc for a marker that only those processes carry in their command line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"

SLEEPER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"

ESCAPES = {
    # A child that starts its own session: a process-group kill misses it.
    "setsid": """
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.execv(sys.executable, [sys.executable, "-c", SLEEPER, MARKER])
    """,
    # Fork, fork again, the middle one exits: the sleeper is an orphan.
    "double-fork": """
        pid = os.fork()
        if pid == 0:
            if os.fork() == 0:
                os.setsid()
                os.execv(sys.executable, [sys.executable, "-c", SLEEPER, MARKER])
            os._exit(0)
        os.waitpid(pid, 0)
    """,
    # A plain child that ignores SIGTERM (only SIGKILL ends it).
    "ignores-sigterm": """
        subprocess.Popen([sys.executable, "-c", SLEEPER, MARKER], start_new_session=True)
    """,
}


def marked_processes(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line or environment holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            blob = b""
            for what in ("cmdline", "environ"):
                try:
                    with open(f"/proc/{name}/{what}", "rb") as fh:
                        blob += fh.read()
                except OSError:
                    pass
        except (OSError, IndexError):
            continue
        if marker.encode() in blob:
            found.append(int(name))
    return found


def learner_source(escape: str, marker: str, *, then: str = "return a + b") -> str:
    return (
        textwrap.dedent(f"""
        import os, subprocess, sys
        MARKER = {marker!r}
        SLEEPER = {SLEEPER!r}
        STARTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "escaped.flag")

        def add(a, b):
            if not os.path.exists(STARTED):
                open(STARTED, "w").close()
    """)
        + textwrap.indent(textwrap.dedent(ESCAPES[escape]), "        ")
        + f"    {then}\n"
    )


@pytest.fixture
def adder_ws(adder_workspace: Path) -> Path:  # tests/conftest.py
    return adder_workspace


@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_no_process_survives_a_grade(run_cli, adder_ws: Path, escape: str) -> None:
    marker = f"roadmap-escape-{uuid.uuid4().hex}"
    (adder_ws / "adder.py").write_text(learner_source(escape, marker))
    result = run_cli("grade", "--part", "add", "--json")
    assert result.exception is None, result
    assert (adder_ws / "escaped.flag").exists(), "the escape never ran"
    assert marked_processes(marker) == []
    assert result.json()["data"]["outcome"] == "part-passed", [t["message"] for t in result.json()["data"]["tests"]]
    history = run_cli("lab", "status", "adder", "--json").json()["data"]["labs"][0]["history"]
    assert history and history[0]["outcome"] == "part-passed"


def test_no_process_survives_a_timeout(run_cli, adder_ws: Path) -> None:
    marker = f"roadmap-escape-{uuid.uuid4().hex}"
    (adder_ws / "adder.py").write_text(learner_source("double-fork", marker, then="while True: pass"))
    result = run_cli("grade", "--part", "add", "--timeout", "4", "--json")
    assert result.json()["data"]["outcome"] == "timeout", result
    assert (adder_ws / "escaped.flag").exists()
    assert marked_processes(marker) == []
    history = run_cli("lab", "status", "adder", "--json").json()["data"]["labs"][0]["history"]
    assert history[0]["outcome"] == "timeout"


def test_no_process_survives_ctrl_c(adder_ws: Path, tmp_path: Path) -> None:
    marker = f"roadmap-escape-{uuid.uuid4().hex}"
    (adder_ws / "adder.py").write_text(learner_source("setsid", marker, then="while True: pass"))
    env = dict(os.environ, ROADMAP_LABS_DIR=str(FIXTURES / "labs"), ROADMAP_DEVICE="cpu")
    proc = subprocess.Popen(
        [sys.executable, "-m", "roadmap_cli", "grade", "--part", "add"],
        cwd=adder_ws,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked_processes(marker), "the escape never started"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert marked_processes(marker) == []


def test_a_stopped_supervisor_does_not_let_anything_escape(run_cli, adder_ws: Path) -> None:
    # The learner's code freezes the supervisor (SIGSTOP: same user, no
    # capability needed), starts a sleeper in its own session and spins:
    # at the timeout the engine kills the supervisor's whole tree itself.
    marker = f"roadmap-escape-{uuid.uuid4().hex}"
    source = learner_source("setsid", marker, then="while True: pass")
    source = source.replace(
        "    if not os.path.exists(STARTED):",
        textwrap.indent(
            textwrap.dedent("""
        with open(f"/proc/{os.getppid()}/stat") as fh:      # the grader's parent: the supervisor
            supervisor = int(fh.read().rsplit(")", 1)[1].split()[1])
        os.kill(supervisor, 19)                            # SIGSTOP
        if not os.path.exists(STARTED):"""),
            "    ",
        ),
        1,
    )
    (adder_ws / "adder.py").write_text(source)
    result = run_cli("grade", "--part", "add", "--timeout", "4", "--json")
    assert result.json()["data"]["outcome"] in ("timeout", "crash"), result
    # Behind the OS wall the supervisor is outside the learner's pid namespace: "its parent" is the namespace's
    # own init, so the SIGSTOP never reaches the engine's side and the escape may not even start. Without the
    # wall the attack runs in full. Either way the engine's timer ends the grade and nothing is left.
    if result.json()["data"]["sandbox"] != "strong":
        assert (adder_ws / "escaped.flag").exists()
    assert marked_processes(marker) == []


def test_a_killed_supervisor_does_not_let_marked_processes_escape(run_cli, adder_ws: Path) -> None:
    # The learner's code SIGKILLs the supervisor: its orphans go to init, out
    # of the supervisor's reach. The engine still finds them by the grade's
    # mark in their environment.
    marker = f"roadmap-escape-{uuid.uuid4().hex}"
    source = learner_source("double-fork", marker)
    source = source.replace(
        "    if not os.path.exists(STARTED):",
        textwrap.indent(
            textwrap.dedent("""
        if not os.path.exists(STARTED):
            with open(f"/proc/{os.getppid()}/stat") as fh:
                supervisor = int(fh.read().rsplit(")", 1)[1].split()[1])
    """),
            "    ",
        )
        + "    if not os.path.exists(STARTED):",
        1,
    )
    source = source.replace("        os.waitpid(pid, 0)", "        os.waitpid(pid, 0)\n        os.kill(supervisor, 9)")
    (adder_ws / "adder.py").write_text(source)
    result = run_cli("grade", "--part", "add", "--timeout", "20", "--json")
    assert result.json()["data"]["outcome"] != "passed", result
    assert (adder_ws / "escaped.flag").exists()
    assert marked_processes(marker) == []
