"""Which part a grader test belongs to.

A part lists pytest node-id prefixes relative to the lab's `tests/` folder
(`test_matmul.py`, `test_matmul.py::test_fp16`, or a folder `perf/`). A test
belongs to the FIRST part with a matching prefix (docs/labs.md). Kept free of
heavy imports: the pytest plugin and the CLI both use it.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence


def prefix_matches(prefix: str, nodeid: str) -> bool:
    """True when `nodeid` is `prefix` or lies under it.

    `test_a.py::test_x` matches `test_a.py::test_x[1-2]` and
    `test_a.py::test_x::sub` but not `test_a.py::test_xy`.
    """
    prefix = prefix.strip()
    if not prefix:
        return False
    if prefix.endswith("/"):
        return nodeid.startswith(prefix)
    if nodeid == prefix:
        return True
    return any(nodeid.startswith(prefix + sep) for sep in ("::", "[", "/"))


def part_for(nodeid: str, parts: Sequence[tuple[str, Iterable[str]]]) -> Optional[str]:
    """The id of the first part (id, prefixes) whose prefixes match `nodeid`."""
    for part_id, prefixes in parts:
        if any(prefix_matches(p, nodeid) for p in prefixes):
            return part_id
    return None


def file_of(prefix: str) -> str:
    """The file (or folder) part of a node-id prefix: `a.py::t[1]` -> `a.py`."""
    return prefix.split("::", 1)[0]
