"""A tiny decoder-only transformer with random weights (provided: do not edit).

The model does not know how attention reads its keys and values: `forward`
calls `attend(layer, q, k, v, positions)` and uses what it returns. The engine
plugs in the paged cache (write k/v into slots, then paged attention); the
grader plugs in a plain contiguous cache. Same weights, same math, so greedy
outputs must match token for token.

Everything is float64 so that batching a token with different neighbours can
never flip an argmax through rounding: any mismatch is a real bug.

Shapes: T = number of tokens in the step (all sequences flattened),
H = n_heads, KVH = n_kv_heads, D = head_dim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

# attend(layer, q (T, H, D), k (T, KVH, D), v (T, KVH, D), positions (T,)) -> (T, H, D)
AttendFn = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 97
    d_model: int = 32
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2          # grouped-query attention: 2 query heads per kv head
    d_ff: int = 64
    rope_theta: float = 10000.0
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class TinyTransformer:
    """Random-weight transformer: RMSNorm, RoPE, GQA attention, SwiGLU MLP."""

    def __init__(self, config: ModelConfig = ModelConfig()) -> None:
        self.config = config
        c = config
        g = torch.Generator().manual_seed(c.seed)

        def w(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=g, dtype=torch.float64) / shape[0] ** 0.5

        self.embed = torch.randn(c.vocab_size, c.d_model, generator=g, dtype=torch.float64)
        self.layers = []
        for _ in range(c.n_layers):
            self.layers.append({
                "wq": w(c.d_model, c.n_heads * c.head_dim),
                "wk": w(c.d_model, c.n_kv_heads * c.head_dim),
                "wv": w(c.d_model, c.n_kv_heads * c.head_dim),
                "wo": w(c.n_heads * c.head_dim, c.d_model),
                "w_gate": w(c.d_model, c.d_ff),
                "w_up": w(c.d_model, c.d_ff),
                "w_down": w(c.d_ff, c.d_model),
            })
        self.lm_head = w(c.d_model, c.vocab_size)

    @property
    def scale(self) -> float:
        return self.config.head_dim ** -0.5

    @staticmethod
    def _rms_norm(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate pairs (x[..., :D/2], x[..., D/2:]) by position-dependent angles. x: (T, heads, D)."""
        half = x.shape[-1] // 2
        freqs = self.config.rope_theta ** (-torch.arange(half, dtype=torch.float64) / half)   # (D/2,)
        angles = positions.to(torch.float64)[:, None] * freqs[None, :]                       # (T, D/2)
        cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def forward(self, token_ids: torch.Tensor, positions: torch.Tensor, attend: AttendFn) -> torch.Tensor:
        """token_ids, positions: (T,) int64. Returns logits (T, vocab_size), float64."""
        c = self.config
        T = token_ids.shape[0]
        h = self.embed[token_ids]                                                  # (T, d_model)
        for i, layer in enumerate(self.layers):
            x = self._rms_norm(h)
            q = (x @ layer["wq"]).view(T, c.n_heads, c.head_dim)
            k = (x @ layer["wk"]).view(T, c.n_kv_heads, c.head_dim)
            v = (x @ layer["wv"]).view(T, c.n_kv_heads, c.head_dim)
            q, k = self._rope(q, positions), self._rope(k, positions)
            attn = attend(i, q, k, v, positions)                                   # (T, H, D)
            h = h + attn.reshape(T, c.n_heads * c.head_dim) @ layer["wo"]
            x = self._rms_norm(h)
            h = h + (torch.nn.functional.silu(x @ layer["w_gate"]) * (x @ layer["w_up"])) @ layer["w_down"]
        return self._rms_norm(h) @ self.lm_head
