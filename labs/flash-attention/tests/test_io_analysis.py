"""Part 7: HBM accesses of standard vs flash attention (README.md, 'Part 7: io-analysis')."""

import math
import random

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


SECTION = "Part 7: io-analysis"


def _exact_ints(value) -> bool:
    values = value if isinstance(value, tuple) else (value,)
    return all(isinstance(x, int) and not isinstance(x, bool) for x in values)


def _check(call: str, got, want) -> None:
    # "All results are exact integers": a float that happens to equal the count does not pass.
    if not _exact_ints(got):
        raise AssertionError(f"{call}: expected exact int(s), got {got!r} of type {type(got).__name__} "
                             f"(README.md, '{SECTION}')")
    if got != want:
        raise AssertionError(f"{call}: expected {want}, got {got} (README.md, '{SECTION}')")


def test_block_sizes():
    for n, d, m in _cases():
        want, _, _ = _expected(n, d, m)
        _check(f"flash_block_sizes(d={d}, m={m}) -> (B_r, B_c)", adapter.io_block_sizes(d, m), want)


def test_standard_attention_accesses():
    for n, d, m in _cases():
        _, want, _ = _expected(n, d, m)
        _check(f"standard_attention_hbm_accesses(n={n}, d={d})", adapter.io_standard_accesses(n, d), want)


def test_flash_attention_accesses():
    for n, d, m in _cases():
        _, _, want = _expected(n, d, m)
        _check(f"flash_attention_hbm_accesses(n={n}, d={d}, m={m})", adapter.io_flash_accesses(n, d, m), want)
    # The point of the exercise: at n=4096, d=64 and 100 KB of fp16 SRAM, flash moves ~4x less.
    ratio = adapter.io_standard_accesses(4096, 64) / adapter.io_flash_accesses(4096, 64, 51200)
    if not math.isclose(ratio, 68157440 / 17383424, rel_tol=1e-9):
        raise AssertionError(f"standard / flash HBM accesses at n=4096, d=64, M=51200: expected "
                             f"{68157440 / 17383424:.4f} (about 3.92), got {ratio:.4f} (README.md, '{SECTION}')")
