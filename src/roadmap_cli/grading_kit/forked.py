"""A process forked from a warm interpreter, made to look like one Popen
started: what warm graders (grading/warm.py) and warm learners
(grading_kit/_warm_learner_main.py) do to each child before running it, and
the handle (`ForkedChild`) through which the engine waits for and signals a
child that another process forked and reaps.

Stdlib only: the learner zygote imports it behind the OS wall."""

from __future__ import annotations

import os
import select
import signal
import struct
import sys
from typing import Optional

WAIT_STATUS = struct.Struct("!i")  # a raw wait status as os.waitpid gives it, sent by whoever reaps the child


class ForkedChild:
    """Popen's poll/wait/send_signal/kill for a child this process did not
    fork: the process that reaps it sends its raw wait status (WAIT_STATUS)
    on `status_fd`, and signals go through a pidfd, so none can reach a
    process that later got the same number. `returncode` is Popen's (-N for
    signal N); a status that never comes (the reaper was killed) reads as
    SIGKILL."""

    def __init__(self, pid: int, pidfd: int, status_fd: int) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self._status_fd = status_fd
        self.returncode: Optional[int] = None

    def _read_status(self) -> bytes:
        return os.read(self._status_fd, WAIT_STATUS.size)

    def _status_lost(self) -> int:
        """The returncode when the reaper went away without a status."""
        return -signal.SIGKILL

    def _release(self) -> None:
        for fd in (self._status_fd, self._pidfd):
            os.close(fd)

    def _collect(self, timeout: Optional[float]) -> Optional[int]:
        if self.returncode is not None:
            return self.returncode
        ready, _, _ = select.select([self._status_fd], [], [], timeout)
        if not ready:
            return None
        data = self._read_status()
        self.returncode = (
            os.waitstatus_to_exitcode(WAIT_STATUS.unpack(data)[0])
            if len(data) == WAIT_STATUS.size
            else self._status_lost()
        )
        self._release()
        return self.returncode

    def poll(self) -> Optional[int]:
        return self._collect(0)

    def wait(self, timeout: Optional[float] = None) -> int:
        code = self._collect(timeout)
        if code is None:
            import subprocess

            raise subprocess.TimeoutExpired(f"{type(self).__name__} {self.pid}", timeout)
        return code

    def _signal(self, sig: int) -> None:
        try:
            signal.pidfd_send_signal(self._pidfd, sig)
        except OSError:
            pass  # exited (its status is on the way) or already reaped

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            self._signal(sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def take_popen_shape(output_fd: int, fds_at: dict[int, int], cwd: str, env: dict[str, str]) -> None:
    """As `Popen(cwd=cwd, env=env, stdin=DEVNULL, stdout=stderr=output_fd,
    pass_fds=...)` leaves a child: each received descriptor at the number the
    requester gave it (`fds_at`: received -> number), every other one closed."""
    import fcntl

    # Above every number filled below first, so no dup2 clobbers one still needed.
    output = fcntl.fcntl(output_fd, fcntl.F_DUPFD, 1024)
    moved = {fcntl.fcntl(fd, fcntl.F_DUPFD, 1024): target for fd, target in fds_at.items()}
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    for fd, target in moved.items():
        os.dup2(fd, target)  # inheritable, as pass_fds makes them
    keep = {0, 1, 2, *moved.values()}
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            try:
                os.close(int(name))
            except OSError:
                pass
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)


def reseed_global_streams() -> None:
    """A new interpreter seeds `random` (and numpy's legacy global stream) from
    the OS: so must a forked child, or every child would replay the zygote's
    stream. torch's default seed is a constant anyway."""
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
