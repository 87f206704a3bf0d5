# BEGIN SOLUTION
"""Tiled matrix multiplication in Triton: C = A @ B, A (M, K), B (K, N), C (M, N).

What you will learn
-------------------
* Tiling: each program computes one BLOCK_M x BLOCK_N tile of C by walking
  along K, BLOCK_K columns of A and rows of B at a time. A tile of A is
  reused BLOCK_N times and a tile of B BLOCK_M times, so the kernel does
  O(BLOCK) flops per byte loaded instead of O(1): that is what makes a matmul
  compute-bound instead of memory-bound.
* Pointer arithmetic with strides: element A[m, k] lives at
  a_ptr + m * stride_am + k * stride_ak, for any layout (row-major,
  transposed, a slice of a bigger tensor).
* Masks on all three dimensions, so M, N and K need not be multiples of the
  block sizes (1, 127, 129, ... all work). Masked loads return 0, which adds
  nothing to the dot product.
* fp32 accumulation: fp16 has an 11-bit significand, so a running sum in fp16
  loses the small terms once it grows (and overflows past 65504). Tensor cores
  multiply fp16 and accumulate in fp32 at full speed; we round to the output
  dtype only once, at the end.
* Grouped ("super-grouped") program ordering: programs that run at the same
  time should share tiles of A and B, so they hit in L2 instead of DRAM.
  Launching GROUP_M rows of tiles column by column does that.

Follows the shape of the Triton tutorial 03-matrix-multiplication.
"""
# STARTER
# """Part 2 — tiled matrix multiplication in Triton: C = A @ B.
#
# A is (M, K), B is (K, N), C is (M, N). Read README.md, section "Part 2:
# Triton tiled matmul", first: it explains tiling, masks, fp32 accumulation
# and grouped program ordering with pictures.
#
# You write the body of `matmul_kernel` and the launch in `matmul`.
# Requirements (all graded):
# - fp16 and fp32 inputs; C has the inputs' dtype;
# - accumulate in fp32 (tl.zeros(..., dtype=tl.float32)), round to C's dtype once, at the end;
# - any M, N, K >= 1: 1, 127, 129, ... (mask every load and the store);
# - any strides: use the stride arguments, never assume contiguous inputs;
# - grouped program ordering (GROUP_M), for L2 reuse on the GPU;
# - no torch.matmul / mm / bmm / einsum / F.linear / `@` (they raise while graded).
#
# Useful Triton pieces:
    # tl.program_id(0), tl.cdiv(a, b), tl.arange(0, BLOCK)
    # x[:, None], x[None, :]                  # make a column / a row (broadcasting)
    # tl.load(ptrs, mask=m, other=0.0)        # masked lanes read 0: adds nothing to a dot product
    # acc = tl.dot(a, b, acc)                 # (BM, BK) @ (BK, BN) added into acc (BM, BN)
    # acc.to(c_ptr.dtype.element_ty)          # convert to the output's dtype
    # tl.store(ptrs, values, mask=m)
# """
# END SOLUTION

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,  # pointers to A (M, K), B (K, N), C (M, N)
    M, N, K,  # matrix sizes
    # BEGIN SOLUTION
    stride_am, stride_ak,  # how far to move in memory for one step along each dim
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    # STARTER
    # stride_am, stride_ak,  # A[m, k] is at a_ptr + m * stride_am + k * stride_ak
    # stride_bk, stride_bn,  # B[k, n] is at b_ptr + k * stride_bk + n * stride_bn
    # stride_cm, stride_cn,  # C[m, n] is at c_ptr + m * stride_cm + n * stride_cn
    # END SOLUTION
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,  # rows of tiles per group (L2 reuse)
):
    # BEGIN SOLUTION
    # ---- 1. which tile of C is mine? (grouped ordering) ----------------------
    # A plain row-major order (pid_m = pid // num_pid_n) sweeps a whole row of
    # C tiles: it reuses one row-block of A but streams *all* of B through L2.
    # Grouping walks GROUP_M row-blocks column by column, so the programs that
    # run together touch GROUP_M row-blocks of A and few column-blocks of B.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)  # the last group may be smaller
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # ---- 2. pointers to the first K-block of A and B -------------------------
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) rows of A and C
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,) columns of B and C
    offs_k = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)
    mask_m = offs_m[:, None] < M  # rows past the bottom edge
    mask_n = offs_n[None, :] < N  # columns past the right edge

    # ---- 3. walk along K, accumulating in fp32 --------------------------------
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        # The last K-block may stick out past K: mask it (loads give 0 there).
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=mask_m & (offs_k[None, :] < k_remaining), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_remaining) & mask_n, other=0.0)
        # (BLOCK_M, BLOCK_K) @ (BLOCK_K, BLOCK_N), added into the fp32 accumulator.
        # On a GPU fp16 inputs run on tensor cores; fp32 inputs use TF32 by default.
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # ---- 4. round once to the output dtype and store the tile ----------------
    c = accumulator.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=mask_m & mask_n)
    # STARTER
    # # The grid is 1-D: cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs, one per tile of C.
    # #
    # # TODO (Part 2), step 1 — which tile of C is mine? (grouped ordering)
    # #   pid = tl.program_id(0); num_pid_m = tl.cdiv(M, BLOCK_M); num_pid_n = tl.cdiv(N, BLOCK_N)
    # #   Programs are numbered down a group of GROUP_M tile-rows, column by column:
    # #   group_id = pid // (GROUP_M * num_pid_n); first_pid_m = group_id * GROUP_M
    # #   The LAST group may have fewer than GROUP_M rows of tiles:
    # #   group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    # #   pid_m = first_pid_m + (pid % (GROUP_M * num_pid_n)) % group_size_m
    # #   pid_n = (pid % (GROUP_M * num_pid_n)) // group_size_m
    # #
    # # TODO step 2 — offsets and pointers of the first K-block:
    # #   offs_m (BLOCK_M,), offs_n (BLOCK_N,), offs_k (BLOCK_K,)
    # #   a_ptrs (BLOCK_M, BLOCK_K) = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    # #   b_ptrs (BLOCK_K, BLOCK_N) likewise with stride_bk, stride_bn
    # #
    # # TODO step 3 — walk along K in steps of BLOCK_K:
    # #   an fp32 accumulator (BLOCK_M, BLOCK_N); in each step load a tile of A and
    # #   of B with masks for the M / N edges AND for the last, partial K-block
    # #   (offs_k < K - k * BLOCK_K), accumulate tl.dot(a, b, acc), advance the pointers.
    # #
    # # TODO step 4 — convert the accumulator to C's dtype and store it, masked
    # #   to the rows < M and columns < N.
    # pass
    # END SOLUTION


