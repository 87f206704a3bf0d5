"""Part 5 — the roofline: is a kernel limited by memory or by compute?

A kernel that performs F floating-point operations while moving B bytes to
and from HBM has arithmetic intensity I = F / B (FLOP per byte). The GPU
cannot go faster than its compute peak P, nor feed the math faster than its
bandwidth W allows, so attainable FLOP/s = min(P, I * W). The ridge point
I* = P / W separates memory-bound kernels (I < I*) from compute-bound ones.
README.md, section "Part 5: roofline", derives the traffic of the project's
own kernels; units: peak in TFLOP/s (1e12), bandwidth in GB/s (1e9 bytes/s).
"""

from __future__ import annotations


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def ridge_point(peak_tflops: float, bandwidth_gbps: float) -> float:
    """FLOP per byte where the two roofs meet."""
    raise NotImplementedError("ridge_point: see README.md, section \"Part 5: roofline\"")


def attainable_tflops(intensity: float, peak_tflops: float, bandwidth_gbps: float) -> float:
    """min(peak, intensity * bandwidth), in TFLOP/s."""
    raise NotImplementedError("attainable_tflops: see README.md, section \"Part 5: roofline\"")


def bound(intensity: float, peak_tflops: float, bandwidth_gbps: float) -> str:
    """"memory" below the ridge point, "compute" at or above it."""
    raise NotImplementedError("bound: see README.md, section \"Part 5: roofline\"")


def _traffic(flops: float, bytes_moved: float) -> dict:
    return {"flops": flops, "bytes": bytes_moved, "intensity": flops / bytes_moved}


def matmul_traffic(m: int, n: int, k: int, block_m: int, block_n: int, element_bytes: int) -> dict:
    """C (m, n) = A (m, k) @ B (k, n), one program per BLOCK_M x BLOCK_N tile of
    C, no cache reuse between programs: every column of tiles re-reads all of A,
    every row of tiles re-reads all of B, C is written once.
    flops = 2mnk; bytes = e * (ceil(n/BN) * m*k + ceil(m/BM) * k*n + m*n)."""
    raise NotImplementedError("matmul_traffic: see README.md, section \"Part 5: roofline\"")


def flash_attention_traffic(batch: int, heads: int, seq_len: int, head_dim: int, block_m: int,
                            causal: bool, element_bytes: int) -> dict:
    """FlashAttention-2 forward, one program per BLOCK_M query rows of one (batch, head):
    Q read once and O written once (N*d each), the fp32 log-sum-exp written once (4N bytes),
    K and V read once per query block — all N rows, or with causal masking only the rows
    up to the block's last query row: min(N, (i+1)*BLOCK_M) for query block i.
    flops: 4*N*N*d per head, causal 2*N*(N+1)*d (only the unmasked scores count)."""
    raise NotImplementedError("flash_attention_traffic: see README.md, section \"Part 5: roofline\"")


def paged_decode_traffic(context_lens: list[int], n_heads: int, n_kv_heads: int, head_dim: int,
                         block_size: int, element_bytes: int) -> dict:
    """One decode step of paged attention for a batch (one new query token per
    sequence): every sequence reads its whole K and V cache (L * n_kv_heads * d
    each), its query and writes its output (n_heads * d each), and reads its
    block table (ceil(L / block_size) int32) and context length (one int32).
    flops = 4 * n_heads * L * d per sequence (q.k and p.v, 2 flops per multiply-add)."""
    raise NotImplementedError("paged_decode_traffic: see README.md, section \"Part 5: roofline\"")
