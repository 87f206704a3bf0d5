"""The far side of `roadmap grade --on NAME` (near.py is the near side).

This file is not imported by the near side: its text is sent over ssh and run
by the remote's own python (`python -c` reading it from stdin), so it uses the
standard library only and works before roadmap is installed there (the far
agent, grading/remote/daemon.py, imports its helpers from the managed venv).
One ssh session per grade; the conversation on its stdin/stdout:

  near -> far   {"tag", "key_id", "ws", "lab", "argv", ...}            one JSON line
  far  -> near  {"hello": {"venv": bool, "key": bool, "files": {path: sha256}, "torch": ..., "agent": path|null}}
  near -> far   {"put": "wheel"|"key"|"files", "size": N, ...} + N bytes, repeated; then {"go": true}
  far  -> near  {"progress": "..."} lines while it installs; then the grade's own JSON lines
                (`roadmap grade --events`, signed result last); then {"exit": rc}

Everything of ours lives under one folder in the remote user's home (ROOT,
~/.roadmap-remote, or $ROADMAP_REMOTE_ROOT where the far side's sshd or
shell sets it):

  ROOT/home/              the far grades' data home ($ROADMAP_HOME): hidden from learner code by the OS wall
  ROOT/home/keys/KEY_ID   the result key of one near side's remote (sent once, 0600)
  ROOT/envs/TAG/          one managed venv per roadmap build (TAG = version + content hash); `ready` when done
  ROOT/work/KEY_ID/WS/    one folder per near side's workspace; WS.manifest.json beside it (sha256 per file)
  ROOT/agents/            (0700) the far agent of each build (grading/remote/daemon.py): TAG.sock (0600),
                          TAG.lock (held while it runs), TAG.log

When the near side asks for it ("agent": true) and the build's venv is ready,
this session starts the far agent of the build after its grade if it is not
running (the hello names its socket): later grades reach it through the
shared ssh connection's stream-local forwarding, with no login shell and no
python start.

The grade runs as a child in its own session; a thread reads stdin, and when
it ends (the near side pressed Ctrl-C, or the connection dropped) the grade is
stopped (SIGTERM: it stops as interrupted, its supervisor kills every
descendant) and killed after a grace period: nothing keeps running here.
"""

import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time

STOP_GRACE_S = 5.0
_out_lock = threading.Lock()


def say(obj):
    """One JSON line to the near side; False when the connection is gone."""
    data = (json.dumps(obj) + "\n").encode()
    with _out_lock:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False


def fail(message, **details):
    """The one line the near side shows (with `details` it may make more exact, e.g. naming its ssh command)."""
    say({"error": message, **details})
    sys.exit(3)


def read_line(stdin):
    line = stdin.readline()
    if not line:
        sys.exit(0)  # the near side went away before the grade: nothing to clean up
    return json.loads(line)


def read_exact(stdin, size):
    data = stdin.read(size)
    if len(data) != size:
        sys.exit(0)
    return data


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def current_files(ws, manifest_path):
    """{relative path: sha256} of the workspace as it is now. The manifest of
    the last send is trusted for a file whose size and mtime did not change
    (a grade may have written to the workspace since: that is rehashed)."""
    try:
        with open(manifest_path) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    out = {}
    for dirpath, dirnames, filenames in os.walk(ws):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            rel = os.path.relpath(path, ws)
            st = os.stat(path)
            entry = known.get(rel)
            if isinstance(entry, list) and entry[1:] == [st.st_size, st.st_mtime_ns]:
                out[rel] = entry[0]
            else:
                out[rel] = sha256_file(path)
    return out


def save_manifest(ws, manifest_path, files):
    body = {}
    for rel, sha in files.items():
        st = os.stat(os.path.join(ws, rel))
        body[rel] = [sha, st.st_size, st.st_mtime_ns]
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(body, f)
    os.replace(tmp, manifest_path)


def safe_rel(rel):
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and ".." not in parts and ".git" not in parts and "" not in parts


class Refused(Exception):
    """Something the near side sent is refused (a file name outside the workspace)."""


