"""`roadmap grade --on NAME`: grade this workspace on a remote machine (a rented GPU) over ssh.

Near side (`grade_on`): the workspace's files (git's tracked and untracked-
not-ignored files, never .git) are hashed; one ssh connection runs the far
side's agent (grading/remote_agent.py, sent as text to the remote's python),
which answers with what it already has (its manifest of sent hashes, whether
the managed venv of this roadmap build and the result key are there); only
changed files go, in one tar, and files deleted here are deleted there. On
first use the wheel of this very install goes too (built from the checkout,
or repacked from an installed wheel; cached in the data home). The far side
then runs `roadmap grade --events` from its managed venv: the same engine,
pre-check, sandbox and OS wall as a local grade, with its progress streamed
back here as JSON lines and the run itself last, signed (HMAC-SHA256 with the
remote's key, over the run and a fresh nonce of this grade). The attempt is
recorded here, with the remote's device and versions, `graded_on` = NAME,
and checkpoints are marked exactly as a local grade marks them.

Far side (`events_grade`): what `roadmap grade --events` runs.

What is not promised: the far machine's owner (root there) can sign anything
with the key; the signature keeps the learner's code that runs there (behind
the OS wall, which hides the key) and the network path from forging a pass.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import shlex
import signal
import subprocess
import tarfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import UserError
from roadmap_cli.remotes import SSH_CONNECTION_FAILED, RemoteError

AGENT = Path(__file__).with_name("remote_agent.py")
MAX_UPLOAD_BYTES = 200 * 2**20  # a workspace is source code; anything near this is a mistake (a dataset, a checkpoint)
STOP_WAIT_S = 10.0  # after Ctrl-C: how long the far side gets to stop its grade before ssh itself is killed


# ---------------------------------------------------------------- the far side: `roadmap grade --events`


def events_grade(lab_id: str, workspace: Path, *, part: Optional[str], timeout: Optional[float], key_path: Path,
                 nonce: str) -> int:
    """Grade `workspace` with the engine (pre-check, GradeJob: manifest check, sandbox, OS wall), print each
    channel event as a JSON line, then the run signed with the key. Records nothing here: the near side does."""
    import sys

    from roadmap_cli.grading import precheck
    from roadmap_cli.grading.runner import GradeJob
    from roadmap_cli.labs.spec import find_lab

    def interrupt(signum, frame):  # the agent's stop: stopped as interrupted, the supervisor kills the tree
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)

    def emit(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    from roadmap_cli.grading import prestart

    try:
        key = bytes.fromhex(key_path.read_text().strip())
    except (OSError, ValueError) as exc:
        prestart.discard()
        raise UserError(f"no usable result key at {key_path}: {exc}") from None
    try:
        spec = find_lab(lab_id)
        # A grader started by events_main (before this module's imports) pre-checked this very folder.
        problem = None if prestart.prechecked(workspace) else precheck.check_workspace(workspace)
        job = GradeJob(spec, workspace, parts=[part] if part else None, timeout=timeout,
                       device=prestart.started_device())
    except BaseException:
        prestart.discard()
        raise
    emit({"event": "remote-device", "cuda": job.device.cuda, "name": job.device.name})
    if problem is not None:
        prestart.discard()
        run = precheck.failed_run(job, problem)
    else:
        job = prestart.claim(job)  # the early one when it is exactly this job
        if job.proc is None:
            job.start()
        try:
            emit({"event": "started"})
            run = job.finish(emit)
        except BaseException:
            job.abort()
            raise
    emit(signed_result(key, nonce, run, problem))
    return run.exit_code


def signed_result(key: bytes, nonce: str, run, problem) -> dict:
    """The last line of a far grade: the run (and its pre-check problem), this grade's nonce and the far
    versions, signed with the remote's key (HMAC-SHA256)."""
    import sys

    from roadmap_cli import __version__

    body = json.dumps({"nonce": nonce, "run": asdict(run), "precheck": asdict(problem) if problem else None,
                       "roadmap": __version__, "python": sys.version.split()[0]}, sort_keys=True)
    return {"signed": body, "sig": hmac.new(key, body.encode(), hashlib.sha256).hexdigest()}


