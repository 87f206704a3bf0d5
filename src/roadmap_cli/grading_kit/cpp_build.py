"""Compiling a learner's C++ for a grade: cached, compiled once, errors at file:line:col.

Two kinds of build, both started by the GRADER process and run behind the
grade's OS wall (the compiler reads learner-controlled input: an `#include`
or `.incbin` of any path it can see; the results are only ever loaded or
executed behind the wall too):

  torch_extension  one shared library from the learner's .cpp files, with the
                   flags `torch.utils.cpp_extension` uses for a CPU extension
                   (its include and library paths, C++20, -fPIC, -fopenmp so
                   at::parallel_for really runs threads). The learner process
                   loads it with torch.ops.load_library.
  asan_binary      a test executable from the grader's own main .cpp and the
                   learner's headers, under AddressSanitizer + LeakSanitizer.
                   The learner's code is linked in, so what it prints is data
                   for the grader's own model, never a verdict (it cannot
                   link calls to the sanitizer's switches: _SANITIZER_SWITCHES).
  compiles         the compiler's verdict on a grader's probe (static_asserts
                   over the learner's headers): compile-time properties.
  defined_macros   `g++ -E -dM`: which macros a learner's header leaves
                   defined, so a grader can refuse one that renames its words.

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
    engine also watches the shared cache around and after a weak grade (grading/integrity.py)."""
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


