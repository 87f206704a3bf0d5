"""The C++ build cache (grading_kit/cpp_build.py's builds go through it): the
compiler run behind the grade's OS wall, once per translation unit; failures
at file:line:col.

Outputs are cached in a per-user temp folder (never inside the installed
project) by a key that covers the whole preprocessed translation unit (every
file the preprocessor read, hashed again on use, as ccache's direct mode does)
and checked against their recorded sha256 on use, so a second grade of the
same code compiles nothing and a changed header or artefact is a miss. A failed build is cached too:
a broken file costs one compiler run per grade, and its message is shown once,
as the compiler's first `file:line:col: error:` with the lines under it.

When `$ROADMAP_CPP_BUILD_LOG` names a file, every failed build appends one
JSON line to it ({"kind", "inputs", "first_error"}): `roadmap dev mutate`
reads it to tell a mutant that does not compile (invalid, not a bug a grader
can miss) from one the tests killed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

_ERROR_LINE = re.compile(r"^(?P<loc>[^\s:][^:]*:\d+:\d+): (?:fatal )?error: ", re.MULTILINE)


class CppBuildError(RuntimeError):
    """A compile or link failure; `first_error` is `file:line:col: error: ...`."""

    def __init__(self, first_error: str, log: str):
        super().__init__(first_error)
        self.first_error = first_error
        self.log = log


@dataclass(frozen=True)
class BuildResult:
    path: Path  # the .so or executable
    cached: bool  # True when nothing was compiled


def shared_cache_root() -> Path:
    """The cache every grade of this user shares: `$ROADMAP_CPP_CACHE`, else <tmp>/roadmap-cpp-cache-<uid>."""
    root = os.environ.get("ROADMAP_CPP_CACHE") or os.path.join(
        tempfile.gettempdir(), f"roadmap-cpp-cache-{os.getuid()}"
    )
    from roadmap_cli.paths import private_dir

    return private_dir(root)  # in the shared temp folder: refused when another account made it first


_PRIVATE: list[Path] = []


def cache_root() -> Path:
    """Where this process's builds are cached. A weak-sandbox grade (its test binaries and the learner's code
    run unwalled, as the user) neither reads nor writes the shared cache: it builds into a folder of its own,
    in the grade's scratch folder (gone with it), so nothing it leaves can become a later grade's artefact; the
    engine also watches the shared cache around and after a weak grade (grading/weak_runtime.py)."""
    from roadmap_cli.grading_kit import sandbox

    grade = sandbox.config()
    if grade is None or grade.get("os_wall"):
        return shared_cache_root()
    if not _PRIVATE:
        scratch = grade.get("artefacts") or None
        _PRIVATE.append(Path(tempfile.mkdtemp(prefix="cpp-cache-", dir=scratch)))
    return _PRIVATE[0]


def first_compiler_error(log: str, workspace: Optional[Path] = None) -> str:
    """The compiler's first error as `file:line:col: error: message` plus the
    source line and caret gcc prints under it; paths inside the workspace are
    shown relative to it."""
    match = _ERROR_LINE.search(log)
    if match is None:
        tail = [ln for ln in log.strip().splitlines() if ln.strip()][-3:]
        return "\n".join(tail) or "the build failed without a message"
    lines = log[match.start() :].splitlines()
    shown = [lines[0]] + [ln for ln in lines[1:3] if ln.startswith(" ")]
    text = "\n".join(shown)
    if workspace is not None:
        text = text.replace(str(workspace) + os.sep, "")
    return text


def digest(parts: Sequence[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()[:24]


def walled_run(cmd: list[str], build: Path, read_only: Sequence[Path], timeout_s: float) -> subprocess.CompletedProcess:
    """Run a compiler on learner-controlled input behind the grade's OS wall
    (grading_kit/oswall.py): it sees the system, the Python runtime,
    `read_only` (the learner's source folder) and `build` (fresh, its one
    writable folder); never the data home, the references or the host's
    network, so an `#include` or `.incbin` of any other path finds nothing.
    Outside a grade (`roadmap watch`'s prebuild) the same view without the
    grade's part, when bubblewrap works here; unwalled on a weak machine
    (there learner code itself runs unwalled)."""
    from roadmap_cli.grading_kit import oswall, sandbox

    grade = sandbox.config()
    wall = (grade or {}).get("os_wall")
    view = None
    if wall:
        view = oswall.compile_view([str(p) for p in read_only], [str(build)], str(build), base=wall)
    elif grade is None and _wall_here():
        view = oswall.compile_view([str(p) for p in read_only], [str(build)], str(build))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C",
        "HOME": oswall.LEARNER_HOME if view else os.environ.get("HOME", "/"),
    }
    return oswall.run(
        cmd, view, capture_output=True, text=True, timeout=timeout_s, cwd=build, env=env, stdin=subprocess.DEVNULL
    )


def _wall_here() -> bool:
    from roadmap_cli.grading_kit import oswall

    try:
        return oswall.status()[0] == oswall.STRONG
    except oswall.WallUnavailable:
        return False


# ---------------------------------------------------------------- the cache
#
# An entry is keyed by `base`: the kind, torch's version, the compiler binary, the flags and every input's name
# and bytes. At build time the compiler also lists every file the preprocessor read (-MD: the whole translation
# unit's includes, system and torch headers too) and the engine stores their sha256 and the artefact's in the
# entry's manifest.json (the learner's own files by sha256, the system's by size and time: _signature). On use,
# every listed file is checked again and the artefact hashed: a header that changed
# since (a new torch, an edited include in the workspace) or an artefact that is not what was built is a miss,
# and the entry is built again. (Files an `.incbin` reads are not listed by the preprocessor: they count only
# through the source's text naming them.) The compiler writes only a fresh build folder behind the wall; this
# process moves the result in.

_hashed: dict[str, str] = {}  # path -> sha256, once per process: a grade's two builds share their headers


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _file_sha(path: str) -> Optional[str]:
    if path not in _hashed:
        try:
            _hashed[path] = _sha256(path)
        except OSError:
            return None
    return _hashed[path]


def _signature(path: str, learners: bool) -> str:
    """A dependency's fingerprint: the sha256 of a file in the learner's folders; size and modification time
    of one elsewhere (system and torch headers: ~5,000 of them, 0.7 s to hash per grade; a reinstall changes
    both, and no walled process can write them)."""
    if learners:
        return _file_sha(path) or "missing"
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    return f"stat:{st.st_size}:{st.st_mtime_ns}"


def _compiler_id(cmd: Sequence[str]) -> bytes:
    import shutil

    exe = shutil.which(cmd[0]) or cmd[0]
    try:
        st = os.stat(os.path.realpath(exe))
        return f"{os.path.realpath(exe)}:{st.st_size}:{st.st_mtime_ns}".encode()
    except OSError:
        return exe.encode()


def parse_deps(path: Path, build: Path) -> Optional[list[str]]:
    """The files of a `-MD` make rule, as absolute paths (None: no rule written)."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    body = text.replace("\\\n", " ").split(":", 1)[-1]
    deps, word, i = [], "", 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body) and body[i + 1] in " #":
            word += body[i + 1]
            i += 2
            continue
        if ch.isspace():
            if word:
                deps.append(word)
            word = ""
        else:
            word += ch
        i += 1
    if word:
        deps.append(word)
    return [os.path.normpath(d if os.path.isabs(d) else os.path.join(build, d)) for d in deps]


