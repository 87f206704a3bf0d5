"""The model this lab quantizes: MiniGPT's architecture, small (given code; the
grader runs its own identical copy).

A decoder-only character transformer with pre-norm blocks, exactly the shape of
the MiniGPT lab's GPT with bias=True: LayerNorm -> attention (c_attn: fused
q/k/v projection, c_proj) and LayerNorm -> MLP (c_fc, GELU, c_proj). lm_head is
tied to the token embedding and stays in fp32 in every method of this lab.

The shipped checkpoint (data/tiny_gpt.pt, made by tests/make_checkpoint.py)
was trained on the MiniGPT corpus, then given PLANTED ACTIVATION OUTLIERS:
a few channels of ln_1 and ln_2 were multiplied by a large factor and the
matching input columns of c_attn / c_fc divided by it. The float model
computes the same function; its activations now look like a big LLM's, where
a handful of channels are 10-100x larger than the rest (README.md, "Background").

Shapes: B = batch, T = time, C = n_embd, nh = n_head, hs = C // nh, V = vocab.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


@dataclass
class TinyConfig:
    vocab_size: int = 65
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)   # x (B,T,C) -> q|k|v (B,T,3C)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, T, C) -> (B, nh, T, hs)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight   # tied, as in GPT-2

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (B, T) int64 token ids, T <= block_size -> logits (B, T, V) float32."""
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# The four Linear layers of every block that this lab quantizes, by their name inside the block.
QUANTIZED_LINEARS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def replace_linears(model: TinyGPT, make) -> TinyGPT:
    """In place: every block's QUANTIZED_LINEARS (attn.c_attn, attn.c_proj, mlp.c_fc,
    mlp.c_proj) becomes make(name, linear), name such as "blocks.1.mlp.c_fc". Returns model."""
    for i, block in enumerate(model.blocks):
        for sub in QUANTIZED_LINEARS:
            owner_name, attr = sub.split(".")
            owner = getattr(block, owner_name)
            setattr(owner, attr, make(f"blocks.{i}.{sub}", getattr(owner, attr)))
    return model


def load_tiny_gpt(checkpoint: dict) -> TinyGPT:
    """checkpoint = {"config": dict of TinyConfig fields, "state_dict": ..., "chars": str}
    (what torch.load(data/tiny_gpt.pt) returns) -> the float32 model in eval mode."""
    model = TinyGPT(TinyConfig(**checkpoint["config"]))
    # lm_head.weight is tied to wte.weight: the checkpoint stores it once (strict=False for that key).
    missing, unexpected = model.load_state_dict(checkpoint["state_dict"], strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise ValueError(f"checkpoint does not fit TinyGPT: missing {missing}, unexpected {unexpected}")
    return model.eval()


def encode(text: str, chars: str) -> torch.Tensor:
    """Characters -> int64 ids by their index in `chars` (the checkpoint's vocabulary)."""
    table = {c: i for i, c in enumerate(chars)}
    return torch.tensor([table[c] for c in text], dtype=torch.int64)


def load_shipped(n_heldout: int = 16) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For trying your code by hand: the lab's shipped data, found through the roadmap installation
    -> (checkpoint dict for load_tiny_gpt, calibration ids (8, 64), held-out inputs (n, 64) and
    targets (n, 64): consecutive windows of data/heldout.txt, each target the next character)."""
    from roadmap_cli.paths import labs_root   # only here: the grader never calls this

    data = labs_root() / "quantization" / "data"
    checkpoint = torch.load(data / "tiny_gpt.pt", weights_only=True)
    chars, T = checkpoint["chars"], checkpoint["config"]["block_size"]
    calib = encode((data / "calib.txt").read_text(encoding="utf-8"), chars)[: 8 * T].reshape(8, T)
    ids = encode((data / "heldout.txt").read_text(encoding="utf-8"), chars)
    x = torch.stack([ids[i * T: i * T + T + 1] for i in range(n_heldout)])
    return checkpoint, calib, x[:, :-1].clone(), x[:, 1:].clone()
