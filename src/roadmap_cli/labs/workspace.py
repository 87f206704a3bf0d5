"""Learner workspaces: the starter copied into a git repository.

This is the only module that uses gitpython. Every commit has an explicit
author and committer ("roadmap <roadmap@localhost>"): a fresh machine may
have no git identity configured. Nothing a learner wrote is ever lost:
`start` refuses a non-empty folder without --force, and with --force the old
content is committed (a git workspace) or moved aside (anything else) first;
`reset` commits the current work before restoring the starter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from roadmap_cli.errors import UserError
from roadmap_cli.labs import gitsafe
from roadmap_cli.labs.spec import LabSpec

AUTHOR_NAME = "roadmap"
AUTHOR_EMAIL = "roadmap@localhost"
# Caches, and training outputs (checkpoints can be hundreds of MB): they stay
# in place on reset/--force (ignored files are never deleted) but out of git.
IGNORED = ["__pycache__/", "*.pyc", ".pytest_cache/", ".hypothesis/", "out/", "*.pt"]


@dataclass
class StartResult:
    path: Path
    commit_sha: str
    moved_aside: Optional[Path] = None  # where a non-git folder's old content went
    saved_commit: Optional[str] = None  # commit that holds the old work of a git folder


def _git():
    """gitpython, or one clear line: importing it fails (a long ImportError)
    when no git executable can be found."""
    try:
        import git
    except ImportError:
        raise UserError(
            "git is not installed or not on PATH: lab workspaces are git repositories "
            "(install git, then retry; `roadmap doctor` checks it)"
        ) from None
    return git


def _actor():
    return _git().Actor(AUTHOR_NAME, AUTHOR_EMAIL)


def _commit_all(repo, message: str) -> str:
    """Stage everything (deletions too) and commit; returns the new HEAD sha.

    Called before anything in the folder changes: if git refuses (say a
    repository without commits inside the workspace), nothing was touched."""
    try:
        repo.git.add(A=True)
    except _git().GitCommandError as exc:
        raise UserError(
            f"cannot save the work in {repo.working_tree_dir} with git ({_problem(exc)}); "
            "nothing was changed: fix that, then retry"
        ) from None
    actor = _actor()
    # These are roadmap's own save points: a learner's hooks (a global
    # init.templateDir with a linting pre-commit, say) must not stop the
    # starter from being committed or old work from being saved.
    commit = repo.index.commit(message, author=actor, committer=actor, skip_hooks=True)
    return commit.hexsha


def _problem(exc: Exception) -> str:
    """git's own complaint, on one line."""
    stderr = getattr(exc, "stderr", None)
    text = stderr.strip().removeprefix("stderr:").strip().strip("'") if stderr else str(exc)
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _has_changes(repo) -> bool:
    """Anything to commit? Asked before the folder is touched, so a damaged
    repository stops here with nothing changed."""
    try:
        return repo.is_dirty(untracked_files=True) or not repo.head.is_valid()
    except (_git().GitError, ValueError) as exc:
        raise UserError(
            f"cannot read the git repository in {repo.working_tree_dir} ({_problem(exc)}); "
            "nothing was changed: repair it, or move the folder aside yourself"
        ) from None


# ---------------------------------------------------------------- never outside the workspace


def _link_in_path(dest: Path, rel: Path) -> Optional[Path]:
    """The first component of dest/rel (below dest) that is a symbolic link, or None.

    Writing to a path with a link in it would write wherever the link points:
    a learner's ignored `model.py -> ../notes.txt` must never receive the
    starter, so every write below checks its path first."""
    current = dest
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def _refuse_links(dest: Path, rels: list[Path], tracked: set[str] = frozenset()) -> None:
    """Refuse, before anything changes, if a file roadmap is about to write
    sits behind a symbolic link (one git tracks is removed first, so it is fine)."""
    for rel in rels:
        link = _link_in_path(dest, rel)
        if link is not None and link.relative_to(dest).as_posix() not in tracked:
            raise UserError(
                f"{link} is a symbolic link (to {os.readlink(link)}) where roadmap would write {rel.as_posix()}; "
                "roadmap never writes through links, so nothing was changed: move the link away, then retry"
            )


