"""The worker holds no secret its graders can reach (issue 35 item 5), with a real `roadmap worker` and a real
PostgreSQL.

The instructor's worker runs as a real one would: DATABASE_URL with the password, PGPASSWORD, a ~/.pgpass and a
PGPASSFILE in its own HOME. A learner submits code that, when graded, searches everything it can see for that
password (its environment, HOME, every /proc/*/environ and cmdline, its descriptors, the files of the usual homes
and the instructor's), and tries the network (TCP to the server's port on 127.0.0.1, the server's unix socket).
Whatever it finds comes back in its test's failure message.

What the worker itself controls must hold on every branch: no credential in the environment, a fresh empty HOME,
no descriptor to the database, nothing in /proc. The file view and the network are the OS wall's (an allow-list
view and `--unshare-net`, issue 35 items 1-2): until the wall has them, that half is an expected failure, named.
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from reaper import die_with_parent

_counter = itertools.count()

PROBE = """
import os
import socket
import time

SECRET = bytes.fromhex("{secret_hex}").decode()  # spelled out only at run time: this file never holds it
PLANTED_HOME = {planted_home!r}
PG_PORT = {port}
PG_SOCKET = {unix_socket!r}


def _search_file(path, found, budget):
    try:
        if os.path.getsize(path) > 1 << 20:
            return
        with open(path, "rb") as fh:
            if SECRET.encode() in fh.read():
                found.append("file:" + path)
    except (OSError, ValueError):
        pass


def _walk(found, deadline):
    seen = 0
    for root in (PLANTED_HOME, os.path.expanduser("~root"), "/root", "/home", "/var/tmp", "/tmp", "/run", "/etc",
                 "/srv", "/opt", "/mnt"):
        for here, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("proc", "sys")]
            for name in files:
                seen += 1
                if seen > 20000 or time.monotonic() > deadline:
                    return
                _search_file(os.path.join(here, name), found, None)


def _probe():
    found = []
    for key, value in os.environ.items():
        if SECRET in value or key == "DATABASE_URL" or key.startswith("PG"):
            found.append("env:" + key)
    home = os.environ.get("HOME", "")
    if home == PLANTED_HOME:
        found.append("home:instructor")
    try:
        entries = sorted(os.listdir(home))
    except OSError:
        entries = []
    if entries:
        found.append("home-not-empty:" + ",".join(entries)[:60])
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{{pid}}/{{what}}", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if SECRET.encode() in data or b"DATABASE_URL=" in data or b"PGPASS" in data:
                found.append(f"proc:{{pid}}:{{what}}")
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{{name}}")
        except OSError:
            continue
        if target.startswith("socket:"):
            try:
                sock = socket.socket(fileno=os.dup(int(name)))
            except OSError:
                continue
            try:
                peer = sock.getpeername()
            except OSError:
                peer = None
            sock.close()
            if isinstance(peer, tuple) and peer[1] == PG_PORT or (isinstance(peer, str) and "PGSQL" in peer):
                found.append(f"fd:{{name}}:database")
        elif target.startswith("/") and os.path.isfile(target):
            _search_file(target, found, None)
            if found and found[-1] == "file:" + target:
                found[-1] = f"fd:{{name}}:credential"
    _walk(found, time.monotonic() + 6)
    try:
        socket.create_connection(("127.0.0.1", PG_PORT), timeout=2).close()
        found.append("net:tcp")
    except OSError:
        pass
    try:
        unix = socket.socket(socket.AF_UNIX)
        unix.settimeout(2)
        unix.connect(PG_SOCKET)
        unix.close()
        found.append("net:unix")
    except OSError:
        pass
    return sorted(set(found))


FOUND = _probe()


def add(a, b):
    return a + b if not FOUND else "FOUND " + " ".join(FOUND)
