"""The operating system's wall around learner code: bubblewrap namespaces.

Everything that reads learner-controlled input runs inside `bwrap`: the
learner process and what it starts (a lab's server, gloo ranks), the C++
compiler on the learner's sources (grading_kit/cpp_build.py) and the test
binaries built from them. Its own user, mount, pid, ipc, uts, cgroup and
**network** namespaces (only its own loopback, brought up by bwrap: nothing
listening on the host, TCP or abstract unix socket, is reachable), every
capability dropped, uid/gid `LEARNER_UID` inside (no longer root, mapped to
the grading user outside: bwrap maps nothing else).

The file system is built up from nothing (docs/architecture.md, "Trust
model"): an empty root, then exactly what `SYSTEM` grants and what the view
of the grade grants (grading/isolation.py `learner_view`); nothing else
exists. No real home, no /root, /var, /opt, /srv, /mnt, /run, no other
copy of roadmap, no lab's tests/ or solution/, no data home:

    SYSTEM (this module)          /usr and its /bin, /lib... links, the
                                  dynamic loader's and compilers' files in
                                  /etc; a synthetic /etc/passwd, group,
                                  hosts, nsswitch.conf; a minimal /dev (plus
                                  /dev/nvidia* and read-only /sys when a GPU
                                  is there); its own /proc; private /tmp and
                                  /dev/shm; an empty private HOME
    view["read_only"]             the Python runtime and site-packages, a
                                  lab's data/, the adapter shim, the C++ cache
    view["read_write"]            the workspace, the grade's scratch folder
    view["hide"]                  absent again inside a granted folder
                                  (roadmap_cli/_data, the workspace's .git)

`roadmap doctor --sandbox` prints the whole list (`describe`). The pid
namespace means nothing started inside outlives the grade: bwrap's
`--die-with-parent` takes it down with whoever started it. What this wall
does not do: limit total memory of the tree (that needs a delegated cgroup;
each process keeps its RLIMIT_AS).

Where bubblewrap is missing or user namespaces are off (macOS, locked-down
hosts), `walled` adds nothing and the in-process sandbox (audit hook,
limits, hashes) is all there is: the engine records that attempt's sandbox
as "weak". ROADMAP_SANDBOX=weak chooses that on purpose (for debugging);
ROADMAP_REQUIRE_BWRAP=1 turns a missing bwrap into an error instead.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator, Optional

STRONG, WEAK = "strong", "weak"
CHOICE_VAR = "ROADMAP_SANDBOX"  # "weak": never use bwrap (debugging); anything else: bwrap when it works
REQUIRE_VAR = "ROADMAP_REQUIRE_BWRAP"

# Who learner code is inside the wall: not root (bwrap maps this one uid to the grading user; nothing else).
LEARNER_UID = LEARNER_GID = 1000
LEARNER_USER = "learner"
LEARNER_HOME = "/home/learner"  # an empty tmpfs of its own: no dotfiles, no caches, no ~/.pgpass
HOSTNAME = "roadmap-grade"

# What every walled process sees of the machine: (kind, path, why). Kinds: "ro" (read-only bind of the host's
# path; a host symlink such as /bin -> usr/bin is recreated as the same symlink), "dev" (a device, passed through).
# Add a line here to grant something to every walled process; per-grade grants are grading/isolation.py's.
SYSTEM: tuple[tuple[str, str, str], ...] = (
    ("ro", "/usr", "system tools, compilers, libraries, CUDA"),
    ("ro", "/bin", "system tools (usually a link to usr/bin)"),
    ("ro", "/sbin", "system tools (usually a link to usr/sbin)"),
    ("ro", "/lib", "system libraries (usually a link to usr/lib)"),
    ("ro", "/lib32", "system libraries"),
    ("ro", "/lib64", "the dynamic loader"),
    ("ro", "/libx32", "system libraries"),
    ("ro", "/etc/ld.so.cache", "where the dynamic loader finds libraries"),
    ("ro", "/etc/ld.so.conf", "where the dynamic loader finds libraries"),
    ("ro", "/etc/ld.so.conf.d", "where the dynamic loader finds libraries"),
    ("ro", "/etc/alternatives", "the links behind cc, c++, ld, cuda"),
    ("ro", "/etc/localtime", "the time zone"),
)
# Made up for the wall (never the host's): who the learner is, and that its host name is its own loopback.
SYNTHETIC_ETC = {
    "/etc/passwd": f"root:x:0:0::/root:/bin/sh\n{LEARNER_USER}:x:{LEARNER_UID}:{LEARNER_GID}::{LEARNER_HOME}:/bin/sh\n"
    "nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n",
    "/etc/group": f"root:x:0:\n{LEARNER_USER}:x:{LEARNER_GID}:\nnogroup:x:65534:\n",
    "/etc/hosts": f"127.0.0.1 localhost {HOSTNAME}\n::1 localhost\n",
    "/etc/hostname": HOSTNAME + "\n",
    "/etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}


class WallUnavailable(RuntimeError):
    """ROADMAP_REQUIRE_BWRAP=1 and bubblewrap cannot run here."""


@lru_cache(maxsize=1)
def _probe() -> tuple[Optional[str], str]:
    """(bwrap's path, "") when a throwaway namespace like the learner's starts here, else (None, why)."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap (bwrap) is not installed"
    try:
        proc = subprocess.run(
            [
                path,
                "--unshare-user",
                "--unshare-pid",
                "--unshare-net",
                "--die-with-parent",
                "--ro-bind",
                "/",
                "/",
                "--proc",
                "/proc",
                "--",
                "/bin/true",
            ],
            capture_output=True,
            text=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
        )
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


def gpu_devices() -> list[str]:
    """The host's NVIDIA device nodes (CUDA needs them inside the wall), if any."""
    return sorted(glob.glob("/dev/nvidia*"))


def system_grants() -> list[tuple[str, str, str]]:
    """SYSTEM, as it applies on this host: what exists, plus the GPU when there is one."""
    grants = [(kind, path, why) for kind, path, why in SYSTEM if os.path.lexists(path)]
    devices = gpu_devices()
    if devices:
        grants += [("dev", dev, "the GPU (CUDA)") for dev in devices]
        # The CUDA driver and NVML read PCI topology and device facts from /sys.
        grants.append(("ro", "/sys", "device facts the CUDA driver reads"))
    return grants


def python_runtime() -> list[str]:
    """The folders a learner interpreter (`python -I`) imports from: the
    install and the virtual environment, the standard library, site-packages
    and the paths their .pth files add (an editable install's source folder).
    Computed the way `site` does, never from this process's sys.path (under
    pytest or with PYTHONPATH that holds folders no learner needs)."""
    import sys
    import sysconfig

    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    paths.update(v for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib"))
    paths.update(site_paths())
    found = sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)})
    # One mount per tree: a folder inside another listed one (the venv's site-packages) comes with it.
    return [p for p in found if not any(p != q and p.startswith(os.path.join(q, "")) for q in found)]