def events_main(argv: list[str]) -> None:
    """`python -m roadmap_cli.grading.remote_grade LAB [--part P] [--timeout S] --events-workspace W
    --events-key K --events-nonce N`: what the far agent runs. The same as `roadmap grade ... --events`, with
    the grader started first, from the lab's plan, before typer, rich and pydantic are imported
    (grading/prestart.py): the learner waits for that import on every grade --on otherwise. Anything this
    reader does not expect goes through the command line as before, which reports it."""
    known = {"--part": "part", "--timeout": "timeout", "--events-workspace": "workspace", "--events-key": "key",
             "--events-nonce": "nonce"}
    opts: dict = {}
    rest = list(argv)
    lab_id = rest.pop(0) if rest and not rest[0].startswith("-") else None
    while len(rest) >= 2 and rest[0] in known and known[rest[0]] not in opts:
        name, value = rest.pop(0), rest.pop(0)
        opts[known[name]] = value
    timeout: Optional[float] = None
    try:
        timeout = float(opts["timeout"]) if "timeout" in opts else None
    except ValueError:
        rest.append("?")
    if rest or lab_id is None or not {"workspace", "key", "nonce"} <= set(opts) or (timeout is not None
                                                                                    and not timeout >= 1):
        import sys

        # The command line says what is wrong, in one line (this process becomes it: same pid, same pipes).
        os.execv(sys.executable, [sys.executable, "-m", "roadmap_cli", "grade", *argv, "--events"])
    from roadmap_cli.grading import prestart

    workspace = Path(opts["workspace"])
    prestart.start_job(lab_id, workspace, part=opts.get("part"), timeout=timeout)
    from roadmap_cli.errors import RoadmapError

    try:
        code = events_grade(lab_id, workspace, part=opts.get("part"), timeout=timeout, key_path=Path(opts["key"]),
                            nonce=opts["nonce"])
    except RoadmapError as exc:  # one line on stderr, as the command line would say it
        import sys

        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(int(getattr(exc, "exit_code", 1))) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    raise SystemExit(code)


# ---------------------------------------------------------------- this install as a wheel


def _fingerprint_files(root: Path) -> list[Path]:
    out = [root / "curriculum.yaml", root / "pyproject.toml", root / "hatch_build.py"]
    for folder in (root / "src" / "roadmap_cli", root / "labs", root / "kernels"):
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            out += [Path(dirpath) / f for f in sorted(filenames) if not f.endswith(".pyc")]
    return [p for p in out if p.is_file()]


def build_tag(home: Path) -> tuple[str, Callable[[], Path]]:
    """(TAG, make_wheel): TAG names this install's build (version + a hash of its files' contents), so the
    far side keeps one managed venv per build; make_wheel() returns the wheel (cached under the data home)."""
    from importlib import metadata

    from roadmap_cli import __version__
    from roadmap_cli.paths import data_root

    cache = home / "cache" / "remote-wheels"
    root = data_root()
    if root.name == "_data":  # installed from a wheel: its RECORD hashes every installed file
        dist = metadata.distribution("roadmap-cli")
        record = dist.read_text("RECORD") or ""
        fp = hashlib.sha256(record.encode()).hexdigest()

        def make() -> Path:
            return _cached(cache, fp, lambda out: _repack(dist, out))
    else:
        files = _fingerprint_files(root)
        stat_sig = hashlib.sha256(repr([(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files])
                                  .encode()).hexdigest()
        memo = cache / "fingerprints.json"
        try:
            known = json.loads(memo.read_text())
        except (OSError, ValueError):
            known = {}
        fp = known.get(stat_sig)
        if fp is None:
            digest = hashlib.sha256()
            for p in files:
                digest.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
            fp = digest.hexdigest()
            cache.mkdir(parents=True, exist_ok=True)
            memo.write_text(json.dumps({stat_sig: fp}))

        def make() -> Path:
            return _cached(cache, fp, lambda out: _build_checkout(root, out))
    return f"{__version__}-{fp[:12]}", make


def _cached(cache: Path, fp: str, build: Callable[[Path], Path]) -> Path:
    target = cache / f"{fp[:16]}.whl"
    if not target.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        built = build(cache)
        os.replace(built, target)
    return target


def _build_checkout(root: Path, cache: Path) -> Path:
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                               "-w", tmp, str(root)], capture_output=True, text=True, timeout=600)
        wheels = list(Path(tmp).glob("roadmap_cli-*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel was written"])[-1]
            raise RemoteError(f"cannot build this roadmap's wheel to send (pip wheel {root}): {last} "
                              "(a checkout needs hatchling: pip install -e '.[dev]')")
        out = cache / (wheels[0].name + ".part")
        os.replace(wheels[0], out)
        return out


def _repack(dist, cache: Path) -> Path:
    """The installed wheel's files back into a wheel: the package and its dist-info (no scripts, no caches)."""
    import zipfile

    out = cache / "repacked.whl.part"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as whl:
        for f in dist.files or []:
            name = str(f)
            if name.startswith(("roadmap_cli/", "roadmap_cli-")) and "__pycache__" not in name \
                    and not name.endswith((".pyc", "/RECORD", "/INSTALLER", "/direct_url.json")):
                whl.write(dist.locate_file(f), name)
    return out


# ---------------------------------------------------------------- the workspace's files


