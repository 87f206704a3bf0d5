"""Part 1: occupancy, checked exactly against the grader's model on hand-picked
edge cases (every limiter, every rounding rule, every architecture, the
carve-out argument) and on seeded random launch configurations."""

from __future__ import annotations

import pytest

import adapter
import reference
from cases import ARCHS, expect_equal, rng

SECTION = "Part 1: occupancy"

# (arch, threads, regs, smem, carveout) chosen so each limit and each rounding
# rule decides at least one case (comments say which).
EDGE_CASES = [
    ("sm_80", 256, 32, 0, None),          # warps and registers tie at 8 blocks
    ("sm_80", 32, 16, 0, None),           # 64 blocks by warps, 128 by registers: the 32-block cap decides
    ("sm_86", 32, 16, 0, None),           # sm_86 caps at 16 blocks
    ("sm_89", 64, 16, 0, None),           # sm_89: 48 warps, 24 blocks
    ("sm_90", 128, 33, 0, None),          # 33 regs -> 1056 -> 1280 per warp (256-register units)
    ("sm_90", 96, 64, 0, None),           # 3 warps per block: 21 by warps, registers win
    ("sm_80", 1024, 64, 0, None),         # 64 x 1024 = 65536: exactly the block's register limit
    ("sm_80", 1024, 65, 0, None),         # one more register: the block can never launch
    ("sm_80", 33, 255, 0, None),          # 2 warps for 33 threads, 255 registers
    ("sm_90", 128, 32, 48 * 1024, None),  # shared memory decides (+1 KB reserved)
    ("sm_90", 128, 32, 227 * 1024, None), # the largest block allowed: fits once
    ("sm_90", 128, 32, 227 * 1024 + 1, None),  # one byte more: never fits
    ("sm_80", 128, 32, 1, None),          # 1 + 1024 bytes rounds up to 1152
    ("sm_80", 64, 32, 32_563, None),      # 33,587 bytes: 5 would fit unrounded, 4 after rounding to 128
    ("sm_80", 128, 32, 10_000, 64),       # a smaller carve-out
    ("sm_89", 256, 40, 20_000, 32),
    ("sm_90", 64, 24, 2048, 8),
    ("sm_86", 1, 1, 0, None),             # one thread is still a whole warp
    ("sm_80", 64, 40, 0, None),           # 1280 per warp: 12 per sub-partition = 48 warps, not 65536 // 1280 = 51
]


@pytest.mark.parametrize("case", EDGE_CASES, ids=lambda c: f"{c[0]}-{c[1]}t-{c[2]}r-{c[3]}B-{c[4]}")
def test_edge_cases(case):
    arch, threads, regs, smem, carve = case
    expected = reference.occupancy(arch, threads, regs, smem, carve)
    got = adapter.occupancy(arch, threads, regs, smem, carve)
    expect_equal(f"occupancy({arch}, threads={threads}, registers={regs}, shared={smem}, carveout_kb={carve})",
                 got, expected, SECTION)


@pytest.mark.parametrize("arch", ARCHS)
def test_random_configurations(arch):
    r = rng(f"occupancy-{arch}")
    carveouts = reference.SM_LIMITS[arch][4]
    for _ in range(150):
        threads = r.choice([r.randint(1, 1024), 32 * r.randint(1, 32), r.choice([1, 31, 33, 1023, 1024])])
        regs = r.choice([r.randint(1, 255), r.choice([8, 16, 24, 32, 40, 64, 128, 255])])
        smem = r.choice([0, r.randint(0, 64 * 1024), r.randint(0, 240 * 1024), 128 * r.randint(0, 400)])
        carve = r.choice([None, None, r.choice(carveouts)])
        expected = reference.occupancy(arch, threads, regs, smem, carve)
        got = adapter.occupancy(arch, threads, regs, smem, carve)
        expect_equal(f"occupancy({arch}, threads={threads}, registers={regs}, shared={smem}, carveout_kb={carve})",
                     got, expected, SECTION)


