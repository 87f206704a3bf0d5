"""Compiling a learner's C++ for a grade: cached, compiled once, errors at file:line:col.

Two kinds of build, both run by the GRADER process (compiling runs none of
the learner's code; the results are only ever loaded or executed elsewhere):

  torch_extension  one shared library from the learner's .cpp files, with the
                   flags `torch.utils.cpp_extension` uses for a CPU extension
                   (its include and library paths, C++20, -fPIC, -fopenmp so
                   at::parallel_for really runs threads). The learner process
                   loads it with torch.ops.load_library.
  asan_binary      a test executable from the grader's own main .cpp and the
                   learner's headers, under AddressSanitizer + LeakSanitizer.

Outputs are cached by a hash of every input (sources, headers, flags, torch
version) in a per-user temp folder (never inside the installed project), so a
second grade of the same code compiles nothing. A failed build is cached too:
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


def cache_root() -> Path:
    """`$ROADMAP_CPP_CACHE`, else <tmp>/roadmap-cpp-cache-<uid>."""
    root = os.environ.get("ROADMAP_CPP_CACHE") or os.path.join(tempfile.gettempdir(), f"roadmap-cpp-cache-{os.getuid()}")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def first_compiler_error(log: str, workspace: Optional[Path] = None) -> str:
    """The compiler's first error as `file:line:col: error: message` plus the
    source line and caret gcc prints under it; paths inside the workspace are
    shown relative to it."""
    match = _ERROR_LINE.search(log)
    if match is None:
        tail = [ln for ln in log.strip().splitlines() if ln.strip()][-3:]
        return "\n".join(tail) or "the build failed without a message"
    lines = log[match.start():].splitlines()
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


def _build(kind: str, inputs: Sequence[Path], cmd_without_output: list[str], suffix: str,
           workspace: Optional[Path], timeout_s: float) -> BuildResult:
    import torch

    # The key holds the flags and each input's NAME and bytes, not its folder:
    # the same code graded from another workspace (dev check's temp folders)
    # hits the cache. Only the listed inputs are hashed (the labs' C++ files
    # include nothing else from the workspace).
    folders = {str(p.parent) for p in inputs}
    flags = [a for a in cmd_without_output if not any(f in a for f in folders)]
    key = _digest([kind.encode(), torch.__version__.encode(), " ".join(flags).encode()]
                  + [p.name.encode() + b"\0" + p.read_bytes() for p in inputs])
    out_dir = cache_root() / f"{kind}-{key}"
    out = out_dir / f"{kind}{suffix}"
    failed = out_dir / "FAILED"
    if out.exists():
        return BuildResult(out, cached=True)
    if failed.exists():
        log = failed.read_text()
        _log_failure(kind, inputs, first_compiler_error(log, workspace))
        raise CppBuildError(first_compiler_error(log, workspace), log)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{os.getpid()}{suffix}"
    try:
        proc = subprocess.run(cmd_without_output + ["-o", str(tmp)], capture_output=True, text=True,
                              timeout=timeout_s, cwd=out_dir)
    except subprocess.TimeoutExpired:
        raise CppBuildError(f"the compiler ran past {timeout_s:g} s", "") from None
    if proc.returncode != 0:
        log = proc.stderr + proc.stdout
        failed.write_text(log)
        _log_failure(kind, inputs, first_compiler_error(log, workspace))
        raise CppBuildError(first_compiler_error(log, workspace), log)
    os.replace(tmp, out)  # atomic: a concurrent grade sees a whole file or none
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
    flags = ["-fPIC", "-std=c++20", "-O2", "-fopenmp", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
             "-DTORCH_EXTENSION_NAME=roadmap_cpp_lab"]
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


def _precompiled_header(sources: list[Path], compile_flags: list[str], timeout_s: float,
                        build: bool = True) -> Optional[Path]:
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
    if gch.exists():
        return header
    if failed.exists() or not build:
        return None  # not built (yet): compile without it rather than wait for one being built
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build; a concurrent grade waits for it and uses it
        if gch.exists():
            return header
        header.write_text(block)
        tmp = folder / f".{os.getpid()}.gch"
        try:
            try:
                proc = subprocess.run(["g++", *compile_flags, "-x", "c++-header", str(header), "-o", str(tmp)],
                                      capture_output=True, text=True, timeout=timeout_s, cwd=folder)
            except subprocess.TimeoutExpired:
                return None
            if proc.returncode != 0:
                failed.write_text(proc.stderr + proc.stdout)  # the extension's own compile will report the error
                return None
            os.replace(tmp, gch)
        finally:
            tmp.unlink(missing_ok=True)  # a build stopped part-way (watch quit) leaves no 400 MB behind
    return header


def asan_binary(main_cpp: Path, include_dir: Path, headers: Sequence[Path], timeout_s: float = 300) -> BuildResult:
    """Build the grader's test main against the learner's headers with ASan + LSan."""
    cmd = ["g++", "-std=c++20", "-g", "-O1", "-fsanitize=address", "-fno-omit-frame-pointer",
           "-fno-sanitize-recover=all", f"-I{include_dir}", str(main_cpp)]
    return _build("asan", [main_cpp, *headers], cmd, "", include_dir, timeout_s)


def run_asan_case(binary: Path, case: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """Run one case of an ASan test binary with a minimal environment (it is
    the learner's code: no inherited secrets, no core dumps)."""
    env = {"PATH": "/usr/bin:/bin", "ASAN_OPTIONS": "detect_leaks=1:exitcode=86:abort_on_error=0:disable_coredump=1",
           "LSAN_OPTIONS": "exitcode=87"}
    from roadmap_cli.grading_kit import oswall, sandbox

    # Behind the same OS wall as the learner process when the engine set one up (grading_kit/oswall.py).
    wall = (sandbox.config() or {}).get("os_wall")
    if wall:
        wall = {**wall, "cwd": str(binary.parent)}
    return subprocess.run(oswall.wrap([str(binary), case], wall), capture_output=True, text=True,
                          timeout=timeout_s, env=env, cwd=binary.parent, stdin=subprocess.DEVNULL)


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
