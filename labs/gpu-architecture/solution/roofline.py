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
    # BEGIN SOLUTION
    return peak_tflops * 1e12 / (bandwidth_gbps * 1e9)
    # STARTER
    # raise NotImplementedError("ridge_point: see README.md, section \"Part 5: roofline\"")
    # END SOLUTION


def attainable_tflops(intensity: float, peak_tflops: float, bandwidth_gbps: float) -> float:
    """min(peak, intensity * bandwidth), in TFLOP/s."""
    # BEGIN SOLUTION
    return min(peak_tflops, intensity * bandwidth_gbps * 1e9 / 1e12)
    # STARTER
    # raise NotImplementedError("attainable_tflops: see README.md, section \"Part 5: roofline\"")
    # END SOLUTION


def bound(intensity: float, peak_tflops: float, bandwidth_gbps: float) -> str:
    """"memory" below the ridge point, "compute" at or above it."""
    # BEGIN SOLUTION
    return "memory" if intensity < ridge_point(peak_tflops, bandwidth_gbps) else "compute"
    # STARTER
    # raise NotImplementedError("bound: see README.md, section \"Part 5: roofline\"")
    # END SOLUTION


def _traffic(flops: float, bytes_moved: float) -> dict:
    return {"flops": flops, "bytes": bytes_moved, "intensity": flops / bytes_moved}


def matmul_traffic(m: int, n: int, k: int, block_m: int, block_n: int, element_bytes: int) -> dict:
    """C (m, n) = A (m, k) @ B (k, n), one program per BLOCK_M x BLOCK_N tile of
    C, no cache reuse between programs: every column of tiles re-reads all of A,
    every row of tiles re-reads all of B, C is written once.
    flops = 2mnk; bytes = e * (ceil(n/BN) * m*k + ceil(m/BM) * k*n + m*n)."""
    # BEGIN SOLUTION
    a = _cdiv(n, block_n) * m * k
    b = _cdiv(m, block_m) * k * n
    return _traffic(2 * m * n * k, element_bytes * (a + b + m * n))
    # STARTER
    # raise NotImplementedError("matmul_traffic: see README.md, section \"Part 5: roofline\"")
    # END SOLUTION


def flash_attention_traffic(batch: int, heads: int, seq_len: int, head_dim: int, block_m: int,
                            causal: bool, element_bytes: int) -> dict:
    """FlashAttention-2 forward, one program per BLOCK_M query rows of one (batch, head):
    Q read once and O written once (N*d each), the fp32 log-sum-exp written once (4N bytes),
    K and V read once per query block — all N rows, or with causal masking only the rows
    up to the block's last query row: min(N, (i+1)*BLOCK_M) for query block i.
    flops: 4*N*N*d per head, causal 2*N*(N+1)*d (only the unmasked scores count)."""
    # BEGIN SOLUTION
    n, d = seq_len, head_dim
    blocks = _cdiv(n, block_m)
    if causal:
        kv_rows = sum(min(n, (i + 1) * block_m) for i in range(blocks))
        flops = 2 * n * (n + 1) * d
    else:
        kv_rows = blocks * n
        flops = 4 * n * n * d
    per_head = element_bytes * (2 * n * d + 2 * kv_rows * d) + 4 * n
    return _traffic(batch * heads * flops, batch * heads * per_head)
    # STARTER
    # raise NotImplementedError("flash_attention_traffic: see README.md, section \"Part 5: roofline\"")
    # END SOLUTION


def paged_decode_traffic(context_lens: list[int], n_heads: int, n_kv_heads: int, head_dim: int,
                         block_size: int, element_bytes: int) -> dict:
    """One decode step of paged attention for a batch (one new query token per
    sequence): every sequence reads its whole K and V cache (L * n_kv_heads * d
    each), its query and writes its output (n_heads * d each), and reads its
    block table (ceil(L / block_size) int32) and context length (one int32).
    flops = 4 * n_heads * L * d per sequence (q.k and p.v, 2 flops per multiply-add)."""
    # BEGIN SOLUTION
    flops = bytes_moved = 0
    for length in context_lens:
        flops += 4 * n_heads * length * head_dim
        bytes_moved += element_bytes * (2 * length * n_kv_heads * head_dim + 2 * n_heads * head_dim)
        bytes_moved += 4 * (_cdiv(length, block_size) + 1)
    return _traffic(flops, bytes_moved)
    # STARTER
    # raise NotImplementedError("paged_decode_traffic: see README.md, section \"Part 5: roofline\"")
    # END SOLUTION