def apply_files(ws, blob, delete, want):
    """Unpack the changed files, delete what the near side no longer has, and
    leave exactly `want` (path -> sha256) in the workspace. Refused: a name
    that would leave the workspace (nothing of that upload is written)."""
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:") as tar:
        members = tar.getmembers()
        for member in members:
            if not member.isfile() or not safe_rel(member.name):
                raise Refused(f"refused a file name in the workspace upload: {member.name!r}")
        for member in members:
            target = os.path.join(ws, member.name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.islink(target):
                os.unlink(target)
            src = tar.extractfile(member)
            tmp = target + ".roadmap-tmp"
            with open(tmp, "wb") as out:
                shutil.copyfileobj(src, out)
            os.chmod(tmp, 0o755 if member.mode & 0o111 else 0o644)
            os.replace(tmp, target)
    for rel in delete:
        if safe_rel(rel):
            try:
                os.unlink(os.path.join(ws, rel))
            except FileNotFoundError:
                pass
    # Anything else here (written by an earlier grade, or left by a send that broke off) goes too:
    # the far workspace is the near one's files, nothing more.
    for dirpath, dirnames, filenames in os.walk(ws, topdown=False):
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), ws)
            if rel not in want:
                os.unlink(os.path.join(dirpath, name))
        if dirpath != ws and not os.listdir(dirpath):
            os.rmdir(dirpath)