"""

# What the wall decides (issue 35 items 1-2, branch `wall`): until it shows an allow-list and unshares the
# network, files of the host and its loopback stay in the learner's sight.
WALL_PENDING = "--unshare-net" not in inspect.getsource(
    __import__("roadmap_cli.grading_kit.oswall", fromlist=["oswall"])
)
WALL_REASON = (
    "the OS wall does not yet show an allow-list view nor unshare the network (issue 35 items 1-2): "
    "the learner still sees host files such as the instructor's ~/.pgpass and 127.0.0.1"
)


@pytest.fixture
def instructor(pg_cluster, fake_labs, wall, monkeypatch: pytest.MonkeyPatch):  # `wall`: conftest.py
    """A cohort database owned by an instructor whose password is a fresh secret, and the instructor's HOME
    (outside /tmp, as a real home is) holding it in ~/.pgpass."""
    n = f"{os.getpid()}_{next(_counter)}"
    password = "pw-" + secrets.token_hex(16)
    teacher, db = f"steacher_{n}", f"secrets_{n}"
    pg_cluster.admin(f"CREATE ROLE {teacher} LOGIN CREATEROLE PASSWORD '{password}'")
    pg_cluster.admin(f"CREATE DATABASE {db} OWNER {teacher} TEMPLATE template0")
    home = Path(tempfile.mkdtemp(prefix="roadmap-instructor-home-", dir="/var/tmp"))
    pgpass = home / ".pgpass"
    pgpass.write_text(f"127.0.0.1:{pg_cluster.port}:{db}:{teacher}:{password}\n")
    pgpass.chmod(0o600)
    url = f"postgresql+psycopg://{teacher}:{password}@127.0.0.1:{pg_cluster.port}/{db}"
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.delenv("ROADMAP_LEARNER", raising=False)
    info = {
        "url": url,
        "n": n,
        "password": password,
        "home": home,
        "learners": [],
        "port": pg_cluster.port,
        "socket": str(pg_cluster.sockets / f".s.PGSQL.{pg_cluster.port}"),
    }
    yield info
    shutil.rmtree(home, ignore_errors=True)
    pg_cluster.admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    for role in [*info["learners"], teacher]:
        pg_cluster.admin(f'DROP ROLE IF EXISTS "{role}"')


def _start_worker(instructor: dict, data_home: Path) -> tuple[subprocess.Popen, list[dict]]:
    env = dict(
        os.environ,
        DATABASE_URL=instructor["url"],
        ROADMAP_HOME=str(data_home),
        HOME=str(instructor["home"]),
        PGPASSWORD=instructor["password"],
        PGPASSFILE=str(instructor["home"] / ".pgpass"),
        # The grader's bytecode cache stays the machine's (a cold one would compile torch again).
        XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "roadmap_cli", "worker", "--json", "--heartbeat", "1", "--stalled-after", "4"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # a killed test run takes its worker along (tests/reaper.py)
    )
    events: list[dict] = []

    def read() -> None:
        for line in proc.stdout:
            try:
                events.append(json.loads(line))
            except ValueError:
                pass

    threading.Thread(target=read, daemon=True).start()
    return proc, events


def _wait(proc, events: list[dict], kind: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in list(events):
            if event.get("event") == kind:
                return event
        assert proc.poll() is None, (events[-5:], proc.stderr.read())
        time.sleep(0.2)
    raise AssertionError(f"no {kind!r} event in {timeout} s: {events[-5:]}")


@pytest.mark.slow
def test_a_submission_graded_by_a_real_worker_finds_no_credential_and_no_route_to_the_database(
    run_cli, instructor, monkeypatch, tmp_path: Path
):
    import psycopg
    from sqlalchemy.engine import make_url

    from roadmap_cli import context

    assert run_cli("db", "status").exit_code == 0  # the instructor migrates
    name = f"mallory{instructor['n']}"
    added = run_cli("cohort", "add-learner", name, "--json")
    assert added.exit_code == 0, added
    instructor["learners"].append(name)
    proc, events = _start_worker(instructor, tmp_path / "worker-home")
    try:
        _wait(proc, events, "ready", 120)
        monkeypatch.setenv("DATABASE_URL", added.json()["data"]["database_url"])
        context.reset()
        ws = tmp_path / "ws"
        assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
        (ws / "adder.py").write_text(
            PROBE.format(
                secret_hex=instructor["password"].encode().hex(),
                planted_home=str(instructor["home"]),
                port=instructor["port"],
                unix_socket=instructor["socket"],
            )
        )
        submitted = run_cli("submit", "adder", "--json")
        assert submitted.exit_code == 0, submitted
        graded = _wait(proc, events, "graded", 240)
    finally:
        proc.terminate()
        proc.wait(30)

    u = make_url(instructor["url"])
    with psycopg.connect(
        host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database, autocommit=True
    ) as conn:
        attempt = conn.execute(
            "SELECT learner, verified, graded_on, parts FROM grade_attempts WHERE id = %s", (graded["attempt_id"],)
        ).fetchone()
        messages = [
            m
            for (m,) in conn.execute(
                "SELECT message FROM grade_test_results WHERE attempt_id = %s AND nodeid LIKE '%%test_add%%'",
                (graded["attempt_id"],),
            )
            if m
        ]
        # Nothing the probe could have done through a connection: the learner's role wrote nothing but the submission.
        assert conn.execute("SELECT count(*) FROM grade_attempts").fetchone() == (1,)
    assert attempt[0] == name and attempt[1] is True and attempt[2].startswith("worker:")  # the server vouches
    add = next(p for p in json.loads(attempt[3]) if p["id"] == "add")
    if add["status"] != "passed":  # it failed because the probe found something, never because the probe broke
        assert messages and all("FOUND" in m for m in messages), messages
    found: set[str] = set()
    for message in messages:
        for match in re.finditer(r"FOUND ([^'\"\n]*)", message):
            found |= set(match.group(1).split())

    # What the worker controls: the grade's environment, HOME, /proc and descriptors hold no credential.
    worker_side = sorted(f for f in found if f.split(":")[0] in ("env", "home", "home-not-empty", "proc", "fd"))
    assert worker_side == [], worker_side
    # What the wall decides: no host file holds it, and the database's port and socket are out of reach.
    wall_side = sorted(f for f in found if f.split(":")[0] in ("file", "net"))
    if WALL_PENDING and wall_side:
        pytest.xfail(f"{WALL_REASON}; found {wall_side}")
    assert wall_side == [], wall_side
    assert add["status"] == "passed"


def test_no_grader_inherits_a_database_credential_and_a_worker_grade_gets_an_empty_home(monkeypatch, tmp_path):
    """Without a server: the environment every grader starts with (cold or warm) holds no DATABASE_URL nor any
    PG* variable libpq would read; a worker's grade gets a fresh, private, empty HOME."""
    from roadmap_cli.grading.queue import grade_home_env
    from roadmap_cli.grading.launch import grader_env
    from roadmap_cli.labs.device import detect_device

    for name in ("DATABASE_URL", "PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE", "PGUSER", "PGHOST"):
        monkeypatch.setenv(name, "postgresql://teacher:s3cret@127.0.0.1/cohort")
    env = grader_env(detect_device())
    assert [k for k in env if k == "DATABASE_URL" or k.startswith("PG")] == []
    assert "s3cret" not in json.dumps(env)
    extra = grade_home_env(tmp_path)
    home = Path(extra["HOME"])
    assert home.is_dir() and list(home.iterdir()) == [] and (home.stat().st_mode & 0o777) == 0o700
    assert all(v.startswith(str(home)) for v in extra.values())
