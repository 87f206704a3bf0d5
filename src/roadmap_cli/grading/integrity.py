"""The grader's own files, hashed before and after each grade.

Learner code must not change what judges it: the lab's tests/ folder and
the project code the grader process imports (grading_kit/, the plugin and
its helpers, the supervisor). As root, file permissions cannot stop a
determined learner process from editing them, so we detect instead:

- content hashes before the grade and after it;
- while the grade runs, the engine compares each file's (size, mtime, inode)
  on every poll, so an edit that is restored before the grade ends (content
  hash identical again) still shows up as a changed mtime/inode;
- the learner process's audit hook refuses Python-level writes there.

Any difference voids the attempt and names the file.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_PKG = Path(__file__).resolve().parents[1]  # src/roadmap_cli
GRADER_CODE = [
    _PKG / "grading_kit",
    _PKG / "grading" / "plugin.py",
    _PKG / "grading" / "channel.py",
    _PKG / "grading" / "_supervisor.py",
    _PKG / "grading" / "__init__.py",
    _PKG / "labs" / "nodeids.py",
    _PKG / "labs" / "__init__.py",
    _PKG / "__init__.py",
]


def _files(root: Path):
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


def snapshot(tests_dir: Path) -> dict[str, str]:
    """path -> sha256 of every grader file (lab tests and grader code)."""
    out: dict[str, str] = {}
    for root in [tests_dir, *GRADER_CODE]:
        for path in _files(root):
            try:
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                out[str(path)] = "unreadable"
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def stat_snapshot(paths) -> dict[str, tuple]:
    """path -> (size, mtime_ns, inode): cheap enough to take on every poll."""
    import os

    out: dict[str, tuple] = {}
    for path in paths:
        try:
            st = os.stat(path)
            out[path] = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            out[path] = ("missing",)
    return out


# ------------------------------------------------ what a weak grade may not leave behind
#
# Without the OS wall (the weak sandbox: macOS, Linux without bubblewrap) learner code runs as the user and can
# write wherever the user can. Learner code runs only inside a grade (the supervisor kills what it starts; git
# runs nothing a workspace configures, labs/gitsafe.py), so the engine watches, around each weak grade, what a
# later grade's judge would execute: the grader's bytecode cache, the top of every site-packages folder (.pth
# files, sitecustomize, a new package or plugin) and of every PATH folder (a `git` the engine would run), and
# the whole of roadmap_cli and pytest. Anything there whose inode changed (ctime) during the grade voids it, and
# later grades are refused until it is repaired (the marker below). A .pyc is the one thing graders and the
# engine write there themselves: one is accepted when it is exactly the compilation of its source. An edit deep
# inside another package (torch/, numpy/) or the stdlib is caught by the stat snapshot of the whole runtime
# below (and its record, for edits made after the grade).

WEAK_WATCH_PACKAGES = ("roadmap_cli", "pytest", "_pytest", "pluggy", "iniconfig")
WEAK_REPAIR = (
    "reinstall roadmap and its dependencies (pip install --force-reinstall roadmap-cli, or "
    "`pip install -e .` in a checkout) and Python if the file is in its stdlib, delete {pycache} and "
    "{cpp_cache}, then grade again"
)


def weak_watch() -> list[tuple[str, bool]]:
    """(folder, whole tree?) of what a weak grade's learner code must not change."""
    import os
    import site

    from roadmap_cli.grading import manifest

    out: list[tuple[str, bool]] = []
    pycache = manifest.pycache_dir()
    if pycache is not None:
        out.append((str(pycache), True))
    for folder in site.getsitepackages():
        out.append((folder, False))
        for name in WEAK_WATCH_PACKAGES:
            out.append((os.path.join(folder, name), True))
    out.append((str(_PKG), True))
    out += [(folder, False) for folder in os.environ.get("PATH", "").split(os.pathsep) if folder]
    return [(p, tree) for p, tree in dict(out).items() if os.path.isdir(p)]


def written_since(t0_ns: int, watch: list[tuple[str, bool]]) -> list[str]:
    """Paths under `watch` whose inode changed at or after `t0_ns`, less .pyc files that are exactly their
    source's compilation (the grader's and the engine's own bytecode)."""
    import os

    found: list[str] = []

    def check(path: str, st) -> None:
        if st.st_ctime_ns >= t0_ns and not (path.endswith(".pyc") and _honest_pyc(path)):
            found.append(path)

    for root, tree in watch:
        if not os.path.isdir(root):
            continue
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if tree or entry.name == "__pycache__":
                        stack.append(entry.path)  # a folder runs nothing: what is in it is checked
                    elif st.st_ctime_ns >= t0_ns:
                        found.append(entry.path)  # a new package at the top of site-packages or PATH
                else:
                    check(entry.path, st)
    return sorted(set(found))


