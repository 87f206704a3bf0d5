"""The OS wall around learner code (issue 25 item 1; grading_kit/oswall.py).

A learner's `adder.py` looks around at import time, from inside the learner
process, and writes what it saw into the workspace (the one place it may
write). Behind bubblewrap it walks the whole file system and finds exactly
the allow-list (issue 35 item 1): no project, no data home, no real home, no
credential; it is uid 1000 with an empty HOME, alone in its pid namespace,
and in a network namespace of its own (item 2). Without
bubblewrap the grade still runs, in the in-process sandbox, and every place
that shows the attempt says "weak".

Where bwrap is missing these tests skip, except under ROADMAP_REQUIRE_BWRAP=1
(CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"
RIGHT_ADD = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the fixture project (labs/, kernels/) with a .git folder, like a checkout."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(root / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    yield root
    detect_device.cache_clear()


@pytest.fixture
def workspace(run_cli, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    shutil.copy(project / "kernels" / "mul.py", ws / "mul.py")
    monkeypatch.chdir(ws)
    return ws


def _looking_adder(project: Path, home: Path, stop: list[str], tcp_port: int, abstract: str) -> str:
    """A right `add`, preceded by code that records what the learner process
    can see and do: it walks the whole file system (not into `stop`, the big
    read-only trees the wall grants: /usr, the Python runtime), tries the
    host's listeners, and looks through a shell whose command line never
    names a reference path (the in-process audit hook would void the attempt
    for that): only the wall can stop these."""
    probe = f"""
        import json, os, socket, subprocess, sys
        project, home, stop = {str(project)!r}, {str(home)!r}, set({stop!r})
        def listing(path):
            try:
                return sorted(os.listdir(path))
            except OSError as exc:
                return type(exc).__name__
        leaves = []
        def walk(path):
            if path in stop or path in ("/proc", "/dev"):
                leaves.append(path)
                return
            try:
                entries = sorted(os.scandir(path), key=lambda e: e.name)
            except OSError as exc:
                leaves.append(path + " !" + type(exc).__name__)
                return
            if not entries:
                leaves.append(path.rstrip("/") + "/")  # an empty folder
            for entry in entries:
                child = os.path.join(path, entry.name)
                if entry.is_dir(follow_symlinks=False):
                    walk(child)
                else:
                    leaves.append(child)
        walk("/")
        seen = {{"leaves": leaves, "project": listing(project), "home": listing(home),
                 "uid": [os.getuid(), os.getgid()], "HOME": os.environ.get("HOME"),
                 "home_listing": listing(os.path.expanduser("~")),
                 "secret_env": sorted(k for k in os.environ if "PASS" in k or "SECRET" in k)}}
        import sys  # the grader's adapter, as the learner process preloaded it: from the shim
        seen["shim"] = listing(os.path.dirname(sys.modules["adapter"].__file__))
        import roadmap_cli
        package = os.path.dirname(roadmap_cli.__file__)
        seen["data_copies"] = [listing(os.path.join(p, "roadmap_cli", "_data")) for p in sys.path
                               if os.path.isdir(os.path.join(p, "roadmap_cli", "_data"))]
        # Plant a module in the installed package, through a shell (no audit hook): the file system refuses.
        plant = subprocess.run(["sh", "-c", 'echo "x = 1" > "$0/planted_by_learner.py"', package],
                               capture_output=True, text=True)
        seen["plant"] = [plant.returncode, plant.stderr.strip()]
        seen["pid1"] = open("/proc/1/comm").read().strip()
        seen["processes"] = sum(1 for p in os.listdir("/proc") if p.isdigit())
        # The host's listeners: TCP on 127.0.0.1 and an abstract unix socket.
        def reach(family, address):
            s = socket.socket(family, socket.SOCK_STREAM)
            s.settimeout(3)
            try:
                s.connect(address)
                s.sendall(b"from the learner")
                return "connected"
            except OSError as exc:
                return type(exc).__name__
            finally:
                s.close()
        seen["tcp"] = reach(socket.AF_INET, ("127.0.0.1", {tcp_port}))
        seen["abstract"] = reach(socket.AF_UNIX, "\\0" + {abstract!r})
        # Its own loopback works: a lab's server or gloo ranks on 127.0.0.1.
        own = socket.socket(); own.bind(("127.0.0.1", 0)); own.listen(1)
        seen["own_loopback"] = reach(socket.AF_INET, own.getsockname())
        with open("view.json", "w") as fh:
            json.dump(seen, fh)
    """
    return textwrap.dedent(probe) + "\n" + RIGHT_ADD


def _allowed(spec, workspace: Path, scratch: str, shim: str) -> tuple[dict, list[str]]:
    """The view this grade's learner had (grading/isolation.py), and every path it grants."""
    from roadmap_cli.grading import isolation
    from roadmap_cli.grading_kit import oswall

    from roadmap_cli.grading_kit import learner_extras

    grants = isolation.learner_grants(spec, str(workspace), scratch, shim)
    grants += [("read_write", path, "GPU build folders") for path in learner_extras.extra_rw_dirs(str(workspace))]
    view = isolation._view([spec], grants)
    rows = oswall.describe(view)
    return view, [path for access, path, _ in rows if access != "network"]


