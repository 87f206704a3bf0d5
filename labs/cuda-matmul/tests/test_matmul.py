"""Part `matmul`: the Triton tiled matmul: fp16 and fp32 inputs, fp32
accumulation, any M, N, K (1, 127, 129, non-multiples of the block), any strides,
and any tile shape the grader puts in INTERPRETER_BLOCKS (unequal ones included).

Inputs reach the learner's code inside NaN-filled buffers; under the interpreter
every unmasked load/store lane is bounds-checked (adapter.py)."""

from __future__ import annotations

import pytest
import torch

import adapter
from inputs import generator, random_values
from roadmap_cli.grading_kit import assert_close, assert_nontrivial, has_cuda, rel_fro_error, to_device

SECTION = "Part 2: Triton tiled matmul"
TRIALS = 5
MAX_REL_FRO = 1e-2
# (M, N, K). Small enough for the CPU interpreter; none a multiple of 64 except
# where it is the point, so every tail mask and the last (partial) group of
# tiles is exercised. K=1: a single, partial K block. 17 and 33: tile+1 for the
# grader's 16- and 32-wide tiles; 63: tile-1.
SHAPES = [
    (1, 1, 1),
    (1, 67, 129),
    (127, 129, 70),
    (129, 63, 33),
    (200, 64, 1),
    (64, 192, 64),
    (17, 33, 63),
]


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp32 reference from the grader's own copies, on the CPU."""
    return adapter.torch_matmul(a.detach().float().cpu(), b.detach().float().cpu())


def column_major(values: torch.Tensor) -> torch.Tensor:
    """The same matrix stored column by column (a .t() view of a contiguous transpose)."""
    return values.t().contiguous().t()


def _fail(what: str, message: str) -> None:
    raise AssertionError(f"{what}: {message} (README.md, '{SECTION}')")