def site_paths() -> list[str]:
    """What `site` would add to sys.path, without running anything: each
    site-packages folder, the folders its .pth files name (their `import`
    lines are never run), and the folder roadmap_cli imports from (an
    editable install's finder may point anywhere). The grader starts with
    `python -I -S` and exactly these (grading/launch.py `grader_python`)."""
    import site

    out: list[str] = []
    for folder in site.getsitepackages():
        if not os.path.isdir(folder):
            continue
        out.append(folder)
        for pth in sorted(glob.glob(os.path.join(glob.escape(folder), "*.pth"))):
            try:
                with open(pth, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    path = os.path.normpath(os.path.join(folder, line))
                    if os.path.isdir(path):
                        out.append(path)
    import roadmap_cli

    out.append(os.path.dirname(os.path.dirname(os.path.realpath(roadmap_cli.__file__))))
    return list(dict.fromkeys(out))


def runtime_hides() -> list[str]:
    """Inside the runtime, what stays absent: every packaged `roadmap_cli/_data` copy of the labs."""
    import sys

    out = []
    for entry in [*python_runtime(), *sys.path]:
        if entry:
            out.append(os.path.join(entry, "roadmap_cli", "_data"))
    import site

    for folder in site.getsitepackages():
        out.append(os.path.join(folder, "roadmap_cli", "_data"))
    return sorted(set(out))


def compile_view(read_only: list[str], read_write: list[str], cwd: str, base: Optional[dict] = None) -> dict:
    """A view for a compiler or a test binary: the grade's own view (`base`,
    for its runtime, hidden paths and network) or, outside a grade (`roadmap
    watch`'s prebuild), the runtime alone; plus `read_only` (the sources)
    and `read_write` (a fresh build folder): never the grade's scratch, the
    workspace only read-only."""
    if base is None:
        base = {"read_only": python_runtime(), "hide": runtime_hides()}
    return {
        "read_only": [*base.get("read_only", []), *read_only],
        "read_write": list(read_write),
        "hide": list(base.get("hide", [])),
        "shared_net": base.get("shared_net", False),
        "cwd": cwd,
    }


def _mounts(view: dict) -> list[tuple[str, str]]:
    """(kind, real path) for every per-grade view entry that exists, shallowest first.

    A mount hides whatever an earlier one put below it, so order is by depth,
    never by kind: a folder hidden inside a read-write one stays hidden, and a
    read-only folder granted inside a hidden one shows. Two kinds of entry are
    dropped: a grant inside a read-write one (the learner could have swapped
    it for a link to anywhere by the next start of bwrap, which follows links;
    it is writable through its parent anyway) and a hidden path outside every
    grant (absent already)."""
    rank = {"hide": 0, "read_only": 1, "read_write": 2}
    seen: dict[str, str] = {}
    for kind in rank:
        for path in view.get(kind, []):
            if path and os.path.exists(path):
                seen[os.path.realpath(path)] = kind  # a path listed twice takes the later (more open) kind
    writable = [os.path.join(p, "") for p, k in seen.items() if k == "read_write"]
    granted = [os.path.join(p, "") for p, k in seen.items() if k != "hide"]
    granted += [os.path.join(os.path.realpath(p), "") for kind, p, _ in system_grants() if kind == "ro"]
    kept = [
        (kind, path)
        for path, kind in seen.items()
        if not (kind != "hide" and any(path.startswith(w) for w in writable))
        and not (kind == "hide" and not any(path.startswith(g) for g in granted))
    ]
    return sorted(kept, key=lambda item: (item[1].rstrip(os.sep).count(os.sep), rank[item[0]], item[1]))


def describe(view: Optional[dict]) -> list[tuple[str, str, str]]:
    """(access, path, why) of everything a process behind this view sees, for
    `roadmap doctor --sandbox` and the test that walks the view from inside."""
    rows = [("read-only" if kind == "ro" else "device", path, why) for kind, path, why in system_grants()]
    rows += [("read-only", path, "made up for the wall") for path in SYNTHETIC_ETC]
    rows += [
        ("own", "/proc", "its own processes only (own pid namespace)"),
        ("device", "/dev", "null, zero, full, random, urandom, tty, pts (a minimal /dev)"),
        ("private", "/dev/shm", "empty, its own"),
        ("private", "/tmp", "empty, its own"),
        ("private", LEARNER_HOME, "HOME: empty, its own"),
        ("network", "lo", "its own loopback only (own network namespace)"),
    ]
    names = {"read_only": "read-only", "read_write": "read-write", "hide": "absent"}
    reasons = (view or {}).get("why", {})
    for kind, path in _mounts(view or {}):
        rows.append((names[kind], path, reasons.get(path, "")))
    return rows


def _argv(view: Optional[dict], data_fds: dict[str, int]) -> tuple[Optional[list[str]], list[int]]:
    """The `bwrap ... --` prefix for a learner command, or None for the weak
    sandbox. `view`: {"hide": [...], "read_only": [...], "read_write": [...],
    "cwd": path, "shared_net": bool} as the engine computed it
    (grading/isolation.py); `data_fds`: /etc path -> descriptor to read it from."""
    if not view:
        return None, []
    # The engine chose the wall after probing it (status()); a grade never quietly drops to the weak sandbox
    # while its attempt says "strong".
    path = shutil.which("bwrap")
    if path is None:
        raise WallUnavailable("the engine chose the OS sandbox but bwrap is gone")
    # The network: the grade's own (enter_grade_network: shared with the grader) or, failing that, its own.
    network = [] if view.get("shared_net") else ["--unshare-net"]
    argv = [
        path,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        *network,
        "--unshare-cgroup-try",
        "--uid",
        str(LEARNER_UID),
        "--gid",
        str(LEARNER_GID),
        "--hostname",
        HOSTNAME,
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        # Nothing but what is granted below: bwrap starts from an empty tmpfs root.
        "--dev",
        "/dev",
        "--tmpfs",
        "/dev/shm",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--dir",
        "/home",
        "--tmpfs",
        LEARNER_HOME,
        "--dir",
        "/etc",
    ]
    for kind, host, _why in system_grants():
        if kind == "dev":
            argv += ["--dev-bind", host, host]
        elif os.path.islink(host) and os.path.dirname(host) == "/":
            argv += ["--symlink", os.readlink(host), host]  # /bin -> usr/bin stays a link into the /usr we show
        else:
            argv += ["--ro-bind", host, host]
    for dest, fd in data_fds.items():
        argv += ["--perms", "0444", "--ro-bind-data", str(fd), dest]
    remounts: list[str] = []
    for kind, host in _mounts(view):
        if kind == "read_write":
            argv += ["--bind", host, host]
        elif kind == "read_only":
            argv += ["--ro-bind", host, host]
        elif os.path.isdir(host):
            argv += ["--tmpfs", host]  # absent: an empty folder on top, made read-only below
            remounts.append(host)
        else:
            argv += ["--ro-bind", "/dev/null", host]  # an absent file reads as empty
    # Read-only only once every deeper mount is in place: bwrap makes a mount point with mkdir, which a
    # read-only tmpfs refuses (a hidden roadmap_cli/_data holding a hidden kernels/, a lab's data/ granted
    # inside a hidden labs/). A remount touches that one mount, never the ones below it.
    for host in reversed(remounts):
        argv += ["--remount-ro", host]
    if view.get("cwd"):
        argv += ["--chdir", view["cwd"]]
    return argv + ["--"], list(data_fds.values())


@contextmanager
def walled(argv: list[str], view: Optional[dict]) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """(`argv` to run behind the wall, descriptors to pass to it) when a view
    is configured, else (`argv`, ()). Start the process inside the `with`:
    the descriptors (the synthetic /etc files, read by bwrap) close after it.

        with oswall.walled(cmd, view) as (cmd, fds):
            subprocess.Popen(cmd, pass_fds=(*mine, *fds), ...)
    """
    if not view:
        yield argv, ()
        return
    fds: dict[str, int] = {}
    try:
        for dest, text in SYNTHETIC_ETC.items():
            fd = os.memfd_create("roadmap-wall-etc", 0)  # CLOEXEC off: bwrap inherits it through pass_fds
            os.write(fd, text.encode())
            os.lseek(fd, 0, os.SEEK_SET)
            fds[dest] = fd
        prefix, _ = _argv(view, fds)
        yield (prefix or []) + argv, tuple(fds.values())
    finally:
        for fd in fds.values():
            os.close(fd)


def run(argv: list[str], view: Optional[dict], **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run(`argv`) behind the wall when `view` is set (its descriptors passed along)."""
    with walled(argv, view) as (cmd, fds):
        return subprocess.run(cmd, pass_fds=fds, **kwargs)


# ----------------------------------------------------------- the grade's network

_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def enter_grade_network() -> bool:
    """Move this process (the grader, before it starts anything) into a user
    and network namespace of its own, with only `lo`, up: the grade's
    network. Learner processes, compiles and test binaries it starts behind
    the wall share it (a view with "shared_net"), so the grader still talks
    to a learner's server and a learner's router still reaches the grader's
    stub replicas on 127.0.0.1, while nothing on the host (TCP on 127.0.0.1,
    abstract unix sockets, the cohort's database) is reachable from any of
    them. Same uid and gid inside (mapped to themselves): the grader's files
    stay its own. False where it cannot be made (no user namespaces for
    this process): the learner then gets a network namespace of its own,
    and a lab whose grader and learner talk over sockets fails honestly."""
    import ctypes
    import fcntl
    import socket
    import struct

    uid, gid = os.geteuid(), os.getegid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE=1 for a moment: a non-dumpable process cannot write its maps
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
            return False
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("16sH14x", b"lo", 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
    except OSError:
        return False
    return True