def test_behind_the_wall_learner_code_sees_only_the_allow_list(
    run_cli, wall, project, workspace, roadmap_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket
    import threading

    from roadmap_cli.labs.spec import find_lab

    # What the grading user has that learner code must never see: a credential in the real home, one in the
    # environment, a sibling folder of the workspace, and listeners on the host.
    real_home = tmp_path / "realhome"
    real_home.mkdir()
    (real_home / ".pgpass").write_text("localhost:5432:*:owner:hunter2\n")
    monkeypatch.setenv("HOME", str(real_home))
    monkeypatch.setenv("PGPASSWORD", "hunter2")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.txt").write_text("not for learners")
    tcp = socket.create_server(("127.0.0.1", 0))
    abstract_name = f"roadmap-wall-test-{os.getpid()}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + abstract_name)
    unix.listen(1)
    accepted: list[str] = []

    def accept(server: socket.socket) -> None:
        server.settimeout(30)
        try:
            accepted.append(str(server.accept()[1]))
        except OSError:
            pass

    threads = [threading.Thread(target=accept, args=(srv,), daemon=True) for srv in (tcp, unix)]
    for thread in threads:
        thread.start()
    from roadmap_cli.grading_kit import oswall

    stop = [path for kind, path, _ in oswall.system_grants() if kind == "ro"] + oswall.python_runtime()
    (workspace / "adder.py").write_text(
        _looking_adder(project, roadmap_home, stop, tcp.getsockname()[1], abstract_name)
    )
    try:
        result = run_cli("grade", "--part", "add", "--json")
    finally:
        tcp.close()
        unix.close()
    data = result.json()["data"]
    assert data["sandbox"] == "strong", (data.get("message"), data.get("log_tail"), data["tests"][:2])
    # A right solution still passes behind the wall.
    assert data["parts"][0]["status"] == "passed", [t["message"] for t in data["tests"]][:1]
    seen = json.loads((workspace / "view.json").read_text())

    # The walk: every file or empty folder found lies in what the allow-list grants, and all of it was found.
    import re

    scratch = next(m.group(0) for p in seen["leaves"] if (m := re.match(r".*/roadmap-grade-[^/]+", p)))
    shim = next(os.path.dirname(p) for p in seen["leaves"] if p.endswith("/adapter.py") and "learner-shim-" in p)
    view, allowed = _allowed(find_lab("adder"), workspace, scratch, shim)
    hidden = [os.path.realpath(p) for p in view["hide"]]
    outside = [
        leaf
        for leaf in seen["leaves"]
        if not any(leaf.rstrip("/") == a or leaf.startswith(a.rstrip("/") + "/") for a in allowed)
    ]
    assert outside == [], outside
    for path in hidden:  # absent inside what is granted: an empty folder at most
        assert not any(leaf.startswith(path + "/") and leaf != path + "/" for leaf in seen["leaves"]), path
    reached = [
        a
        for a in allowed
        if any(leaf.rstrip("/") == a or leaf.startswith(a.rstrip("/") + "/") for leaf in seen["leaves"])
    ]
    missing = sorted(
        set(allowed) - set(reached) - {"/dev/shm"} - {a for a in allowed if not os.path.lexists(a)} - set(hidden)
    )
    assert missing == [], missing  # the comparison is with what the learner really had, not with nothing
    assert not any(".pgpass" in leaf or "elsewhere" in leaf for leaf in seen["leaves"])
    # The project (labs, kernels, .git), the data home and the real home: not there at all.
    assert seen["project"] == "FileNotFoundError" and seen["home"] == "FileNotFoundError", seen
    assert seen["data_copies"] in ([], [[]]) and seen["home_listing"] == [], seen
    # Not root, an empty HOME of its own, no credential in the environment.
    assert seen["uid"] == [1000, 1000] and seen["HOME"] == "/home/learner" and seen["secret_env"] == [], seen
    # The adapter and the lab's declared learner-side helper (lab.yaml learner_side), nothing else of tests/.
    assert seen["shim"] == ["adapter.py", "given.py"], seen
    import roadmap_cli

    planted = Path(roadmap_cli.__file__).parent / "planted_by_learner.py"
    assert seen["plant"][0] != 0 and "Read-only file system" in seen["plant"][1], seen
    assert not planted.exists()
    # Its own pid namespace: bwrap's init is pid 1 and only a handful of processes exist in it.
    assert seen["pid1"] == "bwrap" and seen["processes"] < 10, seen
    # Its own network: the host's listeners are unreachable, its own loopback works.
    assert seen["tcp"] == "ConnectionRefusedError" and seen["abstract"] == "ConnectionRefusedError", seen
    assert seen["own_loopback"] == "connected" and accepted == [], (seen, accepted)
    # The attempt says so, in history too.
    history = run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"]
    assert history[0]["sandbox"] == "strong"


def test_without_bubblewrap_the_grade_runs_weak_and_says_so(
    run_cli, project, workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roadmap_cli.grading_kit import oswall

    monkeypatch.setenv("ROADMAP_SANDBOX", "weak")
    monkeypatch.delenv("ROADMAP_REQUIRE_BWRAP", raising=False)
    (workspace / "adder.py").write_text(RIGHT_ADD)
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert data["sandbox"] == "weak" and data["parts"][0]["status"] == "passed"
    text = run_cli("grade", "--part", "add")
    assert "weak sandbox" in text.stdout
    history = run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"]
    assert [a["sandbox"] for a in history] == ["weak", "weak"]
    assert "weak sandbox" in run_cli("lab", "history", "adder").stdout
    from roadmap_cli.formats.timeutil import local_today

    report = run_cli("report", "--month", local_today().strftime("%Y-%m"))
    assert report.exit_code == 0 and "weak sandbox (graded without bubblewrap)" in report.stdout, report
    oswall._probe.cache_clear()


def test_requiring_bubblewrap_where_it_is_missing_refuses_the_grade(
    run_cli, project, workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roadmap_cli.grading_kit import oswall

    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap on PATH
    monkeypatch.setenv("ROADMAP_REQUIRE_BWRAP", "1")
    monkeypatch.delenv("ROADMAP_SANDBOX", raising=False)
    oswall._probe.cache_clear()
    try:
        result = run_cli("grade", "--part", "add")
    finally:
        oswall._probe.cache_clear()
    assert result.exit_code == 4 and "bubblewrap (bwrap) is not installed" in result.stderr, result
    assert "Traceback" not in result.stderr


def test_mounts_are_ordered_by_depth_so_a_hidden_folder_inside_a_writable_one_stays_hidden(tmp_path: Path) -> None:
    from roadmap_cli.grading_kit.oswall import _mounts

    (tmp_path / "ws" / "home").mkdir(parents=True)
    (tmp_path / "ws" / "shim").mkdir(parents=True)
    (tmp_path / "labs" / "x" / "tests").mkdir(parents=True)
    (tmp_path / "nowhere").mkdir()
    view = {
        "hide": [str(tmp_path / "ws" / "home"), str(tmp_path / "labs"), str(tmp_path / "nowhere")],
        "read_only": [str(tmp_path / "labs" / "x" / "tests"), str(tmp_path / "ws" / "shim")],
        "read_write": [str(tmp_path / "ws")],
    }
    order = [(kind, Path(path).relative_to(tmp_path).as_posix()) for kind, path in _mounts(view)]
    # A grant inside a writable folder is dropped (the learner could swap it for a link before the next bwrap);
    # a hidden path outside every grant is absent already.
    assert order == [("read_write", "ws"), ("hide", "ws/home"), ("read_only", "labs/x/tests")]


def test_doctor_sandbox_prints_the_allow_list(run_cli, wall) -> None:
    data = run_cli("doctor", "--sandbox", "--json").json()["data"]
    assert data["sandbox"] == "strong" and data["uid"] == 1000
    rows = {(row["access"], row["path"]) for row in data["view"]}
    assert {
        ("read-write", "<workspace>"),
        ("read-write", "<grade scratch>"),
        ("read-only", "/usr"),
        ("private", "/home/learner"),
        ("absent", "<workspace>/.git"),
        ("network", "lo"),
    } <= rows, rows
    # Nothing of the real home, /var or the data home is granted.
    assert not any(path in ("/root", "/var", "/home", os.path.expanduser("~")) for _, path in rows), rows
    text = run_cli("doctor", "--sandbox").stdout
    assert "nothing else exists" in text and "<workspace>" in text


def test_a_hidden_folder_may_hold_a_hidden_folder_and_a_granted_one(wall, tmp_path: Path) -> None:
    """A wheel install hides roadmap_cli/_data and, inside it, _data/labs and _data/kernels; a source checkout
    grants a lab's data/ inside its hidden labs/. Both need mount points made inside a hidden (empty) folder,
    which bwrap cannot do once that folder is read-only: the read-only remounts come last."""
    import subprocess

    data = tmp_path / "site" / "roadmap_cli" / "_data"
    (data / "kernels").mkdir(parents=True)
    (data / "labs" / "lab" / "data").mkdir(parents=True)
    (data / "kernels" / "ref.py").write_text("SECRET = 1\n")
    (data / "labs" / "lab" / "data" / "corpus.txt").write_text("input\n")
    view = {
        "read_only": [*wall.python_runtime(), str(tmp_path / "site"), str(data / "labs" / "lab" / "data")],
        "hide": [str(data), str(data / "kernels"), str(data / "labs")],
        "read_write": [],
    }
    script = (
        f"import os; print(os.listdir({str(data / 'kernels')!r})); "
        f"print(open({str(data / 'labs' / 'lab' / 'data' / 'corpus.txt')!r}).read().strip()); "
        f"print(os.path.exists({str(data / 'kernels' / 'ref.py')!r}))"
    )
    import sys

    with wall.walled([sys.executable, "-c", script], view) as (argv, fds):
        proc = subprocess.run(argv, pass_fds=fds, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listing, corpus, secret = proc.stdout.split("\n")[:3]
    assert (listing, corpus, secret) == ("[]", "input", "False")


def test_the_grader_never_follows_a_link_out_of_the_workspace(tmp_path: Path) -> None:
    """Learner code may swap a workspace file for a link to anywhere the grading user can read, for a grader
    test (outside the wall) to quote back; the grader's audit hook refuses such an open."""
    from roadmap_cli.grading.plugin import refuse_links_out_of

    ws = tmp_path / "linkws"
    ws.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    (ws / "answer.py").symlink_to(secret)
    (ws / "inside.py").symlink_to(ws / "real.py")
    (ws / "real.py").write_text("x = 1\n")
    assert (ws / "answer.py").read_text() == "hunter2"  # without the hook
    refuse_links_out_of(str(ws))  # (an audit hook stays for the process: it only concerns this folder)
    with pytest.raises(PermissionError, match="link out of the learner"):
        (ws / "answer.py").read_text()
    assert (ws / "inside.py").read_text() == "x = 1\n" and (ws / "real.py").read_text() == "x = 1\n"
    assert secret.read_text() == "hunter2"


def test_the_grader_never_writes_through_a_link_in_the_scratch_folder(tmp_path: Path) -> None:
    """Red team (issue 35): learner code planted `tmp_path/other.txt -> a host file`, and a minigpt test,
    outside the wall, wrote its corpus through it. Writes through a planted file link, and into a folder
    swapped for a link, are refused; the host files stay as they were."""
    import subprocess
    import sys

    basetemp = tmp_path / "scratch" / "pytest-tmp"
    (basetemp / "test_x0").mkdir(parents=True)
    victim_dir = tmp_path / "host"
    victim_dir.mkdir()
    victim = victim_dir / "VICTIM.txt"
    victim.write_text("precious")
    (basetemp / "test_x0" / "other.txt").symlink_to(victim)
    (basetemp / "test_x1").symlink_to(victim_dir)
    # In a child: an audit hook stays for the life of the process that adds it.
    code = f"""
import sys
from roadmap_cli.grading.plugin import refuse_links_out_of
refuse_links_out_of({str(tmp_path / "ws")!r}, {str(basetemp)!r})
for target in ({str(basetemp / "test_x0" / "other.txt")!r}, {str(basetemp / "test_x1" / "new.txt")!r}):
    try:
        open(target, "w").write("corpus")
        print("WROTE", target)
    except PermissionError as exc:
        print("REFUSED", "link out of the learner" in str(exc))
open({str(basetemp / "test_x0" / "fine.txt")!r}, "w").write("ok")
"""
    (tmp_path / "ws").mkdir()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["REFUSED True", "REFUSED True"], out.stdout
    assert victim.read_text() == "precious" and not (victim_dir / "new.txt").exists()
    assert (basetemp / "test_x0" / "fine.txt").read_text() == "ok"


def test_the_grade_network_is_made_before_a_conftest_that_imports_torch(tmp_path: Path) -> None:
    """The grader enters the grade's own network as its plugin is imported, before any conftest.py: a lab
    conftest that imports torch starts a thread (the OpenMP pool, OMP_NUM_THREADS unset, several cores), and a
    process with two threads cannot unshare a user namespace. Made in pytest_configure instead, it failed, and
    the learner's server sat in a network of its own: llm-serving's reference failed every grade."""
    import subprocess
    import sys

    from roadmap_cli.grading.launch import GRADE_NETWORK_VAR
    from roadmap_cli.grading_kit import oswall

    if oswall.status()[0] != oswall.STRONG:
        pytest.skip("needs user namespaces (bubblewrap's)")
    (tmp_path / "conftest.py").write_text("import torch  # noqa: F401  (as llm-serving's does)\n")
    (tmp_path / "test_net.py").write_text(
        textwrap.dedent("""
        import os
        import sys

        def test_in_the_grade_network():
            plugin = sys.modules["roadmap_cli.grading.plugin"]
            assert plugin._early_network is True
            assert os.readlink("/proc/self/ns/net") != os.environ["HOST_NET"]
            assert "ROADMAP_GRADE_NETWORK" not in os.environ  # read once, never passed on
        """)
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env.update({GRADE_NETWORK_VAR: "1", "HOST_NET": os.readlink("/proc/self/ns/net"), "PYTEST_ADDOPTS": ""})
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "roadmap_cli.grading.plugin",
            "-p",
            "no:cacheprovider",
            "-m",
            "",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