def workspace_files(path: Path) -> dict[str, str]:
    """{relative path: sha256}: git's tracked and untracked-but-not-ignored files (what a local grade reads),
    never .git; every regular file when the workspace is not a git repository."""
    rels: list[str] = []
    if (path / ".git").exists():
        from roadmap_cli.labs import gitsafe

        # Disarmed: nothing the workspace's .git/config names (fsmonitor, filters) runs (labs/gitsafe.py).
        proc = subprocess.run(gitsafe.command(path, "-C", str(path), "ls-files", "-z", "--cached", "--others",
                                              "--exclude-standard"), capture_output=True, timeout=60, cwd=path,
                              env=gitsafe.env())
        if proc.returncode == 0:
            rels = [r for r in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if r]
    if not rels:
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            rels += [os.path.relpath(os.path.join(dirpath, f), path) for f in filenames]
    out: dict[str, str] = {}
    total = 0
    for rel in sorted(set(rels)):
        full = path / rel
        if ".git" in Path(rel).parts or full.is_symlink() or not full.is_file():
            continue  # a tracked file deleted here is simply not sent (and is deleted there)
        data = full.read_bytes()
        total += len(data)
        if total > MAX_UPLOAD_BYTES:
            raise UserError(f"the workspace {path} holds more than {MAX_UPLOAD_BYTES // 2**20} MB of files to send "
                            f"(at {rel}): ignore big data files in .gitignore")
        out[rel] = hashlib.sha256(data).hexdigest()
    return out


