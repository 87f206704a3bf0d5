"""A GPT written out by hand: LayerNorm, causal self-attention, MLP, a pre-norm
block and the whole model (README.md, sections 3 and 4).

What you will learn: every tensor shape inside a decoder-only transformer, why
attention is scaled by 1/sqrt(head_size), how the causal mask keeps the model
from reading the future, and how sampling turns logits into text.

Parameter names are fixed (README.md, "Parameter names"): the grader loads
reference weights into your modules with `load_state_dict`, so keep them.
Shapes use B = batch, T = time (sequence length), C = n_embd,
nh = n_head, hs = head size = C // nh, V = vocab_size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 64  # the longest context the model can see (positions 0..block_size-1)
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    # False: your written-out LayerNorm and attention (what the grader checks, sections 3.1-3.2).
    # True: the same math through torch's fused kernels (section 4.2); train.py turns it on,
    # because it trains ~1.3x faster on a CPU.
    fused: bool = False
    # True: a bias in every Linear (except lm_head) and every LayerNorm, as GPT-2 has them.
    # False: none at all (nanoGPT's shakespeare_char config; train.py's default): 25 fewer
    # tensors for 4 layers, and as good (README.md, section 4.3).
    bias: bool = True


class LayerNorm(nn.Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias, over the last dimension
    (without the "+ bias" when bias=False: then self.bias is None)."""

    def __init__(self, ndim: int, eps: float = 1e-5, fused: bool = False, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))  # (C,) the learned scale, starts at 1
        # (C,) the learned shift, starts at 0; None (no parameter at all) when bias=False.
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None
        self.eps = eps
        self.fused = fused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            # The fast path (README.md, section 4.2): the same formula in one kernel that reads x
            # once, instead of ~8 separate ops that each read and write a (..., C) tensor.
            # (It takes bias=None as "no shift".)
            return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)
        # BEGIN SOLUTION
        # x: (..., C). Statistics are per position, over the C features.
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        # The biased variance (divide by C, not C-1), as in the LayerNorm paper.
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # (..., 1)
        # eps keeps the division finite when a row is (nearly) constant.
        x_hat = (x - mean) / torch.sqrt(var + self.eps)  # (..., C)
        y = x_hat * self.weight  # (..., C) the learned scale
        if self.bias is not None:  # GPTConfig(bias=False): no shift, self.bias is None
            y = y + self.bias
        return y
        # STARTER
        # # TODO (README.md, section 3.1): normalise each row of x over its last dimension C:
        # #   mean = x.mean(-1, keepdim=True)                       # (..., 1)
        # #   var  = the BIASED variance (divide by C)              # (..., 1)
        # #   x_hat = (x - mean) / sqrt(var + self.eps)             # (..., C)
        # # then scale by self.weight and shift by self.bias, unless self.bias is None (a LayerNorm
        # # built with bias=False has no shift at all). (F.layer_norm would do it all; write it out.)
        # raise NotImplementedError("LayerNorm.forward: see README.md, section 3.1")
        # END SOLUTION


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t only attends to positions <= t."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        assert config.n_embd % config.n_head == 0, "n_embd must be divisible by n_head"
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        # One linear layer makes q, k and v for all heads at once: C -> 3C.
        # (bias=config.bias: with bias=False, nn.Linear has no bias and module.bias is None.)
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # The output projection mixes the heads back together: C -> C.
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.fused = config.fused
        # The causal mask, built ONCE (not in every forward of every layer): True where key s <= query t.
        # A buffer moves with .to(device); persistent=False keeps it out of the state dict.
        mask = torch.tril(torch.ones(config.block_size, config.block_size, dtype=torch.bool))
        self.register_buffer("causal_mask", mask, persistent=False)  # (block_size, block_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        hs = C // self.n_head
        if self.fused:
            # The fast path (README.md, section 4.2): one fused kernel computes
            # softmax(q k^T / sqrt(hs) + causal mask) v without a separate mask, masked_fill and softmax.
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
            p = self.attn_dropout.p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs)
            return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))
        # BEGIN SOLUTION
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)  # each (B, T, C)
        # Split C into nh heads of size hs and move the head axis next to the batch axis,
        # so each head is an independent attention over T positions.
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)

        # Scores: how much query t wants key s. Dividing by sqrt(hs) keeps their variance
        # near 1 whatever the head size, so the softmax does not saturate.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
        # Causal mask: query t may only see keys s <= t (the lower triangle, built in __init__).
        att = att.masked_fill(~self.causal_mask[:T, :T], float("-inf"))
        # Softmax over the KEYS (last axis): each query's weights sum to 1.
        att = F.softmax(att, dim=-1)  # (B, nh, T, T)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)
        # Put the heads side by side again: (B, T, nh, hs) -> (B, T, C).
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))
        # STARTER
        # # TODO (README.md, section 3.2), no F.scaled_dot_product_attention:
        # # 1. q, k, v = self.c_attn(x).split(self.n_embd, dim=2)              # each (B, T, C)
        # # 2. split the heads: view as (B, T, nh, hs), transpose(1, 2)         # (B, nh, T, hs)
        # # 3. scores = q @ k^T / sqrt(hs)                                      # (B, nh, T, T)
        # # 4. causal mask: where key s > query t, set the score to -inf
        # #    (self.causal_mask[:T, :T] is True where s <= t: built once in __init__)
        # # 5. softmax over the keys (the last axis); then self.attn_dropout
        # # 6. y = att @ v                                                      # (B, nh, T, hs)
        # # 7. merge the heads: transpose(1, 2), contiguous, view (B, T, C)
        # # 8. return self.resid_dropout(self.c_proj(y))
        # raise NotImplementedError("CausalSelfAttention.forward: see README.md, section 3.2")
        # END SOLUTION


