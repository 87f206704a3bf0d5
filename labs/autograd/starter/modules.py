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
        raise NotImplementedError("reset_parameters: see README.md, section \"Part 5: reading nn.Linear and nn.MultiheadAttention\"")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("forward: see README.md, section \"Part 5: reading nn.Linear and nn.MultiheadAttention\"")


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
        raise NotImplementedError("forward: see README.md, section \"Part 5: reading nn.Linear and nn.MultiheadAttention\"")
