"""What judges cannot be changed: the sha256 of every file a verdict depends
on, fixed when roadmap was installed, checked before every grade.

The files: the engine and what the grader process imports (`roadmap_cli/
grading/`, `roadmap_cli/grading_kit/`, the lab model the engine reads parts and
points from) and the graded lab's `lab.yaml` and `tests/`. integrity.py
catches a change *during* a grade; this module catches one made *before* it
(a learner who edits a lab's test, or grading_kit's comparison, and then
grades).

Where the expected hashes come from:

- a wheel: `roadmap_cli/_manifest.json`, written at build time by
  hatch_build.py (`{"files": {key: sha256}}`);
- a source checkout (editable install, the tests): git. A covered file must
  equal its blob in HEAD (compared by git blob id, computed here without
  running git on every file); a file git does not know (e.g. a new
  `tests/test_x.py`) or one missing from the work tree is a change too;
- neither: no grade (reinstall).

Keys are `roadmap_cli/<path in the package>` and `labs/<lab id>/<path>`.
Authors edit a lab's tests while they write them: `roadmap dev check` and
`dev mutate` never verify, and ROADMAP_DEV_UNLOCKED=1 lets `roadmap grade`
run on changed files (its attempts are then the author's own business).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

PKG = Path(__file__).resolve().parents[1]  # .../roadmap_cli
MANIFEST_FILE = PKG / "_manifest.json"
UNLOCK_ENV = "ROADMAP_DEV_UNLOCKED"
# Package paths (relative to roadmap_cli/) whose code decides a verdict.
ENGINE = (
    "__init__.py",
    "grading",
    "grading_kit",
    "labs/__init__.py",
    "labs/nodeids.py",
    "labs/plan.py",
    "labs/spec.py",
)
LAB_PARTS = ("lab.yaml", "tests")  # relative to labs/<id>/
REPAIR = "repair: reinstall roadmap, see roadmap doctor"


@dataclass
class Verdict:
    source: str  # "wheel", "git", "unlocked" or "none"
    checked: int  # files compared
    changed: Optional[str] = None  # the first changed file, as a path people can open
    reason: str = ""  # why it counts as changed: "differs", "not installed", "missing", or why nothing was checked

    @property
    def ok(self) -> bool:
        return self.changed is None and self.source != "none"

    def line(self) -> str:
        if self.source == "none":
            return f"no manifest of the grader's files ({self.reason}; {REPAIR})"
        return f"grader file changed since install: {self.changed} ({REPAIR})"


def _listed(root: Path):
    """Files under `root` (a file or a folder), sorted, bytecode left out."""
    if root.is_file():
        yield root
        return
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            yield path


def covered(lab_dirs, pkg: Optional[Path] = None) -> dict[str, Path]:
    """key -> path of every file in the manifest's scope for these lab folders."""
    pkg = PKG if pkg is None else pkg
    out: dict[str, Path] = {}
    for rel in ENGINE:
        for path in _listed(pkg / rel):
            out["roadmap_cli/" + path.relative_to(pkg).as_posix()] = path
    for lab_dir in lab_dirs:
        lab_dir = Path(lab_dir)
        for rel in LAB_PARTS:
            for path in _listed(lab_dir / rel):
                out[f"labs/{lab_dir.name}/" + path.relative_to(lab_dir).as_posix()] = path
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(labs_root: Path, pkg: Optional[Path] = None) -> dict:
    """The manifest of an install (hatch_build.py writes it into the wheel)."""
    labs = sorted(p for p in Path(labs_root).iterdir() if (p / "lab.yaml").is_file())
    files = {key: sha256(path) for key, path in sorted(covered(labs, pkg).items())}
    return {"format": 1, "files": files}


def unlocked() -> bool:
    return os.environ.get(UNLOCK_ENV, "") not in ("", "0")


def verify(lab_dir: Path, *, pkg: Optional[Path] = None, manifest_file: Optional[Path] = None) -> Verdict:
    """Compare the engine's files and one lab's with what was installed."""
    pkg = PKG if pkg is None else pkg
    if unlocked():
        return Verdict("unlocked", 0, reason=f"{UNLOCK_ENV} is set")
    files = covered([lab_dir], pkg)
    manifest_file = MANIFEST_FILE if manifest_file is None else manifest_file
    if manifest_file.is_file():
        return _verify_wheel(files, manifest_file, lab_dir)
    return _verify_git(files, pkg, lab_dir)