class MLP(nn.Module):
    """Position-wise feed-forward network: C -> 4C -> GELU -> C."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()  # the exact (erf) GELU, not the tanh approximation
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))  # (B, T, C)
        # STARTER
        # # TODO (README.md, section 3.3): c_fc -> gelu -> c_proj -> dropout.     # (B, T, C)
        # raise NotImplementedError("MLP.forward: see README.md, section 3.3")
        # END SOLUTION


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, fused=config.fused, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, fused=config.fused, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION
        # The residual stream x is never normalised itself; each sub-layer reads a
        # normalised copy and adds its result back. This keeps gradients healthy.
        x = x + self.attn(self.ln_1(x))  # (B, T, C)
        x = x + self.mlp(self.ln_2(x))  # (B, T, C)
        return x
        # STARTER
        # # TODO (README.md, section 3.4): pre-norm residual block.
        # #   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))                      # (B, T, C)
        # raise NotImplementedError("Block.forward: see README.md, section 3.4")
        # END SOLUTION


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),  # token id -> vector
                wpe=nn.Embedding(config.block_size, config.n_embd),  # position -> vector
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, fused=config.fused, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # BEGIN SOLUTION
        # Weight tying: the output layer reuses the token embedding matrix (V, C).
        # One matrix fewer to learn, and it helps small models.
        self.lm_head.weight = self.transformer.wte.weight
        # STARTER
        # # TODO (README.md, section 4): weight tying. The output layer must reuse the token
        # # embedding matrix (V, C): make lm_head.weight the same Parameter as transformer.wte.weight.
        # END SOLUTION
        self.apply(self._init_weights)
        # GPT-2: scale the init of the projections that write into the residual stream
        # by 1/sqrt(2 * n_layer), so the stream's variance does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self) -> int:
        # parameters() yields the tied matrix once, so it is counted once.
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """idx: (B, T) token ids; targets: (B, T) the next token at each position, or None.

        Returns (logits (B, T, V), loss): loss is the mean cross-entropy over all B*T
        positions, or None without targets.
        """
        # BEGIN SOLUTION
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.config.block_size}")
        pos = torch.arange(T, device=idx.device)  # (T,)
        tok_emb = self.transformer.wte(idx)  # (B, T, C)
        pos_emb = self.transformer.wpe(pos)  # (T, C), broadcast over the batch
        x = self.transformer.drop(tok_emb + pos_emb)  # (B, T, C)
        for block in self.transformer.h:
            x = block(x)  # (B, T, C)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)  # (B, T, V)
        loss = None
        if targets is not None:
            # cross_entropy wants (N, V) scores and (N,) class ids.
            loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))
        return logits, loss
        # STARTER
        # # TODO (README.md, section 4):
        # # 1. token embeddings wte(idx) (B, T, C) + position embeddings wpe(arange(T)) (T, C)
        # # 2. self.transformer.drop, every block in self.transformer.h, then ln_f
        # # 3. logits = lm_head(x)                                              # (B, T, V)
        # # 4. loss = F.cross_entropy over all B*T positions if targets is given, else None
        # # Refuse T > block_size with a ValueError (there is no position embedding for it).
        # raise NotImplementedError("GPT.forward: see README.md, section 4")
        # END SOLUTION

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None):
        """Append max_new_tokens sampled tokens to idx (B, T); returns (B, T + max_new_tokens).

        Uses the global torch RNG, so torch.manual_seed(s) makes it repeatable.
        """
        # BEGIN SOLUTION
        if temperature <= 0:
            raise ValueError("temperature must be > 0 (use top_k=1 for greedy decoding)")
        for _ in range(max_new_tokens):
            # The model has no position embedding beyond block_size: keep the last block_size tokens.
            idx_cond = idx[:, -self.config.block_size :]  # (B, <=block_size)
            logits, _ = self(idx_cond)
            # Only the last position predicts the next token. Temperature < 1 sharpens, > 1 flattens.
            logits = logits[:, -1, :] / temperature  # (B, V)
            if top_k is not None:
                # Keep the k largest logits per row; the rest can never be sampled.
                kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, [-1]]  # (B, 1)
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = F.softmax(logits, dim=-1)  # (B, V)
            idx_next = torch.multinomial(probs, num_samples=1)  # (B, 1)
            idx = torch.cat((idx, idx_next), dim=1)  # (B, T + 1)
        return idx
        # STARTER
        # # TODO (README.md, section 4.1): repeat max_new_tokens times:
        # # 1. crop the context to the last block_size tokens                   # (B, <=block_size)
        # # 2. logits of the LAST position only, divided by temperature         # (B, V)
        # # 3. if top_k: set every logit below the k-th largest to -inf
        # # 4. probs = softmax; next = torch.multinomial(probs, 1)              # (B, 1)
        # # 5. append: idx = torch.cat((idx, next), dim=1)
        # # A temperature <= 0 is an error (ValueError); use top_k=1 for greedy decoding.
        # raise NotImplementedError("GPT.generate: see README.md, section 4.1")
        # END SOLUTION
