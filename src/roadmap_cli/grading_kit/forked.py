"""A process forked from a warm interpreter, made to look like one Popen
started: what warm graders (grading/warm.py) and warm learners
(grading_kit/_warm_learner_main.py) do to each child before running it.

Stdlib only: the learner zygote imports it behind the OS wall."""

from __future__ import annotations

import os
import sys


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