def portable(deps: list[str], folders: list[str], build: Path) -> list[list[str]]:
    """[name, sha256] per dependency; one inside an input's folder is named by its place there ("@0/x.h"), so
    the same code graded from another workspace matches; the build folder's own files (copied inputs, already
    in the key) are left out."""
    out = []
    inside = os.path.join(str(build), "")
    for dep in sorted(set(deps)):
        if dep.startswith(inside):
            continue
        name = dep
        for i, folder in enumerate(folders):
            if dep.startswith(os.path.join(folder, "")):
                name = f"@{i}/" + os.path.relpath(dep, folder)
                break
        out.append([name, _signature(dep, learners=name.startswith("@"))])
    return out


def still_valid(manifest: Path, artefact: Optional[Path], folders: list[str]) -> bool:
    try:
        data = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return False
    for name, sha in data.get("deps", []):
        path = name
        if name.startswith("@"):
            index, rel = name[1:].split("/", 1)
            if int(index) >= len(folders):
                return False
            path = os.path.join(folders[int(index)], rel)
        if _signature(path, learners=name.startswith("@")) != sha:
            return False
    if artefact is not None:
        try:
            if _sha256(artefact) != data.get("sha256"):
                return False
        except OSError:
            return False
    return True


def write_manifest(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{os.getpid()}.{path.name}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def build(
    kind: str,
    inputs: Sequence[Path],
    cmd_without_output: list[str],
    suffix: str,
    workspace: Optional[Path],
    timeout_s: float,
    grader_files: Sequence[Path] = (),
    log_failures: bool = True,
) -> BuildResult:
    result = _cached_build(kind, inputs, cmd_without_output, suffix, workspace, timeout_s, grader_files, log_failures)
    return BuildResult(_for_this_grade(result.path), result.cached)


def _for_this_grade(path: Path) -> Path:
    """The artefact where this grade's walled processes can see it: linked into the grade's own artefacts
    folder (the engine's config), since the cache holds every learner's compiled work and is never shown."""
    import shutil

    from roadmap_cli.grading_kit import sandbox

    folder = (sandbox.config() or {}).get("artefacts")
    if not folder or not os.path.isdir(folder):
        return path
    target = Path(folder) / f"{path.parent.name}-{path.name}"
    if not target.exists():
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)
    return target


