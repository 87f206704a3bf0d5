"""Parts 1 and 2: attention in plain torch, first written out, then tiled.

Shapes: q is [batch, heads, seq, head_dim]; k and v are [batch, kv_heads, seq,
head_dim] with heads % kv_heads == 0 (kv_heads < heads is grouped-query
attention: query head h reads K/V head h // (heads // kv_heads)).
"""

from __future__ import annotations

import math

import torch


def _expand_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Repeat each K/V head for the query heads of its group (GQA): [B, H_kv, N, D] -> [B, H, N, D]."""
    group = q.shape[1] // k.shape[1]
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


def reference_attention(q, k, v, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """O = softmax(scale * Q K^T + mask) V, written out (no softmax helper, no SDPA).

    scale defaults to 1 / sqrt(head_dim). With causal=True, query i sees keys 0..i only.
    Returns O [B, H, N, D] in q's dtype (compute in fp32 inside).
    """
    # TODO:
    #   1. k, v = _expand_kv(q, k, v)                      # GQA: one K/V head per query head
    #   2. s = scale * q @ k^T                             # (B, H, N, N) in fp32
    #   3. causal: set s[i, j] = -inf where j > i          # before the softmax!
    #   4. softmax by hand: subtract the row max, exp, divide by the row sum
    #   5. return (p @ v) in q's dtype
    raise NotImplementedError("reference_attention: see README.md, section 'Part 1: reference-torch'")


def tiled_attention(q, k, v, causal: bool = False, scale: float | None = None, block_size: int = 32):
    """The FlashAttention algorithm in torch: visit K/V in blocks of `block_size` keys,
    keep a running max m, a running sum l and an unnormalised accumulator per query row.

    Returns (O [B, H, N, D] in q's dtype, LSE [B, H, N] fp32), where
    LSE_i = log(sum_j exp(scale * q_i . k_j)) over the visible keys j.
    No matmul result may be larger than (N, block_size) or (N, D).
    """
    # TODO (README.md, 'Part 2'): m = -inf, l = 0, acc = 0 per query row; for each block
    # of keys: s = scale * q @ k_blk^T (masked), m_new = max(m, rowmax(s)),
    # alpha = exp(m - m_new), p = exp(s - m_new), l = l * alpha + rowsum(p),
    # acc = acc * alpha + p @ v_blk, m = m_new. Finally O = acc / l, LSE = m + log(l).
    raise NotImplementedError("tiled_attention: see README.md, section 'Part 2: tiled-torch'")