def _verify_wheel(files: dict[str, Path], manifest_file: Path, lab_dir: Path) -> Verdict:
    try:
        expected = json.loads(manifest_file.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return Verdict("wheel", 0, str(manifest_file), "unreadable manifest")
    prefixes = ("roadmap_cli/", f"labs/{Path(lab_dir).name}/")
    scope = {k for k in expected if k.startswith(prefixes) and _in_scope(k)}
    for key in sorted(set(files) | scope):
        path = files.get(key)
        if path is None:
            return Verdict("wheel", len(files), key, "missing")
        want = expected.get(key)
        if want is None:
            return Verdict("wheel", len(files), str(path), "not installed")
        try:
            if sha256(path) != want:
                return Verdict("wheel", len(files), str(path), "differs")
        except OSError:
            return Verdict("wheel", len(files), str(path), "unreadable")
    return Verdict("wheel", len(files))


def _in_scope(key: str) -> bool:
    if key.startswith("labs/"):
        rest = key.split("/", 2)[2]
        return rest == "lab.yaml" or rest.startswith("tests/")
    rel = key[len("roadmap_cli/") :]
    return any(rel == e or rel.startswith(e + "/") for e in ENGINE)


def _git_blob(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _git(cwd: Path, *args: str) -> Optional[str]:
    try:
        proc = subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _head_blobs(repo: Path, paths: list[Path]) -> dict[Path, str]:
    out = _git(repo, "ls-tree", "-r", "-z", "--full-tree", "HEAD", "--", *(str(p.relative_to(repo)) for p in paths))
    blobs: dict[Path, str] = {}
    for entry in (out or "").split("\0"):
        if "\t" in entry:
            meta, name = entry.split("\t", 1)
            kind, blob = meta.split()[1:3]
            if kind == "blob":
                blobs[repo / name] = blob
    return blobs


def _verify_git(files: dict[str, Path], pkg: Path, lab_dir: Path) -> Verdict:
    top = _git(pkg, "rev-parse", "--show-toplevel")
    if top is None:
        return Verdict("none", 0, reason=f"{pkg} is neither a wheel install nor a git checkout")
    repo = Path(top.strip()).resolve()
    lab_top = _git(lab_dir, "rev-parse", "--show-toplevel")
    lab_repo = Path(lab_top.strip()).resolve() if lab_top else None
    if lab_repo is None:
        return Verdict("git", 0, str(Path(lab_dir) / "lab.yaml"), "not under version control")
    roots = {repo: [pkg / rel for rel in ENGINE]}
    roots.setdefault(lab_repo, []).extend(Path(lab_dir).resolve() / rel for rel in LAB_PARTS)
    expected: dict[Path, str] = {}
    for root, paths in roots.items():
        expected.update(_head_blobs(root, [p.resolve() for p in paths if _inside(p.resolve(), root)]))
    seen = set()
    for key in sorted(files):
        path = files[key].resolve()
        seen.add(path)
        want = expected.get(path)
        if want is None:
            return Verdict("git", len(files), str(files[key]), "not in HEAD")
        try:
            if _git_blob(path) != want:
                return Verdict("git", len(files), str(files[key]), "differs")
        except OSError:
            return Verdict("git", len(files), str(files[key]), "unreadable")
    for path in sorted(set(expected) - seen):
        if "__pycache__" not in path.parts:
            return Verdict("git", len(files), str(path), "missing")
    return Verdict("git", len(files))


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def status(lab_dirs) -> dict:
    """For `roadmap doctor`: where the expected hashes come from, and the first changed file if any."""
    if unlocked():
        return {
            "source": "unlocked",
            "ok": None,
            "checked": 0,
            "line": f"{UNLOCK_ENV} is set: grades run on changed grader files (authoring only)",
        }
    checked, first = 0, None
    for lab_dir in lab_dirs:
        verdict = verify(lab_dir)
        checked += verdict.checked
        if not verdict.ok:
            first = verdict
            break
    source = first.source if first else ("wheel" if MANIFEST_FILE.is_file() else "git")
    if first is None:
        return {
            "source": source,
            "ok": True,
            "checked": checked,
            "line": f"every grader file matches the install ({source}, {checked} files)",
        }
    return {
        "source": source,
        "ok": False,
        "checked": checked,
        "changed": first.changed,
        "reason": first.reason,
        "line": f"{first.line()}: {first.reason}",
    }


_PYCACHE: list = []


def pycache_dir() -> Optional[Path]:
    """The grader's private bytecode cache (`python -X pycache_prefix=`): under
    the user's cache folder, made private (0700); None when it cannot be made.
    Shared by every data home, so the tests and a learner's several homes
    compile pytest and torch once."""
    if _PYCACHE:
        return _PYCACHE[0]
    from platformdirs import user_cache_dir

    where: Optional[Path] = Path(user_cache_dir("roadmap", appauthor=False)) / "grader-pycache"
    try:
        where.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(where, 0o700)
    except OSError:
        where = None
    _PYCACHE.append(where)
    return where
