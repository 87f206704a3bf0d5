"""The grader's own GPT as an nn.Module (never copied to the workspace).

Same parameter names and the same dropout places as the handout (README.md,
sections 3 and 4), written independently of the lab's solution. The grader uses
it where a part must not depend on the learner's model: the training part runs
the learner's loop on THIS model, and the generation part runs the learner's
`generate` on it. So a bug in model.py costs the model part, not its neighbours.

It is importable in both grader processes and the learner process (the
sandbox lets the learner process import the lab's tests/ folder), so the
training part can hand it to the learner's `train()`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

LN_EPS = 1e-5


@dataclass
class GPTConfig:
    """The handout's GPTConfig fields (sample.py rebuilds a model from asdict of it)."""

    vocab_size: int = 65
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    fused: bool = False
    bias: bool = True  # False: no bias in any Linear or LayerNorm (nanoGPT's shakespeare_char)


class GPT(nn.Module):
    """A pre-norm GPT with tied embeddings; attention written out (so dropout on the
    attention weights draws random numbers exactly where the handout's does)."""

    def __init__(self, config: GPTConfig):
        nn.Module.__init__(self)  # explicit: a subclass mixing in the learner's GPT must not run its __init__
        self.config = config
        c, bias = config.n_embd, config.bias
        blocks = []
        for _ in range(config.n_layer):
            blk = nn.Module()
            blk.ln_1, blk.ln_2 = _LayerNorm(c, bias), _LayerNorm(c, bias)
            blk.attn = nn.Module()
            blk.attn.c_attn, blk.attn.c_proj = nn.Linear(c, 3 * c, bias=bias), nn.Linear(c, c, bias=bias)
            blk.mlp = nn.Module()
            blk.mlp.c_fc, blk.mlp.c_proj = nn.Linear(c, 4 * c, bias=bias), nn.Linear(4 * c, c, bias=bias)
            blocks.append(blk)
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, c), wpe=nn.Embedding(config.block_size, c),
            h=nn.ModuleList(blocks), ln_f=_LayerNorm(c, bias)))
        self.lm_head = nn.Linear(c, config.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * config.n_layer))
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)
        self.register_buffer("causal", torch.tril(torch.ones(config.block_size, config.block_size, dtype=torch.bool)),
                             persistent=False)
        # Filled by the grader's recorder when it watches a training run (adapter.py): called
        # with (model, idx, targets) on every forward.
        self.on_forward = None

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _drop(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, self.config.dropout, self.training)

    def _attention(self, x: torch.Tensor, attn: nn.Module) -> torch.Tensor:
        B, T, C = x.shape
        nh = self.config.n_head
        q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in attn.c_attn(x).split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // nh)  # (B, nh, T, T)
        att = att.masked_fill(~self.causal[:T, :T], float("-inf")).softmax(dim=-1)
        y = self._drop(att) @ v  # attention dropout, then the weighted sum
        return self._drop(attn.c_proj(y.transpose(1, 2).reshape(B, T, C)))  # residual dropout

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        if self.on_forward is not None:
            self.on_forward(self, idx, targets)
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.config.block_size}")
        x = self._drop(self.transformer.wte(idx) + self.transformer.wpe.weight[:T])  # embedding dropout
        for blk in self.transformer.h:
            x = x + self._attention(blk.ln_1(x), blk.attn)
            x = x + self._drop(blk.mlp.c_proj(F.gelu(blk.mlp.c_fc(blk.ln_2(x)))))  # MLP dropout
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.reshape(-1))
        return logits, loss


class _LayerNorm(nn.Module):
    def __init__(self, ndim: int, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None  # F.layer_norm takes None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, LN_EPS)