def _honest_pyc(path: str) -> bool:
    """Is this .pyc the compilation of the source it stands for (in a __pycache__ beside it, or under the
    grader's pycache_prefix, which mirrors the source's absolute path)?"""
    import importlib.util
    import marshal
    import os

    from roadmap_cli.grading import manifest

    name = os.path.basename(path)
    stem = name.split(".", 1)[0]
    folder = os.path.dirname(path)
    prefix = manifest.pycache_dir()
    if prefix is not None and path.startswith(os.path.join(str(prefix), "")):
        source_dir = os.sep + os.path.relpath(folder, prefix)
    elif os.path.basename(folder) == "__pycache__":
        source_dir = os.path.dirname(folder)
    else:
        return False
    source = os.path.join(source_dir, stem + ".py")
    if "-pytest-" in name:
        return _honest_rewritten_pyc(path, source)
    try:
        if importlib.util.cache_from_source(source, optimization=_optimization(name)).rsplit(os.sep, 1)[-1] != name:
            return False
        with open(path, "rb") as fh:
            data = fh.read()
        with open(source, "rb") as fh:
            text = fh.read()
        code = compile(text, source, "exec", dont_inherit=True, optimize=int(_optimization(name) or 0))
    except (OSError, SyntaxError, ValueError):
        return False
    if data[:4] != importlib.util.MAGIC_NUMBER:
        return False
    try:
        return marshal.loads(data[16:]) == code
    except (EOFError, ValueError, TypeError):
        return False


def _honest_rewritten_pyc(path: str, source: str) -> bool:
    """A test module's bytecode as pytest's assertion rewriting writes it (the grader's ini enables no hook)."""
    import marshal
    from pathlib import Path

    try:
        from _pytest.assertion.rewrite import _rewrite_test

        with open(path, "rb") as fh:
            data = fh.read()
        _, code = _rewrite_test(Path(source), None)  # type: ignore[arg-type]
        return marshal.loads(data[16:]) == code
    except Exception:  # noqa: BLE001 - anything unreadable is not the grader's own
        return False


def _optimization(name: str) -> str:
    parts = name.split(".")
    return next((p[len("opt-") :] for p in parts if p.startswith("opt-")), "")


def taint_file():
    from roadmap_cli.grading import manifest

    pycache = manifest.pycache_dir()
    return None if pycache is None else pycache.parent / "weak-grade-writes.json"


def record_taint(
    paths: list[str], expected: dict[str, str] | None = None, repos: dict[str, list[str]] | None = None
) -> None:
    """Remember what a weak grade left, so later grades refuse until it is repaired. A path of what judges
    (judge_hashes: the lab folder, the checkout's git state) is repaired when its content is back to what it
    was before the grade; any other when it is gone or written again (a reinstall)."""
    import json
    import os

    marker = taint_file()
    if marker is None:
        return
    expected = expected or {}
    entries = []
    for path in paths:
        try:
            entries.append([path, os.lstat(path).st_ctime_ns, expected.get(path)])
        except OSError:
            entries.append([path, None, expected.get(path)])
    marker.write_text(json.dumps({"paths": entries, "repos": repos or {}}))


def taint_line() -> str | None:
    """One line when an earlier weak grade left something a judge would run and it is still there; None
    (and the marker removed) once every such path is gone or was rewritten (a reinstall)."""
    import json
    import os

    from roadmap_cli.grading import manifest

    marker = taint_file()
    if marker is None or not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text())
        entries, repos = data["paths"], dict(data.get("repos") or {})
    except (OSError, ValueError, KeyError, TypeError):
        entries, repos = [[str(marker), 0]], {}
    left = []
    for entry in entries:
        path, ctime, expected = (list(entry) + [None])[:3]
        if expected is not None:
            if _content(path) != expected:
                left.append(path)
            continue
        try:
            if os.lstat(path).st_ctime_ns == ctime:
                left.append(path)
        except OSError:
            pass
    if not left:
        marker.unlink(missing_ok=True)
        record = _record_file()  # repaired: the next weak grade records the runtime afresh
        if record is not None:
            record.unlink(missing_ok=True)
        return None
    head = f"a weak-sandbox grade wrote {left[0]}" + (f" and {len(left) - 1} more" if len(left) > 1 else "")

    def holds(repo: str, path: str) -> bool:
        folders = [repo, *str((repos[repo] + [""])[1]).split(os.pathsep)]
        return any(f and (path == f or path.startswith(f.rstrip(os.sep) + os.sep)) for f in folders)

    repo = next((r for r in repos if isinstance(repos[r], list) and any(holds(r, p) for p in left)), None)
    if repo is not None:
        return (
            head + f", which judges later grades: restore the checkout as it was (`git -C {repo} reset --hard "
            f"{repos[repo][0]}`, after saving any edits of your own there; undo by hand what it added to its "
            f"git config or hooks), or reinstall roadmap, then grade again"
        )
    return (
        head
        + ", which a later grade would run: "
        + WEAK_REPAIR.format(pycache=manifest.pycache_dir(), cpp_cache=cpp_cache_root())
    )


