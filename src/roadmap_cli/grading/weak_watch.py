"""What a weak grade (no OS wall) may not leave behind where a later grade's
judge looks first: the grader's bytecode cache, the top of site-packages and
of PATH, roadmap_cli and pytest; a .pyc there counts unless it is exactly its
source's compilation.
"""

from __future__ import annotations

from roadmap_cli.grading.integrity import PKG

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
    out.append((str(PKG), True))
    out += [(folder, False) for folder in os.environ.get("PATH", "").split(os.pathsep) if folder]
    return [(p, tree) for p, tree in dict(out).items() if os.path.isdir(p)]


def written_since(t0_ns: int, watch: list[tuple[str, bool]]) -> list[str]:
    """Paths under `watch` whose inode changed at or after `t0_ns`, less .pyc files that are exactly their
    source's compilation (the grader's and the engine's own bytecode)."""
    import os

    found: list[str] = []

    def check(path: str, st) -> None:
        if st.st_ctime_ns >= t0_ns and not (path.endswith(".pyc") and honest_pyc(path)):
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


def honest_pyc(path: str) -> bool:
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