def _cached_build(
    kind: str,
    inputs: Sequence[Path],
    cmd_without_output: list[str],
    suffix: str,
    workspace: Optional[Path],
    timeout_s: float,
    grader_files: Sequence[Path] = (),
    log_failures: bool = True,
) -> BuildResult:
    """Compile (behind the wall) or take the cached result; `grader_files` are
    the grader's own inputs (a test main): copied into the build folder, the
    one place the walled compiler reads them from. `log_failures`: False for a
    probe whose failure is a verdict, not a build that does not compile."""
    import shutil

    import torch

    folders = list(dict.fromkeys(str(p.parent) for p in inputs if p not in grader_files))
    flags = [
        a for a in cmd_without_output if not any(f in a for f in [*folders, *(str(g.parent) for g in grader_files)])
    ]
    base = digest(
        [kind.encode(), torch.__version__.encode(), _compiler_id(cmd_without_output), " ".join(flags).encode()]
        + [p.name.encode() + b"\0" + p.read_bytes() for p in inputs]
    )
    entry = cache_root() / f"{kind}-{base}"
    out, manifest = entry / f"{kind}{suffix}", entry / "manifest.json"
    failed, failed_manifest = entry / "FAILED", entry / "FAILED.json"
    if out.exists() and still_valid(manifest, out, folders):
        return BuildResult(out, cached=True)
    if failed.exists() and still_valid(failed_manifest, None, folders):
        log = failed.read_text()
        if log_failures:
            _log_failure(kind, inputs, first_compiler_error(log, workspace))
        raise CppBuildError(first_compiler_error(log, workspace), log)
    entry.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=cache_root()))
    try:
        moved = {str(g): str(build / g.name) for g in grader_files}
        for src, dst in moved.items():
            shutil.copyfile(src, dst)
        cmd = [moved.get(a, a) for a in cmd_without_output]
        artefact = build / f"{kind}{suffix}"
        try:
            # Read-only for the compiler: the learner's folders and a precompiled header's (-include).
            seen = [Path(f) for f in folders] + [
                Path(cmd[i + 1]).parent for i, a in enumerate(cmd[:-1]) if a == "-include"
            ]
            proc = walled_run(cmd + ["-MD", "-MF", str(build / "deps.d"), "-o", str(artefact)], build, seen, timeout_s)
        except subprocess.TimeoutExpired:
            raise CppBuildError(f"the compiler ran past {timeout_s:g} s", "") from None
        deps = parse_deps(build / "deps.d", build)
        if proc.returncode != 0:
            log = (proc.stderr + proc.stdout).replace(str(build) + os.sep, "")
            if deps is not None:  # cached only when we know what it read
                failed.write_text(log)
                write_manifest(failed_manifest, {"deps": portable(deps, folders, build)})
            if log_failures:
                _log_failure(kind, inputs, first_compiler_error(log, workspace))
            raise CppBuildError(first_compiler_error(log, workspace), log)
        if deps is None or not artefact.is_file():
            raise CppBuildError("the compiler reported success but wrote no output", proc.stderr)
        sha = _sha256(artefact)
        tmp = entry / f".{os.getpid()}{suffix}"
        shutil.move(str(artefact), str(tmp))
        write_manifest(manifest, {"deps": portable(deps, folders, build), "sha256": sha})
        os.replace(tmp, out)  # atomic: a concurrent grade sees a whole file or none (and checks its hash)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return BuildResult(out, cached=False)


def _log_failure(kind: str, inputs: Sequence[Path], first_error: str) -> None:
    path = os.environ.get("ROADMAP_CPP_BUILD_LOG")
    if not path:
        return
    line = json.dumps({"kind": kind, "inputs": [p.name for p in inputs], "first_error": first_error})
    try:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")
    except OSError:
        pass  # only a dev mutate statistic: never fail a grade over it


def read_build_failures(path: Path) -> list[dict]:
    """The failed builds logged to `path` (see the module docstring)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
