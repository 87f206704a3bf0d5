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


class PoolModel:
    """What README.md, Part 1 says a BlockPool does, in Python: the grader's side of the random script."""

    def __init__(self, num_blocks: int, block_bytes: int):
        self.n = num_blocks
        self.free_list = list(range(num_blocks - 1, -1, -1))  # pop() hands out 0, 1, 2, ... first
        self.in_use = [False] * num_blocks
        self.contents: dict[int, int] = {}

    def run(self, op: str) -> str:
        kind, rest = op[0], op[1:]
        block = int(rest.split(":")[0]) if rest else 0
        value = int(rest.split(":")[1]) if ":" in rest else 0
        if kind == "a":
            if not self.free_list:
                return "-1"
            got = self.free_list.pop()
            self.in_use[got] = True
            return str(got)
        if kind == "n":
            return str(len(self.free_list))
        if kind == "m":
            moved = PoolModel(0, 0)
            moved.__dict__.update(self.__dict__)
            self.__dict__.update(PoolModel(0, 0).__dict__)
            self.moved = moved
            return "0 0"
        if not 0 <= block < self.n:
            return "range"
        if kind == "f":
            if not self.in_use[block]:
                return "invalid"
            self.in_use[block] = False
            self.free_list.append(block)
            return "ok"
        if kind == "w":
            self.contents[block] = value
            return "ok"
        return "1" if self.contents.get(block) == value else "0"


def _script(rng) -> tuple[int, int, list[str]]:
    """A random run: allocations, frees (some double, some out of range), writes and reads, a move."""
    num_blocks, block_bytes = rng.randint(3, 12), rng.choice([8, 24, 40, 64])
    ops, written = [], []
    for _ in range(rng.randint(40, 80)):
        roll = rng.random()
        block = rng.randint(-2, num_blocks + 1)
        if roll < 0.3:
            ops.append("a")
        elif roll < 0.5:
            ops.append(f"f{block}")
        elif roll < 0.6:
            ops.append("n")
        elif roll < 0.8:
            ops.append(f"w{block}:{rng.randint(1, 255)}")
            written.append(ops[-1])
        elif roll < 0.98 and written:
            ops.append("r" + rng.choice(written)[1:])  # the value last written there, or an older one
        else:
            ops.append("m")
    return num_blocks, block_bytes, ops


def test_block_pool_script():
    """The pool driven by a random script from this grade's secret seed; the
    binary only reports what the pool did and the grader's model decides. (A
    case above prints its own "OK"; code linked into the binary could print
    that too, but it cannot know this script's right answers without doing
    the pool's work.)"""
    import random

    binary = build.asan_tests()
    rng = random.Random(kit.seeded("block_pool_script"))
    for _ in range(5):
        num_blocks, block_bytes, ops = _script(rng)
        model = PoolModel(num_blocks, block_bytes)
        expected = []
        for op in ops:
            expected.append(model.run(op))
            if op == "m":
                model = model.moved
        try:
            proc = cpp_build.run_binary(binary, ["script", str(num_blocks), str(block_bytes), *ops])
        except subprocess.TimeoutExpired:
            pytest.fail(f"block_pool_test script ran past 60 s (README.md, section \"{SECTION}\")", pytrace=False)
        out = proc.stdout + proc.stderr
        if "Sanitizer" in out:
            pytest.fail(f"block_pool_test script: {cpp_build.sanitizer_summary(out, 'block_pool.h')} "
                        f"(README.md, section \"{SECTION}\")", pytrace=False)
        got = proc.stdout.splitlines()
        if proc.returncode != 0 or got[-1:] != ["END"]:
            pytest.fail(f"block_pool_test script exited with status {proc.returncode}: {out.strip()[-300:]} "
                        f"(README.md, section \"{SECTION}\")", pytrace=False)
        for i, (op, want, have) in enumerate(zip(ops, expected, got)):
            if want != have:
                pytest.fail(f"BlockPool({num_blocks}, {block_bytes}), after {ops[:i]}: {_describe(op)} gave "
                            f"{have!r}, expected {want!r} (README.md, section \"{SECTION}\")", pytrace=False)
        assert len(got) == len(ops) + 1


def _describe(op: str) -> str:
    kind, rest = op[0], op[1:]
    return {"a": "allocate()", "n": "num_free()", "m": "moving the pool",
            "f": f"free({rest})", "w": f"writing block {rest.split(':')[0]}",
            "r": f"reading block {rest.split(':')[0]} back"}[kind]


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