def _tar(path: Path, rels: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for rel in rels:
            info = tar.gettarinfo(str(path / rel), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(path / rel, "rb") as f:
                tar.addfile(info, f)
    return buf.getvalue()


# ---------------------------------------------------------------- the near side


class _Session:
    """One ssh session running the session agent (a login, then remote_agent.py on the remote's python):
    JSON lines both ways, byte blobs to it."""

    via = "ssh"

    def __init__(self, remote, request: dict, control: Optional[Path] = None) -> None:
        agent = AGENT.read_bytes()
        boot = f"import sys; exec(compile(sys.stdin.buffer.read({len(agent)}), 'roadmap-remote-agent', 'exec'))"
        python = remote.python or "python3"
        command = f"{shlex.quote(python)} -c {shlex.quote(boot)}"
        self.remote = remote
        try:
            # Its own session: a Ctrl-C in the terminal reaches us only; we end the far grade in order.
            self.proc = subprocess.Popen(remote.ssh_argv(command, control=control), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        except FileNotFoundError:
            raise RemoteError("the `ssh` command is not installed here (install OpenSSH's client, e.g. the Debian "
                              "package openssh-client)") from None
        self.stderr = b""
        import threading

        def drain_stderr() -> None:
            for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
                self.stderr = (self.stderr + chunk)[-8192:]

        self._stderr_thread = threading.Thread(target=drain_stderr, daemon=True)
        self._stderr_thread.start()
        self.send(agent + (json.dumps(request) + "\n").encode())

    def send(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the connection is gone: reading says how

    def put(self, kind: str, blob: bytes, **extra) -> None:
        self.send((json.dumps({"put": kind, "size": len(blob), **extra}) + "\n").encode() + blob)

    def lines(self):
        for raw in self.proc.stdout:
            text = raw.decode("utf-8", "replace").strip()
            if text.startswith("{"):
                try:
                    yield json.loads(text)
                except ValueError:
                    continue  # not ours (a login script's output)

    def failure(self) -> RemoteError:
        """Why the connection ended without an answer, in one line."""
        rc = self.proc.wait()
        self._stderr_thread.join(timeout=2)
        text = self.stderr.decode("utf-8", "replace")
        if rc == SSH_CONNECTION_FAILED:
            from roadmap_cli.remotes import _ssh_failure

            return _ssh_failure(self.remote, text)
        last = (text.strip().splitlines() or [f"exit status {rc}"])[-1].strip()
        if rc == 127:
            return RemoteError(f"remote {self.remote.name!r} has no {self.remote.python or 'python3'} ({last}); "
                               f"point `{self.remote.add_command(python='PATH')}` at one")
        return RemoteError(f"remote {self.remote.name!r}: the connection ended ({last})")

    def end_input(self) -> None:
        """The agent sees its stdin end: it stops the grade there (nothing is left running) and exits."""
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def close(self, wait_s: float = STOP_WAIT_S) -> None:
        """End our side: the agent sees its stdin end and stops the grade; ssh is killed if it lingers."""
        self.end_input()
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _AgentSession:
    """One connection to the far agent (grading/remote_daemon.py) through the shared ssh connection's
    forwarded unix socket: the same conversation as _Session's, with no new ssh session on the far side."""

    via = "agent"

    def __init__(self, sock, remote, request: dict) -> None:
        self.sock, self.remote = sock, remote
        self.rfile = sock.makefile("rb")
        self.send((json.dumps(request) + "\n").encode())

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            pass  # the connection is gone: reading says how

    put = _Session.put

    def lines(self):
        try:
            for raw in self.rfile:
                text = raw.decode("utf-8", "replace").strip()
                if text.startswith("{"):
                    try:
                        yield json.loads(text)
                    except ValueError:
                        continue
        except OSError:
            return

    def failure(self) -> RemoteError:
        return RemoteError(f"remote {self.remote.name!r}: the connection to its far agent ended")

    def end_input(self) -> None:
        import socket

        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self, wait_s: float = STOP_WAIT_S) -> None:
        """End our side; the far agent cancels the grade (nothing keeps running there), then closes: wait
        for that, at most wait_s."""
        self.end_input()
        try:
            self.sock.settimeout(wait_s)
            while self.sock.recv(65536):
                pass
        except OSError:
            pass
        self.sock.close()


def _agent_state_path(home: Path, remote) -> Path:
    return home / "remote-state" / remote.name / "agent.json"


def _agent_state(home: Path, remote) -> dict:
    try:
        data = json.loads(_agent_state_path(home, remote).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_agent_state(home: Path, remote, state: Optional[dict]) -> None:
    path = _agent_state_path(home, remote)
    try:
        if state is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, path)
    except OSError:
        pass  # only an optimisation is lost: the next grade comes through a login


def _local_agent_socket(control: Path, far_socket: str) -> Path:
    """This side's end of the forwarding to `far_socket`, beside the shared connection's control socket (the
    same 0700 folder; ssh makes it 0600)."""
    return control.with_name(f"{control.name}-{hashlib.sha256(far_socket.encode()).hexdigest()[:8]}")


def _connect_agent(home: Path, remote, control: Optional[Path], tag: str):
    """A socket connected to the far agent of build `tag` through the shared ssh connection, or None (no
    shared connection open, no agent known, or the forwarding cannot be set up): the caller logs in."""
    import socket

    state = _agent_state(home, remote)
    far = state.get("socket")
    if control is None or not far or state.get("tag") != tag or state.get("unreachable") \
            or os.environ.get("ROADMAP_FAR_AGENT") == "0" or ":" in str(control):
        return None
    local = _local_agent_socket(control, far)

    def connect():
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(local))
        except OSError:
            sock.close()
            return None
        return sock

    sock = connect()
    if sock is None:
        if not control.exists():
            return None  # no shared connection: the login opens one
        try:
            local.unlink(missing_ok=True)  # left by a master that is gone: ssh cannot bind over it
            # The master (if alive) listens on `local` and opens a channel to `far` for each connection:
            # one ssh command, once per shared connection.
            proc = subprocess.run(remote.ssh_argv("true", control=control)[:-3]
                                  + ["-O", "forward", "-L", f"{local}:{far}", "--", remote.host],
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0:
            return None
        sock = connect()
    return sock


# Run by the far python through a login when no shared connection is open (`remote remove`): asks the far
# agent listening on argv[1] to stop. Standard library only; one word on stdout.
_STOP_AGENT = r"""
import socket, sys
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(sys.argv[1])
        sock.sendall(b'{"stop": true}\n')
        print("stopped" if b"stopping" in sock.makefile("rb").readline(4096) else "no-answer")
except OSError:
    print("not-running")
"""


def stop_far_agent(home: Path, remote) -> str:
    """`roadmap remote remove`: ask the far agent to stop (it exits once no grade runs; a grade of another
    near side of the same far user finishes first): through the shared connection when it is open, else
    through a login. Returns "stopped", "none" (no agent known, or it was not running any more) or
    "unreachable: WHY" (it stops by itself after its idle timeout). Never raises."""
    from roadmap_cli import remotes

    state = _agent_state(home, remote)
    _save_agent_state(home, remote, None)
    far = state.get("socket")
    if not far:
        return "none"
    try:
        control = remotes.control_path(home, remote)
        local = _local_agent_socket(control, far) if control is not None else None
        if local is not None and local.exists():
            import socket

            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(5)
                    sock.connect(str(local))
                    sock.sendall(b'{"stop": true}\n')
                    if b"stopping" in sock.makefile("rb").readline(4096):
                        return "stopped"
            except OSError:
                pass  # the forwarding's master is gone: a login reaches it
            finally:
                local.unlink(missing_ok=True)  # the master keeps listening until it is closed; the name goes now
        # No shared connection (ControlPersist ran out, a reboot here): one login, without leaving a shared
        # connection behind for a remote that is being removed.
        python = shlex.quote(remote.python or "python3")
        command = f"{python} -c {shlex.quote(_STOP_AGENT)} {shlex.quote(far)}"
        proc = subprocess.run(remote.ssh_argv(command, connect_timeout_s=5), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=20)
        words = proc.stdout.split()
        if proc.returncode == 0 and words:
            return "stopped" if words[-1] == "stopped" else "none"
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        return "unreachable: " + (lines[-1] if lines else f"ssh exited with {proc.returncode}")
    except subprocess.TimeoutExpired:
        return "unreachable: no answer within 20 s"
    except Exception as exc:  # noqa: BLE001 - removing a remote never fails on its far side
        return f"unreachable: {exc}"


class _Background:
    """fn() in a thread; result() joins it and returns its value or raises what it raised."""

    def __init__(self, fn: Callable[[], Path]) -> None:
        import threading

        self._value: Optional[Path] = None
        self._error: Optional[BaseException] = None

        def run() -> None:
            try:
                self._value = fn()
            except BaseException as exc:  # noqa: BLE001 - raised again in result()
                self._error = exc

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> Path:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


class _Opened:
    """A grade's session (the far agent's connection, or a new ssh session), opened and sent its request:
    what the hello will be compared against."""

    def __init__(self, home: Path, remote, lab_id: str, path: Path, part: Optional[str],
                 timeout: Optional[float]) -> None:
        import secrets

        from roadmap_cli import remotes

        self.remote, self.lab_id, self.path, self.part, self.timeout = remote, lab_id, path, part, timeout
        self.key = remotes.key(home, remote.name)
        key_id = hashlib.sha256(self.key).hexdigest()[:16]
        self.ws_id = f"{lab_id}-{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
        self.files = workspace_files(path)
        self.tag, self.make_wheel = build_tag(home)
        self.nonce = secrets.token_hex(16)
        argv = [lab_id] + (["--part", part] if part else []) + (["--timeout", repr(float(timeout))] if timeout else [])
        self.t0 = time.monotonic()
        self.home = home
        self.control = remotes.control_path(home, remote)
        # "agent": the session may start the far agent (it is reached through the shared connection only).
        self.request = {"tag": self.tag, "key_id": key_id, "ws": self.ws_id, "argv": argv, "nonce": self.nonce,
                        "agent": self.control is not None and os.environ.get("ROADMAP_FAR_AGENT") != "0",
                        # Where a first install gets torch when the far python has none (remote add --torch ...).
                        "torch": {"spec": remote.torch, "index": remote.torch_index}}
        sock = _connect_agent(home, remote, self.control, self.tag)
        self.session = (_AgentSession(sock, remote, self.request) if sock is not None
                        else _Session(remote, self.request, control=self.control))
        # No far agent of this build known there: most likely its first use, whose hello asks for the wheel.
        # Building it (pip wheel of a checkout: seconds) overlaps with the login and the far python's start
        # instead of following the hello; a cached wheel makes this a file check.
        self._wheel = None if _agent_state(home, remote).get("tag") == self.tag else _Background(self.make_wheel)

    def go_early(self) -> None:
        """start_early only: read the hello and, when the far side has this build's venv and the key (a warm
        remote), send the changed files and "go" at once, in a thread, so the far grade runs while this
        process still imports typer, rich and pydantic (it idled for them: ~1.3 s of a 4.6 s warm grade on
        loopback). A first use, an error or no answer is left to grade_on, which says what happens."""
        import threading

        def run() -> None:
            try:
                msg = next((m for m in self.session.lines() if "hello" in m or "error" in m), None)
                self.early = {"msg": msg}
                hello = (msg or {}).get("hello")
                if not hello or not hello.get("venv") or not hello.get("key"):
                    return
                theirs = hello["files"]
                changed = [rel for rel, sha in self.files.items() if theirs.get(rel) != sha]
                deleted = sorted(set(theirs) - set(self.files))
                blob = b""
                if changed or deleted:
                    blob = _tar(self.path, changed)
                    self.session.put("files", blob, delete=deleted, manifest=self.files)
                self.session.send(b'{"go": true}\n')
                self.early["sent"] = {"changed": len(changed), "deleted": len(deleted), "bytes": len(blob)}
            except Exception:  # noqa: BLE001 - grade_on goes on from what was read; a lost connection says so
                return

        self.early = None
        self._early_thread = threading.Thread(target=run, daemon=True)
        self._early_thread.start()

    def early_result(self) -> Optional[dict]:
        """What go_early did: None (not asked, or it read nothing), {"msg": the hello or error message}, with
        "sent" ({"changed", "deleted", "bytes"}) when it sent the files and "go"."""
        thread = getattr(self, "_early_thread", None)
        if thread is None:
            return None
        thread.join()
        return self.early

    def wheel(self) -> Path:
        """This build's wheel: the one built in the background since the session opened, else built now."""
        return self._wheel.result() if self._wheel is not None else self.make_wheel()

    def settle(self) -> None:
        """A background build nobody needed (the far venv was there) finishes before the command exits:
        never a pip process left behind writing into the cache."""
        if self._wheel is not None:
            self._wheel.wait()

    def log_in(self):
        """The far agent did not answer: the same request through a new ssh session (the old way), and the
        agent is not tried again until a session finds it (re)started."""
        state = _agent_state(self.home, self.remote)
        _save_agent_state(self.home, self.remote, {**state, "unreachable": True})
        self.session = _Session(self.remote, self.request, control=self.control)
        return self.session

    def matches(self, remote, lab_id: str, path: Path, part: Optional[str], timeout: Optional[float]) -> bool:
        return (self.remote == remote and self.lab_id == lab_id and self.path == path and self.part == part
                and (self.timeout or None) == (timeout or None))


_early: Optional[_Opened] = None  # opened by start_early (before typer loads), until grade_on takes it


def start_early(home: Path, remote_name: str, lab_id: str, path: Path, *, part: Optional[str] = None,
                timeout: Optional[float] = None) -> bool:
    """`roadmap grade --on NAME`, called by grading/prestart.py before the command line is parsed: open the
    ssh session now, so the connection, the far login and the far agent's start overlap with this side's
    imports (typer, rich, pydantic). grade_on takes it only when it is for the very same grade; anything
    going wrong here opens nothing, and the normal path reports it. Never raises."""
    global _early
    try:
        from roadmap_cli import remotes

        remote = remotes.get(home, remote_name)
        if not path.is_dir():
            return False
        _early = _Opened(home, remote, lab_id, path, part, timeout)
        _early.go_early()
    except Exception:  # noqa: BLE001 - the normal path says what is wrong
        return False
    return True


def start_early_args(args: list[str]) -> bool:
    """`roadmap grade ARGS` with `--on NAME` (the plain forms grading/prestart.py reads): start_early for the
    workspace the command will grade. Called by the console script and cli.main before typer parses;
    never raises (the normal path reports every problem)."""
    from roadmap_cli.grading import prestart

    if _early is not None:
        return True  # the console script opened it already
    options = prestart._read(args)
    if options is None or options["on"] is None or os.environ.get("_ROADMAP_COMPLETE") \
            or options["keyword"] or options["tests"] or options["first_failure"] or options["verbose"]:
        return False  # not a plain --on grade (or one the command refuses: it says so)
    try:
        from roadmap_cli.labs.service import locate_workspace, workspaces_fast
        from roadmap_cli.paths import resolve_home

        home = resolve_home(None)
        rows = workspaces_fast(home)
        if rows is None:
            return False  # another database, or none yet: the store is needed first
        lab_id, path = locate_workspace(None, options["lab_id"], Path.cwd(), rows)
    except Exception:  # noqa: BLE001
        return False
    return start_early(home, options["on"], lab_id, path, part=options["part"], timeout=options["timeout"])


def discard_early() -> None:
    """Close an early session nobody took (the command failed first): the far agent sees its stdin end and
    exits, cancelling the grade go_early may have started (nothing is left running there)."""
    global _early
    opened, _early = _early, None
    if opened is not None:
        opened.session.close(2.0)
        opened.settle()


def _take_early(remote, lab_id: str, path: Path, part: Optional[str], timeout: Optional[float]):
    global _early
    opened, _early = _early, None
    if opened is not None and not opened.matches(remote, lab_id, path, part, timeout):
        opened.session.close(2.0)
        opened.settle()
        return None
    return opened


def _state_path(home: Path, remote: str, ws_id: str) -> Path:
    return home / "remote-state" / remote / f"{ws_id}.json"


def _run_from(data: dict):
    from roadmap_cli.grading.results import GradeRun, PartResult, TestResult

    run = dict(data)
    run["parts"] = [PartResult(**p) for p in run["parts"]]
    run["tests"] = [TestResult(**t) for t in run["tests"]]
    return GradeRun(**run)


def grade_on(get_store: Callable[[], object], home: Path, remote_name: str, lab_id: Optional[str], cwd: Path, *,
             part: Optional[str] = None, timeout: Optional[float] = None,
             on_event: Optional[Callable[[dict], None]] = None,
             on_progress: Optional[Callable[[str], None]] = None, cancel=None):
    """Send, grade there, record here. Returns a grade.GradeOutcome (with `.sent`: files sent, deleted).
    `cancel`: a threading.Event that stops the grade there (`roadmap watch --on`: a save during a run); the
    attempt is then recorded as interrupted, as a cancelled local grade is."""
    from roadmap_cli import remotes
    from roadmap_cli.grading.grade import GradeOutcome, _outcome, record_attempt
    from roadmap_cli.labs.service import resolve_workspace, start_command, workspaces, workspaces_fast
    from roadmap_cli.labs.workspace import head_info

    say = on_progress or (lambda line: None)
    remote = remotes.get(home, remote_name)
    rows = workspaces_fast(home)
    if rows is None:
        rows = workspaces(get_store())
    spec, path = resolve_workspace(None, lab_id, cwd, rows)
    if not path.is_dir():
        raise UserError(f"workspace {path} is gone: run `{start_command(home, spec.id, path)}`")
    if part:
        spec.part(part)
    # The session opened before the command line was parsed (start_early) when it is for this grade.
    opened = _take_early(remote, spec.id, path, part, timeout) or _Opened(home, remote, spec.id, path, part, timeout)
    key, ws_id, files, tag, make_wheel = opened.key, opened.ws_id, opened.files, opened.tag, opened.wheel
    nonce, t0, session = opened.nonce, opened.t0, opened.session
    events: list[dict] = []
    signed = None
    started = interrupted = False
    sent = {"changed": 0, "deleted": 0, "bytes": 0, "installed": False, "via": session.via}
    device = {"cuda": False, "name": "?"}
    finished = False
    if cancel is not None:
        import threading

        def stop_on_cancel() -> None:
            while not finished:
                if cancel.wait(0.1):
                    opened.session.end_input()  # the agent stops the grade there, as for Ctrl-C
                    return

        threading.Thread(target=stop_on_cancel, daemon=True).start()
    early = opened.early_result()
    try:
        lines = session.lines()
        if early is not None:  # start_early read the hello already (and maybe sent the files and "go")
            msg = early["msg"] or {}
            if "error" in msg:
                _raise(msg, remote)
            hello = msg.get("hello")
        else:
            hello = next((m["hello"] for m in lines if "hello" in m or "error" in m and _raise(m, remote)), None)
        if hello is None and session.via == "agent" and not (cancel is not None and cancel.is_set()):
            say(f"the far agent on {remote.name} did not answer: grading through a new ssh session")
            session.close(0.5)
            early = None
            session = opened.log_in()
            lines = session.lines()
            hello = next((m["hello"] for m in lines if "hello" in m or "error" in m and _raise(m, remote)), None)
        if hello is None:
            if cancel is not None and cancel.is_set():
                raise _Cancelled
            raise session.failure()
        sent["via"] = session.via
        if session.via == "ssh":
            # What this session says of the far agent: where it listens (started after this grade when it
            # did not run), or nothing (no agent there: its path is too long, or agents are off).
            previous = _agent_state(home, remote)
            _save_agent_state(home, remote, None if not hello.get("agent") else {
                "socket": hello["agent"], "tag": tag,
                # Unreachable while the agent that was not reached still runs (e.g. the server forbids
                # forwarding); a new one gets a new try.
                "unreachable": bool(previous.get("unreachable") and previous.get("socket") == hello["agent"]
                                    and hello.get("agent_running"))})
        theirs = hello["files"]
        changed = [rel for rel, sha in files.items() if theirs.get(rel) != sha]
        deleted = sorted(set(theirs) - set(files))
        if early is not None and "sent" in early:
            if early["sent"]["changed"] or early["sent"]["deleted"]:
                say(f"sent {early['sent']['changed']} changed file(s) ({early['sent']['bytes'] / 1024:.0f} KiB)"
                    + (f", deleting {early['sent']['deleted']}" if early["sent"]["deleted"] else "")
                    + f" to {remote.name}")
            sent.update(early["sent"])
        elif not hello["venv"]:
            if not hello.get("torch") and hello.get("ensurepip") is False:
                # Without torch everything must come from pip, and this python cannot give a venv pip.
                _raise({"error": "", "kind": "no-ensurepip", "python": hello.get("executable"),
                        "version": ".".join(str(hello.get("python", "3")).split(".")[:2])}, remote)
            wheel = make_wheel()
            from roadmap_cli.remotes import torch_install_plan

            say(f"first use of {remote.name}: sending roadmap {tag} ({wheel.stat().st_size / 2**20:.1f} MB) to set up "
                f"its managed venv" + ("" if hello.get("torch") else
                                       f" (its python has no torch: pip installs "
                                       f"{torch_install_plan(remote, bool(hello.get('nvidia_driver')))})"))
            session.put("wheel", wheel.read_bytes(), name=wheel.name.split(".whl")[0][:40] + ".whl")
            sent["installed"] = True
        if early is None or "sent" not in early:
            if not hello["key"]:
                session.put("key", key.hex().encode() + b"\n")
            if changed or deleted:
                blob = _tar(path, changed)
                say(f"sending {len(changed)} changed file(s) ({len(blob) / 1024:.0f} KiB)"
                    + (f", deleting {len(deleted)}" if deleted else "") + f" to {remote.name}")
                session.put("files", blob, delete=deleted, manifest=files)
                sent.update(changed=len(changed), deleted=len(deleted), bytes=len(blob))
            session.send(b'{"go": true}\n')
        for msg in lines:
            if "progress" in msg:
                say(f"{remote.name}: {msg['progress']}")
            elif "error" in msg:
                _raise(msg, remote)
            elif "signed" in msg:
                signed = msg
            elif msg.get("event") == "remote-device":
                device = msg
            elif "event" in msg:
                started = started or msg["event"] == "started"
                events.append(msg)
                if on_event:
                    on_event(msg)
            elif "exit" in msg:
                break
    except _Cancelled:
        pass  # before the grade started there: recorded as interrupted below
    except KeyboardInterrupt:
        interrupted = True
        say(f"stopping the grade on {remote.name}…")
    finally:
        finished = True
        interrupted = interrupted or (cancel is not None and cancel.is_set() and signed is None)
        session.close(STOP_WAIT_S if interrupted or signed is None else 2.0)
        opened.settle()
    if started or signed is not None:
        state = _state_path(home, remote.name, ws_id)
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps(files))  # what the far side now holds (it keeps the same manifest)
    precheck_problem = None
    if signed is not None:
        expected = hmac.new(key, signed["signed"].encode(), hashlib.sha256).hexdigest()
        body = json.loads(signed["signed"])
        if not hmac.compare_digest(expected, str(signed.get("sig"))) or body.get("nonce") != nonce:
            raise RemoteError(f"the result from remote {remote.name!r} is not signed with its key (or is a replay): "
                              "nothing was recorded")
        run = _run_from(body["run"])
        run.workspace = str(path)
        if body.get("precheck"):
            from roadmap_cli.grading.precheck import Problem

            precheck_problem = Problem(**body["precheck"])
    elif started or interrupted:
        run = _interrupted_run(spec, path, device, part, events, t0)
    else:
        raise session.failure()
    sha, dirty = head_info(path)
    store = get_store()
    attempt_id, marked = record_attempt(store, spec, run, sha, dirty, graded_on=remote.name)
    outcome: GradeOutcome = _outcome(store, spec, attempt_id, run, sha, dirty, marked, "en", problem=precheck_problem)
    outcome.sent = sent  # type: ignore[attr-defined]
    outcome.graded_on = remote.name  # type: ignore[attr-defined]
    # The footers of `grade --on` and `watch --on` say where the grade ran (not on this machine).
    address = remote.url.split("://", 1)[1]
    outcome.graded_where = f"graded remotely on {remote.name} ({address})"  # type: ignore[attr-defined]
    if signed is None and not interrupted:
        raise RemoteError(f"the connection to remote {remote.name!r} was lost during the grade: attempt "
                          f"{outcome.attempt_number} of {spec.id} is recorded as interrupted")
    return outcome


class _Cancelled(Exception):
    """The grade's `cancel` was set before the far side answered."""


def _raise(msg: dict, remote) -> bool:
    if msg.get("kind") == "no-ensurepip":
        # Debian and Ubuntu ship ensurepip apart from python itself (python3.X-venv): name that package, and
        # the exact commands that fix it (installing it there, or using another python there).
        package = f"python{msg.get('version') or '3'}-venv"
        raise RemoteError(f"remote {remote.name!r}: {msg.get('python') or remote.python or 'python3'} has no "
                          f"ensurepip, so roadmap cannot install torch and its other dependencies there: run "
                          f"`{remote.ssh_command('sudo', 'apt-get', 'install', '-y', package, tty=True)}` (Debian/Ubuntu), "
                          f"or use another python there: `{remote.add_command(python='PATH')}`")
    if msg.get("kind") == "torch-install" and remote.torch_index != "pip":
        # Most often a box that cannot reach the index torch's build comes from (a firewall, a mirror only).
        raise RemoteError(f"remote {remote.name!r}: {msg['error']} (to take torch from the mirror or wheels pip "
                          f"is configured with there: `{remote.add_command(torch_index='pip')}`)")
    raise RemoteError(f"remote {remote.name!r}: {msg['error']}")


def _interrupted_run(spec, path: Path, device: dict, part: Optional[str], events: list[dict], t0: float):
    """What arrived before the grade stopped, marked interrupted: nothing of it counts."""
    from datetime import datetime, timezone
    from types import SimpleNamespace

    from roadmap_cli.grading.results import assemble, mark_interrupted

    dev = SimpleNamespace(cuda=bool(device.get("cuda")), name=device.get("name") or "?", capability=None,
                          torch_version=None, triton_version=None)
    selected = [p.id for p in spec.parts if (part is None or p.id == part) and (dev.cuda or not p.needs_cuda)]
    run = assemble(spec, path, dev, selected, events, None, False, 0.0, "")
    mark_interrupted(run)
    run.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    run.duration_s = round(time.monotonic() - t0, 3)
    run.grader_sha256 = ""
    return run


if __name__ == "__main__":
    import sys

    events_main(sys.argv[1:])
