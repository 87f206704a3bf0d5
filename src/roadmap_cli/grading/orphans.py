"""Nothing a weak grade starts outlives it (Linux).

In the weak sandbox (no bubblewrap) learner code runs as the user, so it can
SIGKILL the grade's supervisor (the documented escape) after forking a child
in its own session with a clean environment: the supervisor's subreaper and
the grade-token sweep both miss that child, which then waits for the grade's
checks to finish and plants what a LATER grade's judge runs (red team W5).

So, around each weak grade, the engine itself is a child subreaper
(prctl PR_SET_CHILD_SUBREAPER): an orphan of the grade is re-parented to the
engine, never to init, and once the grade ends the engine kills every
process below it that was not there before the grade, before it looks at
what the grade left. Processes of other grades running at the same time in
this engine (a worker's --concurrency) are left alone: their supervisors are
registered here while they run.

macOS has no subreaper: there an escaped child still outlives the grade, and
the runtime record (grading/weak_runtime.py) is the only net; docs/grading.md.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36

_lock = threading.Lock()
_subreaper_users = 0  # weak grades in flight that need the engine to be a subreaper
_running_supervisors: set[int] = set()  # every grade's supervisor while it runs: never ours to kill


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (with the pid, it names one process even if the pid is reused)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[-1].split()
        return fields[19].decode()
    except (OSError, IndexError):
        return None


def _below(root: int) -> list[tuple[int, int]]:
    """Every descendant of `root` as (pid, the child of `root` it descends from), skipping the trees of
    running supervisors (other grades')."""
    from roadmap_cli.grading._supervisor import _children_map

    tree, out = _children_map(), []
    todo = [(child, child) for child in tree.get(root, []) if child not in _running_supervisors]
    while todo:
        pid, branch = todo.pop()
        out.append((pid, branch))
        todo += [(child, branch) for child in tree.get(pid, []) if child not in _running_supervisors]
    return out


def supervisor_started(pid: int) -> None:
    with _lock:
        _running_supervisors.add(pid)


def supervisor_ended(pid: int) -> None:
    with _lock:
        _running_supervisors.discard(pid)


class Reaper:
    """`Reaper()` before a weak grade starts anything; `kill_new()` once it ended; `close()` always."""

    def __init__(self) -> None:
        global _subreaper_users
        with _lock:
            self.active = _prctl(PR_SET_CHILD_SUBREAPER, 1)
            if self.active:
                _subreaper_users += 1
        me = os.getpid()
        self.before = {(pid, _start_time(pid)) for pid, _ in _below(me)} if self.active else set()

    def kill_new(self) -> int:
        """SIGKILL and reap every process that is new below the engine, in a branch that is new itself,
        until none is left (a fork racing with the scan is caught by the next round: its orphans come back
        to us). Returns how many were killed.

        Only new branches: an orphan of the grade is re-parented to the engine itself, so it heads a branch
        of its own. A new process under a child the engine already had (the warm grader zygote, a dev check
        the test suite runs beside its own weak grades) belongs to that child's work, not to this grade:
        killing it crashed a concurrent grade (CI, the suite's weak grades against its background dev
        check)."""
        if not self.active:
            return 0
        me, killed = os.getpid(), 0
        for _ in range(200):
            below = _below(me)
            new_branches = {b for b in {branch for _, branch in below} if (b, _start_time(b)) not in self.before}
            new = [
                pid for pid, branch in below if branch in new_branches and (pid, _start_time(pid)) not in self.before
            ]
            for pid in new:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except (ProcessLookupError, PermissionError):
                    pass
            for pid in new:
                try:
                    os.waitpid(pid, 0 if _is_child(pid, me) else os.WNOHANG)
                except (ChildProcessError, OSError):
                    pass
            if not new:
                return killed
            time.sleep(0.01)
        return killed

    def close(self) -> None:
        global _subreaper_users
        if not self.active:
            return
        self.active = False
        with _lock:
            _subreaper_users -= 1
            if _subreaper_users == 0:
                _prctl(PR_SET_CHILD_SUBREAPER, 0)


def _is_child(pid: int, parent: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[-1].split()[1]) == parent
    except (OSError, IndexError, ValueError):
        return False
