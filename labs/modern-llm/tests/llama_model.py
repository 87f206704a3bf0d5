"""The grader's model for part 4, with the KV-cache interface of README.md
"Part 4". Every forward records (T, S): how many new tokens it processed and
how many keys it saw.

Learner-side (lab.yaml `learner_side`: the tests pass it to the learner's
`generate`, so the learner process imports this file). So it is Llama-shaped,
grouped-query attention with a cache, but on purpose none of the handout's
answers for parts 1-3: a mean-centred norm (not RMSNorm), RoPE on interleaved
pairs (not rotate-half), key/value heads tiled across query heads (not
repeat_interleave) and a GELU-gated MLP (not SwiGLU). The KV-cache part only
needs a model whose cached and uncached forwards agree."""

from __future__ import annotations

import math

import torch
from torch import nn


class TinyLlama(nn.Module):
    def __init__(self, vocab=61, dim=48, n_layers=2, n_heads=6, n_kv_heads=2, hidden=96, theta=500.0, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.n_layers, self.n_heads, self.n_kv_heads = n_layers, n_heads, n_kv_heads
        self.head_dim, self.theta = dim // n_heads, theta

        def w(*shape):
            return nn.Parameter(torch.randn(*shape, generator=g) / math.sqrt(shape[-1]))

        self.embed = w(vocab, dim)
        self.wq = nn.ParameterList(w(dim, dim) for _ in range(n_layers))
        self.wk = nn.ParameterList(w(n_kv_heads * self.head_dim, dim) for _ in range(n_layers))
        self.wv = nn.ParameterList(w(n_kv_heads * self.head_dim, dim) for _ in range(n_layers))
        self.wo = nn.ParameterList(w(dim, dim) for _ in range(n_layers))
        self.w1 = nn.ParameterList(w(hidden, dim) for _ in range(n_layers))
        self.w3 = nn.ParameterList(w(hidden, dim) for _ in range(n_layers))
        self.w2 = nn.ParameterList(w(dim, hidden) for _ in range(n_layers))
        self.out = w(vocab, dim)
        self.calls: list[dict] = []

    def _norm(self, x):
        x = x - x.mean(-1, keepdim=True)
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5)

    def _rope(self, x, positions):  # x (B, H, T, d), positions (B, T)
        d = self.head_dim
        freqs = self.theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = positions.double()[..., None] * freqs                       # (B, T, d/2)
        cos, sin = ang.cos().to(x.dtype)[:, None], ang.sin().to(x.dtype)[:, None]
        x1, x2 = x[..., 0::2], x[..., 1::2]  # interleaved pairs (2i, 2i + 1)
        return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)

    def forward(self, tokens, positions, cache=None, mask=None):
        b, t = tokens.shape
        x = self.embed[tokens]
        for i in range(self.n_layers):
            h = self._norm(x)
            q = (h @ self.wq[i].t()).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
            k = (h @ self.wk[i].t()).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
            v = (h @ self.wv[i].t()).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
            q, k = self._rope(q, positions), self._rope(k, positions)
            if cache is not None:
                k, v = cache.update(i, k, v)
            s = k.shape[2]
            rep = self.n_heads // self.n_kv_heads
            k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)  # query head h reads kv head h % n_kv_heads
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
            lowest = torch.finfo(scores.dtype).min  # not -inf: padding rows stay finite
            scores = scores.masked_fill(~torch.ones(t, s, dtype=torch.bool).tril(s - t), lowest)
            if mask is not None:
                scores = scores.masked_fill(~mask[:, None, None, :], lowest)
            x = x + (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, t, -1) @ self.wo[i].t()
            h = self._norm(x)
            x = x + (torch.nn.functional.gelu(h @ self.w1[i].t()) * (h @ self.w3[i].t())) @ self.w2[i].t()
        self.calls.append({"T": t, "S": s})
        return self._norm(x) @ self.out.t()
