"""The two compiles of a grade, each done at most once per grade (and cached
across grades by source hash, see roadmap_cli.grading_kit.cpp_build):

  extension()   rms_norm.cpp -> a .so holding Parts 2-4 (loaded by the learner process)
  asan_tests()  block_pool_test.cpp (the grader's) + block_pool.h (the learner's)
                -> an ASan + LSan executable for Part 1

A build error fails the tests that need it with the compiler's first
`file:line:col: error:`; the full message is shown by the first such test only.
"""

from __future__ import annotations

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
    return _get("block_pool.h", lambda: cpp_build.asan_binary(HERE / "block_pool_test.cpp", ws, [ws / "block_pool.h"]))
