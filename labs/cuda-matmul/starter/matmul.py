"""Part 2 — tiled matrix multiplication in Triton: C = A @ B.

A is (M, K), B is (K, N), C is (M, N). Read README.md, section "Part 2:
Triton tiled matmul", first: it explains tiling, masks, fp32 accumulation
and grouped program ordering with pictures.

You write the body of `matmul_kernel` and the launch in `matmul`.
Requirements (all graded):
- fp16 and fp32 inputs; C has the inputs' dtype;
- accumulate in fp32 (tl.zeros(..., dtype=tl.float32)), round to C's dtype once, at the end;
- any M, N, K >= 1: 1, 127, 129, ... (mask every load and the store);
- any strides: use the stride arguments, never assume contiguous inputs;
- grouped program ordering (GROUP_M), for L2 reuse on the GPU;
- no torch.matmul / mm / bmm / einsum / F.linear / `@` (they raise while graded).

Useful Triton pieces:
    tl.program_id(0), tl.cdiv(a, b), tl.arange(0, BLOCK)
    x[:, None], x[None, :]                  # make a column / a row (broadcasting)
    tl.load(ptrs, mask=m, other=0.0)        # masked lanes read 0: adds nothing to a dot product
    acc = tl.dot(a, b, acc)                 # (BM, BK) @ (BK, BN) added into acc (BM, BN)
    acc.to(c_ptr.dtype.element_ty)          # convert to the output's dtype
    tl.store(ptrs, values, mask=m)
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,  # pointers to A (M, K), B (K, N), C (M, N)
    M, N, K,  # matrix sizes
    stride_am, stride_ak,  # A[m, k] is at a_ptr + m * stride_am + k * stride_ak
    stride_bk, stride_bn,  # B[k, n] is at b_ptr + k * stride_bk + n * stride_bn
    stride_cm, stride_cn,  # C[m, n] is at c_ptr + m * stride_cm + n * stride_cn
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,  # rows of tiles per group (L2 reuse)
):
    # The grid is 1-D: cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs, one per tile of C.
    #
    # TODO (Part 2), step 1 — which tile of C is mine? (grouped ordering)
    #   pid = tl.program_id(0); num_pid_m = tl.cdiv(M, BLOCK_M); num_pid_n = tl.cdiv(N, BLOCK_N)
    #   Programs are numbered down a group of GROUP_M tile-rows, column by column:
    #   group_id = pid // (GROUP_M * num_pid_n); first_pid_m = group_id * GROUP_M
    #   The LAST group may have fewer than GROUP_M rows of tiles:
    #   group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    #   pid_m = first_pid_m + (pid % (GROUP_M * num_pid_n)) % group_size_m
    #   pid_n = (pid % (GROUP_M * num_pid_n)) // group_size_m
    #
    # TODO step 2 — offsets and pointers of the first K-block:
    #   offs_m (BLOCK_M,), offs_n (BLOCK_N,), offs_k (BLOCK_K,)
    #   a_ptrs (BLOCK_M, BLOCK_K) = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    #   b_ptrs (BLOCK_K, BLOCK_N) likewise with stride_bk, stride_bn
    #
    # TODO step 3 — walk along K in steps of BLOCK_K:
    #   an fp32 accumulator (BLOCK_M, BLOCK_N); in each step load a tile of A and
    #   of B with masks for the M / N edges AND for the last, partial K-block
    #   (offs_k < K - k * BLOCK_K), accumulate tl.dot(a, b, acc), advance the pointers.
    #
    # TODO step 4 — convert the accumulator to C's dtype and store it, masked
    #   to the rows < M and columns < N.
    pass


# The CPU interpreter (TRITON_INTERPRET=1) runs one program at a time in numpy:
# keep these tile sizes there, or grading on a CPU gets very slow.
INTERPRETER_BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 2}
# On a GPU, start here; Part 5 (performance) rewards tuning: bigger tiles,
# num_warps, num_stages, or triton.autotune over a few triton.Config's.
GPU_BLOCKS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}

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
    # TODO (Part 2):
    # 1. Allocate C: torch.empty((M, N), device=a.device, dtype=a.dtype).
    # 2. A 1-D grid with one program per tile of C:
    #    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)   (round UP!)
    # 3. Launch matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1),
    #    b.stride(0), b.stride(1), c.stride(0), c.stride(1), **blocks) with
    #    blocks = INTERPRETER_BLOCKS when os.environ.get("TRITON_INTERPRET") == "1"
    #    or the tensors are on the CPU, GPU_BLOCKS otherwise. Return C.
    raise NotImplementedError("matmul is not implemented yet: see README.md, section 'Part 2: Triton tiled matmul'")