def _span(indices: list[int]) -> str:
    """[3, 4, 5, 9] -> '3..5, 9' (first few runs only)."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    text = ", ".join(f"{a}..{b}" if b > a else str(a) for a, b in runs[:4])
    return text + (", ..." if len(runs) > 4 else "")


def check_matmul(a: torch.Tensor, b: torch.Tensor, what: str, blocks: dict | None = None) -> None:
    a, b = to_device(a), to_device(b)  # CPU data here; on the lab's device in the learner process
    expected = reference(a, b)
    # Elementwise tolerance scaled to the typical output size: fp16 output
    # rounding and TF32 on GPUs stay far inside it; a wrong tile does not.
    scale = float(expected.pow(2).mean().sqrt())
    atol = 2e-2 * scale
    assert_nontrivial(expected, atol, what="reference")
    if blocks is not None:
        what = f"{what} with INTERPRETER_BLOCKS={blocks}"
    facts = adapter.matmul(a, b, blocks)
    if not facts["launches"]:
        _fail(what, "matmul returned without launching a @triton.jit kernel")
    if facts["violations"]:
        _fail(what, "out-of-bounds memory access: " + "; ".join(facts["violations"][:4])
              + ". Indices are [row, column] of the named matrix (N+k: k past its last row or column); "
              "mask every load and the store, the last K-block included, even where the value read would "
              "not change C")
    if facts["overruns"]:
        _fail(what, "; ".join(facts["overruns"]) + ": a store without a mask for the last, partial tile?")
    out = facts["out"]
    if tuple(out.shape) != (a.shape[0], b.shape[1]):
        _fail(what, f"output shape: expected {(a.shape[0], b.shape[1])}, got {tuple(out.shape)}")
    if out.dtype != a.dtype:
        _fail(what, f"output dtype: expected the inputs' {a.dtype}, got {out.dtype}")
    out = out.cpu()
    unwritten = int(((out.float() == adapter.SENTINEL) & (expected != adapter.SENTINEL)).sum())
    if unwritten:
        where = torch.nonzero((out.float() == adapter.SENTINEL) & (expected != adapter.SENTINEL))
        rows, cols = sorted({int(r) for r in where[:, 0]}), sorted({int(c) for c in where[:, 1]})
        _fail(what, f"{unwritten} element(s) of C were never written (they still hold {adapter.SENTINEL:g}, the "
                    f"value the grader filled your output with): rows {_span(rows)} of {out.shape[0]}, columns "
                    f"{_span(cols)} of {out.shape[1]}. Every element of C must be stored by exactly one program: "
                    "check the grid size, the program -> tile mapping and the store mask")
    if not bool(torch.isfinite(out.float()).all()):
        bad = int((~torch.isfinite(out.float())).sum())
        _fail(what, f"{bad} output element(s) are NaN/inf where the reference is finite. Under the "
                    "interpreter the grader turns every undefined value into NaN: masked-off lanes of a load "
                    "without other= (give other=0.0 where they reach the dot product), and on a GPU the NaN "
                    "around A and B (a read past an edge); an overflow gives inf")
    error = rel_fro_error(out, expected)
    if error >= MAX_REL_FRO:
        _fail(what, f"relative Frobenius error: expected < {MAX_REL_FRO:g}, got {error:.3g}")
    if expected.numel() > 1:
        try:
            assert_close(out, expected, atol=atol, rtol=1e-2, what=what)
        except AssertionError as error:
            raise AssertionError(f"{error} (README.md, '{SECTION}')") from None


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul(shape, dtype):
    M, N, K = shape
    for trial in range(TRIALS):
        gen = generator(f"matmul:{M}:{N}:{K}:{dtype}:{trial}")
        distribution = "normal" if trial % 2 == 0 else "uniform"
        a = random_values((M, K), dtype, gen, distribution)
        b = random_values((K, N), dtype, gen, distribution)
        # Every other trial stores B column-major (trial 3: A too): use the strides you are given.
        if trial % 2 == 1:
            b = column_major(b)
        if trial == 3:
            a = column_major(a)
        # Trials 1 and 3 run with the grader's tile shapes (cycling over shapes; the others with
        # the learner's own INTERPRETER_BLOCKS). On a GPU INTERPRETER_BLOCKS is not used.
        blocks = adapter.TILES[(trial // 2 + SHAPES.index(shape)) % len(adapter.TILES)] if trial in (1, 3) else None
        check_matmul(a, b, f"matmul {M}x{K} @ {K}x{N} ({dtype}, trial {trial}, {distribution})", blocks)


# Every empty size "any M, N, K" allows: K = 0 makes each element of C an empty sum, 0 (torch.matmul gives
# zeros); M or N = 0 an empty C. Either dtype. No kernel needs to launch for them.
ZERO_SHAPES = [(5, 7, 0), (1, 1, 0), (70, 3, 0), (0, 5, 7), (5, 0, 7), (0, 0, 0), (0, 4, 0)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("shape", ZERO_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_empty_sizes(shape, dtype):
    M, N, K = shape
    gen = generator(f"matmul-empty:{M}:{N}:{K}:{dtype}")
    a = to_device(random_values((M, K), dtype, gen, "normal"))  # CPU data; placed in the learner process
    b = to_device(random_values((K, N), dtype, gen, "normal"))
    what = f"matmul {M}x{K} @ {K}x{N} ({dtype})"
    facts = adapter.matmul(a, b)
    if facts["violations"]:
        _fail(what, "out-of-bounds memory access: " + "; ".join(facts["violations"][:4]))
    if facts["overruns"]:
        _fail(what, "; ".join(facts["overruns"]))
    out = facts["out"]
    if tuple(out.shape) != (M, N):
        _fail(what, f"output shape: expected {(M, N)}, got {tuple(out.shape)}")
    if out.dtype != dtype:
        _fail(what, f"output dtype: expected the inputs' {dtype}, got {out.dtype}")
    out = out.cpu().float()
    if not torch.equal(out, torch.zeros(M, N)):
        left = int((out == adapter.SENTINEL).sum())
        _fail(what, f"C must be all zeros when K = 0 (each element is an empty sum, as torch.matmul gives); "
                    f"{int((out != 0).sum())} element(s) are not 0"
                    + (f", {left} of them still -4096: C was returned without being written" if left else ""))


def test_matmul_accumulates_in_fp32():
    """Large terms that cancel, with small ones in between: a running sum in
    fp16 (11-bit significand) rounds the small terms away once it holds the
    large ones (spacing 32 at 32768); fp32 keeps them. The 16 large terms of each
    end sit in one 16-wide K block, so every K tiling sees them whole."""
    M, N, K = 48, 40, 160
    for trial in range(TRIALS):
        gen = generator(f"matmul-cancel:{trial}")
        a = torch.rand((M, K), generator=gen)
        b = torch.rand((K, N), generator=gen)
        a[:, :16], b[:16, :] = 32.0, 64.0  # 16 products of 2048: +32768
        a[:, -16:], b[-16:, :] = 32.0, -64.0  # and -32768 at the end of K
        check_matmul(a.half(), b.half(), f"matmul with cancellation (trial {trial})",
                     adapter.TILES[trial] if trial in (1, 3) else None)


def test_matmul_fp32_inputs_beyond_fp16_range():
    """fp32 inputs of 1e5 x 1e-3: casting A or B to fp16 before tl.dot turns them into inf."""
    gen = generator("matmul-fp32-range")
    a = random_values((40, 48), torch.float32, gen) * 1e5
    b = random_values((48, 24), torch.float32, gen) * 1e-3
    check_matmul(a, b, "fp32 matmul with |A| ~ 1e5", adapter.TILES[1])


def test_matmul_fp32_output_beyond_fp16_range():
    """fp32 inputs of ~1e3 give outputs of ~1e7: an fp32 C must stay fp32 all the way; an accumulator
    rounded to fp16 on the way to the store overflows to inf (TF32 on a GPU keeps fp32's range)."""
    gen = generator("matmul-fp32-out-range")
    a = random_values((33, 48), torch.float32, gen) * 1e3
    b = random_values((48, 20), torch.float32, gen) * 1e3
    check_matmul(a, b, "fp32 matmul with outputs of ~1e7", adapter.TILES[0])


def test_matmul_rejects_mismatched_shapes():
    a = torch.zeros((4, 5), dtype=torch.float32)
    b = torch.zeros((6, 3), dtype=torch.float32)
    # On the lab's device: on a GPU, CPU tensors would make Triton raise a ValueError of its own, for any matmul.
    raised = adapter.matmul_raises(to_device(a), to_device(b))
    if raised not in ("ValueError", "AssertionError", "TypeError"):
        raise AssertionError(f"matmul(A 4x5, B 6x3): expected a ValueError for mismatched inner dimensions, "
                             f"got {raised or 'no exception'} (README.md, '{SECTION}')")


# One launch with unequal tiles and a partial last group: M = 5 tile-rows of 32 (the last
# group of GROUP_M=3 has 2), N = 4 tile-columns of 32 (the last partial).
LAUNCH_BLOCKS = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 3}