def _digest(parts: Sequence[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()[:24]


def _walled_run(
    cmd: list[str], build: Path, read_only: Sequence[Path], timeout_s: float
) -> subprocess.CompletedProcess:
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


def _parse_deps(path: Path, build: Path) -> Optional[list[str]]:
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


def _portable(deps: list[str], folders: list[str], build: Path) -> list[list[str]]:
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


def _still_valid(manifest: Path, artefact: Optional[Path], folders: list[str]) -> bool:
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


def _write_manifest(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{os.getpid()}.{path.name}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _build(
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
    base = _digest(
        [kind.encode(), torch.__version__.encode(), _compiler_id(cmd_without_output), " ".join(flags).encode()]
        + [p.name.encode() + b"\0" + p.read_bytes() for p in inputs]
    )
    entry = cache_root() / f"{kind}-{base}"
    out, manifest = entry / f"{kind}{suffix}", entry / "manifest.json"
    failed, failed_manifest = entry / "FAILED", entry / "FAILED.json"
    if out.exists() and _still_valid(manifest, out, folders):
        return BuildResult(out, cached=True)
    if failed.exists() and _still_valid(failed_manifest, None, folders):
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
            proc = _walled_run(cmd + ["-MD", "-MF", str(build / "deps.d"), "-o", str(artefact)], build, seen, timeout_s)
        except subprocess.TimeoutExpired:
            raise CppBuildError(f"the compiler ran past {timeout_s:g} s", "") from None
        deps = _parse_deps(build / "deps.d", build)
        if proc.returncode != 0:
            log = (proc.stderr + proc.stdout).replace(str(build) + os.sep, "")
            if deps is not None:  # cached only when we know what it read
                failed.write_text(log)
                _write_manifest(failed_manifest, {"deps": _portable(deps, folders, build)})
            if log_failures:
                _log_failure(kind, inputs, first_compiler_error(log, workspace))
            raise CppBuildError(first_compiler_error(log, workspace), log)
        if deps is None or not artefact.is_file():
            raise CppBuildError("the compiler reported success but wrote no output", proc.stderr)
        sha = _sha256(artefact)
        tmp = entry / f".{os.getpid()}{suffix}"
        shutil.move(str(artefact), str(tmp))
        _write_manifest(manifest, {"deps": _portable(deps, folders, build), "sha256": sha})
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


def _extension_flags() -> list[str]:
    """The compile flags of a CPU torch extension (those torch.utils.cpp_extension uses)."""
    import torch
    from torch.utils import cpp_extension

    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    flags = [
        "-fPIC",
        "-std=c++20",
        "-O2",
        "-fopenmp",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        "-DTORCH_EXTENSION_NAME=roadmap_cpp_lab",
    ]
    for inc in cpp_extension.include_paths():
        flags += ["-isystem", inc]
    return flags


def torch_extension(sources: Sequence[Path], workspace: Optional[Path] = None, timeout_s: float = 600) -> BuildResult:
    """Build a CPU torch extension (TORCH_LIBRARY ops, no Python module)."""
    from torch.utils import cpp_extension

    lib_dirs = cpp_extension.library_paths()
    compile_flags = _extension_flags()
    cmd = ["g++", "-shared", *compile_flags]
    # With ROADMAP_CPP_PCH=1 (dev check) the precompiled header is built when missing; otherwise one that
    # dev check or `roadmap watch` (in the background) already built is used, and none is waited for.
    header = _precompiled_header(list(sources), compile_flags, timeout_s, build=os.environ.get(PCH_VAR) == "1")
    if header is not None:
        cmd += ["-include", str(header)]
    cmd += [str(s) for s in sources]
    cmd += [f"-L{d}" for d in lib_dirs] + ["-lc10", "-ltorch_cpu", "-ltorch"] + [f"-Wl,-rpath,{d}" for d in lib_dirs]
    return _build("ext", list(sources), cmd, ".so", workspace, timeout_s)


def prebuild_precompiled_header(sources: Sequence[Path], timeout_s: float = 600) -> Optional[Path]:
    """Build the precompiled header `torch_extension(sources)` would use, now:
    `roadmap watch` runs this in the background after its first grade, so the
    compiles of later saves take ~3 s instead of ~7 (see _precompiled_header)."""
    return _precompiled_header(list(sources), _extension_flags(), timeout_s, build=True)


PCH_VAR = "ROADMAP_CPP_PCH"  # "1": build the precompiled header when missing (dev check sets it)
_SYSTEM_INCLUDE = re.compile(r"#\s*include\s*<([^<>\s]+)>\s*(//.*)?")


def leading_system_includes(text: str) -> list[str]:
    """The `#include <...>` lines a C++ source starts with, in order (blank
    lines and `//` comments may sit between them), up to its first other line."""
    block = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        match = _SYSTEM_INCLUDE.fullmatch(line)
        if match is None:
            break
        block.append(f"#include <{match.group(1)}>")
    return block


def _precompiled_header(
    sources: list[Path], compile_flags: list[str], timeout_s: float, build: bool = True
) -> Optional[Path]:
    """A header of the sources' own leading system includes, precompiled with
    the extension's exact flags, for `g++ -include`; None when there is none
    to share (no such block, or the sources' blocks differ) or it fails to build.

    Why: <torch/extension.h> and ATen are most of a torch extension's compile
    (7.4 s of 7.4 for the cpp-extension solution, 2.8 s with this header), and
    dev check compiles one extension per C++ variant. It changes nothing a
    source sees: the same headers, in the same order, first in every
    translation unit; the source's own #include lines then find them included
    (include guards) and gcc uses the .gch only when the flags match, parsing
    the header as text otherwise. Cost: 16 s and ~430 MB once per block and
    torch version, which is why a grade builds it only in dev check
    (ROADMAP_CPP_PCH=1; `build`) and otherwise uses one that is already there
    (`roadmap watch` builds it in the background, prebuild_precompiled_header)."""
    import fcntl

    import torch

    blocks = {tuple(leading_system_includes(s.read_text(encoding="utf-8", errors="replace"))) for s in sources}
    if len(blocks) != 1 or not next(iter(blocks)):
        return None
    block = "\n".join(next(iter(blocks))) + "\n"
    key = _digest([b"pch", torch.__version__.encode(), " ".join(compile_flags).encode(), block.encode()])
    folder = cache_root() / f"pch-{key}"
    header, gch, failed = folder / "roadmap_pch.h", folder / "roadmap_pch.h.gch", folder / "FAILED"
    manifest = folder / "manifest.json"
    if gch.exists() and _pch_valid(manifest, gch):
        return header
    if failed.exists() or not build:
        return None  # not built (yet): compile without it rather than wait for one being built
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build; a concurrent grade waits for it and uses it
        if gch.exists() and _pch_valid(manifest, gch):
            return header
        header.write_text(block)
        scratch = Path(tempfile.mkdtemp(prefix=".build-pch-", dir=cache_root()))
        tmp = scratch / "roadmap_pch.h.gch"
        try:
            # The block names headers the learner chose (`#include <../../x>` is a name too): behind the wall,
            # where only the system and the Python runtime exist.
            try:
                proc = _walled_run(
                    [
                        "g++",
                        *compile_flags,
                        "-x",
                        "c++-header",
                        str(header),
                        "-MD",
                        "-MF",
                        str(scratch / "deps.d"),
                        "-o",
                        str(tmp),
                    ],
                    scratch,
                    [folder],
                    timeout_s,
                )
            except subprocess.TimeoutExpired:
                return None
            deps = _parse_deps(scratch / "deps.d", scratch)
            if proc.returncode != 0 or deps is None:
                failed.write_text(proc.stderr + proc.stdout)  # the extension's own compile will report the error
                return None
            os.replace(tmp, gch)
            st = gch.stat()
            _write_manifest(
                manifest, {"deps": _portable(deps, [], scratch), "gch": [st.st_size, st.st_mtime_ns, st.st_ino]}
            )
        finally:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)  # a build stopped part-way (watch quit) leaves no 400 MB behind
    return header


def _pch_valid(manifest: Path, gch: Path) -> bool:
    """The headers it was built from are unchanged and the .gch is the file built then (its size, time and
    inode: hashing 400 MB per grade would cost more than the header saves; only ever loaded behind the wall)."""
    try:
        st = gch.stat()
        recorded = json.loads(manifest.read_text()).get("gch")
    except (OSError, ValueError):
        return False
    return recorded == [st.st_size, st.st_mtime_ns, st.st_ino] and _still_valid(manifest, None, [])


_ASAN_FLAGS = ["-std=c++20", "-g", "-O1", "-fsanitize=address", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]

# The sanitizer runtime's switches: a call to one from the learner's code (to make LeakSanitizer ignore an
# object, stop checking, or send its report elsewhere) and the dynamic loader's lookups that would reach them
# by name. `--wrap` renames every reference to SYM in the program to `__wrap_SYM`, which nothing defines, so
# such a header does not link: the compiler refuses it, nothing the binary later prints has to be believed.
# (The hooks the runtime calls, such as __lsan_is_turned_off, are defined by the grader's test main instead.)
_SANITIZER_SWITCHES = [
    "__lsan_ignore_object",
    "__lsan_disable",
    "__lsan_enable",
    "__lsan_register_root_region",
    "__lsan_unregister_root_region",
    "__lsan_do_leak_check",
    "__lsan_do_recoverable_leak_check",
    "__asan_set_error_report_callback",
    "__sanitizer_set_report_path",
    "__sanitizer_set_report_fd",
    "__asan_unpoison_memory_region",
    "dlsym",
    "dlvsym",
    "dlopen",
    "dlmopen",
]
# `--wrap` also resolves `__real_SYM` to the real SYM, so those names are wrapped too (to nothing), all but
# __real_dlsym: the grader's test main reaches the runtime's heap meter through it (what a header could reach
# with it changes nothing the meter counts).
_REAL_SWITCHES = [f"__real_{sym}" for sym in _SANITIZER_SWITCHES if sym != "dlsym"]


def asan_binary(main_cpp: Path, include_dir: Path, headers: Sequence[Path], timeout_s: float = 300) -> BuildResult:
    """Build the grader's test main against the learner's headers with ASan + LSan."""
    cmd = [
        "g++",
        *_ASAN_FLAGS,
        f"-I{include_dir}",
        str(main_cpp),
        *(f"-Wl,--wrap={sym}" for sym in _SANITIZER_SWITCHES + _REAL_SWITCHES),
    ]
    return _build("asan", [main_cpp, *headers], cmd, "", include_dir, timeout_s, grader_files=[main_cpp])


def defined_macros(main_cpp: Path, include_dir: Path, headers: Sequence[Path], timeout_s: float = 120) -> dict:
    """Every macro defined at the end of `main_cpp` preprocessed as asan_binary compiles it (`g++ -E -dM`,
    behind the wall like every compile): name -> its `#define` line. Comparing it with the same main over a
    header of the grader's tells which macros the learner's header added, changed or removed."""
    cmd = ["g++", *_ASAN_FLAGS, "-E", "-dM", f"-I{include_dir}", str(main_cpp)]
    path = _build("macros", [main_cpp, *headers], cmd, ".txt", include_dir, timeout_s, grader_files=[main_cpp]).path
    macros = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = re.match(r"#define ([A-Za-z_]\w*)", line)
        if match:
            macros[match.group(1)] = line
    return macros


def compiles(main_cpp: Path, include_dir: Path, headers: Sequence[Path], timeout_s: float = 120) -> Optional[str]:
    """The compiler's verdict on a probe (a grader's translation unit of `static_assert`s over the learner's
    headers), with asan_binary's flags, behind the wall: None when it compiles, else its first error."""
    cmd = ["g++", *_ASAN_FLAGS, "-c", f"-I{include_dir}", str(main_cpp)]
    try:
        _build(
            "probe",
            [main_cpp, *headers],
            cmd,
            ".o",
            include_dir,
            timeout_s,
            grader_files=[main_cpp],
            log_failures=False,
        )
    except CppBuildError as err:
        return err.first_error
    return None


def run_asan_case(binary: Path, case: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """Run one case of an ASan test binary with a minimal environment (it is
    the learner's code: no inherited secrets, no core dumps)."""
    return run_binary(binary, [case], timeout_s)


def run_binary(
    binary: Path, args: Sequence[str], timeout_s: float = 60, symbolize: bool = True
) -> subprocess.CompletedProcess:
    """Run an ASan test binary (learner code is linked in) with `args`, behind
    the grade's wall; what it prints is data for the grader to check.
    `symbolize=False`: reports without function names and file:line, ~10x
    faster when the run reports a leak on purpose (symbolizing costs ~0.7 s)."""
    # Set here, these override whatever the program's default-options hooks would say.
    env = {
        "PATH": "/usr/bin:/bin",
        "ASAN_OPTIONS": "detect_leaks=1:exitcode=86:abort_on_error=0:disable_coredump=1"
        + ("" if symbolize else ":symbolize=0"),
        "LSAN_OPTIONS": "exitcode=87:print_suppressions=1",
    }
    from roadmap_cli.grading_kit import oswall, sandbox

    # Behind the same OS wall as the learner process when the engine set one up (grading_kit/oswall.py).
    wall = (sandbox.config() or {}).get("os_wall")
    if wall:
        wall = {**wall, "cwd": str(binary.parent)}
    return oswall.run(
        [str(binary), *args],
        wall,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=binary.parent,
        stdin=subprocess.DEVNULL,
    )


def sanitizer_summary(output: str, header_name: str) -> str:
    """One line for an ASan/LSan report: the error kind and the first stack
    frame inside the learner's header (file:line), else the first frame."""
    kind = re.search(r"ERROR: (?:AddressSanitizer|LeakSanitizer): (.*)", output)
    what = kind.group(1).strip() if kind else "a sanitizer error"
    what = re.sub(r" (on|at) (address |unknown address )?0x[0-9a-f]+.*", "", what)
    frames = re.findall(r"#\d+ 0x[0-9a-f]+ in (.*?) (\S+?):(\d+)(?::\d+)?\s*$", output, re.MULTILINE)
    mine = [f for f in frames if os.path.basename(f[1]) == header_name]
    if not (mine or frames):
        return what
    func, path, line = (mine or frames)[0]
    return f"{what} at {os.path.basename(path)}:{line} (in {func})"


if __name__ == "__main__":  # `python -m roadmap_cli.grading_kit.cpp_build SOURCE.cpp ...`: roadmap watch's prebuild
    import signal
    import sys

    # `roadmap watch` ends this with SIGTERM when it quits: exit through the cleanup above, not around it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    prebuild_precompiled_header([Path(a) for a in sys.argv[1:]])
