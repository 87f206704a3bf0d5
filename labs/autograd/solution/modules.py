"""Part 5 — read the source: nn.Linear and nn.MultiheadAttention, rebuilt.

Read `torch/nn/modules/linear.py` and `torch/nn/modules/activation.py`
(class MultiheadAttention) and `torch.nn.functional.multi_head_attention_forward`
in your installed torch, then write them again from what they do
(README.md, "Part 5: reading nn.Linear and nn.MultiheadAttention"):

- the same parameter NAMES and shapes, so a real module's `state_dict()` loads
  into yours with `load_state_dict` (strict);
- the same initialisation: with the same seed, `Linear(…)` draws exactly the
  weights `nn.Linear(…)` draws (same init functions, same order);
- the same outputs for the documented options: `batch_first`,
  `key_padding_mask` (bool, True = ignore that key), `attn_mask` (bool (L, S),
  True = not allowed), `need_weights`, `average_attn_weights`.
You may use torch tensor ops (matmul, softmax, ...), not F.linear,
F.multi_head_attention_forward, F.scaled_dot_product_attention or nn.MultiheadAttention.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class Linear(nn.Module):
    """y = x @ weight.T + bias; weight (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)  # keeps `self.bias` an attribute (None), as nn.Linear does
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # BEGIN SOLUTION
        # nn.Linear: kaiming_uniform_ with a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the
        # weight, then the bias from the same bound.
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)
        # STARTER
        # raise NotImplementedError("reset_parameters: see README.md, section \"Part 5: reading nn.Linear and nn.MultiheadAttention\"")
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION
        y = x @ self.weight.t()
        return y + self.bias if self.bias is not None else y
        # STARTER
        # raise NotImplementedError("forward: see README.md, section \"Part 5: reading nn.Linear and nn.MultiheadAttention\"")
        # END SOLUTION


class MultiheadAttention(nn.Module):
    """Multi-head attention with nn.MultiheadAttention's parameters:
    in_proj_weight (3E, E), in_proj_bias (3E), out_proj (Linear E -> E)."""

    def __init__(self, embed_dim: int, num_heads: int, batch_first: bool = False) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.embed_dim, self.num_heads, self.batch_first = embed_dim, num_heads, batch_first
        self.head_dim = embed_dim // num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        self.out_proj = Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                average_attn_weights: bool = True):
        """query (L, N, E) and key/value (S, N, E), or (N, L, E)/(N, S, E) with batch_first.
        Returns (output shaped like query, weights (N, L, S) averaged over heads,
        or (N, H, L, S) with average_attn_weights=False, or None without need_weights)."""
        # BEGIN SOLUTION
        if self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        tgt_len, batch, embed = query.shape
        src_len = key.shape[0]
        h, d = self.num_heads, self.head_dim
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3)
        q = query @ w_q.t() + b_q                            # (L, N, E)
        k = key @ w_k.t() + b_k                              # (S, N, E)
        v = value @ w_v.t() + b_v
        # (L, N, E) -> (N, H, L, d): split E into heads of d.
        q = q.reshape(tgt_len, batch, h, d).permute(1, 2, 0, 3)
        k = k.reshape(src_len, batch, h, d).permute(1, 2, 0, 3)
        v = v.reshape(src_len, batch, h, d).permute(1, 2, 0, 3)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)    # (N, H, L, S)
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask.bool()[None, None], float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask.bool()[:, None, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = (weights @ v).permute(2, 0, 1, 3).reshape(tgt_len, batch, embed)  # (L, N, E)
        out = self.out_proj(out)
        if self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, (weights.mean(dim=1) if average_attn_weights else weights)
        # STARTER
        # raise NotImplementedError("forward: see README.md, section \"Part 5: reading nn.Linear and nn.MultiheadAttention\"")
        # END SOLUTION
