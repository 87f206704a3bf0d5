"""Entry point of dev check's learner zygote (warm_learner.py tells the
whole story), started by grading/warm.py `WarmLearners` behind bubblewrap as
`python -I -B -P -c "from roadmap_cli.grading_kit._warm_learner_main import serve; serve()" SOCKET_FD`.

It imports what every learner process imports, then for each request forks
a keeper (own session, child subreaper) that forks the learner process and
runs `_learner_main.main()` in it, in place, as a cold learner would. Nothing
here runs learner code before the fork, and nothing of the learner's set-up
(limits, capabilities, audit hook, import layout) happens before it either.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
from typing import Optional

from roadmap_cli.grading_kit.forked import reseed_global_streams, take_popen_shape
from roadmap_cli.grading_kit.warm_learner import STATUS

# What a learner process imports anyway (the grading_kit package and its modules, torch with the adapter).
PRELOAD = (
    "numpy",
    "torch",
    "roadmap_cli.grading_kit",
    "roadmap_cli.grading_kit._learner_main",
    "roadmap_cli.grading_kit.learner",
    "roadmap_cli.grading_kit.sandbox",
)
_MAX_MESSAGE = 1 << 20


def serve() -> None:
    """The zygote's loop, behind bubblewrap: `python -I -B -P -c "...serve()" SOCKET_FD`.
    bwrap's --die-with-parent ends it (and every learner, with its pid namespace) with the engine."""
    import importlib

    sock = socket.socket(fileno=int(sys.argv[1]))
    for name in PRELOAD:
        importlib.import_module(name)
    _subreaper()  # a keeper that dies leaves its learner's processes to us
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select() through the wakeup fd
    keepers: set[int] = set()
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            _reap_orphans(keepers)
        if sock not in readable:
            continue
        message, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 8)
        if not message:
            os._exit(0)  # every grader and the engine closed the socket: the run is over (no teardown of torch)
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _keep(json.loads(message), fds, close=(sock.fileno(), wake_r, wake_w))
        keepers.add(pid)
        for fd in fds:
            os.close(fd)


def _subreaper() -> None:
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _children() -> list[int]:
    """Our direct children (orphans re-parented to us among them), from /proc (our pid namespace's)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found


def _reap_orphans(keepers: set[int]) -> None:
    """Reap exited keepers; SIGKILL any other child (a dead keeper's orphan)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        keepers.discard(pid)
    for pid in _children():
        if pid not in keepers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _reap_exited(learner: int) -> tuple[Optional[int], bool]:
    """Reap every child that has exited, without waiting: (the learner's wait
    status if it was among them, whether no child at all is left)."""
    status = None
    try:
        while True:
            pid, st = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return status, False
            if pid == learner:
                status = st
    except ChildProcessError:
        return status, True


def _kill_all(learner: int) -> Optional[int]:
    """SIGKILL the learner's group and every descendant of ours, until none
    is left; the learner's wait status if it was reaped here."""
    status = None
    try:
        os.killpg(learner, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(1000):
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reaped, none_left = _reap_exited(learner)
        status = reaped if reaped is not None else status
        if none_left:
            break
        select.select([], [], [], 0.005)
    return status


def _keep(request: dict, fds: list[int], close: tuple[int, ...]) -> None:
    """The keeper, in a child of the zygote: fork the learner, report it, end
    it and everything it started. Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        for fd in close:
            os.close(fd)
        os.setsid()
        _subreaper()  # orphans of the learner's processes come to us, to be killed with it
        req_r, rep_w, out_w, sock_fd = fds
        sock = socket.socket(fileno=sock_fd)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        learner = os.fork()
        if learner == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _become_learner(request, req_r, rep_w, out_w, close=(sock_fd, wake_r, wake_w))
        for fd in (req_r, rep_w, out_w):
            os.close(fd)
        pidfd = os.pidfd_open(learner)
        socket.send_fds(sock, [b"pid"], [pidfd])
        os.close(pidfd)
        status: Optional[int] = None
        while status is None:
            readable, _, _ = select.select([sock, wake_r], [], [])
            if wake_r in readable:
                os.read(wake_r, 4096)
            status, _ = _reap_exited(learner)
            if status is None and sock in readable:
                try:
                    data = sock.recv(16)
                except OSError:
                    data = b""
                if not data:  # the grader is done with it, or gone
                    _kill_all(learner)
                    os._exit(0)
                if data == b"kill":
                    status = _kill_all(learner)
        _kill_all(learner)  # what it left running ends with it, as with a cold learner's pid namespace
        try:
            sock.send(STATUS.pack(status))
        except OSError:
            pass
    except BaseException:  # noqa: BLE001 - nothing may return into the zygote's loop
        import traceback

        traceback.print_exc()
    finally:
        os._exit(0)


def _become_learner(request: dict, req_r: int, rep_w: int, out_w: int, close: tuple[int, ...]) -> None:
    """In the learner child: look like the cold learner's Popen, then run
    `_learner_main.main()` in place. Never returns."""
    code = 1
    try:
        for fd in close:
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        req_t, rep_t = request["fds"]
        take_popen_shape(out_w, {req_r: req_t, rep_w: rep_t}, request["cwd"], request["env"])
        reseed_global_streams()
        sys.argv = ["-c", str(req_t), str(rep_t)]
        from roadmap_cli.grading_kit._learner_main import main

        main()  # exits itself (os._exit) when the grader closes the request pipe
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - as an uncaught exception ends a cold learner: a traceback, status 1
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)
