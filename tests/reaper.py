"""A watchdog for the servers tests start (PostgreSQL, sshd and what its
sessions leave behind): when the test process dies without stopping them
(`kill -9` of pytest, a CI job cancelled, an OOM kill), the servers go with it
and their folders are removed. A process a test starts as its own child
(`roadmap worker`, the background dev check) needs no second process: it gets
`die_with_parent` as its preexec_fn, and the kernel ends it with the test.

Why a separate process: `pg_ctl start` daemonises the postmaster, so it is no
child of pytest and no parent-death signal reaches it; and a test killed
outright runs no `finally`. The reaper is started in its own session (a signal
to pytest's process group does not take it along), waits on a pidfd for the
test process to exit (no polling), then runs the clean-up it was given.

A server that daemonises what it serves leaves processes that are neither its
children nor in its process group by the time the test dies (sshd's
per-connection processes, the far agent a `grade --on` session starts in a
session of its own): the reaper also kills, at that moment, every descendant
of the guarded pids and every process whose command line or environment names
one of the `marks` (a folder of that test's own).

`guard(...)` returns a handle whose `release()` stops the reaper when the test
stops the server itself; the normal path costs one short-lived process.

Run as a script: `python reaper.py < SPEC_JSON` (guard does that).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass
class Reaper:
    proc: subprocess.Popen

    def release(self) -> None:
        """The test stopped its server itself: the reaper has nothing to do."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def guard(
    *, commands: list[list[str]] = (), pids: list[int] = (), paths: list[str] = (), marks: list[str] = ()
) -> Reaper:
    """When this process dies: note every descendant of `pids` and every process marked by one of `marks`
    (a folder named by its command line or environment, or below it); run `commands` (e.g. `pg_ctl stop -m
    immediate`); then SIGKILL all of those still alive (and the process groups `pids` lead); then remove
    `paths`."""
    spec = {
        "parent": os.getpid(),
        "commands": [list(c) for c in commands],
        "pids": list(pids),
        "paths": [str(p) for p in paths],
        "marks": [str(m) for m in marks],
    }
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    # The spec goes through stdin, not the command line: a test that looks for processes naming its folder must
    # not find the reaper.
    proc.stdin.write(json.dumps(spec).encode())
    proc.stdin.close()
    return Reaper(proc)


def die_with_parent() -> None:
    """A preexec_fn: the child is sent SIGKILL when the process that started it dies (PR_SET_PDEATHSIG), so a
    test killed outright takes the processes it started itself along. Linux only; elsewhere a no-op."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _wait_for_exit(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone
    except (AttributeError, OSError):  # no pidfd (old kernel): poll
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _processes() -> dict[int, tuple[int, list[bytes], list[bytes]]]:
    """pid -> (parent pid, command-line words, environment entries) of every process we may read."""
    table = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[-1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    environ = fh.read().split(b"\0")
            except OSError:
                environ = []
        except (OSError, ValueError, IndexError):
            continue
        table[int(name)] = (ppid, argv, environ)
    return table


def _names(word: bytes, marks: list[bytes]) -> bool:
    value = word.split(b"=", 1)[1] if b"=" in word and not word.startswith(b"/") else word
    return any(value == m or value.startswith(m + b"/") for m in marks)


def _left_behind(spec: dict) -> set[int]:
    """Every descendant of the guarded pids, and every process marked by one of the marks (not this one)."""
    table = _processes()
    marks = [os.fsencode(m.rstrip("/")) for m in spec.get("marks", ())]
    found = {
        pid for pid, (_, argv, environ) in table.items() if marks and any(_names(w, marks) for w in argv + environ)
    }
    frontier = set(spec["pids"]) | found
    while frontier:
        children = {pid for pid, (ppid, _, _) in table.items() if ppid in frontier} - found
        found |= children
        frontier = children
    return found - {os.getpid()}


def _reap(spec: dict) -> None:
    left_behind = _left_behind(spec)  # before the commands: a stopped server's children lose their parent
    for command in spec["commands"]:
        try:
            subprocess.run(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            pass
    deadline = time.monotonic() + (5 if spec["commands"] else 0)
    while any(_alive(p) for p in spec["pids"]) and time.monotonic() < deadline:
        time.sleep(0.1)  # give an orderly stop its moment
    for pid in spec["pids"]:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
    for pid in left_behind:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for path in spec["paths"]:
        shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    spec = json.loads(sys.stdin.read())
    # release() sends SIGTERM: leave quietly, touching nothing.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal goes to pytest, not here
    _wait_for_exit(spec["parent"])
    _reap(spec)


if __name__ == "__main__":
    main()
