"""Warm learners (`roadmap dev check` only): one learner interpreter with
torch already imported, behind the OS wall, forked for each grade's learner
process instead of starting bubblewrap and Python again. This module is the
grader's side; the zygote's code is `_warm_learner_main.py`.

A cold learner process costs ~1.5 s of CPU before it runs a line of the
learner's code (bwrap, the interpreter, torch). dev check starts one per
grade (~550), so the engine starts one *learner zygote* per run
(grading/warm.py `WarmLearners`): `python -I -B -P` behind bubblewrap with
the learner's view of the file system, except that its one writable folder
is a common root under which dev check puts every workspace and every
grade's scratch folder. It imports torch, numpy and the grading_kit modules
a learner process imports, and waits on a unix socket that every grader of
the run inherits (ENV_FD names its number, ENV_ROOT the root):

    grader ──(socket: env, cwd, fd numbers + req/reply/output pipes + a fresh
              per-learner socket)──▶ zygote
    zygote ──fork──▶ keeper (own session, child subreaper)
                        └──fork──▶ learner (_learner_main.main, in place)

The keeper answers over the per-learner socket: the learner's pidfd first
(its host pid is in the pidfd's fdinfo), its wait status when it exits. When
the learner exits, or the grader closes that socket (it is done, or it died),
the keeper SIGKILLs the learner's group and every descendant left (they are
re-parented to it), as the end of a cold learner's pid namespace does. The
grade's supervisor cannot do that itself: the learner is not its descendant.
If a keeper dies, the zygote (a subreaper too) kills whatever was orphaned.

The learner itself starts as a cold one does: own session, cwd = the
workspace, the learner environment, stdin /dev/null, stdout and stderr on the
output pipe, the pipes at the numbers in argv, nothing else open, a fresh
`random` stream; then `_learner_main.main()` sets limits, drops capabilities,
installs the audit hook and the import layout, all after the fork (the
zygote has none of them). What differs from a cold learner, on purpose
(authoring runs, on the project's own reference code and variants): the
zygote's view shows every checked lab's adapter shim and data/ read-only (not only
this grade's); the private /tmp, the pid namespace (a run's learners can see
and signal each other) and the RLIMIT_NPROC count are shared by the run's
learners; and the engine's grade-token net (grading/runner.py
`_kill_marked`) does not see forked learners (their /proc environ is the
zygote's): the keeper stands in for it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
from typing import Optional

from roadmap_cli.grading_kit.forked import WAIT_STATUS, ForkedChild

ENV_FD = "ROADMAP_WARM_LEARNER_FD"  # the grader's end of the zygote's socket (dev check only)
ENV_ROOT = "ROADMAP_WARM_LEARNER_ROOT"  # the one folder the zygote's learners can write
STATUS = WAIT_STATUS  # a learner's raw wait status, from its keeper
_PIDFD_WAIT_S = 60.0  # the first request waits for the zygote's imports
_unavailable = False  # this grader found the zygote gone: every later learner starts cold


class WarmUnavailable(Exception):
    """No zygote answered: the caller starts the learner cold."""


# ----------------------------------------------------------------- grader side


def usable(config: dict) -> Optional[int]:
    """The zygote's socket when this grade's learner can be forked from it:
    the engine set one up (dev check), the grade is behind the OS wall, and
    every path the cold learner could write lies under the zygote's root."""
    fd, root = os.environ.get(ENV_FD), os.environ.get(ENV_ROOT)
    wall = config.get("os_wall")
    if _unavailable or not fd or not root or not wall:
        return None
    from roadmap_cli.grading_kit.learner_extras import shared_rw_dirs

    # The zygote's writable folders: its root, and the GPU build folders every learner shares (learner_extras).
    roots = [os.path.join(os.path.realpath(p), "") for p in (root, *shared_rw_dirs())]
    writable = [config["workspace"], *wall.get("read_write", [])]
    if not all(any(os.path.join(os.path.realpath(p), "").startswith(r) for r in roots) for p in writable):
        return None
    return int(fd)


class WarmLearnerProc(ForkedChild):
    """A forked learner: the part of Popen's interface LearnerClient uses.
    Its keeper reaps it and sends the status on the request socket."""

    def __init__(self, sock: socket.socket, pidfd: int) -> None:
        super().__init__(_host_pid(pidfd), pidfd, sock.fileno())
        self._sock = sock

    def _read_status(self) -> bytes:
        try:
            return self._sock.recv(STATUS.size)
        except OSError:
            return b""

    def _status_lost(self) -> int:
        self._signal(signal.SIGKILL)  # the keeper is gone without a status (killed): make sure the learner is too
        return -signal.SIGKILL

    def _release(self) -> None:
        self._sock.close()
        os.close(self._pidfd)

    def kill(self) -> None:
        """SIGKILL the learner and its process group (the keeper does the group: pids are its namespace's)."""
        if self.returncode is None:
            self._signal(signal.SIGKILL)
            try:
                self._sock.send(b"kill")
            except OSError:
                pass


def _host_pid(pidfd: int) -> int:
    """The learner's pid as this process sees it (the keeper's number is its pid namespace's)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as fh:
        for line in fh:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise WarmUnavailable("no pid in the pidfd's fdinfo")


def spawn(zygote_fd: int, *, env: dict, cwd: str, req_r: int, rep_w: int, out_w: int) -> WarmLearnerProc:
    """Fork a learner process from the zygote on `zygote_fd`: what
    `Popen(python -c _LEARNER_CMD req_r rep_w, cwd, env, stdout=stderr=out_w,
    stdin=DEVNULL, pass_fds=(req_r, rep_w), start_new_session=True)` starts."""
    global _unavailable
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    request = json.dumps({"env": env, "cwd": cwd, "fds": [req_r, rep_w]}).encode()
    try:
        shared = socket.socket(fileno=os.dup(zygote_fd))  # a copy: the inherited number stays open
        try:
            socket.send_fds(shared, [request], [req_r, rep_w, out_w, theirs.fileno()])
        finally:
            shared.close()
        theirs.close()
        ready, _, _ = select.select([mine], [], [], _PIDFD_WAIT_S)
        reply, fds, _, _ = socket.recv_fds(mine, 64, 1) if ready else (b"", [], 0, None)
    except OSError as exc:
        theirs.close()
        mine.close()
        _unavailable = True
        raise WarmUnavailable(f"the learner zygote is gone: {exc}") from None
    if reply != b"pid" or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        mine.close()  # a keeper that still comes kills its learner at once: we are gone
        _unavailable = True
        raise WarmUnavailable("the learner zygote did not answer")
    try:
        return WarmLearnerProc(mine, fds[0])
    except (OSError, WarmUnavailable):
        os.close(fds[0])
        mine.close()
        raise WarmUnavailable("cannot read the warm learner's pid") from None
