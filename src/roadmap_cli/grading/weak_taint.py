"""What a weak grade left that a later grade's judge would run: the marker
(beside the grader's bytecode cache) and the one line that refuses every later
grade until it is repaired; before each grade, the runtime checked against the
record an earlier weak grade left (weak_runtime.py).
"""

from __future__ import annotations


from roadmap_cli.grading.weak_content import content
from roadmap_cli.grading.weak_runtime import cpp_cache_root, judge_roots, record_file, tree_changes, tree_snapshot

WEAK_REPAIR = (
    "reinstall roadmap and its dependencies (pip install --force-reinstall roadmap-cli, or "
    "`pip install -e .` in a checkout) and Python if the file is in its stdlib, delete {pycache} and "
    "{cpp_cache}, then grade again"
)


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
            if content(path) != expected:
                left.append(path)
            continue
        try:
            if os.lstat(path).st_ctime_ns == ctime:
                left.append(path)
        except OSError:
            pass
    if not left:
        marker.unlink(missing_ok=True)
        record = record_file()  # repaired: the next weak grade records the runtime afresh
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


def verify_runtime() -> tuple[dict[str, tuple] | None, str | None]:
    """(the current snapshot, None) when no weak grade has run here or nothing changed since the last one;
    (None, the one repair line) when a file of the runtime or the C++ cache changed after a weak grade."""
    import json

    record = record_file()
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