# BEGIN SOLUTION
# GPU configurations tried once per (M, N, K) by the autotuner (from the Triton
# tutorial's list for fp16 on Ampere/Hopper). Bigger tiles = more reuse, but
# more registers and shared memory; num_stages = software pipelining depth.
_GPU_CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=5, num_warps=2),
]
_autotuned_kernel = triton.autotune(configs=_GPU_CONFIGS, key=["M", "N", "K"])(matmul_kernel)

# The CPU interpreter runs one program at a time in numpy: 64-wide tiles were
# the fastest we measured (4x faster than 32), and autotuning would only waste
# time. GROUP_M=2 keeps a partial last group even on small test matrices.
INTERPRETER_BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 2}

# Small problems and fp32 (big fp32 tiles overflow shared memory) use one
# modest configuration: tuning them would cost more compile time than it saves.
_GPU_SMALL_BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}
_AUTOTUNE_MIN_FLOP_VOLUME = 512**3  # M * N * K
# STARTER
# # The CPU interpreter (TRITON_INTERPRET=1) runs one program at a time in numpy:
# # keep these tile sizes there, or grading on a CPU gets very slow.
# INTERPRETER_BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 2}
# # On a GPU, start here; Part 5 (performance) rewards tuning: bigger tiles,
# # num_warps, num_stages, or triton.autotune over a few triton.Config's.
# GPU_BLOCKS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}
# END SOLUTION

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B for 2-D A (M, K) and B (K, N) of the same dtype (fp16, bf16 or fp32)
    and device. Accumulates in fp32; C has the inputs' dtype. Any strides."""
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"matmul takes 2-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: A is {tuple(a.shape)}, B is {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"A and B must share a dtype among {SUPPORTED_DTYPES}; got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"device mismatch: A on {a.device}, B on {b.device}")
    M, K = a.shape
    _, N = b.shape
    # BEGIN SOLUTION
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    # A 1-D grid: the kernel maps program ids to tiles itself (grouped ordering).
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    if not a.is_cuda or os.environ.get("TRITON_INTERPRET") == "1":
        matmul_kernel[grid](*args, **INTERPRETER_BLOCKS)
    elif a.dtype != torch.float32 and M * N * K >= _AUTOTUNE_MIN_FLOP_VOLUME:
        _autotuned_kernel[grid](*args)  # big fp16/bf16 problems: worth a one-time tuning run per shape
    else:
        matmul_kernel[grid](*args, **_GPU_SMALL_BLOCKS)
    return c
    # STARTER
    # # TODO (Part 2):
    # # 1. Allocate C: torch.empty((M, N), device=a.device, dtype=a.dtype).
    # # 2. A 1-D grid with one program per tile of C:
    # #    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)   (round UP!)
    # # 3. Launch matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1),
    # #    b.stride(0), b.stride(1), c.stride(0), c.stride(1), **blocks) with
    # #    blocks = INTERPRETER_BLOCKS when os.environ.get("TRITON_INTERPRET") == "1"
    # #    or the tensors are on the CPU, GPU_BLOCKS otherwise. Return C.
    # raise NotImplementedError("matmul is not implemented yet: see README.md, section 'Part 2: Triton tiled matmul'")
    # END SOLUTION
