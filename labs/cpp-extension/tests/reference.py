"""The grader's own answers: RMSNorm in torch, and the vLLM launch/slot
arithmetic of Part 5 (independent of the learner's vllm_reading.py)."""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Accumulate in float32 (float64 for double), round x * inv_rms to x's
    dtype, then scale by the weight: the op's documented rounding order."""
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    xa = x.to(acc)
    inv = torch.rsqrt(xa.pow(2).mean(-1, keepdim=True) + eps)
    normed = (xa * inv).to(x.dtype)
    return (normed.to(acc) * weight.to(acc)).to(x.dtype)


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def paged_attention_launch(version, num_seqs, num_heads, head_size, max_seq_len, block_size, num_threads=128):
    warps = num_threads // 32
    outputs = warps // 2 * head_size * 4
    if version == 1:
        logits = ceil_div(max_seq_len, block_size) * block_size * 4
        return {"grid": (num_heads, num_seqs, 1), "block": (num_threads, 1, 1), "shared_mem_bytes": max(logits, outputs)}
    parts = ceil_div(max_seq_len, 512)
    return {"grid": (num_heads, num_seqs, parts), "block": (num_threads, 1, 1),
            "shared_mem_bytes": max(512 * 4, outputs), "reduce_grid": (num_heads, num_seqs, 1),
            "reduce_block": (num_threads, 1, 1), "reduce_shared_mem_bytes": 2 * parts * 4}


def use_v1(max_seq_len, num_seqs, num_heads):
    parts = ceil_div(max_seq_len, 512)
    return max_seq_len <= 8192 and (parts == 1 or num_seqs * num_heads > 512)


def slot_mapping(block_table, positions, block_size):
    return [-1 if p < 0 else block_table[p // block_size] * block_size + p % block_size for p in positions]


def cache_write_indices(slot, head, dim, num_heads, head_size, block_size, x):
    if slot < 0:
        return (None, None)
    # Build the two cache tensors' strides and use them: an independent route
    # to the same flat offsets.
    b, off = divmod(slot, block_size)
    key_shape = (b + 1, num_heads, head_size // x, block_size, x)
    val_shape = (b + 1, num_heads, head_size, block_size)
    ks = torch.empty(0).new_empty(key_shape, dtype=torch.int8).stride()
    vs = torch.empty(0).new_empty(val_shape, dtype=torch.int8).stride()
    key = b * ks[0] + head * ks[1] + (dim // x) * ks[2] + off * ks[3] + (dim % x) * ks[4]
    val = b * vs[0] + head * vs[1] + dim * vs[2] + off * vs[3]
    return (key, val)


def reshape_and_cache_launch(num_tokens, num_heads, head_size):
    return {"grid": (num_tokens, 1, 1), "block": (min(num_heads * head_size, 512), 1, 1)}
