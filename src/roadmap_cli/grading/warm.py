"""Warm graders: one Python with pytest and torch already imported, forked
for each grade instead of starting a new interpreter.

A grade's grader process spends most of a small grade importing: torch alone
is ~1.4 s of CPU, pytest ~0.4 s, while a wrong variant's focused tests run in
milliseconds. `roadmap dev check` grades ~500 times, `dev mutate` hundreds,
so the authoring tools keep one *warm* interpreter (the zygote) per run:

    engine ──(socket: argv, env, cwd + the grade's descriptors)──▶ zygote
    zygote ──fork──▶ supervisor (grading/_supervisor.supervise: subreaper)
                         └──fork──▶ grader (pytest.console_main, in place)

Everything a grade can observe is what a cold start gives it: its own
environment, working folder, stdin/stdout/stderr and descriptors at the same
numbers, its own session, a fresh `random` stream, the same supervisor (a
subreaper that kills every descendant at the end), and the learner process is
started exactly as before (grading_kit/learner.py: bubblewrap, a new
interpreter). Only start-up state is shared, and it is the same as a cold
start's: the zygote runs with the engine's environment for this device
(TRITON_INTERPRET, thread variables) and imports modules without running
anything of a lab. What the zygote never preloads: the grading plugin and
any lab or test module (pytest must import them itself: assertion rewriting,
conftest order), and triton (whose behaviour follows TRITON_INTERPRET at
import).

The engine gets a `WarmProc` for the supervisor with the part of
subprocess.Popen's interface GradeJob uses (pid, poll, wait, send_signal,
kill, returncode). The supervisor is the zygote's child, not the engine's:
the zygote reaps it and writes its wait status to a pipe the engine reads,
and hands over a pidfd, so a signal can never reach a recycled pid.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from typing import Callable, Optional

from roadmap_cli.grading_kit.forked import WAIT_STATUS, ForkedChild, reseed_global_streams, take_popen_shape

# Imported once in the zygote: the cost every grade would pay again. Import-time
# state only (no lab code runs), and none of them reads the grade's variables.
PRELOAD = ("numpy", "torch", "pytest", "roadmap_cli.grading_kit", "roadmap_cli.labs.nodeids")
_MAX_MESSAGE = 1 << 20
_MAX_FDS = 16


class WarmUnavailable(Exception):
    """The zygote could not start or died: the caller grades cold."""


class WarmProc(ForkedChild):
    """The per-grade supervisor, forked by the zygote: Popen's interface as
    GradeJob uses it, with the exit status read from the zygote's pipe (no
    status at all: the zygote died, killed with the engine, and its children
    with it)."""


class WarmGraders:
    """One zygote for a run of many grades (dev check, dev mutate) on one
    device. Start it from the main thread (its parent-death signal follows
    the thread that started it); `spawn` may be called from any thread. Use
    as a context manager, or call close()."""

    def __init__(self, env: dict[str, str], python: Callable[[str], list[str]]) -> None:
        """`env`: the grader environment for the device, less what is per grade;
        `python`: argv of the grader's interpreter running some code (its flags, its fixed sys.path).
        (grading/launch.py's warm_graders(device) gives both.)"""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._lock = threading.Lock()
        self._ready = False
        self._log = tempfile.TemporaryFile()  # the zygote's own stderr: shown if it fails to start
        cmd = [*python("from roadmap_cli.grading.warm import serve; serve()"), str(theirs.fileno())]
        try:
            # A session of its own: Ctrl-C in the terminal reaches the engine, which cancels its
            # grades (recorded as interrupted); it must not kill the zygote under them first.
            self._proc = subprocess.Popen(
                cmd,
                env=env,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                cwd="/",
                start_new_session=True,
            )
        finally:
            theirs.close()

    def __enter__(self) -> "WarmGraders":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _why(self) -> str:
        self._log.seek(0)
        tail = self._log.read()[-600:].decode(errors="replace").strip()
        return tail.splitlines()[-1] if tail else f"exit status {self._proc.poll()}"

    def _check_ready(self, block: bool, timeout: Optional[float] = None) -> None:
        if self._ready:
            return
        self._sock.settimeout(timeout if block else 0.0)
        try:
            message = self._sock.recv(16)
        except (BlockingIOError, socket.timeout):
            raise WarmUnavailable("the warm grader is still starting") from None
        finally:
            self._sock.settimeout(None)
        if message != b"ready":
            raise WarmUnavailable(f"the warm grader did not start: {self._why()}")
        self._ready = True

    def wait_ready(self, timeout: float = 60) -> bool:
        """Wait until the zygote has imported what it preloads; False if it
        failed or took longer (grades then start cold)."""
        with self._lock:
            try:
                self._check_ready(block=True, timeout=timeout)
            except (WarmUnavailable, OSError):
                return False
        return True

    def spawn(
        self, pytest_args: list[str], *, env: dict[str, str], cwd: str, output_fd: int, pass_fds: tuple[int, ...]
    ) -> WarmProc:
        """Start one grade: `python -m pytest *pytest_args` under a supervisor,
        stdout and stderr on `output_fd`, `pass_fds` at the same numbers."""
        request = json.dumps({"args": pytest_args, "env": env, "cwd": cwd, "targets": list(pass_fds)}).encode()
        status_r, status_w = os.pipe()
        try:
            with self._lock:
                # Never wait for it: a grade asked for while torch is still loading starts cold (a
                # cancel, a Ctrl-C, must not sit behind the zygote's start-up).
                self._check_ready(block=False)
                socket.send_fds(self._sock, [request], [output_fd, status_w, *pass_fds])
                reply, fds, _, _ = socket.recv_fds(self._sock, 256, 1)
        except OSError as exc:
            os.close(status_r)
            raise WarmUnavailable(f"the warm grader is gone: {exc}") from None
        except WarmUnavailable:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
        if not reply or not fds:
            os.close(status_r)
            raise WarmUnavailable(f"the warm grader is gone: {self._why()}")
        return WarmProc(json.loads(reply)["pid"], fds[0], status_r)

    def close(self) -> None:
        """Closing the socket ends the zygote (it stops every grade still running)."""
        self._sock.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()


# ------------------------------------------------------------------ the zygote


def serve() -> None:
    """The zygote's main loop: `python -I -u -c "...serve()" SOCKET_FD`."""
    import importlib

    from roadmap_cli.grading._supervisor import PR_SET_PDEATHSIG, _prctl

    sock = socket.socket(fileno=int(sys.argv[1]))
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the engine died: so do we, and (by theirs) every grade
    if os.getppid() == 1:
        os._exit(1)
    for name in PRELOAD:
        importlib.import_module(name)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select() through the wakeup fd
    sock.send(b"ready")
    status_fds: dict[int, int] = {}
    try:
        while True:
            readable, _, _ = select.select([sock, wake_r], [], [])
            if wake_r in readable:
                os.read(wake_r, 4096)
            _reap(status_fds)
            if sock not in readable:
                continue
            message, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, _MAX_FDS)
            if not message:
                break  # the engine closed its end: we are done
            pid = os.fork()
            if pid == 0:
                _become_supervisor(json.loads(message), fds, close=(sock.fileno(), wake_r, wake_w))
            # Taken before we could reap it: the pid cannot be recycled while the pidfd exists.
            pidfd = os.pidfd_open(pid)
            status_fds[pid] = fds[1]
            for fd in fds[:1] + fds[2:]:
                os.close(fd)
            socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd])
            os.close(pidfd)
    finally:
        for pid in status_fds:
            try:
                os.kill(pid, signal.SIGTERM)  # each supervisor kills and reaps its own grade
            except ProcessLookupError:
                pass


