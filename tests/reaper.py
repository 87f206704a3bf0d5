"""A watchdog for the servers tests start (PostgreSQL, sshd, workers): when
the test process dies without stopping them (`kill -9` of pytest, a CI job
cancelled, an OOM kill), the servers go with it and their folders are removed.

Why a separate process: `pg_ctl start` daemonises the postmaster, so it is no
child of pytest and no parent-death signal reaches it; and a test killed
outright runs no `finally`. The reaper is started in its own session (a signal
to pytest's process group does not take it along), waits on a pidfd for the
test process to exit (no polling), then runs the clean-up it was given.

`guard(...)` returns a handle whose `release()` stops the reaper when the test
stops the server itself; the normal path costs one short-lived process.

Run as a script: `python reaper.py SPEC_JSON` (guard does that).
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


def guard(*, commands: list[list[str]] = (), pids: list[int] = (), paths: list[str] = ()) -> Reaper:
    """When this process dies: run `commands` (e.g. `pg_ctl stop -m immediate`), then SIGKILL `pids` still
    alive (and their process groups, when they lead one), then remove `paths`."""
    spec = {
        "parent": os.getpid(),
        "commands": [list(c) for c in commands],
        "pids": list(pids),
        "paths": [str(p) for p in paths],
    }
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), json.dumps(spec)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return Reaper(proc)


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


def _reap(spec: dict) -> None:
    for command in spec["commands"]:
        try:
            subprocess.run(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            pass
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in spec["pids"]) and time.monotonic() < deadline:
        time.sleep(0.1)  # give an orderly stop its moment
    for pid in spec["pids"]:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
    for path in spec["paths"]:
        shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    spec = json.loads(sys.argv[1])
    # release() sends SIGTERM: leave quietly, touching nothing.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal goes to pytest, not here
    _wait_for_exit(spec["parent"])
    _reap(spec)


if __name__ == "__main__":
    main()
