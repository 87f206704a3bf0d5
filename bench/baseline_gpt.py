"""The baseline GPT of bench_minigpt.py: the model nanoGPT trains, written for this bench.

What is carried over from nanoGPT (github.com/karpathy/nanoGPT, model.py) is the
architecture and its arithmetic, not its code: pre-norm blocks; LayerNorm through
F.layer_norm, with a bias or none (`bias`); attention through
F.scaled_dot_product_attention(is_causal=True) on one fused q/k/v projection;
a 4x GELU (exact) MLP; learned position embeddings; the output layer tied to
the token embedding; N(0, 0.02) init, zero biases, and the two projections
into the residual stream drawn with std 0.02 / sqrt(2 * n_layer).

The submodules are registered with the same names and in the same order as
nanoGPT's (and as the lab's GPT), and initialised by one `apply` walk, so after
the same torch.manual_seed this model, nanoGPT's and the lab's reference draw
the same initial weights: the bench compares speed at identical numbers.
Dropout layers are kept (p = 0 here) because nanoGPT calls them in training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class BaselineConfig:
    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    dropout: float = 0.0
    bias: bool = False  # False as in nanoGPT's shakespeare_char config; True: GPT-2's layout


class Norm(nn.Module):
    """LayerNorm over the last dimension, the shift (bias) optional."""

    def __init__(self, width: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, 1e-5)


class Attention(nn.Module):
    def __init__(self, cfg: BaselineConfig):
        super().__init__()
        self.heads, self.p = cfg.n_head, cfg.dropout
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)  # q, k, v side by side
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.attn_dropout = nn.Dropout(cfg.dropout)  # registered as nanoGPT does; SDPA applies the dropout itself
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, heads, T, C / heads)
            return t.view(B, T, self.heads, C // self.heads).transpose(1, 2)

        q, k, v = (heads(t) for t in self.c_attn(x).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class FeedForward(nn.Module):
    def __init__(self, cfg: BaselineConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Layer(nn.Module):
    def __init__(self, cfg: BaselineConfig):
        super().__init__()
        self.ln_1 = Norm(cfg.n_embd, cfg.bias)
        self.attn = Attention(cfg)
        self.ln_2 = Norm(cfg.n_embd, cfg.bias)
        self.mlp = FeedForward(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class BaselineGPT(nn.Module):
    def __init__(self, cfg: BaselineConfig):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(cfg.vocab_size, cfg.n_embd),
                "wpe": nn.Embedding(cfg.block_size, cfg.n_embd),
                "drop": nn.Dropout(cfg.dropout),
                "h": nn.ModuleList(Layer(cfg) for _ in range(cfg.n_layer)),
                "ln_f": Norm(cfg.n_embd, cfg.bias),
            }
        )
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.transformer["wte"].weight = self.lm_head.weight  # one (V, C) matrix for input and output
        self.apply(self._init)
        residual_std = 0.02 / math.sqrt(2 * cfg.n_layer)
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=residual_std)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """idx, targets: (B, T) token ids. Training: logits at every position and the
        mean cross-entropy; without targets: the last position's logits only."""
        t = self.transformer
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = t["drop"](t["wte"](idx) + t["wpe"](positions))
        for layer in t["h"]:
            x = layer(x)
        x = t["ln_f"](x)
        if targets is None:
            return self.lm_head(x[:, -1:, :]), None
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1)
