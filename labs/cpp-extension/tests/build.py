"""The two compiles of a grade, each done at most once per grade (and cached
across grades by source hash, see roadmap_cli.grading_kit.cpp_build):

  extension()   rms_norm.cpp -> a .so holding Parts 2-4 (loaded by the learner process)
  asan_tests()  block_pool_test.cpp (the grader's) + block_pool.h (the learner's)
                -> an ASan + LSan executable for Part 1
  probe()       a translation unit of static_asserts over block_pool.h: the compiler's verdict
  header_macros()  which macros block_pool.h adds or changes (g++ -E -dM), so the grader can refuse
                one that renames a name its own code uses

A build error fails the tests that need it with the compiler's first
`file:line:col: error:`; the full message is shown by the first such test only.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import cpp_build

HERE = Path(__file__).resolve().parent
_results: dict = {}  # kind -> Path, or CppBuildError (memoised for the whole grade)


def _get(kind: str, make) -> Path:
    if kind not in _results:
        try:
            _results[kind] = make().path
        except cpp_build.CppBuildError as err:
            _results[kind] = err
            pytest.fail(f"{kind} build failed:\n{err.first_error}", pytrace=False)
    result = _results[kind]
    if isinstance(result, cpp_build.CppBuildError):
        pytest.fail(f"{kind} build failed ({result.first_error.splitlines()[0]}; full message in the first "
                    f"failing test)", pytrace=False)
    return result


def extension() -> str:
    ws = kit.workspace()
    return str(_get("rms_norm.cpp", lambda: cpp_build.torch_extension([ws / "rms_norm.cpp"], workspace=ws)))


def asan_tests() -> Path:
    ws = kit.workspace()
    return _get("block_pool.h", lambda: cpp_build.asan_binary(TEST_MAIN, ws, [ws / "block_pool.h"]))


TEST_MAIN = HERE / "block_pool_test.cpp"
_INCLUDE = '#include "block_pool.h"\n'


@contextlib.contextmanager
def _own_folder():
    """A folder for the grader's own probe sources: written by this process only (never the workspace), and
    removed as soon as the compile has copied them (the cache keys them by content)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="cpp-probe-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def probe(name: str, assertions: list) -> "str | None":
    """The compiler's verdict on `static_assert(cond, why)` for each (cond, why) after the learner's header:
    None when all hold, else the compiler's first error. The probe starts exactly as block_pool_test.cpp
    does (same standard headers, then block_pool.h, same flags), so the header cannot tell them apart."""
    main = TEST_MAIN.read_text()
    prefix = main[:main.index(_INCLUDE) + len(_INCLUDE)]
    body = "".join(f"static_assert({cond}, {json.dumps(why)});\n" for cond, why in assertions)
    ws = kit.workspace()
    with _own_folder() as folder:
        source = folder / "block_pool_test.cpp"
        source.write_text(prefix + body)
        return cpp_build.compiles(source, ws, [ws / "block_pool.h"])


def header_macros() -> "tuple[set, str | None]":
    """(the names of the macros block_pool.h adds, changes or removes, None) as block_pool_test.cpp sees
    them (`g++ -E -dM` of it over the learner's header and over an empty one of the grader's), or
    (set(), the compiler's first error) when the header does not preprocess."""
    if "macros" not in _results:
        ws = kit.workspace()
        try:
            theirs = cpp_build.defined_macros(TEST_MAIN, ws, [ws / "block_pool.h"])
            with _own_folder() as folder:
                (folder / "block_pool.h").write_text("")
                ours = cpp_build.defined_macros(TEST_MAIN, folder, [folder / "block_pool.h"])
        except cpp_build.CppBuildError as err:
            _results["macros"] = (set(), err.first_error)
        else:
            _results["macros"] = ({n for n in theirs.keys() | ours.keys() if theirs.get(n) != ours.get(n)}, None)
    return _results["macros"]