# ------------------------------------------------ the whole runtime, around and after a weak grade
#
# The watch above covers the places a judge looks first; a weak grade's learner code can also edit any file deep
# inside the runtime (an appended patch in torch/version.py, in the stdlib) that a later grader imports. So around
# each weak grade the engine takes a stat snapshot of EVERY file of the Python runtime the grader imports from
# (stdlib, every site-packages, the venv's bin) and of the shared C++ build cache, and compares: (inode, size,
# mtime, ctime) per file; ctime cannot be set back by the user. The post-grade snapshot is kept in the data
# home, and every later grade of that home (strong or weak, a worker's included) checks the runtime against it
# before the grader starts, so a process the learner left running that edits a file after the grade ended is
# caught too. In the shared C++ cache, which strong grades fill meanwhile, a rewritten entry counts, a new one
# does not (residual: an entry planted for a key no grade has built yet). Limit: in the weak mode everything is written as the same user, so learner code that also rewrites this
# record cannot be told from the engine; the strong wall (bubblewrap) is the answer to that.


def runtime_roots() -> list[str]:
    """Every folder the grader's Python imports from: the stdlib, each site-packages folder and what the grader's
    fixed sys.path adds, roadmap_cli, the venv's bin; nested folders only once."""
    import site
    import sys
    import sysconfig

    paths = sysconfig.get_paths()
    found = [
        paths.get("stdlib"),
        paths.get("platstdlib"),
        paths.get("purelib"),
        paths.get("platlib"),
        *site.getsitepackages(),
        os.path.join(sys.prefix, "bin"),
        str(_PKG),
    ]
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    from roadmap_cli.grading_kit.oswall import site_paths

    found += site_paths()  # exactly what the grader's sys.path adds to the stdlib (launch.grader_python)
    prefixes = tuple(os.path.realpath(p) + os.sep for p in {sys.prefix, sys.base_prefix})
    found += [p for p in sys.path if p and os.path.realpath(p).startswith(prefixes)]  # lib-dynload, the zip
    roots = sorted({os.path.realpath(p) for p in found if p and os.path.isdir(p)})
    out: list[str] = []
    for root in roots:  # sorted: a folder comes before what is inside it
        if not any(root == kept or root.startswith(kept + os.sep) for kept in out):
            out.append(root)
    return out


def tree_snapshot(roots) -> dict[str, tuple]:
    """path -> (inode, size, mtime_ns, ctime_ns) of every file (and link, not followed) under `roots`; a
    site-packages folder that is not a root itself (the base Python's, under its stdlib, when a venv does not
    import it) is left out."""
    import site
    import sys

    from roadmap_cli.grading import manifest

    out: dict[str, tuple] = {}
    roots = list(roots)
    imported = {os.path.realpath(p) for p in [*roots, *site.getsitepackages(), *sys.path] if p}
    pycache = str(manifest.pycache_dir())
    for root in roots:
        mirror = root == pycache  # the grader's bytecode cache mirrors absolute paths: all of it is read
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                it = os.scandir(folder)
            except OSError:
                continue
            with it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name.startswith(".build-"):
                                continue  # a C++ build in flight (its result is moved into an entry, seen there)
                            if mirror or entry.name not in ("site-packages", "dist-packages") or entry.path in imported:
                                stack.append(entry.path)
                            continue
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    out[entry.path] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return out


def tree_changes(before: dict[str, tuple], after: dict[str, tuple], cache: str | None = None) -> list[str]:
    """Files added, changed or removed, less bytecode that is exactly its source's compilation (Python writes
    that itself on import) and bytecode removed. Under `cache` (the shared C++ build cache, which strong grades
    of this user fill meanwhile) only a file that was there and changed counts: an entry rewritten."""
    out = []
    inside = (cache.rstrip(os.sep) + os.sep) if cache else None
    for path in set(before) | set(after):
        if before.get(path) == after.get(path):
            continue
        if inside and path.startswith(inside) and (path not in before or path not in after):
            continue
        if path.endswith(".pyc") and (path not in after or _honest_pyc(path)):
            continue
        out.append(path)
    return sorted(out)