def _reap(status_fds: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status_fds.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, WAIT_STATUS.pack(status))
            except OSError:
                pass  # the engine stopped waiting
            os.close(fd)


def _become_supervisor(request: dict, fds: list[int], close: tuple[int, ...]) -> None:
    """In the forked child: look like `Popen(supervisor cmd, cwd, env,
    stdout=stderr=output, stdin=DEVNULL, start_new_session, pass_fds)`, then
    supervise a grader that runs pytest in place. Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        os.setsid()
        output, status, passed = fds[0], fds[1], fds[2:]
        os.close(status)  # the zygote reports our status, we do not
        take_popen_shape(output, dict(zip(passed, request["targets"])), request["cwd"], request["env"])
        from roadmap_cli.grading._supervisor import supervise

        supervise(lambda: _run_pytest(request["args"]))
    except BaseException:  # noqa: BLE001 - nothing may return into the zygote's loop
        import traceback

        traceback.print_exc()
    finally:
        os._exit(126)


def _run_pytest(args: list[str]) -> None:
    """`python -m pytest *args`, in this already-warm interpreter. Never returns."""
    code = 1
    try:
        reseed_global_streams()
        import pytest

        sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *args]
        code = pytest.console_main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


# --------------------------------------------------------------- warm learners


class WarmLearners:
    """dev check's learner zygote (grading_kit/warm_learner.py): one Python
    behind bubblewrap, with torch imported, that forks each grade's learner
    process. Its one writable folder is `root`: make every workspace and
    every grade's scratch folder under it (GradeJob's `scratch_parent`), or
    that grade's learner starts cold. Start it from the main thread; pass
    `grade_env()` and `fd` to every grader (GradeJob does, given `learners`).
    grading/launch.py's `warm_learners(specs, device)` gives None where there is no OS wall."""

    def __init__(self, env: dict[str, str], view: dict, root: str, shims: Optional[str] = None) -> None:
        from roadmap_cli.grading_kit import oswall

        self.root = root
        self.shims = shims  # where GradeJob makes the labs' adapter shims (read-only in the view), removed at close
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self.fd = ours.fileno()  # every grader inherits this number (pass_fds) and names it in its environment
        self._log = tempfile.TemporaryFile()  # the zygote's own stderr, for a test to read
        flags = ["-I", "-B"] + (["-P"] if sys.version_info >= (3, 11) else [])  # as a cold learner's
        cmd = [
            sys.executable,
            *flags,
            "-c",
            "from roadmap_cli.grading_kit._warm_learner_main import serve; serve()",
            str(theirs.fileno()),
        ]
        try:
            with oswall.walled(cmd, view) as (cmd, wall_fds):
                self._proc = subprocess.Popen(
                    cmd,
                    env=env,
                    pass_fds=(theirs.fileno(), *wall_fds),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=self._log,
                    cwd=root,
                    start_new_session=True,
                )
        finally:
            theirs.close()

    def grade_env(self) -> dict[str, str]:
        from roadmap_cli.grading_kit.warm_learner import ENV_FD, ENV_ROOT

        return {ENV_FD: str(self.fd), ENV_ROOT: self.root}

    def __enter__(self) -> "WarmLearners":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Closing our end ends the zygote once no grader holds one; bwrap's end takes every learner with it."""
        import shutil

        self._sock.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()  # bwrap: its pid namespace, every learner in it, goes with it
            self._proc.wait()
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.shims:
            shutil.rmtree(self.shims, ignore_errors=True)
