"""The operating system's wall around learner code: bubblewrap namespaces.

The learner process (and everything it starts: a lab's server, gloo workers,
an ASan test binary built from the learner's header) runs inside `bwrap`
with its own user, mount, pid, ipc and uts namespaces. Inside, the file
system is the host's, read-only, with:

- the workspace read-write (the learner's own files);
- the grade's scratch folder read-write (pytest's tmp_path lives there, so a
  test can hand the learner a folder to write into and read it back);
- a private, empty /tmp and /dev/shm;
- the grade's adapter shim (the lab's adapter.py and declared learner-side
  files, copied out of tests/ by the engine) read-only;
- the reference solutions, every lab's tests/ folder, the project's kernels/,
  the packaged `_data/` copy and the data home **absent**: an empty folder is mounted on
  top of each, so no path, `dir_fd` trick or child process can reach them.

The pid namespace means nothing started inside outlives the grade: bwrap's
`--die-with-parent` takes the whole namespace down with the learner client
that started it. What this wall does not do: limit total memory of the tree
(that needs a delegated cgroup; each process keeps its RLIMIT_AS) or keep
root from being root (the kernel exempts uid 0 from RLIMIT_NPROC).

Where bubblewrap is missing or user namespaces are off (macOS, locked-down
hosts), `wall_argv` returns None and the in-process sandbox (audit hook,
limits, hashes) is all there is: the engine records that attempt's sandbox
as "weak". ROADMAP_SANDBOX=weak chooses that on purpose (for debugging);
ROADMAP_REQUIRE_BWRAP=1 turns a missing bwrap into an error instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from typing import Optional

STRONG, WEAK = "strong", "weak"
CHOICE_VAR = "ROADMAP_SANDBOX"  # "weak": never use bwrap (debugging); anything else: bwrap when it works
REQUIRE_VAR = "ROADMAP_REQUIRE_BWRAP"


class WallUnavailable(RuntimeError):
    """ROADMAP_REQUIRE_BWRAP=1 and bubblewrap cannot run here."""


@lru_cache(maxsize=1)
def _probe() -> tuple[Optional[str], str]:
    """(bwrap's path, "") when a throwaway namespace starts here, else (None, why)."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap (bwrap) is not installed"
    try:
        proc = subprocess.run([path, "--unshare-user", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
                               "--proc", "/proc", "--", "/bin/true"],
                              capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap did not start: {exc}"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return None, f"bwrap cannot create namespaces here ({why}); are user namespaces disabled?"
    return path, ""


def status() -> tuple[str, str]:
    """(STRONG or WEAK, the reason when weak) for a grade started now."""
    if os.environ.get(CHOICE_VAR) == WEAK:
        return WEAK, f"{CHOICE_VAR}=weak"
    path, why = _probe()
    if path is None:
        if os.environ.get(REQUIRE_VAR) == "1":
            raise WallUnavailable(f"{why} ({REQUIRE_VAR}=1: grading without the OS sandbox is refused)")
        return WEAK, why
    return STRONG, ""


def _mounts(view: dict) -> list[tuple[str, str]]:
    """(kind, real path) for every view entry that exists, shallowest first.

    A mount hides whatever an earlier one put below it, so order is by depth,
    never by kind: the data home hidden inside a read-write folder stays
    hidden, and a tests folder re-exposed inside the hidden labs folder shows."""
    rank = {"hide": 0, "read_only": 1, "read_write": 2}
    seen: dict[str, str] = {}
    for kind in rank:
        for path in view.get(kind, []):
            if path and os.path.exists(path):
                seen[os.path.realpath(path)] = kind  # a path listed twice takes the later (more open) kind
    return sorted(((kind, path) for path, kind in seen.items()),
                  key=lambda item: (item[1].rstrip(os.sep).count(os.sep), rank[item[0]], item[1]))


def wall_argv(view: Optional[dict]) -> Optional[list[str]]:
    """The `bwrap ... --` prefix for a learner command, or None for the weak
    sandbox. `view`: {"hide": [...], "read_only": [...], "read_write": [...],
    "cwd": path} as the engine computed it (grading/isolation.py)."""
    if not view:
        return None
    # The engine chose the wall after probing it (status()); a grade never quietly drops to the weak sandbox
    # while its attempt says "strong".
    path = shutil.which("bwrap")
    if path is None:
        raise WallUnavailable("the engine chose the OS sandbox but bwrap is gone")
    argv = [path, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--cap-drop", "ALL",
            "--ro-bind", "/", "/",
            # Devices as on the host (a CUDA GPU needs /dev/nvidia*); the shared-memory folder private.
            "--dev-bind", "/dev", "/dev", "--tmpfs", "/dev/shm",
            "--proc", "/proc", "--tmpfs", "/tmp"]
    for kind, path in _mounts(view):
        if kind == "read_write":
            argv += ["--bind", path, path]
        elif kind == "read_only":
            argv += ["--ro-bind", path, path]
        elif os.path.isdir(path):
            argv += ["--tmpfs", path]  # hidden: an empty folder on top
        else:
            argv += ["--ro-bind", "/dev/null", path]  # a hidden file reads as empty
    if view.get("cwd"):
        argv += ["--chdir", view["cwd"]]
    return argv + ["--"]


def wrap(argv: list[str], view: Optional[dict]) -> list[str]:
    """`argv` to run behind the wall when one is configured, else unchanged."""
    prefix = wall_argv(view)
    return argv if prefix is None else prefix + argv
