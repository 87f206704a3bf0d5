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

Around a weak grade (no OS wall) the engine watches more: weak_watch.py (the
places a later judge looks first), weak_runtime.py (every file of the runtime,
and its record), weak_content.py (the lab folder and the checkout's git state,
by content), weak_taint.py (what was left, and the line that refuses later
grades until it is repaired).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PKG = Path(__file__).resolve().parents[1]  # src/roadmap_cli
GRADER_CODE = [
    PKG / "grading_kit",
    PKG / "grading" / "plugin.py",
    PKG / "grading" / "channel.py",
    PKG / "grading" / "_supervisor.py",
    PKG / "grading" / "__init__.py",
    PKG / "labs" / "nodeids.py",
    PKG / "labs" / "__init__.py",
    PKG / "__init__.py",
]


def files(root: Path):
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
        for path in files(root):
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