def _launch_facts(M: int, N: int, K: int, what: str) -> dict:
    gen = generator(f"matmul-launch:{M}:{N}:{K}")
    a = to_device(random_values((M, K), torch.float32, gen))
    b = to_device(random_values((K, N), torch.float32, gen))
    if has_cuda():
        pytest.skip("the launch is recorded under the Triton interpreter only")
    facts = adapter.matmul_launches(a, b, LAUNCH_BLOCKS)
    kernels = [launch for launch in facts["recorded"] if launch["grid"] is not None]
    if len(kernels) != 1:
        _fail(what, f"expected one Triton launch per matmul call, got {len(kernels)}")
    return {**facts, "launch": kernels[0]}


def test_matmul_grid_is_one_program_per_tile():
    """README Part 2: a 1-D grid of cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs, no more
    (M = 128 is a multiple of BLOCK_M: `(M + BLOCK_M) // BLOCK_M` is one too many)."""
    M, N, K = 128, 100, 40
    what = f"matmul {M}x{K} @ {K}x{N} with INTERPRETER_BLOCKS={LAUNCH_BLOCKS}"
    grid = _launch_facts(M, N, K, what)["launch"]["grid"]
    expected = [-(-M // LAUNCH_BLOCKS["BLOCK_M"]) * -(-N // LAUNCH_BLOCKS["BLOCK_N"]), 1, 1]
    if grid != expected:
        _fail(what, f"grid: expected a 1-D grid of cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) = {expected[0]} programs, "
                    f"got (x, y, z) = {tuple(grid)}")


def test_matmul_uses_the_graders_blocks():
    """README 'How it is graded': under the interpreter the kernel runs with the tiles in
    INTERPRETER_BLOCKS as they are when matmul is called (the grader changes them)."""
    M, N, K = 70, 50, 40
    what = f"matmul {M}x{K} @ {K}x{N} with INTERPRETER_BLOCKS={LAUNCH_BLOCKS}"
    used = _launch_facts(M, N, K, what)["launch"]["blocks"]
    if used != LAUNCH_BLOCKS:
        _fail(what, f"the kernel ran with {used}: read INTERPRETER_BLOCKS when matmul is called (not at import) "
                    "and pass it to the launch under TRITON_INTERPRET=1")


def test_matmul_grouped_program_order():
    """README Part 2 / Background: program ids walk GROUP_M rows of tiles column by column;
    the last group has fewer rows. Under the interpreter programs run in id order, so the
    tile each program stores is its place in that order."""
    M, N, K = 150, 100, 40
    bm, bn, group = LAUNCH_BLOCKS["BLOCK_M"], LAUNCH_BLOCKS["BLOCK_N"], LAUNCH_BLOCKS["GROUP_M"]
    what = f"matmul {M}x{K} @ {K}x{N} with INTERPRETER_BLOCKS={LAUNCH_BLOCKS}"
    facts = _launch_facts(M, N, K, what)
    num_m, num_n = -(-M // bm), -(-N // bn)
    expected = {}
    for pid in range(num_m * num_n):
        first_m = pid // (group * num_n) * group
        size_m = min(num_m - first_m, group)
        expected[pid] = (first_m + (pid % (group * num_n)) % size_m, (pid % (group * num_n)) // size_m)
    got: dict[int, set] = {}
    for _launch, pid, row, col in facts["stores"]:
        got.setdefault(pid, set()).add((row // bm, col // bn))
    wrong = [f"program {pid} stored tile {sorted(got.get(pid, set()))}, expected {tile}"
             for pid, tile in expected.items() if got.get(pid) != {tile}]
    if wrong:
        _fail(what, f"{len(wrong)} program(s) out of grouped order (tile = (row of tiles, column of tiles)): "
                    + "; ".join(wrong[:3]) + ". Walk GROUP_M rows of tiles column by column; the last group "
                    "may have fewer than GROUP_M rows")
