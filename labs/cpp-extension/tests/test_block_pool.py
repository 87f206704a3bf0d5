"""Part 1: RAII and ownership. The grader's block_pool_test.cpp is compiled
with the learner's block_pool.h under AddressSanitizer + LeakSanitizer (once
per grade) and run once per case, so a double free in one case cannot hide
the others."""

from __future__ import annotations

import re
import subprocess

import pytest

import build
from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import cpp_build

SECTION = "Part 1: RAII and ownership"
CASES = ["allocate_order", "free_reuse_lifo", "blocks_are_disjoint", "bad_free_throws", "data_checks_range",
         "move_construct", "move_assign", "self_move_assign", "copy_is_deleted", "moves_are_noexcept",
         "rejected_calls_change_nothing", "many_pools"]


@pytest.mark.parametrize("case", CASES)
def test_block_pool(case):
    binary = build.asan_tests()
    try:
        proc = cpp_build.run_asan_case(binary, case)
    except subprocess.TimeoutExpired:
        pytest.fail(f"block_pool_test {case} ran past 60 s (README.md, section \"{SECTION}\")", pytrace=False)
    out = proc.stdout + proc.stderr
    if proc.returncode == 0 and f"OK {case}" in proc.stdout:
        return
    if "Sanitizer" in out:
        pytest.fail(f"block_pool_test {case}: {cpp_build.sanitizer_summary(out, 'block_pool.h')} "
                    f"(README.md, section \"{SECTION}\")", pytrace=False)
    failed = [ln for ln in out.splitlines() if ln.startswith("CHECK FAILED")]
    if failed:
        pytest.fail(f"{failed[0]} (README.md, section \"{SECTION}\")", pytrace=False)
    if "terminate called" in out:
        pytest.fail(f"block_pool_test {case}: an exception escaped: {out.strip().splitlines()[0]} "
                    f"(README.md, section \"{SECTION}\")", pytrace=False)
    pytest.fail(f"block_pool_test {case} exited with status {proc.returncode}: {out.strip()[-400:]} "
                f"(README.md, section \"{SECTION}\")", pytrace=False)


# Comments, string and character literals: the words "new" and "delete" in them are not code.
_NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def test_no_raw_new_or_delete():
    """"No `new`/`delete` in your code": the storage is owned by a
    std::unique_ptr, so no path can leak it or free it twice. ASan only sees
    the paths the cases run; this reads the source (`= delete` is allowed)."""
    # Blank out what is not code but keep its newlines, so line numbers stay right.
    code = _NOT_CODE.sub(lambda m: "\n" * m.group(0).count("\n"), (kit.workspace() / "block_pool.h").read_text())
    code = re.sub(r"=\s*delete\b", " ", code)
    found = [(code.count("\n", 0, m.start()) + 1, m.group(0)) for m in re.finditer(r"\b(?:new|delete)\b", code)]
    if found:
        where = ", ".join(f"`{word}` on line {line}" for line, word in found[:3])
        pytest.fail(f"block_pool.h uses {where} (README.md says no new/delete: own the storage with "
                    f"std::unique_ptr<std::byte[]> and std::make_unique) (README.md, section \"{SECTION}\")",
                    pytrace=False)
