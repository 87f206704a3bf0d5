"""What a learner process on a GPU machine needs from the host beyond the OS wall's base view.

The wall (oswall.py) shows the host read-only, the workspace and the grade's
scratch folder read-write, and a private /tmp. Three GPU paths need more:

- `torch.utils.cpp_extension.load_inline` (cuda-matmul's CUDA C, the padded
  transpose) builds in $TORCH_EXTENSIONS_DIR, by default under ~/.cache,
  which the wall makes read-only: every load failed with EROFS, even of an
  extension built before. The learner process gets a per-user extensions
  folder of its own, read-write, kept across grades (nvcc's minute is paid
  once per source: each extension's name carries its source's hash). The
  compilers run inside the wall, as the learner process's children.
- Triton compiles every kernel specialisation (and ~40 autotune configs for
  flash-attention) into $TRITON_CACHE_DIR: one cache per workspace, kept
  across grades, so a re-grade does not compile again against its time
  limit. Never the grader's cache, and never another workspace's.
- CUDA MPS clients talk to the daemon through its pipe folder
  ($CUDA_MPS_PIPE_DIRECTORY, /tmp/nvidia-mps by default), which the private
  /tmp hides: shown read-write when it exists.

A build killed mid-way (a grade's time limit, Ctrl-C) leaves torch's `lock`
file in the extension's folder, and the next load_inline waits on it for
ever. Every grade holds a shared flock on the extensions folder for as long
as its learner process may build (ExtensionsLease); a lease that finds no
other holder (an exclusive lock succeeds) knows every lock file is stale and
removes them.

RLIMIT_NPROC counts per user namespace only on Linux 5.14 and later; before,
it counts every process of the host user, and CUDA's and OpenMP's thread
creation in the learner process would fail on a busy machine.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
import platform
import re
import stat
from pathlib import Path
from typing import Optional

CACHE_VAR = "ROADMAP_GPU_CACHE"  # tests (and a user who wants it elsewhere) move the whole cache
# One build folder and Triton cache for every workspace of a run instead of one per workspace: `dev check --gpu`
# grades the project's own reference and wrong variants in a fresh folder each, and would otherwise pay nvcc and
# every Triton compile (flash-attention's autotune configs) again for each, past its ten minutes. Kernels are cached
# by their source's hash, so a variant still builds what it changed. Never for learners' grades (a cohort worker
# grades every learner as one user: one learner's build must not be loaded by another's grade).
SCOPE_VAR = "ROADMAP_GPU_CACHE_SCOPE"


def _cache_key(workspace: str) -> str:
    scope = os.environ.get(SCOPE_VAR)
    source = f"scope:{scope}" if scope else os.path.realpath(workspace)
    return hashlib.sha256(source.encode()).hexdigest()[:16]


_MPS_DEFAULT = "/tmp/nvidia-mps"


def cache_root() -> Path:
    """$ROADMAP_GPU_CACHE, else the user's cache folder (~/.cache/roadmap/gpu on Linux)."""
    root = os.environ.get(CACHE_VAR)
    if not root:
        # The grader calls this (its learner's environment), and the grader imports only what a grade needs
        # (grading_kit is a leaf; on a `grade --on` box its managed venv may not have platformdirs): the
        # XDG rule platformdirs follows on Linux, by hand. macOS: ~/Library/Caches.
        if sys.platform == "darwin":
            base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
        else:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "roadmap", "gpu")
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:  # a read-only home (a locked-down worker): a per-user folder in the temp dir instead
        import tempfile

        from roadmap_cli.paths import private_dir

        path = private_dir(
            Path(tempfile.gettempdir()) / f"roadmap-gpu-cache-{os.getuid()}", CACHE_VAR, "~/.cache/roadmap/gpu"
        )
    return path


def extensions_dir(workspace: str, root: Optional[Path] = None) -> Path:
    """A workspace's torch extensions folder, kept across its grades (one per torch version: an extension is
    built against it). Per workspace, never per user: on a cohort's worker every learner's submission is graded
    by the same user, and a folder they shared would let one submission leave a built extension (a .so and the
    hash torch checks) that another learner's `load_inline` then loads instead of building its own."""
    import importlib.metadata

    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    key = _cache_key(workspace)
    parent = (root or cache_root()) / f"torch_extensions-{re.sub(r'[^A-Za-z0-9.+-]', '_', version)}"
    path = parent / key
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        _prune(parent, keep=path)  # as for Triton caches: the most recently graded workspaces' are kept
    os.utime(path)
    return path


TRITON_CACHES_KEPT = 16  # workspaces whose Triton caches are kept (dev check's temporary ones come and go)


def triton_cache_dir(workspace: str, root: Optional[Path] = None) -> Path:
    """The Triton cache of one workspace, kept across its grades; the least recently graded
    workspaces' caches beyond TRITON_CACHES_KEPT are removed when a new one is made."""
    key = _cache_key(workspace)
    parent = (root or cache_root()) / "triton"
    path = parent / key
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        _prune(parent, keep=path)
    os.utime(path)  # most recently graded
    return path


