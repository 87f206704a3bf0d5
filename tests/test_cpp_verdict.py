"""A C++ test binary's verdict is data the grader checks, never a line the
binary prints about itself (issue 35 item 3; labs/cpp-extension/tests/test_block_pool.py).

The learner's block_pool.h is linked into the grader's test binary, so its code
can print anything and end the process whenever it likes. Each attack below is
a wrong BlockPool plus code that tries to pass anyway: printing the lines a
passing run prints, ending the run before LeakSanitizer looks, switching the
leak check off, telling the std:: traits a lie, or redefining the words the
grader's own code is written in. Each is graded for real, behind bubblewrap,
and must fail; the reference (with a harmless include guard) must pass the
same selection.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler"), pytest.mark.slow]

LAB = Path(__file__).resolve().parents[1] / "labs" / "cpp-extension"
SOLUTION = (LAB / "solution" / "block_pool.h").read_text()
STARTER = (LAB / "starter" / "block_pool.h").read_text()

# Wrong pools, each a small edit of the reference.
NOT_NOEXCEPT = SOLUTION.replace("BlockPool(BlockPool&& other) noexcept", "BlockPool(BlockPool&& other)").replace(
    "BlockPool& operator=(BlockPool&& other) noexcept", "BlockPool& operator=(BlockPool&& other)"
)
LEAKY = SOLUTION.replace(
    "storage_ = std::move(other.storage_);",
    "(void)storage_.release();  // the old storage is never freed\n      storage_ = std::move(other.storage_);",
)
COPYABLE = SOLUTION.replace(
    "BlockPool(const BlockPool&) = delete;",
    "BlockPool(const BlockPool& o) : BlockPool(o.num_blocks_, o.block_bytes_) {}",
).replace("BlockPool& operator=(const BlockPool&) = delete;", "")
assert NOT_NOEXCEPT != SOLUTION and LEAKY != SOLUTION and COPYABLE != SOLUTION

T = "test_block_pool.py::test_block_pool"
RUNTIME = [
    f"{T}[allocate_order]",
    f"{T}[move_assign]",
    f"{T}[self_move_assign]",
    f"{T}[many_pools]",
    "test_block_pool.py::test_block_pool_script",
]

FORGED_LINES = r"""
#include <cstdio>
#include <unistd.h>
// Prints what a passing run of the old protocol printed, then ends the process before main runs.
inline const bool forged = [] {
  for (const char* c : {"allocate_order", "free_reuse_lifo", "blocks_are_disjoint", "bad_free_throws",
                        "data_checks_range", "move_construct", "move_assign", "self_move_assign",
                        "copy_is_deleted", "moves_are_noexcept", "rejected_calls_change_nothing", "many_pools"}) {
    std::printf("OK %s\n", c);
  }
  std::printf("ok\nEND\n");
  std::fflush(stdout);
  _exit(0);
  return true;
}();
"""

QUIT_BEFORE_LEAK_CHECK = r"""
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
// Runs at exit before LeakSanitizer's own check, and ends the process with status 0.
inline const int quit_early = std::atexit([] { std::fflush(stdout); _exit(0); });
"""

LSAN_OFF_HOOK = 'extern "C" int __lsan_is_turned_off() { return 1; }\n'
LSAN_SUPPRESSION_HOOK = 'extern "C" const char* __lsan_default_suppressions() { return "leak:BlockPool"; }\n'
LSAN_DISABLED = "#include <sanitizer/lsan_interface.h>\ninline const bool leaks_ignored = (__lsan_disable(), true);\n"

# No RAII at all, yet LeakSanitizer stays quiet: every buffer is malloc'd and kept in a global table (a root
# LeakSanitizer scans), the destructor is empty and move assignment drops the target's old buffer.
GLOBAL_ROOTS = (
    SOLUTION.replace("std::unique_ptr<std::byte[]> storage_;", "std::byte* storage_ = nullptr;")
    .replace("~BlockPool() = default;", "~BlockPool() {}")
    .replace(
        "storage_(std::make_unique<std::byte[]>(num_blocks * block_bytes))",
        "storage_(keep(static_cast<std::byte*>(std::malloc(num_blocks * block_bytes + 1))))",
    )
    .replace("storage_(std::move(other.storage_))", "storage_(std::exchange(other.storage_, nullptr))")
    .replace("storage_ = std::move(other.storage_);", "storage_ = std::exchange(other.storage_, nullptr);")
    .replace("return storage_.get() +", "return storage_ +")
    .replace(
        "class BlockPool {",
        """#include <cstdlib>
inline std::byte* kept_roots[1 << 16];
inline std::size_t kept_count = 0;
inline std::byte* keep(std::byte* p) { kept_roots[kept_count++ % (1 << 16)] = p; return p; }

