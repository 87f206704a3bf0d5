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

Every build goes through the cache (grading_kit/cpp_cache.py: keyed on the
whole translation unit, failures at file:line:col, the failed-build log dev
mutate reads); torch_extension uses a precompiled header of the sources'
leading system includes when one is built (grading_kit/cpp_pch.py).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Optional, Sequence

from roadmap_cli.grading_kit import cpp_cache
from roadmap_cli.grading_kit.cpp_cache import BuildResult, CppBuildError
from roadmap_cli.grading_kit.cpp_pch import PCH_VAR, precompiled_header


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
    header = precompiled_header(list(sources), compile_flags, timeout_s, build=os.environ.get(PCH_VAR) == "1")
    if header is not None:
        cmd += ["-include", str(header)]
    cmd += [str(s) for s in sources]
    cmd += [f"-L{d}" for d in lib_dirs] + ["-lc10", "-ltorch_cpu", "-ltorch"] + [f"-Wl,-rpath,{d}" for d in lib_dirs]
    return cpp_cache.build("ext", list(sources), cmd, ".so", workspace, timeout_s)


def prebuild_precompiled_header(sources: Sequence[Path], timeout_s: float = 600) -> Optional[Path]:
    """Build the precompiled header `torch_extension(sources)` would use, now:
    `roadmap watch` runs this in the background after its first grade, so the
    compiles of later saves take ~3 s instead of ~7 (see precompiled_header)."""
    return precompiled_header(list(sources), _extension_flags(), timeout_s, build=True)


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
    return cpp_cache.build("asan", [main_cpp, *headers], cmd, "", include_dir, timeout_s, grader_files=[main_cpp])


def defined_macros(main_cpp: Path, include_dir: Path, headers: Sequence[Path], timeout_s: float = 120) -> dict:
    """Every macro defined at the end of `main_cpp` preprocessed as asan_binary compiles it (`g++ -E -dM`,
    behind the wall like every compile): name -> its `#define` line. Comparing it with the same main over a
    header of the grader's tells which macros the learner's header added, changed or removed."""
    cmd = ["g++", *_ASAN_FLAGS, "-E", "-dM", f"-I{include_dir}", str(main_cpp)]
    path = cpp_cache.build(
        "macros", [main_cpp, *headers], cmd, ".txt", include_dir, timeout_s, grader_files=[main_cpp]
    ).path
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
        cpp_cache.build(
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
