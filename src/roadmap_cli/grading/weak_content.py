"""What judges beyond the runtime, by content, around a weak grade: every file
of the lab folder and, in a source checkout, its git state (HEAD's commit,
config, hooks).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from roadmap_cli.grading.integrity import PKG, files

# ------------------------------------------------ what judges beyond the runtime, by content
#
# In a source checkout (README's install) the lab folders and git live outside the runtime: learner code of a
# weak grade can append a hook to labs/<lab>/tests/conftest.py and `git commit` it (the manifest compares with
# git HEAD: it would match), or append to a reference input in labs/<lab>/data/. So the engine hashes, before a
# weak grade and in its own memory, the whole lab folder and, in a checkout, its git state (the commit HEAD
# names, config, hooks), and compares after it. A wheel install has no git state that judges (its manifest is
# a file in the runtime, covered above).

ABSENT = "absent"


def content(path: str) -> str:
    folder = os.path.dirname(path)
    if os.path.basename(path) == "HEAD" and (
        os.path.isdir(os.path.join(folder, "refs")) or os.path.isfile(os.path.join(folder, "commondir"))
    ):
        # A checkout's HEAD, as the commit it names: what the install check compares with. (Other refs move
        # when the user commits on another branch or worktree meanwhile: not this grade's doing.)
        return "commit:" + str(_head_commit(_git_dirs_of(os.path.dirname(path))))
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return "unreadable"


def _git_dirs(start: Path) -> list[Path]:
    """The git folder(s) of the checkout holding `start` (a linked worktree's own and the common one)."""
    for folder in [start, *start.parents]:
        dot = folder / ".git"
        if dot.is_dir():
            return [dot.resolve()]
        if dot.is_file():
            try:
                text = dot.read_text().strip()
            except OSError:
                return []
            if not text.startswith("gitdir:"):
                return []
            gitdir = (folder / text[len("gitdir:") :].strip()).resolve()
            dirs = [gitdir]
            common = gitdir / "commondir"
            if common.is_file():
                try:
                    dirs.append((gitdir / common.read_text().strip()).resolve())
                except OSError:
                    pass
            return dirs
    return []


def _git_dirs_of(gitdir: str) -> list[Path]:
    """A git folder and, for a linked worktree's, the common one."""
    dirs = [Path(gitdir)]
    try:
        dirs.append((Path(gitdir) / (Path(gitdir) / "commondir").read_text().strip()).resolve())
    except OSError:
        pass
    return dirs


def judge_hashes(lab_root: Path) -> dict[str, str]:
    """path -> sha256 of every file of the lab folder and of the git state of the checkout(s) holding it and
    the engine; "@git-head:<repo>" -> the commit checked out (for the repair line)."""
    out: dict[str, str] = {}
    lab_root = Path(lab_root).resolve()
    for path in files(lab_root):
        out[str(path)] = content(str(path))
    from roadmap_cli.grading import manifest

    for holder in {lab_root, PKG} if not manifest.MANIFEST_FILE.is_file() else ():
        gitdirs = _git_dirs(holder)
        if not gitdirs:
            continue
        out[str(gitdirs[0] / "HEAD")] = content(str(gitdirs[0] / "HEAD"))
        for gitdir in gitdirs:  # what git runs when the engine calls it: config (fsmonitor, aliases), hooks
            for name in ("config", "config.worktree"):
                out[str(gitdir / name)] = content(str(gitdir / name))
            for hook in sorted((gitdir / "hooks").glob("*")) if (gitdir / "hooks").is_dir() else []:
                out[str(hook)] = content(str(hook))
        head = _head_commit(gitdirs)
        if head:
            worktree = str(_worktree_of(holder))
            out["@git-head:" + worktree] = head
            out["@git-dirs:" + worktree] = os.pathsep.join(str(d) for d in gitdirs)
    return out


def _worktree_of(start: Path) -> Path:
    return next((f for f in [start, *start.parents] if (f / ".git").exists()), start)


def _head_commit(gitdirs: list[Path]) -> str | None:
    """HEAD's commit, read from the files (no git process: the engine runs nothing the checkout configures)."""
    try:
        head = (gitdirs[0] / "HEAD").read_text().strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head or None
    ref = head[len("ref:") :].strip()
    for gitdir in gitdirs:
        try:
            return (gitdir / ref).read_text().strip()
        except OSError:
            pass
        try:
            for line in (gitdir / "packed-refs").read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split(" ", 1)[0]
        except OSError:
            pass
    return None


def judge_repos(before: dict[str, str]) -> dict[str, list[str]]:
    """checkout -> [the commit it had before the grade, its git folders] (from judge_hashes)."""
    return {
        k[len("@git-head:") :]: [v, before.get("@git-dirs:" + k[len("@git-head:") :], "")]
        for k, v in before.items()
        if k.startswith("@git-head:")
    }


def judge_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What judges that the grade changed, added or removed."""
    keys = {p for p in set(before) | set(after) if not p.startswith("@")}
    return sorted(p for p in keys if before.get(p, ABSENT) != after.get(p, ABSENT))
