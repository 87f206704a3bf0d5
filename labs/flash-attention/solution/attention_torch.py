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
    # BEGIN SOLUTION
    """O = softmax(scale * Q K^T + mask) V, written out (no softmax helper, no SDPA).

    Materialises the full (N, N) score matrix: this is what FlashAttention avoids.
    """
    n, d = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    k, v = _expand_kv(q, k, v)
    s = (q.float() @ k.float().transpose(-2, -1)) * scale  # (B, H, N, N)
    if causal:
        future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)  # key j > query i
        s = s.masked_fill(future, float("-inf"))
    # Subtract the row max before exp: softmax is unchanged (the factor e^-max cancels)
    # and exp never sees a large positive number, so it cannot overflow.
    s = s - s.amax(dim=-1, keepdim=True)
    p = torch.exp(s)
    p = p / p.sum(dim=-1, keepdim=True)  # (B, H, N, N), rows sum to 1
    return (p @ v.float()).to(q.dtype)  # (B, H, N, D)
    # STARTER
    # """O = softmax(scale * Q K^T + mask) V, written out (no softmax helper, no SDPA).
#
    # scale defaults to 1 / sqrt(head_dim). With causal=True, query i sees keys 0..i only.
    # Returns O [B, H, N, D] in q's dtype (compute in fp32 inside).
    # """
    # # TODO:
    # #   1. k, v = _expand_kv(q, k, v)                      # GQA: one K/V head per query head
    # #   2. s = scale * q @ k^T                             # (B, H, N, N) in fp32
    # #   3. causal: set s[i, j] = -inf where j > i          # before the softmax!
    # #   4. softmax by hand: subtract the row max, exp, divide by the row sum
    # #   5. return (p @ v) in q's dtype
    # raise NotImplementedError("reference_attention: see README.md, section 'Part 1: reference-torch'")
    # END SOLUTION


def tiled_attention(q, k, v, causal: bool = False, scale: float | None = None, block_size: int = 32):
    # BEGIN SOLUTION
    """The FlashAttention algorithm in torch: visit K/V in blocks of `block_size` keys,
    keep a running max m, a running sum l and an unnormalised accumulator per query row.

    Returns (O [B, H, N, D] in q's dtype, LSE [B, H, N] fp32), where
    LSE_i = log(sum_j exp(scale * q_i . k_j)) over the visible keys j.
    No matmul result is ever larger than (N, block_size) or (N, D).
    """
    n, d = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    k, v = _expand_kv(q, k, v)
    qf = q.float() * scale
    rows = torch.arange(n, device=q.device)[:, None]  # (N, 1) query positions
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), device=q.device)  # (B, H, N, 1) running max
    l = torch.zeros_like(m)  # (B, H, N, 1) running sum of exp(s - m)
    acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)  # (B, H, N, D)
    for start in range(0, n, block_size):
        kb = k[:, :, start:start + block_size].float()  # (B, H, bs, D)
        vb = v[:, :, start:start + block_size].float()
        s = qf @ kb.transpose(-2, -1)  # (B, H, N, bs): one tile of scores
        if causal:
            cols = torch.arange(start, start + kb.shape[2], device=q.device)[None, :]  # (1, bs)
            s = s.masked_fill(cols > rows, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        # A row that has seen no visible key yet keeps m = -inf; exp(-inf - -inf) would be NaN.
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        alpha = torch.exp(m - m_safe)  # rescales what was summed under the old max
        p = torch.exp(s - m_safe)  # (B, H, N, bs)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ vb
        m = m_new
    o = acc / l
    lse = (m + torch.log(l)).squeeze(-1)  # log(l * e^m) = m + log(l)
    return o.to(q.dtype), lse
    # STARTER
    # """The FlashAttention algorithm in torch: visit K/V in blocks of `block_size` keys,
    # keep a running max m, a running sum l and an unnormalised accumulator per query row.
#
    # Returns (O [B, H, N, D] in q's dtype, LSE [B, H, N] fp32), where
    # LSE_i = log(sum_j exp(scale * q_i . k_j)) over the visible keys j.
    # No matmul result may be larger than (N, block_size) or (N, D).
    # """
    # # TODO (README.md, 'Part 2'): m = -inf, l = 0, acc = 0 per query row; for each block
    # # of keys: s = scale * q @ k_blk^T (masked), m_new = max(m, rowmax(s)),
    # # alpha = exp(m - m_new), p = exp(s - m_new), l = l * alpha + rowsum(p),
    # # acc = acc * alpha + p @ v_blk, m = m_new. Finally O = acc / l, LSE = m + log(l).
    # raise NotImplementedError("tiled_attention: see README.md, section 'Part 2: tiled-torch'")
    # END SOLUTION
