"""Parts 1-3 — the layers a Llama-style decoder is made of.

- RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x^2) + eps) * weight. No mean
  subtraction and no bias: cheaper than LayerNorm and works as well.
- SwiGLU (Shazeer 2020): w2(silu(w1 x) * w3 x): a gated MLP; Llama names the
  gate w1, the up projection w3 and the down projection w2.
- RoPE (Su et al. 2021), rotate-half convention (as in Llama / GPT-NeoX): the
  dimension pairs are (i, i + d/2); pair i at position m is rotated by the
  angle m * theta^(-2i/d). Because a rotation by m then by -n is a rotation by
  m - n, q_m . k_n depends only on the distance m - n.
- GQA (Ainslie et al. 2023): n_kv_heads <= n_heads key/value heads, each
  shared by n_heads / n_kv_heads query heads; MQA is n_kv_heads = 1.
README.md, sections "Part 1" to "Part 3", derive each one.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., dim): normalise over the last dimension, in float32 at least
        (then back to x's dtype), and scale by weight."""
        # BEGIN SOLUTION
        xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return normed.to(x.dtype) * self.weight
        # STARTER
        # raise NotImplementedError("RMSNorm.forward: see README.md, section \"Part 1: RMSNorm and SwiGLU\"")
        # END SOLUTION


class SwiGLU(nn.Module):
    """The Llama feed-forward block: w2(silu(w1(x)) * w3(x)), no biases."""

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)  # gate
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)  # up
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION
        return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))
        # STARTER
        # raise NotImplementedError("SwiGLU.forward: see README.md, section \"Part 1: RMSNorm and SwiGLU\"")
        # END SOLUTION


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float = 10000.0,
                 dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables for the given integer positions: each (len(positions), head_dim),
    the frequencies theta^(-2i/d) for i < d/2 repeated for both halves."""
    # BEGIN SOLUTION
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))  # (d/2,)
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]                           # (T, d/2)
    angles = torch.cat([angles, angles], dim=-1)                                                # (T, d)
    return angles.cos().to(dtype), angles.sin().to(dtype)
    # STARTER
    # raise NotImplementedError("rope_cos_sin: see README.md, section \"Part 2: RoPE\"")
    # END SOLUTION


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension."""
    # BEGIN SOLUTION
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    # STARTER
    # raise NotImplementedError("rotate_half: see README.md, section \"Part 2: RoPE\"")
    # END SOLUTION


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, d) rotated by the tables for its T positions (cos/sin (T, d))."""
    # BEGIN SOLUTION
    return x * cos[None, None] + rotate_half(x) * sin[None, None]
    # STARTER
    # raise NotImplementedError("apply_rope: see README.md, section \"Part 2: RoPE\"")
    # END SOLUTION


def gqa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                  mask: torch.Tensor | None = None) -> torch.Tensor:
    """q (B, H, T, d); k, v (B, KVH, S, d) with H % KVH == 0 -> (B, H, T, d).

    Query head h uses key/value head h // (H // KVH). With `causal`, query t
    (the t-th of the LAST T positions of the S keys) sees keys 0 .. S - T + t.
    `mask` (B, S) bool, True = a real token (False: padding, never attended).
    Written out (no F.scaled_dot_product_attention)."""
    # BEGIN SOLUTION
    b, h, t, d = q.shape
    kvh, s = k.shape[1], k.shape[2]
    if h % kvh:
        raise ValueError(f"n_heads {h} is not a multiple of n_kv_heads {kvh}")
    group = h // kvh
    k = k.repeat_interleave(group, dim=1)                     # (B, H, S, d)
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)         # (B, H, T, S)
    if causal:
        allowed = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(diagonal=s - t)
        scores = scores.masked_fill(~allowed, float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
    # STARTER
    # raise NotImplementedError("gqa_attention: see README.md, section \"Part 3: grouped-query attention\"")
    # END SOLUTION


def kv_cache_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int, bytes_per_element: int) -> int:
    """Bytes of K and V one token occupies in the cache of the whole model."""
    # BEGIN SOLUTION
    return 2 * n_layers * n_kv_heads * head_dim * bytes_per_element
    # STARTER
    # raise NotImplementedError("kv_cache_bytes_per_token: see README.md, section \"Part 3: grouped-query attention\"")
    # END SOLUTION