def cpp_cache_root() -> str:
    from roadmap_cli.grading_kit import cpp_cache

    return str(cpp_cache.shared_cache_root())


def judge_roots() -> list[str]:
    """What a weak grade's learner code must leave as it was: the runtime, the grader's bytecode cache (a
    changed .pyc there counts unless it is exactly its source's compilation: contents, not pytest's source-hash
    header) and the shared C++ build cache."""
    from roadmap_cli.grading import manifest

    pycache = manifest.pycache_dir()
    return [*runtime_roots(), *([str(pycache)] if pycache is not None else []), cpp_cache_root()]


def drop_runtime_record() -> None:
    """Where the engine was a subreaper, nothing of a weak grade outlives it: its window's comparison is the
    whole story, and a record would only blame it for what the user or another home's grade changes later."""
    record = _record_file()
    if record is not None:
        record.unlink(missing_ok=True)


# ------------------------------------------------ what judges beyond the runtime, by content
#
# In a source checkout (README's install) the lab folders and git live outside the runtime: learner code of a
# weak grade can append a hook to labs/<lab>/tests/conftest.py and `git commit` it (the manifest compares with
# git HEAD: it would match), or append to a reference input in labs/<lab>/data/. So the engine hashes, before a
# weak grade and in its own memory, the whole lab folder and, in a checkout, its git state (the commit HEAD
# names, config, hooks), and compares after it. A wheel install has no git state that judges (its manifest is
# a file in the runtime, covered above).

ABSENT = "absent"


def _content(path: str) -> str:
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
    for path in _files(lab_root):
        out[str(path)] = _content(str(path))
    from roadmap_cli.grading import manifest

    for holder in {lab_root, _PKG} if not manifest.MANIFEST_FILE.is_file() else ():
        gitdirs = _git_dirs(holder)
        if not gitdirs:
            continue
        out[str(gitdirs[0] / "HEAD")] = _content(str(gitdirs[0] / "HEAD"))
        for gitdir in gitdirs:  # what git runs when the engine calls it: config (fsmonitor, aliases), hooks
            for name in ("config", "config.worktree"):
                out[str(gitdir / name)] = _content(str(gitdir / name))
            for hook in sorted((gitdir / "hooks").glob("*")) if (gitdir / "hooks").is_dir() else []:
                out[str(hook)] = _content(str(hook))
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


def _record_file():
    """In the data home (one per user, and per test): the runtime (by its prefix) and C++ cache it records."""
    import hashlib as _hashlib
    import sys

    from roadmap_cli.errors import RoadmapError
    from roadmap_cli.paths import resolve_home

    try:
        home = resolve_home()
    except RoadmapError:
        return None
    tag = _hashlib.sha256(f"{sys.prefix}\0{cpp_cache_root()}".encode()).hexdigest()[:16]
    return home / f"weak-grade-runtime-{tag}.json"


def has_runtime_record() -> bool:
    record = _record_file()
    return record is not None and record.is_file()


def save_runtime_record(snap: dict[str, tuple]) -> None:
    """Keep the snapshot a later grade checks the runtime against (written whole, then renamed)."""
    import json

    record = _record_file()
    if record is None:
        return
    tmp = record.with_name(f".{os.getpid()}.{record.name}")
    tmp.write_text(json.dumps({"roots": judge_roots(), "files": snap}))
    os.replace(tmp, record)


def refresh_cache_record() -> None:
    """After a strong grade (its own, walled, C++ builds are trusted): the cache part of the record is now."""
    import json

    record = _record_file()
    if record is None or not record.is_file():
        return
    try:
        files = json.loads(record.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    cache = cpp_cache_root()
    files = {p: v for p, v in files.items() if not p.startswith(cache + os.sep)}
    files.update(tree_snapshot([cache]))
    save_runtime_record(files)


def verify_runtime() -> tuple[dict[str, tuple] | None, str | None]:
    """(the current snapshot, None) when no weak grade has run here or nothing changed since the last one;
    (None, the one repair line) when a file of the runtime or the C++ cache changed after a weak grade."""
    import json

    record = _record_file()
    if record is None or not record.is_file():
        return None, None
    try:
        data = json.loads(record.read_text())
        recorded = {p: tuple(v) for p, v in data["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        recorded = {}
    now = tree_snapshot(judge_roots())
    changes = tree_changes(recorded, now, cpp_cache_root())
    if not changes:
        return now, None
    record_taint(changes)
    return None, taint_line() or f"a file a grader runs changed after a weak-sandbox grade: {changes[0]}"