def _starter_targets(spec: LabSpec) -> list[Path]:
    """Every path (relative to the workspace) that write_starter may write."""
    rels = [
        path.relative_to(spec.starter_dir)
        for path in spec.starter_dir.rglob("*")
        if "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]
    return sorted(rels + [Path(".gitignore")])


def _copy_file(source: Path, dest: Path, rel: Path) -> None:
    _refuse_links(dest, [rel])
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target, follow_symlinks=True)  # the source is ours; the target was checked


def _copy_tree(src: Path, dest: Path) -> None:
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts or path.suffix == ".pyc":
            continue
        if path.is_dir():
            _refuse_links(dest, [rel])
            (dest / rel).mkdir(parents=True, exist_ok=True)
        else:
            _copy_file(path, dest, rel)


def _remove_committed(repo, path: Path) -> None:
    """Delete the files git holds (call it right after committing them), then
    the folders left empty. Files the workspace's .gitignore ignores are not
    in git, so they stay: deleting them would lose them for good (say a
    trained checkpoint under an ignored out/)."""
    for rel in repo.git.ls_files("-z").split("\0"):
        target = path / rel
        if rel and _link_in_path(path, Path(rel).parent) is None and (target.is_file() or target.is_symlink()):
            target.unlink()  # a link itself is removed, never what it points to
    folders = [
        p for p in path.rglob("*") if p.is_dir() and not p.is_symlink() and ".git" not in p.relative_to(path).parts
    ]
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()


def write_starter(spec: LabSpec, dest: Path) -> None:
    _copy_tree(spec.starter_dir, dest)
    _refuse_links(dest, [Path(".gitignore")])  # a dangling link does not "exist" but would be written through
    ignore = dest / ".gitignore"
    if not ignore.exists():
        ignore.write_text("\n".join(IGNORED) + "\n")


def write_solution(spec: LabSpec, dest: Path, overrides: Optional[dict[str, str]] = None) -> None:
    """The reference solution: starter, overlaid with solution/ and solution_files,
    with the single source's markers and starter lines stripped (starter_build).
    `overrides` (workspace path -> reference text with markers) replaces a
    source's text, e.g. a mutant of it."""
    from roadmap_cli.labs.starter_build import comment_prefix, solution_text

    write_starter(spec, dest)
    for rel, source in spec.solution_sources().items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if overrides and rel in overrides:
            target.write_text(solution_text(overrides[rel], rel), encoding="utf-8")
        elif comment_prefix(rel) is not None:
            target.write_text(solution_text(source.read_text(encoding="utf-8"), rel), encoding="utf-8")
        else:
            shutil.copy2(source, target)