def boundary_cases(arch: str) -> dict[str, list[tuple]]:
    """Launches on both sides of every granularity of `arch`'s row of the table:
    the warp (32 threads), the register unit (256 per warp: 8k and 8k + 1
    registers per thread), the per-block register file, the 128-byte shared
    unit after the 1 KB reserve, and the per-block shared-memory maximum."""
    max_warps, _, smem_sm, smem_block, carveouts = reference.SM_LIMITS[arch]
    warps = [(t, 16, 0, None) for w in (1, 2, 3, 8, 32) for t in (32 * w - 1, 32 * w, 32 * w + 1) if t <= 1024]
    warps += [(32 * max_warps // k, 16, 0, None) for k in (2, 3, 4) if 32 * max_warps // k <= 1024]
    registers = [(threads, r, 0, None) for threads in (64, 96, 256) for k in range(1, 32)
                 for r in (8 * k, 8 * k + 1) if r <= 255]
    registers += [(1024, 64, 0, None), (1024, 65, 0, None), (512, 128, 0, None), (512, 129, 0, None),
                  (256, 255, 0, None), (288, 255, 0, None)]
    shared = [(128, 16, 128 * j - 1024 + d, None) for j in (9, 17, 100, 400) for d in (-1, 0, 1)]
    shared += [(128, 16, smem_block + d, None) for d in (-128, -1, 0, 1)]
    shared += [(128, 16, c * 1024 // n - 1024 + d, c) for c in carveouts if c for n in (1, 3) for d in (0, 1)]
    return {"warps": warps, "registers": registers, "shared": shared}


@pytest.mark.parametrize("kind", ["warps", "registers", "shared"])
@pytest.mark.parametrize("arch", ARCHS)
def test_granularity_boundaries(arch, kind):
    """Every rounding rule decided at its boundary on every architecture of the table, not only on one."""
    for threads, regs, smem, carve in boundary_cases(arch)[kind]:
        expected = reference.occupancy(arch, threads, regs, smem, carve)
        got = adapter.occupancy(arch, threads, regs, smem, carve)
        expect_equal(f"occupancy({arch}, threads={threads}, registers={regs}, shared={smem}, carveout_kb={carve})",
                     got, expected, SECTION)


@pytest.mark.parametrize("bad", [
    dict(threads=0, regs=32, smem=0), dict(threads=1025, regs=32, smem=0),
    dict(threads=128, regs=0, smem=0), dict(threads=128, regs=256, smem=0),
    dict(threads=128, regs=32, smem=-1), dict(threads=128, regs=32, smem=0, carveout_kb=48),
], ids=["0-threads", "1025-threads", "0-regs", "256-regs", "negative-smem", "carveout-48"])
def test_invalid_launches_raise(bad):
    with pytest.raises(ValueError):
        adapter.occupancy("sm_80", bad["threads"], bad["regs"], bad["smem"], bad.get("carveout_kb"))


def test_best_block_size():
    r = rng("best-block-size")
    cases = [("sm_80", 32, 0), ("sm_90", 128, 0), ("sm_89", 64, 96), ("sm_80", 255, 0), ("sm_86", 40, 200)]
    cases += [(r.choice(ARCHS), r.randint(8, 200), r.choice([0, 16, 64, 128, 200])) for _ in range(40)]
    for arch, regs, per_thread in cases:
        expected = reference.best_block_size(arch, regs, per_thread)
        call = f"best_block_size({arch}, registers={regs}, shared_per_thread={per_thread})"
        if expected is None:
            with pytest.raises(ValueError):
                adapter.best_block_size(arch, regs, per_thread)
        else:
            expect_equal(call, adapter.best_block_size(arch, regs, per_thread), expected, SECTION)
    # Non-default candidates, including ones that cannot fit at all.
    cands = (96, 160, 384, 1024)
    for arch, regs, per_thread in [("sm_90", 64, 100), ("sm_80", 128, 150), ("sm_89", 32, 0)]:
        expected = reference.best_block_size(arch, regs, per_thread, cands)
        expect_equal(f"best_block_size({arch}, registers={regs}, shared_per_thread={per_thread}, candidates={cands})",
                     adapter.best_block_size(arch, regs, per_thread, list(cands)), expected, SECTION)
    with pytest.raises(ValueError):
        adapter.best_block_size("sm_86", 255, 400, [512, 1024])


def test_best_block_size_ties_in_any_order():
    """Ties go to the smaller block whatever order the candidates come in: descending and shuffled too."""
    r = rng("best-block-size-order")
    cases = [("sm_80", 32, 0), ("sm_89", 32, 0), ("sm_90", 64, 0), ("sm_86", 40, 16)]
    cases += [(r.choice(ARCHS), r.randint(8, 64), r.choice([0, 16])) for _ in range(12)]
    ties = 0
    for arch, regs, per_thread in cases:
        cands = [64, 128, 256, 512, 1024]
        for order in (cands[::-1], r.sample(cands, len(cands))):
            expected = reference.best_block_size(arch, regs, per_thread, tuple(order))
            if expected is None:
                continue
            occ = {t: reference.occupancy(arch, t, regs, per_thread * t)["occupancy"] for t in order}
            ties += sum(1 for t in order if t != expected and occ[t] == occ[expected])
            expect_equal(f"best_block_size({arch}, registers={regs}, shared_per_thread={per_thread}, "
                         f"candidates={tuple(order)}) (ties go to the smaller block)",
                         adapter.best_block_size(arch, regs, per_thread, list(order)), expected, SECTION)
    assert ties, "grader check: no case had a tie"