def _prune(parent: Path, keep: Path) -> None:
    import shutil

    try:
        caches = sorted((p for p in parent.iterdir() if p.is_dir() and p != keep), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for old in caches[: max(0, len(caches) + 1 - TRITON_CACHES_KEPT)]:
        shutil.rmtree(old, ignore_errors=True)


def mps_dirs() -> list[str]:
    """CUDA MPS's pipe (and log) folders, read-write to learner code so its CUDA reaches the daemon: only on a
    machine with an NVIDIA device, and only a real folder (not a link) owned by root or this user that holds
    none of the runtime, the home or the data. `/tmp/nvidia-mps` can be made by anyone where no daemon runs:
    a link there to the user's home opened the home read-write behind the wall (red team route M1)."""
    from roadmap_cli.grading_kit import oswall

    if not oswall.gpu_devices():
        return []
    found = []
    for var, default in (("CUDA_MPS_PIPE_DIRECTORY", _MPS_DEFAULT), ("CUDA_MPS_LOG_DIRECTORY", None)):
        path = os.environ.get(var) or default
        if path and _safe_mps_dir(path):
            found.append(os.path.realpath(path))
    return found


def _safe_mps_dir(path: str) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (0, os.getuid()):
        return False
    real = os.path.join(os.path.realpath(path), "")
    precious = [os.path.expanduser("~"), sys.prefix, sys.base_prefix, os.path.dirname(os.path.abspath(__file__))]
    # A grant that contains one of these would show it read-write.
    return not any(os.path.join(os.path.realpath(p), "").startswith(real) for p in precious)


def shared_rw_dirs() -> list[str]:
    """What dev check's warm learner shows read-write besides its root: the whole GPU cache (every
    workspace's Triton cache lies in it) and MPS's folders. Every grade's extra_rw_dirs lie inside these."""
    return [str(cache_root()), *mps_dirs()]


def extra_rw_dirs(workspace: str, root: Optional[Path] = None) -> list[str]:
    """The folders the wall must show read-write besides the workspace and the scratch folder. `root`: the GPU
    cache the grader's environment names ($ROADMAP_GPU_CACHE, which the engine sets for every grade), so the
    view and the learner's TORCH_EXTENSIONS_DIR/TRITON_CACHE_DIR are the same folders."""
    return [str(extensions_dir(workspace, root)), str(triton_cache_dir(workspace, root)), *mps_dirs()]


def learner_env(workspace: str, path: str) -> dict[str, str]:
    """Where the learner process's torch and Triton build (the wall shows these folders read-write),
    and `path` ($PATH) with the `ninja` that load_inline runs (the pip package's binary sits in the
    environment's bin folder, which is on no PATH when roadmap is run as .venv/bin/roadmap)."""
    env = {"TORCH_EXTENSIONS_DIR": str(extensions_dir(workspace)), "TRITON_CACHE_DIR": str(triton_cache_dir(workspace))}
    try:
        import ninja

        folders = path.split(os.pathsep) if path else []
        if ninja.BIN_DIR not in folders:
            env["PATH"] = os.pathsep.join([ninja.BIN_DIR, *folders])
    except (ImportError, AttributeError):
        pass  # load_inline will say that ninja is missing; `roadmap doctor` does too
    for var in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
        if os.environ.get(var):
            env[var] = os.environ[var]
    return env


# ------------------------------------------------------------ stale build locks


def stale_locks(folder: Path) -> list[Path]:
    """torch's FileBaton files (`<extension>/lock`) in an extensions folder: real folders holding a
    regular file named `lock`. The folder is read-write to learner code, so an entry may be a symlink to
    any folder of the grading user's; those are never followed (see `remove_lock`)."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    lock = Path(entry.path) / "lock"
                    if stat.S_ISREG(_lstat_mode(lock)):
                        found.append(lock)
    except OSError:
        return []
    return found


def _lstat_mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def remove_lock(lock: Path) -> None:
    """Unlink `<entry>/lock` without following a link at either level, even if learner code swaps the entry
    for a symlink after `stale_locks` looked: the entry is opened O_NOFOLLOW and the unlink is relative to it."""
    fd = os.open(lock.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if stat.S_ISREG(os.stat(lock.name, dir_fd=fd, follow_symlinks=False).st_mode):
            os.unlink(lock.name, dir_fd=fd)
    finally:
        os.close(fd)


class ExtensionsLease:
    """A shared flock on the extensions folder while a learner process may build in it.

    `renew()` (before each learner process starts) first tries the lock
    exclusively: when no other grade holds it, no build can be running, and
    the lock files left are a killed build's: they are removed. Then it holds
    the lock shared again."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.fd: Optional[int] = None
        self.cleared: list[Path] = []

    def renew(self) -> list[Path]:
        """Clear stale locks when this grade is alone; the locks removed."""
        if self.fd is None:
            # O_NOFOLLOW: learner code can leave a symlink by that name in the folder.
            self.fd = os.open(
                self.folder / ".grades.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
            )
        removed: list[Path] = []
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass  # another grade is using the folder: its builds may be live
        else:
            for lock in stale_locks(self.folder):
                try:
                    remove_lock(lock)
                    removed.append(lock)
                except OSError:
                    pass
        fcntl.flock(self.fd, fcntl.LOCK_SH)
        self.cleared += removed
        return removed

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None


# ------------------------------------------------------------ RLIMIT_NPROC


def nproc_is_per_namespace(release: Optional[str] = None) -> bool:
    """True on Linux >= 5.14, where RLIMIT_NPROC counts the processes of the user namespace (the wall's)
    rather than every process of the host user."""
    match = re.match(r"(\d+)\.(\d+)", release if release is not None else platform.release())
    return bool(match) and (int(match.group(1)), int(match.group(2))) >= (5, 14)
