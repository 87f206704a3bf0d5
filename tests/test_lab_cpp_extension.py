"""The cpp-extension lab: its stage-6 checkpoints became lab-proved without
losing earlier self-assessment, and the C++ build helper reports a compile
error once at file:line:col, caches by source hash, and summarises sanitizer
reports at the learner's file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from roadmap_cli.grading_kit import cpp_build, cpp_cache
from test_curriculum_cli import mark_done

S6 = ("s6-read-modern-cpp-projects", "s6-read-vllm-cpp-extensions")


def test_self_checked_stage6_checkpoints_stay_done(run_cli, roadmap_home: Path):
    mark_done(roadmap_home, "s6-read-modern-cpp-projects")
    stage = run_cli("stage", "show", "6", "--json")
    assert stage.exit_code == 0, stage
    checkpoints = {c["id"]: c for c in stage.json()["data"]["checkpoints"]}
    assert checkpoints["s6-read-modern-cpp-projects"]["done"] and not checkpoints["s6-read-vllm-cpp-extensions"]["done"]
    assert all(checkpoints[cid]["kind"] == "build" for cid in S6)
    assert checkpoints["s6-read-tensorrt-llm-source"]["kind"] == "explain"  # not graded by the lab
    result = run_cli("check", "s6-read-vllm-cpp-extensions")
    assert result.exit_code != 0 and "cpp-extension" in (result.stderr or result.stdout)


GCC_LOG = """In file included from /ws/block_pool_test.cpp:7:
/ws/block_pool.h: In constructor 'BlockPool::BlockPool(std::size_t, std::size_t)':
/ws/block_pool.h:31:9: error: 'num_blockz' was not declared in this scope
   31 |         num_blockz(num_blocks),
      |         ^~~~~~~~~~
/ws/block_pool.h:40:1: error: expected ';' after class definition
"""


def test_first_compiler_error_is_file_line_col_relative_to_the_workspace():
    text = cpp_cache.first_compiler_error(GCC_LOG, Path("/ws"))
    assert text.splitlines()[0] == "block_pool.h:31:9: error: 'num_blockz' was not declared in this scope"
    assert "^~~" in text and "40:1" not in text  # the first error only, with its caret


ASAN_LOG = """==1==ERROR: AddressSanitizer: attempting double-free on 0x602000000010 in thread T0:
    #0 0x7f in operator delete[](void*) ../../../../src/libsanitizer/asan/asan_new_delete.cpp:163
    #1 0x55 in std::default_delete<std::byte []>::operator()(std::byte*) const /usr/include/c++/12/bits/unique_ptr.h:132
    #2 0x56 in BlockPool::~BlockPool() /tmp/ws/block_pool.h:45
    #3 0x57 in case_copy_is_deleted() /tmp/t/block_pool_test.cpp:140
"""


def test_sanitizer_summary_names_the_learners_line():
    assert (
        cpp_build.sanitizer_summary(ASAN_LOG, "block_pool.h")
        == "attempting double-free at block_pool.h:45 (in BlockPool::~BlockPool())"
    )


def test_broken_header_fails_once_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(tmp_path / "cache"))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "block_pool.h").write_text("struct BlockPool { int x = ; };\n")
    main = tmp_path / "main.cpp"
    main.write_text('#include "block_pool.h"\nint main() { return 0; }\n')
    with pytest.raises(cpp_build.CppBuildError) as first:
        cpp_build.asan_binary(main, ws, [ws / "block_pool.h"])
    assert first.value.first_error.startswith("block_pool.h:1:")
    failed = list((tmp_path / "cache").glob("asan-*/FAILED"))
    assert len(failed) == 1  # the failure is cached: the next grade does not recompile
    with pytest.raises(cpp_build.CppBuildError) as second:
        cpp_build.asan_binary(main, ws, [ws / "block_pool.h"])
    assert second.value.first_error == first.value.first_error
    (ws / "block_pool.h").write_text("struct BlockPool { int x = 1; };\n")  # a fix changes the hash
    built = cpp_build.asan_binary(main, ws, [ws / "block_pool.h"])
    assert built.path.exists() and not built.cached
    assert cpp_build.asan_binary(main, ws, [ws / "block_pool.h"]).cached


def test_the_precompiled_header_takes_only_the_sources_leading_system_includes():
    """dev check precompiles what a source includes first (grading_kit/cpp_build.py): only
    `#include <...>` lines before any other code, in order, so `-include` changes nothing."""
    from roadmap_cli.grading_kit.cpp_pch import leading_system_includes

    text = (
        "// RMSNorm\n\n#include <ATen/ATen.h>  // tensors\n#include <torch/library.h>\n"
        '#include "block_pool.h"\n#include <cmath>\n'
    )
    assert leading_system_includes(text) == ["#include <ATen/ATen.h>", "#include <torch/library.h>"]
    assert leading_system_includes("#define X 1\n#include <ATen/ATen.h>\n") == []  # a macro first: nothing shared
    assert leading_system_includes("") == []


def test_a_grade_uses_a_built_precompiled_header_and_never_builds_or_waits_for_one(tmp_path, monkeypatch):
    """Only dev check (ROADMAP_CPP_PCH=1) and `roadmap watch`'s background prebuild build the header; any
    other grade uses it once it is there and compiles without it until then (a small header here: <vector>)."""
    from roadmap_cli.grading_kit import cpp_pch

    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "op.cpp"
    source.write_text("#include <vector>\nint size() { return std::vector<int>(3).size(); }\n")
    flags = ["-std=c++20", "-O0"]
    assert cpp_pch.precompiled_header([source], flags, 60, build=False) is None  # not built: not waited for
    assert not list((tmp_path / "cache").glob("pch-*/*.gch"))
    header = cpp_pch.precompiled_header([source], flags, 60, build=True)
    assert header is not None and header.with_suffix(".h.gch").is_file()
    assert header.read_text() == "#include <vector>\n"
    assert cpp_pch.precompiled_header([source], flags, 60, build=False) == header  # built: used
    assert [p.name for p in header.parent.iterdir() if p.name.endswith(".gch")] == ["roadmap_pch.h.gch"]
