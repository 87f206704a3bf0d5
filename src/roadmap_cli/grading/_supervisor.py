"""The grade's supervisor: `python -I -S _supervisor.py -- GRADER_CMD...`.

A tiny stdlib-only process between the engine and the grader (pytest). It
makes itself a *child subreaper* (prctl PR_SET_CHILD_SUBREAPER): every
process the grade starts that gets orphaned — a learner's `os.setsid()`,
a double-forked sleeper — is re-parented to this process instead of init.
So when the grader ends, or on SIGTERM/SIGINT/SIGHUP from the engine
(timeout, Ctrl-C), or when the engine itself dies (PR_SET_PDEATHSIG), it
SIGKILLs every descendant, reaps them, and exits with the grader's status
(killed by signal N -> it kills itself with N, so the engine sees the same
status as if it had run the grader itself).

It is run by path with -S (no site-packages): nothing the learner could
shadow is imported, and it starts in ~20 ms.
"""

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children_map() -> dict:
    """ppid -> [pid] for every process we can see."""
    tree: dict = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 2:
            tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def descendants(root: int) -> list:
    tree, out, todo = _children_map(), [], [root]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def marked(token: str) -> list:
    """Processes whose environment holds `token` (the grade's mark on every
    learner process and, unless they cleared their environment, its
    descendants): found even after re-parenting to init."""
    needle, me, out = token.encode(), os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read():
                    out.append(int(name))
        except OSError:
            continue
    return out


def reap_all() -> None:
    """SIGKILL and reap every descendant, until none is left (a fork racing
    with the scan is caught by the next round: orphans come back to us)."""
    me = os.getpid()
    for _ in range(200):
        alive = descendants(me)
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
        if not alive:
            return
        time.sleep(0.01)


class _Stop(Exception):
    pass


def _on_signal(signum, frame):
    raise _Stop(signum)


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    supervise(lambda: os.execv(argv[0], argv))


def supervise(run_grader) -> None:
    """Be the grade's supervisor: fork, call `run_grader()` in the child (it
    must never return: exec, or run the grader and exit), and wait for it;
    never returns. Warm graders (grading/warm.py) call this in a process
    forked from a warm interpreter, with a `run_grader` that runs pytest in
    place instead of exec'ing a new Python."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    if os.getppid() == 1:  # our parent (the engine, or a warm grader) died before PDEATHSIG was armed
        _exit(1)
    status = None
    try:
        child = os.fork()
        if child == 0:
            try:
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                run_grader()
            finally:
                os._exit(127)
        # Our copies of the inherited descriptors (results channel, config
        # pipe) must not keep them open once the grader is gone.
        for fd in os.listdir("/proc/self/fd"):
            if int(fd) > 2:
                try:
                    os.close(int(fd))
                except OSError:
                    pass
        while status is None:
            pid, st = os.wait()
            if pid == child:
                status = st
    except _Stop as stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        reap_all()
        _exit(128 + int(stop.args[0]))
    except ChildProcessError:
        status = 0
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # finish the cleanup even if asked twice
    reap_all()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    _exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _exit(code: int) -> None:
    """Exit at once: in a process forked from a warm grader, interpreter
    teardown (atexit handlers, torch's among them) is not ours to run."""
    os._exit(code)


if __name__ == "__main__":
    main()
