"""Learner-side stand-ins of the minigpt grader (lab.yaml `learner_side`:
with adapter.py and train_watch.py, the only files of tests/ the learner
process sees).

Where a part must not depend on another part's code, the learner's code runs
on these instead of its own: the generation part runs the learner's
`GPT.generate` on `GPT` below, the training part runs the learner's `train()`
with this model, tokenizer, split and batches swapped in. None of them is the
handout's answer, so copying one cannot pass a part:

- `GPT` has the handout's parameter names and shapes (so the optimizer's
  weight-decay groups and checkpoints are checkable), dropout, a block_size
  limit and a differentiable forward that uses every parameter, but it is
  not a GPT: no attention. Each position mixes the ones before it with
  fixed, per-head decaying weights; the MLP uses ReLU.
- `CharTokenizer` and `split_train_val` look their answers up in tables the
  grader computed and sent (`GIVEN`): they know no rule, only the corpora the
  grader uses.
- `get_batch` draws from the generator exactly as the handout's does, and
  takes its windows elsewhere (mirrored start offsets).

The grader computes every expected value with these same stand-ins, in its
own process (ref_train.py, the tests).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

LN_EPS = 1e-5

# Filled by train_watch from what the grader sent: sha256 of a corpus text -> its vocabulary, and
# (number of tokens, val_fraction) -> the number of training tokens.
GIVEN: dict = {"vocab": {}, "splits": {}}


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
    bias: bool = True


class GPT(nn.Module):
    """The stand-in model (see the module's docstring)."""

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
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)
        # Per head h, position t takes position s <= t with weight decay_h ** (t - s), normalised.
        decay = 1.0 - 0.5 ** torch.arange(1, config.n_head + 1, dtype=torch.float32)  # 0.5, 0.75, ...
        gap = torch.arange(config.block_size)[:, None] - torch.arange(config.block_size)[None, :]
        mix = torch.where(gap >= 0, decay[:, None, None] ** gap.clamp(min=0), torch.zeros(()))
        self.register_buffer("mix", mix / mix.sum(-1, keepdim=True), persistent=False)  # (nh, T, T)
        # Called with (model, idx, targets) on every forward when the grader watches a run (train_watch.py).
        self.on_forward = None

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _drop(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, self.config.dropout, self.training)

    def _mixing(self, x: torch.Tensor, attn: nn.Module) -> torch.Tensor:
        B, T, C = x.shape
        nh = self.config.n_head
        gate, key, value = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in attn.c_attn(x).split(C, dim=2))
        mixed = self._drop(self.mix[:, :T, :T]) @ (torch.sigmoid(key) * value)  # (B, nh, T, hs)
        y = torch.sigmoid(gate) * mixed
        return self._drop(attn.c_proj(y.transpose(1, 2).reshape(B, T, C)))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        if self.on_forward is not None:
            self.on_forward(self, idx, targets)
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.config.block_size}")
        x = self._drop(self.transformer.wte(idx) + self.transformer.wpe.weight[:T])
        for blk in self.transformer.h:
            x = x + self._mixing(blk.ln_1(x), blk.attn)
            x = x + self._drop(blk.mlp.c_proj(F.relu(blk.mlp.c_fc(blk.ln_2(x)))))
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.reshape(-1))
        return logits, loss


class _LayerNorm(nn.Module):
    def __init__(self, ndim: int, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, LN_EPS)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CharTokenizer:
    """The vocabulary the grader sent for this text (GIVEN["vocab"])."""

    def __init__(self, text: str):
        chars = GIVEN["vocab"].get(text_key(text))
        if chars is None:
            raise RuntimeError("the grader's stand-in tokenizer has no vocabulary for this text: train() must "
                               "build its CharTokenizer from the whole corpus file it read")
        self.chars = list(chars)
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.itos = dict(enumerate(self.chars))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        return [self.stoi[c] for c in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def split_train_val(data: torch.Tensor, val_fraction: float = 0.1):
    """The split the grader sent for this many tokens and this fraction (GIVEN["splits"])."""
    n = GIVEN["splits"].get((len(data), float(val_fraction)))
    if n is None:
        raise RuntimeError(f"the grader's stand-in split has no answer for {len(data)} tokens and val_fraction "
                           f"{val_fraction}: train() must split the encoded corpus with val_fraction 0.1")
    return data[:n], data[n:]


def get_batch(data, block_size, batch_size, generator=None, device="cpu"):
    """The same draw from `generator` as the handout's get_batch; other windows."""
    high = len(data) - block_size
    ix = torch.randint(high, (batch_size,), generator=generator).tolist()
    starts = [high - 1 - i for i in ix]
    x = torch.stack([data[i : i + block_size] for i in starts])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in starts])
    return x.long().to(device), y.long().to(device)