class BlockPool {""",
    )
)
# The move assignment swaps the storage: the target's old buffer lives on in the moved-from pool (freed only
# when that pool dies, so LeakSanitizer sees nothing).
SWAPPING = SOLUTION.replace("storage_ = std::move(other.storage_);", "std::swap(storage_, other.storage_);")
# A leaky pool that tells LeakSanitizer to ignore its storage through the linker's __real_ name.
IGNORED_BY_REAL_NAME = LEAKY + (
    'extern "C" void __real___lsan_ignore_object(const void*);\n'
    "inline const bool ignored = (__real___lsan_ignore_object(nullptr), true);\n"
)
METER_FORGED = LEAKY + 'extern "C" std::size_t __sanitizer_get_current_allocated_bytes() { return 0; }\n'
assert SWAPPING != SOLUTION

TRAITS_LIE = r"""
#include <type_traits>
template <> struct std::is_nothrow_move_constructible<BlockPool> : std::true_type {};
template <> struct std::is_nothrow_move_assignable<BlockPool> : std::true_type {};
template <> struct std::is_copy_constructible<BlockPool> : std::false_type {};
template <> struct std::is_copy_assignable<BlockPool> : std::false_type {};
"""

STATIC_ASSERT_MACRO = '#define static_assert(...) static_assert(true, "")\n'
BUILTIN_MACROS = (
    "#define __is_nothrow_constructible(...) true\n#define __is_nothrow_assignable(...) true\n"
    "#define __is_constructible(...) false\n#define __is_assignable(...) false\n"
)
NOEXCEPT_MACRO = "#define noexcept noexcept(true)\n"
DELETE_MACRO = "#define delete default\n"  # the copy operations become defaulted (deleted only by unique_ptr)

ATTACKS = {
    # name: (header, tests graded, every one of them must fail)
    "starter-prints-the-ok-lines-from-a-static-initialiser": (STARTER + FORGED_LINES, RUNTIME),
    "leaky-pool-exits-0-before-the-leak-check": (LEAKY + QUIT_BEFORE_LEAK_CHECK, [f"{T}[move_assign]"]),
    "leaky-pool-turns-leak-sanitizer-off": (LEAKY + LSAN_OFF_HOOK, [f"{T}[move_assign]"]),
    "leaky-pool-suppresses-its-leak": (LEAKY + LSAN_SUPPRESSION_HOOK, [f"{T}[move_assign]"]),
    "leaky-pool-disables-leak-checking": (LEAKY + LSAN_DISABLED, [f"{T}[move_assign]"]),
    "pool-without-raii-keeps-its-buffers-in-a-global": (GLOBAL_ROOTS, RUNTIME),
    "move-assign-swaps-the-old-storage-into-the-source": (SWAPPING, [f"{T}[move_assign]"]),
    "leaky-pool-calls-a-sanitizer-switch-by-its-real-name": (IGNORED_BY_REAL_NAME, [f"{T}[move_assign]"]),
    "leaky-pool-defines-the-heap-meter": (METER_FORGED, [f"{T}[move_assign]"]),
    "std-traits-specialised-to-lie": (NOT_NOEXCEPT + TRAITS_LIE, [f"{T}[moves_are_noexcept]"]),
    "copyable-pool-with-lying-traits": (COPYABLE + TRAITS_LIE, [f"{T}[copy_is_deleted]"]),
    "static-assert-redefined": (NOT_NOEXCEPT + STATIC_ASSERT_MACRO, [f"{T}[moves_are_noexcept]"]),
    "compiler-builtins-redefined": (
        COPYABLE.replace("BlockPool(BlockPool&& other) noexcept", "BlockPool(BlockPool&& other)") + BUILTIN_MACROS,
        [f"{T}[copy_is_deleted]", f"{T}[moves_are_noexcept]"],
    ),
    "noexcept-redefined": (NOEXCEPT_MACRO + NOT_NOEXCEPT, [f"{T}[moves_are_noexcept]"]),
    "delete-redefined": (
        SOLUTION.replace("#pragma once\n", "#pragma once\n" + DELETE_MACRO),
        [f"{T}[copy_is_deleted]", "test_block_pool.py::test_block_pool_script"],
    ),
}


@pytest.fixture
def walled(wall, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Grades behind bubblewrap (conftest.py's `wall`: skipped where it cannot run, unless CI requires it), as
    ROADMAP_REQUIRE_BWRAP=1 demands; a C++ build cache of this test's own."""
    monkeypatch.setenv("ROADMAP_REQUIRE_BWRAP", "1")
    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(tmp_path / "cpp-cache"))
    yield


def _grade(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, header: str, tests: list[str]) -> dict:
    ws = tmp_path / "ws"
    result = run_cli("lab", "start", "cpp-extension", "--dir", str(ws))
    assert result.exit_code == 0, result
    (ws / "block_pool.h").write_text(header)
    monkeypatch.chdir(ws)
    args = ["grade", "--json"]
    for test in tests:
        args += ["--test", test]
    result = run_cli(*args)
    assert result.exception is None, result
    data = result.json()["data"]
    assert data["sandbox"] == "strong", data["sandbox"]
    outcomes = {t["nodeid"]: (t["outcome"], t["message"]) for t in data["tests"]}
    assert sorted(outcomes) == sorted(tests), outcomes
    for nodeid, (outcome, message) in outcomes.items():  # shown with `pytest -s`
        print(f"  {nodeid}: {outcome} {(message or '')[:240]!r}")
    return outcomes


@pytest.mark.parametrize("attack", ATTACKS)
def test_an_attack_from_the_learners_header_fails_the_grade(attack, walled, run_cli, tmp_path, monkeypatch):
    header, tests = ATTACKS[attack]
    outcomes = _grade(run_cli, tmp_path, monkeypatch, header, tests)
    passed = [nodeid for nodeid, (outcome, _) in outcomes.items() if outcome == "passed"]
    assert not passed, f"{attack}: {passed} passed"


def test_the_reference_with_an_include_guard_and_its_own_macros_passes(walled, run_cli, tmp_path, monkeypatch):
    """The macro check refuses only macros that rename what the grader's code spells: an include guard and a
    macro of the learner's own are fine."""
    header = SOLUTION.replace("#pragma once", "#ifndef BLOCK_POOL_H\n#define BLOCK_POOL_H\n#define POOL_ALIGN 8")
    header += "#endif  // BLOCK_POOL_H\n"
    tests = RUNTIME + [f"{T}[copy_is_deleted]", f"{T}[moves_are_noexcept]"]
    outcomes = _grade(run_cli, tmp_path, monkeypatch, header, tests)
    assert all(outcome == "passed" for outcome, _ in outcomes.values()), outcomes