def apply_patch(patch: Path, dest: Path) -> None:
    """`git apply` a wrong variant (paths a/<file> b/<file> relative to `dest`)."""
    env = dict(gitsafe.env(), GIT_CEILING_DIRECTORIES=str(dest.parent))  # never apply into an enclosing repo
    proc = subprocess.run(
        gitsafe.command(dest, "apply", "--whitespace=nowarn", str(patch), environ=env),
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise UserError(f"cannot apply {patch.name}: {proc.stderr.strip() or proc.stdout.strip()}")


def _is_within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def _refuse_dangerous_dir(dest: Path, data_home: Optional[Path]) -> None:
    """A workspace folder is emptied (--force) or moved aside: never let that
    be the data home, the home directory, a file-system root, or a parent of
    any of them."""
    protected = [(Path.home().resolve(), "your home directory")]
    if data_home is not None:
        protected.append((Path(data_home).expanduser().resolve(), "roadmap's data home"))
    for place, what in protected:
        if _is_within(place, dest):
            where = "is" if place == dest else "contains"
            raise UserError(
                f"{dest} {where} {what} ({place}); choose a new or empty folder for the workspace "
                "(the default is fine: leave out --dir)"
            )
    if dest.parent == dest or os.path.ismount(dest):
        raise UserError(f"{dest} is a file-system root or mount point; choose a new or empty folder for the workspace")


def _made_by_roadmap(repo) -> bool:
    """Was this repository a roadmap workspace (a `roadmap: start` commit by roadmap)?"""
    try:
        found = repo.git.log("--all", f"--author={AUTHOR_EMAIL}", "--grep=^roadmap: start ", "-1", "--format=%H")
    except _git().GitCommandError:
        return False
    return bool(found.strip())


def _enclosing_repo(dest: Path):
    """The git repository `dest` is in (its own or an enclosing one), or None."""
    git = _git()
    try:
        return gitsafe.harden(git.Repo(dest, search_parent_directories=True))
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def _tracked(repo) -> set[str]:
    return {rel for rel in repo.git.ls_files("-z").split("\0") if rel}


def start(spec: LabSpec, dest: Path, *, data_home: Path, force: bool = False) -> StartResult:
    """Copy the starter into `dest`, make it a git repository, commit.

    `data_home` (the learner's) is never used, emptied or moved."""
    git = _git()

    dest = Path(dest).expanduser().resolve()
    _refuse_dangerous_dir(dest, data_home)
    if dest.exists() and not dest.is_dir():
        raise UserError(f"{dest} exists and is not a directory")
    non_empty = dest.is_dir() and any(dest.iterdir())
    result = StartResult(dest, "")
    if non_empty and not force:
        raise UserError(f"{dest} is not empty; use --force to start over (your old work is kept in git or moved aside)")
    repo = None
    if non_empty:
        repo = _enclosing_repo(dest)
        if repo is not None and not _made_by_roadmap(repo):
            raise UserError(
                f"{dest} is in a git repository roadmap did not create ({repo.working_tree_dir}); "
                "refusing to empty or move it: choose a new or empty folder for the workspace"
            )
        if repo is not None and Path(repo.working_tree_dir).resolve() != dest:
            raise UserError(
                f"{dest} is inside another workspace's repository ({repo.working_tree_dir}); "
                "choose a new or empty folder for the workspace"
            )
        if repo is not None:
            if _has_changes(repo):
                result.saved_commit = _commit_all(repo, f"roadmap: save work before restarting {spec.id}")
            else:
                result.saved_commit = repo.head.commit.hexsha
            _refuse_links(dest, _starter_targets(spec), _tracked(repo))
            _remove_committed(repo, dest)
        else:
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
            aside = dest.with_name(f"{dest.name}.old-{stamp}")
            n = 1
            while aside.exists():
                aside = dest.with_name(f"{dest.name}.old-{stamp}-{n}")
                n += 1
            dest.rename(aside)
            result.moved_aside = aside
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a read-only place, a parent that is a file, no permission...
        raise UserError(f"cannot create the workspace {dest}: {exc.strerror or exc}") from None
    if repo is None:
        repo = gitsafe.harden(git.Repo.init(dest))
    write_starter(spec, dest)
    result.commit_sha = _commit_all(repo, f"roadmap: start {spec.id} from the starter")
    return result


def reset(spec: LabSpec, path: Path, restart_hint: Optional[str] = None) -> tuple[Optional[str], str]:
    """Back to the starter after committing the current work.

    `restart_hint` is the `roadmap lab start ... --force` line to suggest when
    the folder cannot be reset. Returns (sha of the commit holding the old
    work or None, sha of the reset commit).
    """
    git = _git()
    InvalidGitRepositoryError, Repo = git.InvalidGitRepositoryError, git.Repo

    path = Path(path).resolve()
    restart_hint = restart_hint or f"roadmap lab start {spec.id} --force"
    if not path.is_dir():
        raise UserError(f"workspace {path} does not exist; use `{restart_hint.removesuffix(' --force')}`")
    try:
        repo = gitsafe.harden(Repo(path))
    except InvalidGitRepositoryError:
        raise UserError(
            f"{path} is not a git repository, so its files cannot be saved in a commit; refusing to "
            f"reset (`{restart_hint}` moves them aside and starts over)"
        ) from None
    if Path(repo.working_tree_dir).resolve() != path or not _made_by_roadmap(repo):
        raise UserError(
            f"{path} is not a git repository created by roadmap; refusing to reset it "
            f"(`{restart_hint}` in a new folder starts over)"
        )
    saved = _commit_all(repo, f"roadmap: save work before resetting {spec.id}") if _has_changes(repo) else None
    # After the save commit every file roadmap removes is in git; a link git
    # does not track (an ignored one) would be written through: refuse first.
    _refuse_links(path, _starter_targets(spec), _tracked(repo))
    _remove_committed(repo, path)
    write_starter(spec, path)
    if _has_changes(repo):
        return saved, _commit_all(repo, f"roadmap: reset {spec.id} to the starter")
    return saved, repo.head.commit.hexsha


def head_info(path: Path) -> tuple[Optional[str], Optional[bool]]:
    """(HEAD sha, dirty) of the workspace's git repository; None for what
    git cannot tell (no git, no repository, a damaged one): grading never
    depends on the health of the learner's repository.

    One `git status` call, not GitPython: `roadmap grade` asks this while
    pytest runs, and GitPython's import plus its five git processes cost more
    than the grader's own start-up on a busy 2-core machine (issue 13).
    Dirty means what GitPython's is_dirty(untracked_files=True) meant: staged
    or unstaged changes, or an untracked file. Only `path` itself may be the
    repository (one in a folder above it is not the workspace's)."""
    path = Path(path).resolve()
    env = gitsafe.env()  # the user's GIT_DIR etc. point elsewhere; nothing the workspace configures runs
    env["GIT_CEILING_DIRECTORIES"] = str(path.parent)  # never search above the workspace
    env["LC_ALL"] = "C"
    try:
        # --no-optional-locks: never take index.lock (a git command of the learner's may be running).
        proc = subprocess.run(
            gitsafe.command(
                path,
                "--no-optional-locks",
                "status",
                "--porcelain=v2",
                "--branch",
                "--untracked-files=normal",
                environ=env,
            ),
            cwd=path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):  # no git executable, a hung repository
        return None, None
    if proc.returncode != 0:
        # Not a repository, or a damaged one (a broken index leaves HEAD readable: name the commit graded).
        return _head_sha_only(path, env), None
    lines = proc.stdout.decode("utf-8", errors="replace").splitlines()
    sha = None
    for line in lines:
        if line.startswith("# branch.oid "):
            oid = line.split(" ", 2)[2].strip()
            sha = oid if oid != "(initial)" else None  # "(initial)": no commit yet
    return sha, any(line and not line.startswith("#") for line in lines)


def _head_sha_only(path: Path, env: dict) -> Optional[str]:
    """HEAD's sha when `git status` cannot run (a damaged index), else None."""
    try:
        proc = subprocess.run(
            gitsafe.command(path, "--no-optional-locks", "rev-parse", "--verify", "-q", "HEAD", environ=env),
            cwd=path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = proc.stdout.decode("ascii", errors="replace").strip()
    return sha if proc.returncode == 0 and len(sha) == 40 else None


HANDOUT = "README.md"


def add_handout(spec: LabSpec, path: Path, lang: str = "en") -> Optional[str]:
    """Put the lab's handout into the workspace as README.md and commit it.

    Every starter error says "see README.md, section ..."; the file must be
    where the learner works. A translation (`README.<lang>.md` in the lab
    folder) is used when it exists. Hints are never written here: they stay
    earned through `roadmap lab hint`. A starter that ships its own README.md
    keeps it. Returns the new HEAD sha, or None when nothing changed.
    """
    path = Path(path)
    target = path / HANDOUT
    if (spec.starter_dir / HANDOUT).exists():
        return None
    translated = spec.root / f"README.{lang}.md"
    source = translated if lang != "en" and translated.is_file() else spec.readme
    try:
        target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write the handout {target}: {exc.strerror or exc}") from None
    try:
        repo = gitsafe.harden(_git().Repo(path))
    except _git().GitError:
        return None
    if not _has_changes(repo):
        return None
    repo.index.add([HANDOUT])
    actor = _actor()
    return repo.index.commit(
        f"roadmap: the {spec.id} handout ({HANDOUT})", author=actor, committer=actor, skip_hooks=True
    ).hexsha
