"""Part 7: HBM accesses of standard vs flash attention (README.md, 'Part 7: io-analysis')."""

import math
import random

import pytest
from roadmap_cli import grading_kit as kit

import adapter


def _expected(n: int, d: int, m: int) -> tuple[tuple[int, int], int, int]:
    b_c = -(-m // (4 * d))
    b_r = min(b_c, d)
    t_c = -(-n // b_c)
    return (b_r, b_c), 4 * n * d + 4 * n * n, 2 * n * d + t_c * (3 * n * d + 4 * n)


FIXED = [  # (n, d, m): the handout's worked example, ragged blocks, tiny SRAM, huge SRAM
    (4096, 64, 51200),
    (1000, 128, 49152),
    (129, 16, 1000),
    (1024, 64, 10_000_000),
]


def _cases():
    rng = random.Random(kit.seeded("io-analysis"))
    return FIXED + [(rng.randint(1, 20000), rng.choice([16, 32, 64, 80, 128]), rng.randint(1024, 300_000))
                    for _ in range(6)]


def test_block_sizes():
    block_sizes, _, _ = adapter.io_functions()
    for n, d, m in _cases():
        want, _, _ = _expected(n, d, m)
        got = tuple(block_sizes(d, m))
        assert got == want, f"flash_block_sizes(d={d}, m={m}) = {got}, expected (B_r, B_c) = {want}"


def test_standard_attention_accesses():
    _, standard, _ = adapter.io_functions()
    for n, d, m in _cases():
        _, want, _ = _expected(n, d, m)
        got = standard(n, d)
        assert got == want, f"standard_attention_hbm_accesses(n={n}, d={d}) = {got}, expected {want}"


def test_flash_attention_accesses():
    _, standard, flash = adapter.io_functions()
    for n, d, m in _cases():
        _, _, want = _expected(n, d, m)
        got = flash(n, d, m)
        assert got == want, f"flash_attention_hbm_accesses(n={n}, d={d}, m={m}) = {got}, expected {want}"
    # The point of the exercise: at n=4096, d=64 and 100 KB of fp16 SRAM, flash moves ~4x less.
    assert standard(4096, 64) / flash(4096, 64, 51200) == pytest.approx(68157440 / 17383424)
    assert math.isclose(standard(4096, 64) / flash(4096, 64, 51200), 3.92, rel_tol=0.01)
