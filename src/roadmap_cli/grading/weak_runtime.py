"""The whole Python runtime a grader imports from (and the shared C++ build
cache), by stat, around and after a weak grade; the record later grades check
it against (grading/weak_taint.py `verify_runtime`).
"""

from __future__ import annotations

import os

from roadmap_cli.grading.integrity import PKG
from roadmap_cli.grading.weak_watch import honest_pyc

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
        str(PKG),
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
        if path.endswith(".pyc") and (path not in after or honest_pyc(path)):
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
    record = record_file()
    if record is not None:
        record.unlink(missing_ok=True)


def record_file():
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
    record = record_file()
    return record is not None and record.is_file()


def save_runtime_record(snap: dict[str, tuple]) -> None:
    """Keep the snapshot a later grade checks the runtime against (written whole, then renamed)."""
    import json

    record = record_file()
    if record is None:
        return
    tmp = record.with_name(f".{os.getpid()}.{record.name}")
    tmp.write_text(json.dumps({"roots": judge_roots(), "files": snap}))
    os.replace(tmp, record)


def refresh_cache_record() -> None:
    """After a strong grade (its own, walled, C++ builds are trusted): the cache part of the record is now."""
    import json

    record = record_file()
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
