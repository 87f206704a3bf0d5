"""A workspace as one gzipped tar (`roadmap submit`), and back into a folder (`roadmap worker`).

What goes in is what `roadmap grade` would see of the learner's work: the
files git tracks plus the untracked ones it does not ignore (`git ls-files
--cached --others --exclude-standard`), never `.git`; a folder that is not a
git repository gives every regular file but `.git`. Symbolic links and
special files are left out (the grader reads files, and a link would point
into the submitter's machine). Over the cap (20 MB of file contents) the
submission is refused with one line naming the biggest files.

Unpacking trusts nothing in the archive: only regular files, relative paths
without `..`, each written with O_EXCL under a fresh folder, sizes re-checked.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from roadmap_cli.errors import UserError

MAX_BYTES = 20 * 1024 * 1024
MAX_FILES = 5000


@dataclass(frozen=True)
class Snapshot:
    data: bytes  # the gzipped tar
    size_bytes: int  # file contents, before compression
    file_count: int


def _git_files(workspace: Path) -> list[str] | None:
    if not (workspace / ".git").exists():
        return None
    try:
        from roadmap_cli.labs import gitsafe

        # Disarmed: nothing the workspace's .git/config names (fsmonitor, filters) runs (labs/gitsafe.py).
        out = subprocess.run(
            gitsafe.command(
                workspace, "-C", str(workspace), "ls-files", "-z", "--cached", "--others", "--exclude-standard"
            ),
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            cwd=workspace,
            env=gitsafe.env(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return sorted({name for name in out.stdout.decode("utf-8", "surrogateescape").split("\0") if name})


def _walk_files(workspace: Path) -> list[str]:
    names = []
    for root, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in files:
            names.append(os.path.relpath(os.path.join(root, name), workspace))
    return sorted(names)


def workspace_files(workspace: Path, *, max_bytes: int, carried_by: str) -> list[tuple[str, int]]:
    """(relative path, size) of every file a grade of `workspace` reads: git's tracked and untracked-but-not-
    ignored files (every regular file when it is not a git repository), never .git, links or special files.
    Over `max_bytes` of contents: a UserError naming the biggest files; `carried_by` ends its first clause
    ("a submission may carry", "grade --on sends")."""
    names = _git_files(workspace)
    if names is None:
        names = _walk_files(workspace)
    files = []
    for name in names:
        if name.split("/")[0] == ".git":
            continue
        try:
            st = os.lstat(workspace / name)
        except FileNotFoundError:  # tracked but deleted: the learner's current work has no such file
            continue
        import stat

        if stat.S_ISREG(st.st_mode):
            files.append((name, st.st_size))
    total = sum(size for _, size in files)
    if total > max_bytes:
        mb = 1024 * 1024  # MB here is MiB, as the cap is written: 20 MB = 20 * 2**20 bytes
        biggest = ", ".join(f"{name} ({size / mb:.1f} MB)" for name, size in sorted(files, key=lambda f: -f[1])[:3])
        raise UserError(
            f"the workspace's files add up to {total / mb:.1f} MB, over the {max_bytes / mb:.0f} MB "
            f"{carried_by} (biggest: {biggest}); ignore large outputs in .gitignore"
        )
    return files


def pack(workspace: Path, *, max_bytes: int = MAX_BYTES) -> Snapshot:
    files = workspace_files(workspace, max_bytes=max_bytes, carried_by="a submission may carry")
    total = sum(size for _, size in files)
    if len(files) > MAX_FILES:
        raise UserError(
            f"the workspace holds {len(files)} files, over the {MAX_FILES} a submission may carry; "
            "ignore generated files in .gitignore"
        )
    if not files:
        raise UserError(f"the workspace {workspace} holds no files to submit")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for name, _ in files:
            info = tarfile.TarInfo(name)
            data = (workspace / name).read_bytes()
            info.size, info.mode, info.mtime = len(data), 0o644, 0  # reproducible: same files, same bytes
            tar.addfile(info, io.BytesIO(data))
    return Snapshot(buf.getvalue(), total, len(files))


def unpack(data: bytes, dest: Path, *, max_bytes: int = MAX_BYTES) -> int:
    """Write the archive's files under `dest` (a new, empty folder); returns how many."""
    try:
        return _unpack(data, dest, max_bytes)
    except (tarfile.TarError, EOFError, zlib.error) as exc:  # a corrupt snapshot: one line, never a worker crash
        raise ValueError(f"the submission's snapshot is not a readable gzipped tar ({exc})") from None


def _unpack(data: bytes, dest: Path, max_bytes: int) -> int:
    count, total = 0, 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            parts = Path(member.name).parts
            if not member.isfile() or member.name.startswith("/") or ".." in parts or not parts or parts[0] == ".git":
                raise ValueError(f"the submission holds an entry that is not a plain relative file: {member.name!r}")
            total += member.size
            if total > max_bytes or count >= MAX_FILES:
                raise ValueError("the submission is over the size cap")
            target = dest.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(source.read(member.size + 1)[:max_bytes])
            count += 1
    return count