def missing_requirements(venv_python, wheel_dir):
    """The wheel's requirements the managed venv cannot import a distribution for (run inside the venv)."""
    code = r"""
import importlib.metadata as md, json, re, sys
meta = md.distribution("roadmap-cli")
missing = []
for req in meta.requires or []:
    name, _, marker = req.partition(";")
    if "extra" in marker:
        continue
    if "platform_system" in marker and "Linux" in marker and not sys.platform.startswith("linux"):
        continue
    base = re.match(r"[A-Za-z0-9._-]+", name.strip()).group(0)
    try:
        md.distribution(base)
    except md.PackageNotFoundError:
        missing.append(name.strip().replace(" ", ""))
print(json.dumps(missing))
"""
    proc = subprocess.run([venv_python, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        fail("the managed venv cannot read roadmap's requirements: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
    return json.loads(proc.stdout)


# Where pip finds torch's CPU build (PyTorch's own index: a few hundred MB, instead of PyPI's default Linux
# build, which bundles CUDA: several GB that a machine without an NVIDIA GPU cannot use).
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
PIP_CONFIGURED = "pip"  # a torch index setting meaning: pip's own configuration there (pip.conf, PIP_* variables)


def nvidia_driver():
    """The NVIDIA kernel driver's version on this machine, or None where it has none (no GPU torch can use)."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            words = f.readline().split()
        for i, word in enumerate(words):
            if word == "Module" and i + 1 < len(words):
                return words[i + 1]
        return "?"
    except OSError:
        pass
    if shutil.which("nvidia-smi"):
        try:
            proc = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            lines = proc.stdout.split()
            if proc.returncode == 0 and lines:
                return lines[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None


def torch_plan(requirement, setting, driver):
    """(pip arguments for torch, the index it comes from or None, why) for a venv that has no torch.
    `requirement`: roadmap's own (e.g. 'torch<2.14,>=2.3'); `setting`: the remote's --torch / --torch-index
    (either may be missing); `driver`: nvidia_driver()."""
    setting = setting or {}
    spec = setting.get("spec") or requirement
    index = setting.get("index")
    if index:
        where = "pip's own configuration here" if index == PIP_CONFIGURED else index
        why = f"the remote's --torch-index: {where}"
        index = None if index == PIP_CONFIGURED else index
    elif driver:
        why = f"NVIDIA driver {driver} found: the CUDA build (PyPI's default torch for Linux)"
    else:
        index = CPU_TORCH_INDEX
        why = "no NVIDIA driver here (no /proc/driver/nvidia/version, no nvidia-smi): the CPU build"
    return [spec] + (["--index-url", index] if index else []), index, why


def no_ensurepip_line(python=None):
    """One line: this python cannot give a venv pip, and which Debian/Ubuntu package fixes that."""
    major, minor = sys.version_info[:2]
    package = f"python{major}.{minor}-venv"
    return (
        f"{python or sys.executable} (Python {major}.{minor}) has no ensurepip, so a venv made with it has no "
        f"pip to install roadmap's dependencies: install it there with `sudo apt install {package}` "
        f"(Debian/Ubuntu; python3-venv on the default python3)"
    )


def has_ensurepip():
    try:
        import ensurepip  # noqa: F401 - only whether this python ships it (Debian: python3.X-venv)

        return True
    except ImportError:
        return False


def last_pip_line(text):
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    return (errors or lines or ["?"])[-1]


def pip_install(venv_python, args, what, kind="pip"):
    """pip install ARGS in the managed venv, its progress summarised as progress lines (a package being
    collected at most every few seconds: a first install takes a minute or more)."""
    proc = subprocess.Popen(
        [
            venv_python,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
            *args,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    tail = []
    last_said = 0.0
    for line in proc.stdout:
        tail = (tail + [line])[-40:]
        if line.startswith("Collecting ") and time.monotonic() - last_said > 3:
            last_said = time.monotonic()
            say({"progress": "pip: collecting " + line.split()[1]})
        elif line.startswith("Installing collected packages:"):
            count = len(line.split(":", 1)[1].split(","))
            say({"progress": f"pip: installing {count} package(s)"})
    if proc.wait() != 0:
        fail(f"pip could not install {what}: " + last_pip_line("".join(tail)), kind=kind)


def torch_build(venv_python):
    """(version, CUDA version or None) of the torch the venv imports."""
    proc = subprocess.run(
        [venv_python, "-c", "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        fail("torch was installed but does not import: " + last_pip_line(proc.stderr))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def install(root, tag, wheel_name, wheel, has_torch, torch_setting=None):
    """The managed venv ROOT/envs/TAG: roadmap unpacked from the near side's
    wheel; dependencies reused from this python when it has torch (system
    site-packages), and only what is still missing installed with pip (pip
    itself from this python's ensurepip, only when something is missing).
    torch, when missing, first and on its own: the CPU build where this
    machine has no NVIDIA driver, PyPI's CUDA build where it has one, or
    what the remote's --torch / --torch-index settings say."""
    env = os.path.join(root, "envs", tag)
    lock_path = os.path.join(root, "envs", tag + ".lock")
    os.makedirs(os.path.dirname(env), exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two first grades at once: one installs, the other waits
        if os.path.exists(os.path.join(env, "ready")):
            return
        shutil.rmtree(env, ignore_errors=True)
        reuse = has_torch
        say(
            {
                "progress": f"creating the managed venv {env}"
                + (" (reusing this python's packages: it imports torch)" if reuse else "")
            }
        )
        # Without pip for now: when this python's packages cover every requirement, none is needed (and
        # ensurepip costs seconds); it is added below only when something must be installed.
        cmd = [sys.executable, "-m", "venv", "--without-pip"] + (["--system-site-packages"] if reuse else []) + [env]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            fail("cannot create the managed venv: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
        venv_python = os.path.join(env, "bin", "python")
        site = subprocess.run(
            [venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if reuse and sys.prefix != sys.base_prefix:
            # This python is itself a venv: --system-site-packages would show its base's packages, not
            # the ones (torch & co.) it imports. Its own site-packages are added after the managed one's.
            import site as site_mod

            dirs = [d for d in site_mod.getsitepackages() if os.path.isdir(d)]
            with open(os.path.join(site, "zz_roadmap_reuse.pth"), "w") as f:
                f.write("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs) + "\n")
        say({"progress": f"installing roadmap ({wheel_name}) in the managed venv"})
        import zipfile

        with zipfile.ZipFile(io.BytesIO(wheel)) as whl:
            for name in whl.namelist():
                if name.startswith("/") or ".." in name.split("/"):
                    fail(f"refused a file name in the wheel: {name!r}")
            whl.extractall(site)  # a pure-python wheel: unpacking it into site-packages is installing it
        missing = missing_requirements(venv_python, site)
        if missing:
            say({"progress": "missing here: " + ", ".join(missing)})
            # venv's own way of giving a venv pip (what `python -m venv` without --without-pip runs).
            if not has_ensurepip():
                fail(
                    no_ensurepip_line(),
                    kind="no-ensurepip",
                    python=sys.executable,
                    version="%d.%d" % sys.version_info[:2],
                )
            proc = subprocess.run(
                [venv_python, "-m", "ensurepip", "--upgrade", "--default-pip"], capture_output=True, text=True
            )
            if proc.returncode != 0:
                fail("ensurepip could not give the managed venv pip: " + last_pip_line(proc.stderr or proc.stdout))
            torch_req = next((m for m in missing if re.match(r"torch\b(?![-_.])", m.lower())), None)
            if torch_req is not None:
                args, index, why = torch_plan(torch_req, torch_setting, nvidia_driver())
                say(
                    {
                        "progress": f"torch is not importable by {sys.executable}: installing {args[0]} with pip"
                        + (f" from {index}" if index else "")
                        + f" ({why})"
                    }
                )
                pip_install(venv_python, args, args[0], kind="torch-install")
                version, cuda = torch_build(venv_python)
                say(
                    {
                        "progress": f"installed torch {version}: "
                        + (f"the CUDA {cuda} build" if cuda else "the CPU build (no CUDA)")
                    }
                )
                missing = missing_requirements(venv_python, site)
            if missing:
                say({"progress": "installing with pip: " + ", ".join(missing)})
                pip_install(venv_python, missing, ", ".join(missing))
        check = subprocess.run(
            [venv_python, "-c", "import roadmap_cli, os; print(os.path.realpath(roadmap_cli.__file__))"],
            capture_output=True,
            text=True,
        )
        if check.returncode != 0 or not check.stdout.strip().startswith(os.path.realpath(site)):
            fail("the managed venv does not import the roadmap it was given: " + (check.stderr or check.stdout).strip())
        with open(os.path.join(env, "ready"), "w") as f:
            f.write(wheel_name + "\n")
        say({"progress": "installed"})


def agent_socket(root, tag):
    """Where the far agent of build TAG listens, or None where a unix socket cannot be (too long a path, or
    a ':' that ssh's -L forwarding spec would misread)."""
    path = os.path.join(root, "agents", tag + ".sock")
    return path if len(os.fsencode(path)) <= 100 and ":" not in path else None


def agent_running(root, tag):
    """Whether the far agent of TAG runs: it holds TAG.lock for its whole life."""
    try:
        fd = os.open(os.path.join(root, "agents", tag + ".lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # our lock, if we took it, goes with the descriptor
    return False


def start_agent(root, tag, env):
    """Start the far agent of build TAG, in its own session, with the grades' environment; its output goes to
    TAG.log, never to this ssh session's pipes (which would keep the session open). It takes TAG.lock
    itself: a second one started at the same moment exits at once."""
    agents = os.path.join(root, "agents")
    os.makedirs(agents, mode=0o700, exist_ok=True)
    log_path = os.path.join(agents, tag + ".log")
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        subprocess.Popen(
            [os.path.join(root, "envs", tag, "bin", "python"), "-m", "roadmap_cli.grading.remote.daemon", root, tag],
            env=env,
            cwd=os.path.expanduser("~"),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
        )
        os.close(fd)
    except OSError:
        pass  # no agent: the next grade comes through a login again


def run_grade(cmd, env, stdin, after=None):
    """The grade as a child in its own session; its lines go through to the
    near side; stdin's end (Ctrl-C there, or a dropped connection) stops it.
    `after`: called once the grade has ended, before the last line."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, start_new_session=True)
    gone = threading.Event()

    def watch_stdin():
        try:
            while stdin.read(4096):
                pass
        except (OSError, ValueError):
            pass
        gone.set()
        stop(proc)

    threading.Thread(target=watch_stdin, daemon=True).start()
    for line in proc.stdout:
        if gone.is_set():
            continue  # nobody to tell: drain until the grade has stopped
        with _out_lock:
            try:
                sys.stdout.buffer.write(line)
                sys.stdout.buffer.flush()
            except (BrokenPipeError, OSError, ValueError):
                gone.set()
                threading.Thread(target=stop, args=(proc,), daemon=True).start()
    rc = proc.wait()
    if after is not None:
        after()  # even when nobody listens any more: the next grade finds the agent
    say({"exit": rc})
    # Not a normal exit: the stdin thread is blocked in a read holding stdin's lock, and the interpreter's
    # shutdown would wait a second for that lock, then abort (a core dump, and a second on every grade).
    os._exit(0)


def stop(proc):
    """SIGTERM (the grade stops as interrupted and its supervisor kills every
    descendant), then SIGKILL to the whole session after a grace period."""
    if proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def torch_imports():
    try:
        import torch  # noqa: F401 - only whether it imports

        return True
    except Exception:  # noqa: BLE001
        return False


def main():
    stdin = sys.stdin.buffer
    req = read_line(stdin)
    root = os.environ.get("ROADMAP_REMOTE_ROOT") or os.path.join(os.path.expanduser("~"), ".roadmap-remote")
    home = os.path.join(root, "home")
    for folder in (root, home, os.path.join(home, "keys")):
        os.makedirs(folder, mode=0o700, exist_ok=True)
    key_id, ws_id, tag = req["key_id"], req["ws"], req["tag"]
    for value in (key_id, ws_id, tag):
        if not value or "/" in value or value.startswith("."):
            fail(f"bad request: {value!r}")
    key_path = os.path.join(home, "keys", key_id)
    ws = os.path.join(root, "work", key_id, ws_id)
    manifest_path = ws + ".manifest.json"
    os.makedirs(ws, exist_ok=True)
    env_dir = os.path.join(root, "envs", tag)
    ready = os.path.exists(os.path.join(env_dir, "ready"))
    # Whether this python has torch matters only to set up a venv; importing it costs seconds, so only then.
    has_torch = False if ready else torch_imports()
    files = current_files(ws, manifest_path)
    agent = agent_socket(root, tag) if req.get("agent") and os.environ.get("ROADMAP_FAR_AGENT") != "0" else None
    running = agent is not None and agent_running(root, tag)
    # Only to set up a venv: whether torch's CUDA build could use a GPU here, and whether pip can be had.
    driver = None if ready or has_torch else nvidia_driver()
    say(
        {
            "hello": {
                "venv": ready,
                "key": os.path.exists(key_path),
                "files": files,
                "torch": has_torch,
                "nvidia_driver": driver,
                "ensurepip": ready or has_ensurepip(),
                "python": sys.version.split()[0],
                "executable": sys.executable,
                "root": root,
                "agent": agent,
                "agent_running": running,
            }
        }
    )
    wheel = wheel_name = None
    want = files
    while True:
        msg = read_line(stdin)
        if msg.get("go"):
            break
        blob = read_exact(stdin, int(msg["size"]))
        if msg["put"] == "wheel":
            wheel, wheel_name = blob, os.path.basename(msg["name"])
        elif msg["put"] == "key":
            fd = os.open(key_path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(key_path + ".tmp", key_path)
        elif msg["put"] == "files":
            want = msg["manifest"]
            try:
                apply_files(ws, blob, msg.get("delete", []), want)
            except Refused as exc:
                fail(str(exc))
            save_manifest(ws, manifest_path, want)
    if not os.path.exists(os.path.join(env_dir, "ready")):
        if wheel is None:
            fail("the managed venv is not installed and no wheel was sent")
        install(root, tag, wheel_name, wheel, torch_imports(), req.get("torch"))
    if not os.path.exists(key_path):
        fail("no result key here (it was not sent)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROADMAP_") or k in req.get("pass_env", ())}
    env.update(ROADMAP_HOME=home)
    for k in (
        "ROADMAP_LABS_DIR",
        "ROADMAP_DEVICE",
        "ROADMAP_DEV_UNLOCKED",
        "ROADMAP_SANDBOX",
        "ROADMAP_REQUIRE_BWRAP",
        "ROADMAP_WARM_GRADERS",
        "ROADMAP_FAR_AGENT_IDLE_S",
    ):  # the last two: for the far agent itself
        if os.environ.get(k):
            env[k] = os.environ[k]  # what the far side's own sshd or profile sets for its grades
    # grading/remote/far.py's events_main: `roadmap grade --events` with the grader started before the
    # command line's imports (typer, pydantic).
    cmd = [
        os.path.join(env_dir, "bin", "python"),
        "-m",
        "roadmap_cli.grading.remote.far",
        *req["argv"],
        "--events-workspace",
        ws,
        "--events-key",
        key_path,
        "--events-nonce",
        req["nonce"],
    ]
    start = None
    if agent is not None and not running:

        def start():
            start_agent(root, tag, env)

    run_grade(cmd, env, stdin, after=start)


if __name__ == "__main__":
    main()
